//! A counting buffer pool, the device allocator of the CUDA design: a buffer is taken from
//! the pool and goes back to it when dropped, and a later request of its size class (fixed at
//! the size's first request, [`Pool::take_of`]) reuses it, so a training step's buffers, whose
//! sizes repeat from step to step, are allocated in the first step and then only recycled (no
//! `cudaMalloc`/`cudaFree` inside a later step). The pool counts bytes:
//! those in buffers taken and not yet returned ([`Pool::in_use`]), those it holds in all
//! ([`Pool::reserved`]: in use plus cached for reuse, what the device would see allocated),
//! and the peak of each. In shim mode a buffer is host memory; a pool made by
//! `Pool::on_gpu` (feature `cuda`) lends CUDA managed memory instead, one address for the
//! host code and the kernels (see `device`). Each buffer carries a byte size per element that
//! the counts use, so a 2-byte (bf16) buffer is counted as the device would hold it while the
//! shim still computes in `f32`.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::rc::Rc;

/// Bytes per element of an `f32` buffer.
pub const F32: usize = 4;
/// Bytes per element of a `bf16` buffer (counted; the shim stores it as `f32`).
pub const BF16: usize = 2;

/// The element types a pool buffer can hold: those the kernels take pointers to.
pub trait DeviceElem: Copy + Default + std::fmt::Debug + 'static {}
impl DeviceElem for f32 {}
impl DeviceElem for f64 {}
impl DeviceElem for i32 {}
impl DeviceElem for u16 {}

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

/// A buffer's memory: host words (8-byte aligned, so any [`DeviceElem`] fits), or (feature
/// `cuda`) a managed allocation of the pool's device; `cap` elements of the buffer's type.
#[derive(Debug)]
enum Storage {
    Host {
        words: Vec<u64>,
        cap: usize,
    },
    #[cfg(feature = "cuda")]
    Managed {
        ptr: u64,
        cap: usize,
    },
}

impl Storage {
    fn capacity(&self) -> usize {
        match self {
            Storage::Host { cap, .. } => *cap,
            #[cfg(feature = "cuda")]
            Storage::Managed { cap, .. } => *cap,
        }
    }

    fn addr(&self) -> u64 {
        match self {
            Storage::Host { words, .. } => words.as_ptr() as u64,
            #[cfg(feature = "cuda")]
            Storage::Managed { ptr, .. } => *ptr,
        }
    }
}

/// What a cached buffer can serve: the bytes it is counted at per element and the bytes an
/// element takes in memory. A bf16 buffer (counted 2, held 4 in the shim) never serves an
/// f32 request, nor an f64 buffer an f32 one of twice the length.
type Kind = (usize, usize);

#[derive(Debug, Default)]
struct State {
    /// Cached buffers: their kind and storage, the storage's capacity their size.
    free: Vec<(Kind, Storage)>,
    /// The capacity that serves each (kind, request size).
    classes: std::collections::HashMap<(Kind, usize), usize>,
    stats: PoolStats,
    /// The device whose managed memory the pool lends; host memory when `None`.
    #[cfg(feature = "cuda")]
    gpu: Option<Rc<crate::device::Gpu>>,
}

impl State {
    /// New storage of `n` elements of `size` bytes: managed memory of the pool's device,
    /// else (or should the device be out of memory) host memory, which a launch then stages.
    /// Storage in device memory (the shim's stands for it) is registered as resident
    /// ([`crate::exec::resident`]), so a launch given it stages nothing.
    fn allocate(&mut self, n: usize, size: usize) -> Storage {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = &self.gpu {
            match gpu.alloc_managed(n * size) {
                Ok(ptr) => {
                    crate::exec::resident::insert(ptr, n * size);
                    return Storage::Managed { ptr, cap: n };
                }
                Err(_) => {
                    self.stats.host_fallbacks += 1;
                    return Storage::Host { words: vec![0; (n * size).div_ceil(8)], cap: n };
                }
            }
        }
        let s = Storage::Host { words: vec![0; (n * size).div_ceil(8).max(1)], cap: n };
        crate::exec::resident::insert(s.addr(), n * size);
        s
    }

    /// Returns storage to its allocator.
    fn release(&mut self, s: Storage) {
        crate::exec::resident::remove(s.addr());
        match s {
            Storage::Host { words, .. } => drop(words),
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

/// A buffer of the pool: `len` elements of `T` (`f32` unless said), zeroed when taken;
/// returned to the pool on drop.
#[derive(Debug)]
pub struct Buf<T: DeviceElem = f32> {
    data: Storage,
    len: usize,
    elem: usize,
    pool: Pool,
    _t: PhantomData<T>,
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

    /// `n` zeroed elements of `T`, counted at their size.
    pub fn zeros_of<T: DeviceElem>(&self, n: usize) -> Buf<T> {
        self.take_of(n, std::mem::size_of::<T>())
    }

    /// `n` zeroed `f32` elements counted as `elem` bytes each (see [`Pool::take_of`]).
    pub fn take(&self, n: usize, elem: usize) -> Buf {
        self.take_of(n, elem)
    }

    /// `n` zeroed elements of `T` counted as `elem` bytes each, from a cached buffer of the
    /// same kind and of the request size's class, else a new one of that capacity. The class
    /// is fixed at the size's first request: the capacity of the smallest cached buffer then
    /// free that holds at least `n` and at most `2 n` (the bound keeps a small request from
    /// pinning a large buffer), else `n`.
    pub fn take_of<T: DeviceElem>(&self, n: usize, elem: usize) -> Buf<T> {
        let size = std::mem::size_of::<T>();
        let kind = (elem, size);
        let mut st = self.0.borrow_mut();
        // Each request size has a class, the capacity of the buffers that serve it, fixed at
        // its first request: a cached buffer of at most twice the size if one is free (the
        // smallest; a short last group of sequences reuses a full group's), else the size
        // itself. Later requests take only buffers of their class, so one step's sizes never
        // take each other's buffers and the next step of the same shapes allocates nothing.
        let class = match st.classes.get(&(kind, n)) {
            Some(&c) => c,
            None => {
                let larger =
                    |(k, v): &&(Kind, Storage)| *k == kind && v.capacity() >= n && v.capacity() <= 2 * n.max(1);
                let c = st.free.iter().filter(larger).map(|(_, v)| v.capacity()).min().unwrap_or(n);
                st.classes.insert((kind, n), c);
                c
            }
        };
        let data = match st.free.iter().position(|(k, v)| *k == kind && v.capacity() == class) {
            Some(i) => {
                st.stats.reused += 1;
                st.free.swap_remove(i).1
            }
            None => {
                st.stats.allocated += 1;
                let v = st.allocate(class, size);
                st.stats.reserved += v.capacity() * elem;
                v
            }
        };
        zero(&data, n * size, &st);
        let s = &mut st.stats;
        s.in_use += data.capacity() * elem;
        s.peak_in_use = s.peak_in_use.max(s.in_use);
        s.peak_reserved = s.peak_reserved.max(s.reserved);
        Buf { data, len: n, elem, pool: self.clone(), _t: PhantomData }
    }

    /// A buffer holding a copy of `src`, a pool buffer (one device copy, no host traffic).
    pub fn copy_of(&self, src: &[f32]) -> Buf {
        let mut b = self.zeros(src.len());
        crate::exec::copy(src, &mut b);
        b
    }

    /// A buffer holding `src`, a host slice: the upload of a step's input (counted by
    /// [`crate::exec::traffic`] as uploaded, not staged).
    pub fn upload<T: DeviceElem>(&self, src: &[T]) -> Buf<T> {
        let mut b = self.zeros_of::<T>(src.len());
        crate::exec::upload(src, &mut b);
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
        let cached: usize = st.free.iter().map(|((e, _), v)| e * v.capacity()).sum();
        for (_, s) in std::mem::take(&mut st.free) {
            st.release(s);
        }
        st.stats.reserved -= cached;
    }
}

impl<T: DeviceElem> Buf<T> {
    /// Bytes per element this buffer is counted at.
    pub fn elem_bytes(&self) -> usize {
        self.elem
    }
}

/// Sets the first `bytes` of `data` to zero: on the host, or on the device by an
/// asynchronous memset in stream order (no synchronization).
fn zero(data: &Storage, bytes: usize, _st: &State) {
    match data {
        Storage::Host { words, .. } => {
            // SAFETY: the words hold at least `bytes` bytes; no view of them is alive (the
            // storage is being handed out).
            unsafe { std::ptr::write_bytes(words.as_ptr() as *mut u8, 0, bytes) };
        }
        #[cfg(feature = "cuda")]
        Storage::Managed { ptr, .. } => {
            // A failed memset means a failed device, which the next launch reports; the
            // buffer is then never read as zeros by a kernel that ran.
            if let Some(gpu) = &_st.gpu {
                let _ = gpu.zero(*ptr, bytes);
            }
        }
    }
}

impl<T: DeviceElem> Deref for Buf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: the storage holds at least `len` elements of `T` at an 8-byte aligned
        // address, alive while the buffer is; every bit pattern is a valid `T`. On a device the
        // address is managed memory: the host reads it only after a synchronization
        // (`crate::exec::sync`), and a kernel reads it through the address alone.
        unsafe { std::slice::from_raw_parts(self.data.addr() as *const T, self.len) }
    }
}

impl<T: DeviceElem> DerefMut for Buf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as Deref; `&mut self` makes the view unique.
        unsafe { std::slice::from_raw_parts_mut(self.data.addr() as *mut T, self.len) }
    }
}

impl<T: DeviceElem> AsRef<[T]> for Buf<T> {
    fn as_ref(&self) -> &[T] {
        self
    }
}

impl<T: DeviceElem> AsMut<[T]> for Buf<T> {
    fn as_mut(&mut self) -> &mut [T] {
        self
    }
}

impl<T: DeviceElem> Drop for Buf<T> {
    fn drop(&mut self) {
        let data = std::mem::replace(&mut self.data, Storage::Host { words: Vec::new(), cap: 0 });
        let mut st = self.pool.0.borrow_mut();
        st.stats.in_use -= data.capacity() * self.elem;
        st.free.push(((self.elem, std::mem::size_of::<T>()), data));
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

    /// A size first served by a larger cached buffer keeps that class: the sizes of a step
    /// never take each other's buffers, so a repeat of the step allocates nothing, whatever
    /// order frees them.
    #[test]
    fn a_repeated_sequence_of_requests_allocates_only_the_first_time() {
        let pool = Pool::new();
        let round = |pool: &Pool| {
            let a = pool.zeros(100);
            drop(a);
            // Served by the 100 (its class from now on); then 100 itself needs a buffer.
            let b = pool.zeros(60);
            let c = pool.zeros(100);
            drop((c, b));
            let (d, e) = (pool.zeros(60), pool.zeros(100));
            drop((e, d));
        };
        round(&pool);
        let first = pool.stats().allocated;
        assert_eq!(first, 2);
        for _ in 0..3 {
            round(&pool);
            assert_eq!(pool.stats().allocated, first);
        }
        assert_eq!(pool.reserved(), 800);
        // Typed buffers: f64 and i32 of their own kinds, zeroed, counted at their sizes.
        let (x, y) = (pool.zeros_of::<f64>(3), pool.upload(&[1i32, -2, 3]));
        assert_eq!((&x[..], &y[..]), (&[0.0f64; 3][..], &[1, -2, 3][..]));
        assert_eq!(pool.in_use(), 24 + 12);
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
