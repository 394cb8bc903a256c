//! The process's allocator policy for training: keep freed memory for reuse instead of
//! handing it back to the kernel after every step.
//!
//! A training step allocates and frees many buffers above glibc's default mmap threshold
//! (128 KiB): when this policy was added, a dozen activation buffers of `B * T * P * M`
//! values (16 MiB each at the `cpu-demo` preset), which cost a page fault and a zeroed page
//! per 4 KiB written, about 5 % of a `cpu-demo` step (measured with `perf`). The CPU model
//! now keeps its activation buffers itself from step to step (its buffer pool); what this
//! policy still covers is every other large allocation: the per-block gradient partials
//! (a few hundred KiB each, dozens per step), the dfdx backend's tensors, the data loaders.
//! Raising the mmap threshold to glibc's maximum (32 MiB) and the trim threshold to 1 GiB
//! keeps such buffers on the heap and reuses them; larger ones are still mapped, and at most
//! 1 GiB of freed heap is kept. `bc-cli` calls [`retain_freed_memory`] once at start; a
//! library user who trains in a loop may do the same.

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
