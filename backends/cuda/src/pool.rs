//! A counting buffer pool, the device allocator of the CUDA design: a buffer is taken from
//! the pool and goes back to it when dropped, and a later request of a size it fits reuses
//! it, so a training step's buffers, whose sizes repeat from step to step, are allocated once
//! and then only recycled (no `cudaMalloc`/`cudaFree` inside a step). The pool counts bytes:
//! those in buffers taken and not yet returned ([`Pool::in_use`]), those it holds in all
//! ([`Pool::reserved`]: in use plus cached for reuse, what the device would see allocated),
//! and the peak of each. In shim mode a buffer is a host `Vec<f32>`; a pool made by
//! `Pool::on_gpu` (feature `cuda`) lends CUDA managed memory instead, one address for the
//! host code and the kernels (see `device`). Each buffer carries a byte size per element that
//! the counts use, so a 2-byte (bf16) buffer is counted as the device would hold it while the
//! shim still computes in `f32`.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::rc::Rc;

/// Bytes per element of an `f32` buffer.
pub const F32: usize = 4;
/// Bytes per element of a `bf16` buffer (counted; the shim stores it as `f32`).
pub const BF16: usize = 2;

/// What the pool has counted, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// In buffers taken and not yet returned.
    pub in_use: usize,
    /// The most `in_use` has been.
    pub peak_in_use: usize,
    /// In use plus cached for reuse.
    pub reserved: usize,
    /// The most `reserved` has been: the allocator's peak.
    pub peak_reserved: usize,
    /// Requests served from the cache.
    pub reused: usize,
    /// Requests that allocated.
    pub allocated: usize,
    /// Allocations a pool on a device had to make in host memory (the device was full).
    pub host_fallbacks: usize,
}

/// A buffer's memory: a host vector, or (feature `cuda`) a managed allocation of the pool's
/// device of `cap` elements.
#[derive(Debug)]
enum Storage {
    Host(Vec<f32>),
    #[cfg(feature = "cuda")]
    Managed {
        ptr: u64,
        cap: usize,
    },
}

impl Storage {
    fn capacity(&self) -> usize {
        match self {
            Storage::Host(v) => v.capacity(),
            #[cfg(feature = "cuda")]
            Storage::Managed { cap, .. } => *cap,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// Cached buffers: (element bytes, storage), the storage's capacity its size.
    free: Vec<(usize, Storage)>,
    stats: PoolStats,
    /// The device whose managed memory the pool lends; host memory when `None`.
    #[cfg(feature = "cuda")]
    gpu: Option<Rc<crate::device::Gpu>>,
}

impl State {
    /// New storage of `n` elements: managed memory of the pool's device, else (or should the
    /// device be out of memory) a host vector, which a launch then stages.
    fn allocate(&mut self, n: usize) -> Storage {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = &self.gpu {
            match gpu.alloc_managed(n * F32) {
                Ok(ptr) => return Storage::Managed { ptr, cap: n },
                Err(_) => self.stats.host_fallbacks += 1,
            }
        }
        Storage::Host(Vec::with_capacity(n))
    }

    /// Returns storage to its allocator.
    fn release(&mut self, s: Storage) {
        match s {
            Storage::Host(v) => drop(v),
            #[cfg(feature = "cuda")]
            Storage::Managed { ptr, .. } => {
                if let Some(gpu) = &self.gpu {
                    gpu.free_managed(ptr);
                }
            }
        }
    }
}

impl Drop for State {
    fn drop(&mut self) {
        for (_, s) in std::mem::take(&mut self.free) {
            self.release(s);
        }
    }
}

/// A shared handle on one pool (cheap to clone; single-threaded, as one CUDA stream is).
#[derive(Clone, Debug, Default)]
pub struct Pool(Rc<RefCell<State>>);

/// A buffer of the pool: `len` elements, zeroed when taken; returned to the pool on drop.
#[derive(Debug)]
pub struct Buf {
    data: Storage,
    len: usize,
    elem: usize,
    pool: Pool,
}

impl Pool {
    /// An empty pool of host memory.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty pool lending `gpu`'s managed memory.
    #[cfg(feature = "cuda")]
    pub fn on_gpu(gpu: Rc<crate::device::Gpu>) -> Self {
        let pool = Self::default();
        pool.0.borrow_mut().gpu = Some(gpu);
        pool
    }

    /// `n` zeroed `f32` elements.
    pub fn zeros(&self, n: usize) -> Buf {
        self.take(n, F32)
    }

    /// `n` zeroed elements counted as `elem` bytes each. A cached buffer of the same element
    /// size serves the request when it holds at least `n` and at most `2 n` elements (the
    /// smallest such; the bound keeps a small request from pinning a large buffer), else a
    /// new buffer of exactly `n` is allocated.
    pub fn take(&self, n: usize, elem: usize) -> Buf {
        let mut st = self.0.borrow_mut();
        let fits = |(e, v): &(usize, Storage)| *e == elem && v.capacity() >= n && v.capacity() <= 2 * n.max(1);
        let best = st.free.iter().enumerate().filter(|(_, f)| fits(f)).min_by_key(|(_, (_, v))| v.capacity());
        let mut data = match best.map(|(i, _)| i) {
            Some(i) => {
                st.stats.reused += 1;
                st.free.swap_remove(i).1
            }
            None => {
                st.stats.allocated += 1;
                let v = st.allocate(n);
                st.stats.reserved += v.capacity() * elem;
                v
            }
        };
        zero(&mut data, n, &st);
        let s = &mut st.stats;
        s.in_use += data.capacity() * elem;
        s.peak_in_use = s.peak_in_use.max(s.in_use);
        s.peak_reserved = s.peak_reserved.max(s.reserved);
        Buf { data, len: n, elem, pool: self.clone() }
    }

    /// A buffer holding a copy of `src`.
    pub fn copy_of(&self, src: &[f32]) -> Buf {
        let mut b = self.zeros(src.len());
        b.copy_from_slice(src);
        b
    }

    /// The counts so far.
    pub fn stats(&self) -> PoolStats {
        self.0.borrow().stats
    }

    /// Bytes in buffers taken and not returned.
    pub fn in_use(&self) -> usize {
        self.stats().in_use
    }

    /// Bytes held: in use plus cached.
    pub fn reserved(&self) -> usize {
        self.stats().reserved
    }

    /// The peak of [`Pool::reserved`]: what the device allocator would have had to provide.
    pub fn peak(&self) -> usize {
        self.stats().peak_reserved
    }

    /// Restart both peaks from the present counts (to measure one phase of a step).
    pub fn reset_peaks(&self) {
        let s = &mut self.0.borrow_mut().stats;
        s.peak_in_use = s.in_use;
        s.peak_reserved = s.reserved;
    }

    /// Free every cached buffer (`cudaFree` of the cache); buffers in use are untouched.
    pub fn trim(&self) {
        let mut st = self.0.borrow_mut();
        let cached: usize = st.free.iter().map(|(e, v)| e * v.capacity()).sum();
        for (_, s) in std::mem::take(&mut st.free) {
            st.release(s);
        }
        st.stats.reserved -= cached;
    }
}

impl Buf {
    /// Bytes per element this buffer is counted at.
    pub fn elem_bytes(&self) -> usize {
        self.elem
    }
}

/// Sets the first `n` elements of `data` (which holds at least `n`) to zero.
fn zero(data: &mut Storage, n: usize, _st: &State) {
    match data {
        Storage::Host(v) => {
            v.clear();
            v.resize(n, 0.0);
        }
        #[cfg(feature = "cuda")]
        Storage::Managed { ptr, .. } => {
            // A failed memset means a failed device, which the next launch reports; the
            // buffer is then never read as zeros by a kernel that ran.
            if let Some(gpu) = &_st.gpu {
                let _ = gpu.zero(*ptr, n * F32);
            }
        }
    }
}

impl Deref for Buf {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        match &self.data {
            Storage::Host(v) => &v[..self.len],
            // SAFETY: a managed allocation of at least `len` f32, alive while the buffer is,
            // and host-accessible: every launch and product synchronizes before returning.
            #[cfg(feature = "cuda")]
            Storage::Managed { ptr, .. } => unsafe { std::slice::from_raw_parts(*ptr as *const f32, self.len) },
        }
    }
}

impl DerefMut for Buf {
    fn deref_mut(&mut self) -> &mut [f32] {
        match &mut self.data {
            Storage::Host(v) => &mut v[..self.len],
            // SAFETY: as Deref; `&mut self` makes the view unique.
            #[cfg(feature = "cuda")]
            Storage::Managed { ptr, .. } => unsafe { std::slice::from_raw_parts_mut(*ptr as *mut f32, self.len) },
        }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        let data = std::mem::replace(&mut self.data, Storage::Host(Vec::new()));
        let mut st = self.pool.0.borrow_mut();
        st.stats.in_use -= data.capacity() * self.elem;
        st.free.push((self.elem, data));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_returned_buffer_is_reused_and_counted_once() {
        let pool = Pool::new();
        let a = pool.zeros(100);
        assert_eq!((pool.in_use(), pool.reserved()), (400, 400));
        drop(a);
        assert_eq!((pool.in_use(), pool.reserved()), (0, 400));
        let mut b = pool.zeros(80);
        assert_eq!(b.len(), 80);
        assert!(b.iter().all(|&v| v == 0.0));
        b[0] = 3.0;
        // Served by the cached 100-element buffer: 400 bytes, nothing new.
        assert_eq!((pool.in_use(), pool.reserved(), pool.stats().reused), (400, 400, 1));
        drop(b);
        // Zeroed again when taken again.
        assert_eq!(pool.zeros(100)[0], 0.0);
        // Too large for it, and a buffer over twice the request is not lent.
        let (c, d) = (pool.zeros(101), pool.zeros(10));
        assert_eq!(pool.stats().allocated, 3);
        assert_eq!(pool.reserved(), 400 + 404 + 40);
        drop((c, d));
    }

    #[test]
    fn peaks_and_current_bytes() {
        let pool = Pool::new();
        {
            let _a = pool.zeros(10);
            let _b = pool.take(20, BF16);
            assert_eq!(pool.in_use(), 40 + 40);
        }
        assert_eq!(pool.stats().peak_in_use, 80);
        // bf16 and f32 buffers are not exchanged, even of the same byte size.
        let c = pool.take(10, BF16);
        assert_eq!(c.elem_bytes(), 2);
        assert_eq!((pool.in_use(), pool.peak()), (40, 80));
        pool.reset_peaks();
        assert_eq!(pool.stats().peak_in_use, 40);
        pool.trim();
        // The cached buffers are gone; the one in use is still counted.
        assert_eq!((pool.reserved(), pool.in_use()), (40, 40));
        drop(c);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn steps_of_the_same_shapes_allocate_once() {
        let pool = Pool::new();
        for _ in 0..5 {
            let a = pool.zeros(64);
            let b = pool.zeros(32);
            drop(a);
            let _c = pool.zeros(64);
            drop(b);
        }
        assert_eq!(pool.stats().allocated, 2);
        assert_eq!(pool.peak(), 4 * 96);
    }
}
