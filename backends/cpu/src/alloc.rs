//! The process's allocator policy for training: keep freed memory for reuse instead of
//! handing it back to the kernel after every step
//! ([`retain_freed_memory`]), and give every buffer a
//! cache-line-aligned address ([`CacheAligned`]).
//!
//! A training step allocates and frees many buffers above glibc's default mmap threshold
//! (128 KiB), and by default glibc hands them back to the kernel when they are freed
//! (unmapping them, or trimming the heap top), so the next step's buffers are fresh pages and
//! every 4 KiB written costs a page fault and a zeroed page (BENCHMARKS.md, CPU backend,
//! "Allocator policy", has what that cost). The CPU model keeps its activation buffers
//! itself from step to step (its buffer pool); this policy covers every other large
//! allocation: the per-block gradient partials (a few hundred KiB each, dozens per step),
//! the dfdx backend's tensors, the data loaders.
//! Raising the mmap threshold to glibc's maximum (32 MiB) and the trim threshold to 1 GiB
//! keeps such buffers on the heap and reuses them; larger ones are still mapped, and at most
//! 1 GiB of freed heap is kept. `bc-cli` calls [`retain_freed_memory`] once at start; a
//! library user who trains in a loop may do the same.

use std::alloc::{GlobalAlloc, Layout, System};

/// Bytes of a cache line, and of an AVX-512 vector.
const LINE: usize = 64;

/// A global allocator that gives every allocation of at least a cache line (64 bytes) a
/// 64-byte-aligned address and passes everything else to the system allocator unchanged.
///
/// Why: the CPU backend's kernels run over its buffers 16 `f32` lanes (64 bytes) at a time.
/// glibc's `malloc` aligns to 16 bytes only, so in a buffer that starts 16 bytes past a line
/// every 64-byte load and store spans two cache lines, and on AVX-512 a split access costs
/// about twice a whole one. BENCHMARKS.md, CPU backend, "Buffers on cache-line boundaries",
/// has the scan kernels timed with and without it.
///
/// `bc-cli` and the benches install it; a program that uses the library directly gets the
/// same speed by installing it too:
///
/// ```
/// #[global_allocator]
/// static ALLOC: boldcast_cpu::alloc::CacheAligned = boldcast_cpu::alloc::CacheAligned;
/// ```
///
/// It costs 64 bytes per allocation of 64 bytes or more (the padding that puts the block on
/// a line boundary). It composes with [`retain_freed_memory`]: the padded blocks are plain
/// `malloc` blocks, reused from step to step like any other.
#[derive(Copy, Clone, Debug, Default)]
pub struct CacheAligned;

/// Whether `CacheAligned` aligns a block of this layout itself: at least a line long, and
/// asking for less than a line's alignment (larger alignments go to `System` as they are).
fn aligned_here(size: usize, align: usize) -> bool {
    size >= LINE && align < LINE
}

/// The layout of the `System` block behind an aligned block of `size` bytes: a line longer,
/// so a line boundary with at least 8 bytes before it always falls inside.
fn raw_layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.checked_add(LINE)?, 8).ok()
}

/// The first line boundary past `raw` (1 to 64 bytes on; at least 8, as `raw` is
/// 8-aligned), with `raw` written in the 8 bytes before it for `dealloc` and `realloc`.
///
/// # Safety
/// `raw` must be null or the start of a live block of `raw_layout(size)`.
unsafe fn place(raw: *mut u8) -> *mut u8 {
    if raw.is_null() {
        return raw;
    }
    let p = raw.add(LINE - (raw as usize % LINE));
    p.cast::<usize>().sub(1).write(raw as usize);
    p
}

/// The `System` block behind an aligned block `p`.
///
/// # Safety
/// `p` must come from [`place`].
unsafe fn raw_of(p: *mut u8) -> *mut u8 {
    p.cast::<usize>().sub(1).read() as *mut u8
}

/// A block for `layout` from `alloc` (`System`'s allocation or zeroed allocation): as asked
/// when `CacheAligned` does not align it, else padded by a line and placed on the boundary.
///
/// # Safety
/// As [`GlobalAlloc::alloc`]: `layout` has a non-zero size.
unsafe fn with_padding(layout: Layout, alloc: impl FnOnce(Layout) -> *mut u8) -> *mut u8 {
    if !aligned_here(layout.size(), layout.align()) {
        return alloc(layout);
    }
    match raw_layout(layout.size()) {
        Some(raw) => place(alloc(raw)),
        None => std::ptr::null_mut(),
    }
}

// SAFETY: a block aligned here is the first line boundary inside a `System` block one line
// longer than asked (so `size` bytes fit after it), which `dealloc` and `realloc` find again
// from the 8 bytes before the boundary; which blocks are aligned here is a function of the
// caller's layout alone (`aligned_here`), the same at `alloc`, `dealloc` and `realloc`.
// Every other block is `System`'s with the caller's layout.
//
// The padding is done here rather than by asking `System` for 64-byte alignment because
// glibc serves aligned requests (`posix_memalign`) by carving them out of larger chunks,
// which a training step's same-sized buffers then do not fit again: the heap grew every
// step and each step's buffers faulted in fresh pages (tests/alloc_policy.rs: 49,152 minor
// faults in four steps, against none with plain `malloc` of the padded size).
unsafe impl GlobalAlloc for CacheAligned {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        with_padding(layout, |l| System.alloc(l))
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        with_padding(layout, |l| System.alloc_zeroed(l))
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !aligned_here(layout.size(), layout.align()) {
            return System.dealloc(ptr, layout);
        }
        let raw = raw_layout(layout.size()).expect("a layout this allocator returned");
        System.dealloc(raw_of(ptr), raw)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (old_here, new_here) =
            (aligned_here(layout.size(), layout.align()), aligned_here(new_size, layout.align()));
        if !old_here && !new_here {
            return System.realloc(ptr, layout, new_size);
        }
        if old_here && new_here {
            // Grow or shrink the padded block in place where `System` can; the data then sit
            // at the old offset from the block's start, and move if the new start puts the
            // line boundary elsewhere.
            let (Some(old_raw), Some(new_raw)) = (raw_layout(layout.size()), raw_layout(new_size)) else {
                return std::ptr::null_mut();
            };
            let raw = raw_of(ptr);
            let offset = ptr as usize - raw as usize;
            let moved = System.realloc(raw, old_raw, new_raw.size());
            if moved.is_null() {
                return moved;
            }
            let p = moved.add(LINE - (moved as usize % LINE));
            if p != moved.add(offset) {
                std::ptr::copy(moved.add(offset), p, layout.size().min(new_size));
            }
            p.cast::<usize>().sub(1).write(moved as usize);
            return p;
        }
        // Crossing the 64-byte threshold: a new block of the other kind.
        let new = Layout::from_size_align_unchecked(new_size, layout.align());
        let moved = self.alloc(new);
        if !moved.is_null() {
            std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
            self.dealloc(ptr, layout);
        }
        moved
    }
}

/// Sets the allocator policy described in the module documentation. Returns whether it was
/// applied: only with glibc (elsewhere the allocator is left as it is). Call it before the
/// first large allocation, once per process; calling it again is harmless.
pub fn retain_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `mallopt` only adjusts the allocator's thresholds; both values are within
        // the ranges glibc documents (the mmap threshold at most 32 MiB on 64-bit systems).
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20) == 1 && libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The allocator as `Vec` and friends call it: blocks of a line or more come back
    /// aligned to 64 bytes, smaller ones with their own alignment, contents survive a
    /// `realloc` across the threshold in both directions.
    #[test]
    fn large_blocks_are_line_aligned_and_realloc_keeps_contents() {
        let a = CacheAligned;
        for size in [1usize, 8, 63, 64, 65, 100, 4096, 1 << 20, 40 << 20] {
            let l = Layout::from_size_align(size, 4).unwrap();
            // SAFETY: a non-zero size; every block is freed with its layout.
            unsafe {
                let p = a.alloc(l);
                assert!(!p.is_null());
                assert_eq!(p as usize % 4, 0);
                if size >= 64 {
                    assert_eq!(p as usize % 64, 0, "{size} bytes at {p:p}");
                }
                a.dealloc(p, l);
                let z = a.alloc_zeroed(l);
                assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0));
                a.dealloc(z, l);
            }
        }
        // SAFETY: each pointer is the live block of the layout passed with it.
        unsafe {
            let l = Layout::from_size_align(40, 8).unwrap();
            let p = a.alloc(l);
            for i in 0..40 {
                *p.add(i) = i as u8;
            }
            let mut p = a.realloc(p, l, 5000);
            assert_eq!(p as usize % 64, 0);
            assert!((0..40).all(|i| *p.add(i) == i as u8));
            // Aligned to aligned, growing (the block may move) and shrinking.
            for i in 40..5000 {
                *p.add(i) = (i % 251) as u8;
            }
            let mut size = 5000;
            for new_size in [1 << 20, 300, 64, 3 << 20] {
                let p2 = a.realloc(p, Layout::from_size_align(size, 8).unwrap(), new_size);
                assert_eq!(p2 as usize % 64, 0);
                let kept = size.min(new_size);
                assert!((40..kept).all(|i| *p2.add(i) == (i % 251) as u8), "after realloc to {new_size}");
                for i in kept..new_size {
                    *p2.add(i) = (i % 251) as u8;
                }
                p = p2;
                size = new_size;
            }
            let p = a.realloc(p, Layout::from_size_align(size, 8).unwrap(), 16);
            assert!((0..16).all(|i| *p.add(i) == i as u8));
            a.dealloc(p, Layout::from_size_align(16, 8).unwrap());
        }
    }
}
