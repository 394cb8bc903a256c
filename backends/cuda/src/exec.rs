//! Where a kernel runs: the one launch path of the crate. A launcher (`crate::shim`) checks its
//! launch shape and buffer lengths, then calls [`launch`] with the kernel's name and its
//! arguments as [`Arg`]s in the kernel's parameter order. [`launch`] checks the arguments
//! against the kernel's signature (which the shim's table derives from the kernel's own C
//! declaration) and builds one parameter array, `params[i]` pointing at argument i as CUDA's
//! `kernelParams` do, which goes either to the CPU shim's generic launcher or, on a thread
//! that has entered a device (`device::Gpu::enter`, feature `cuda`), to
//! `cuLaunchKernel` of the same kernel compiled by NVRTC. So the shim tests check every
//! argument list a device launch uses.

use crate::launch::{Dim3, Launch};
use crate::shim::{LaunchError, Result};
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr};
use std::sync::OnceLock;

/// One argument of a kernel, as its parameter is declared in the kernel's C source.
#[derive(Debug)]
pub enum Arg<'a> {
    /// `const float*`.
    F32s(&'a [f32]),
    /// `float*`.
    F32sMut(&'a mut [f32]),
    /// `const double*`.
    F64s(&'a [f64]),
    /// `double*`.
    F64sMut(&'a mut [f64]),
    /// `const int*`.
    I32s(&'a [i32]),
    /// `int*`.
    I32sMut(&'a mut [i32]),
    /// `const unsigned short*` (bf16 bits).
    U16s(&'a [u16]),
    /// `unsigned short*` (bf16 bits).
    U16sMut(&'a mut [u16]),
    /// `int`.
    I32(i32),
    /// `long long`.
    I64(i64),
    /// `unsigned`.
    U32(u32),
    /// `float`.
    F32(f32),
    /// `double`.
    F64(f64),
}

impl Arg<'_> {
    /// The signature letter of the shim's table (`shim/shim.h`, `shim::code`).
    pub fn code(&self) -> u8 {
        match self {
            Arg::F32s(_) => b'f',
            Arg::F32sMut(_) => b'F',
            Arg::F64s(_) => b'd',
            Arg::F64sMut(_) => b'D',
            Arg::I32s(_) => b'i',
            Arg::I32sMut(_) => b'I',
            Arg::U16s(_) => b'h',
            Arg::U16sMut(_) => b'H',
            Arg::I32(_) => b'4',
            Arg::I64(_) => b'8',
            Arg::U32(_) => b'u',
            Arg::F32(_) => b's',
            Arg::F64(_) => b'S',
        }
    }

    /// The argument as the 8 bytes a parameter slot holds: a buffer's address, or a scalar
    /// in the slot's low bytes (little-endian, as both the CPU and the GPU read them).
    pub fn slot(&self) -> u64 {
        match self {
            Arg::F32s(s) => s.as_ptr() as u64,
            Arg::F32sMut(s) => s.as_ptr() as u64,
            Arg::F64s(s) => s.as_ptr() as u64,
            Arg::F64sMut(s) => s.as_ptr() as u64,
            Arg::I32s(s) => s.as_ptr() as u64,
            Arg::I32sMut(s) => s.as_ptr() as u64,
            Arg::U16s(s) => s.as_ptr() as u64,
            Arg::U16sMut(s) => s.as_ptr() as u64,
            Arg::I32(v) => u64::from(*v as u32),
            Arg::I64(v) => *v as u64,
            Arg::U32(v) => u64::from(*v),
            Arg::F32(v) => u64::from(v.to_bits()),
            Arg::F64(v) => v.to_bits(),
        }
    }

    /// A buffer argument's bytes and whether the kernel writes it; `None` for a scalar.
    pub fn buffer(&self) -> Option<(usize, bool)> {
        let b = |n: usize, e: usize, w: bool| Some((n * e, w));
        match self {
            Arg::F32s(s) => b(s.len(), 4, false),
            Arg::F32sMut(s) => b(s.len(), 4, true),
            Arg::F64s(s) => b(s.len(), 8, false),
            Arg::F64sMut(s) => b(s.len(), 8, true),
            Arg::I32s(s) => b(s.len(), 4, false),
            Arg::I32sMut(s) => b(s.len(), 4, true),
            Arg::U16s(s) => b(s.len(), 2, false),
            Arg::U16sMut(s) => b(s.len(), 2, true),
            _ => None,
        }
    }
}

macro_rules! arg_from {
    ($($t:ty => $v:ident),* $(,)?) => {
        $(impl<'a> From<$t> for Arg<'a> {
            fn from(x: $t) -> Self {
                Arg::$v(x)
            }
        })*
    };
}

arg_from! {
    &'a [f32] => F32s, &'a mut [f32] => F32sMut, &'a [f64] => F64s, &'a mut [f64] => F64sMut,
    &'a [i32] => I32s, &'a mut [i32] => I32sMut, &'a [u16] => U16s, &'a mut [u16] => U16sMut,
    i32 => I32, i64 => I64, u32 => U32, f32 => F32, f64 => F64,
}

/// `args![a, b, n]`: the arguments of a launch, each converted by `Arg::from`.
macro_rules! args {
    ($($a:expr),* $(,)?) => {
        [$($crate::exec::Arg::from($a)),*]
    };
}
pub(crate) use args;

/// The shim's generic launcher of one kernel: `(name, grid, block, params)`.
type ParamsFn = unsafe extern "C" fn(*const c_char, Dim3, Dim3, *mut *mut c_void);

/// An entry of a kernel file's table in the shim (`shim::Entry`).
#[repr(C)]
#[derive(Clone, Copy)]
struct RawEntry {
    name: *const c_char,
    launch: ParamsFn,
    signature: *const c_char,
}

/// A kernel of the shim's tables.
#[derive(Clone, Copy, Debug)]
pub struct ShimKernel {
    name: *const c_char,
    launch: ParamsFn,
    /// One letter per parameter ([`Arg::code`]).
    pub signature: &'static str,
}

// SAFETY: the pointers point at the shim's static, immutable tables and strings.
unsafe impl Send for ShimKernel {}
// SAFETY: as Send.
unsafe impl Sync for ShimKernel {}

mod ffi {
    use super::RawEntry;
    extern "C" {
        pub fn shim_table_act(n: *mut usize) -> *const RawEntry;
        pub fn shim_table_layernorm(n: *mut usize) -> *const RawEntry;
        pub fn shim_table_optim(n: *mut usize) -> *const RawEntry;
        pub fn shim_table_mamba1(n: *mut usize) -> *const RawEntry;
        pub fn shim_table_knn(n: *mut usize) -> *const RawEntry;
        pub fn shim_table_loss(n: *mut usize) -> *const RawEntry;
        pub fn shim_table_mamba2(n: *mut usize) -> *const RawEntry;
        pub fn shim_table_autocast(n: *mut usize) -> *const RawEntry;
        pub fn shim_table_layout(n: *mut usize) -> *const RawEntry;
        pub fn shim_table_selftest(n: *mut usize) -> *const RawEntry;
    }
}

/// Every kernel the shim can run, by name: the kernel files' and its own test kernels'.
pub fn shim_kernels() -> &'static HashMap<&'static str, ShimKernel> {
    static TABLE: OnceLock<HashMap<&'static str, ShimKernel>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let tables = [
            ffi::shim_table_act,
            ffi::shim_table_layernorm,
            ffi::shim_table_optim,
            ffi::shim_table_mamba1,
            ffi::shim_table_knn,
            ffi::shim_table_loss,
            ffi::shim_table_mamba2,
            ffi::shim_table_autocast,
            ffi::shim_table_layout,
            ffi::shim_table_selftest,
        ];
        let mut map = HashMap::new();
        for table in tables {
            let mut n = 0usize;
            // SAFETY: the table function returns its static array and writes its length.
            let entries = unsafe { std::slice::from_raw_parts(table(&mut n), n) };
            for e in entries {
                // SAFETY: both strings are static, NUL-terminated ASCII (kernel names and letters).
                let (name, sig) = unsafe { (CStr::from_ptr(e.name), CStr::from_ptr(e.signature)) };
                let (name, signature) = (name.to_str().expect("ASCII"), sig.to_str().expect("ASCII"));
                map.insert(name, ShimKernel { name: e.name, launch: e.launch, signature });
            }
        }
        map
    })
}

/// The shim's entry of `kernel`, and the arguments checked against its signature.
fn checked(kernel: &'static str, args: &[Arg]) -> Result<ShimKernel> {
    let entry = *shim_kernels()
        .get(kernel)
        .ok_or_else(|| LaunchError { kernel, why: "no kernel of this name in the shim's tables".into() })?;
    let codes: Vec<u8> = args.iter().map(Arg::code).collect();
    if codes != entry.signature.as_bytes() {
        let why = format!(
            "arguments of types {:?} do not match the kernel's parameters {:?}",
            String::from_utf8_lossy(&codes),
            entry.signature
        );
        return Err(LaunchError { kernel, why });
    }
    Ok(entry)
}

/// Runs `kernel` over the launch `l` with `args` in its parameter order: on the thread's
/// device when it has entered one (feature `cuda`), else through the CPU shim. The caller has
/// checked the launch shape and that every buffer holds what the kernel indexes.
pub fn launch(kernel: &'static str, l: Launch, args: &mut [Arg]) -> Result<()> {
    let entry = checked(kernel, args)?;
    note_buffers(args);
    count(|t| t.launches += 1);
    #[cfg(feature = "cuda")]
    if let Some(gpu) = crate::device::current() {
        return gpu.launch(kernel, l, args);
    }
    let mut slots: Vec<u64> = args.iter().map(Arg::slot).collect();
    let mut params: Vec<*mut c_void> = slots.iter_mut().map(|s| s as *mut u64 as *mut c_void).collect();
    // SAFETY: the arguments match the kernel's parameter types (checked above), each slot
    // holds its value in the bytes the shim reads, and the caller checked that the buffers
    // cover what the kernel indexes for this launch.
    unsafe { (entry.launch)(entry.name, l.grid, l.block, params.as_mut_ptr()) };
    Ok(())
}

/// Counts the buffers among `args` that are not device memory ([`resident`]): a device
/// launch stages each (a copy in, and back out when written), so each is host traffic.
pub(crate) fn note_buffers(args: &[Arg]) {
    for a in args {
        if let Some((bytes, _)) = a.buffer() {
            note_buffer(a.slot(), bytes);
        }
    }
}

/// Counts `bytes` at `addr` as staged unless they are device memory.
fn note_buffer(addr: u64, bytes: usize) {
    if bytes > 0 && !resident::contains(addr, bytes) {
        count(|t| {
            t.staged += 1;
            t.staged_bytes += bytes as u64;
        });
    }
}

/// What crossed between the host and the device, counted per thread over every launch,
/// product, copy and synchronization of the crate, in shim mode as on a device (the shim
/// counts what a device would do). [`traffic`] reads it; two readings around a training
/// step give the step's ([`Traffic::since`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Kernel launches, device copies and fills.
    pub launches: u64,
    /// Matrix products.
    pub products: u64,
    /// Buffers a launch or product was given that are not device memory: each staged.
    pub staged: u64,
    /// Their bytes.
    pub staged_bytes: u64,
    /// Times the host waited for the device ([`sync`]).
    pub syncs: u64,
    /// Bytes of inputs copied to the device ([`upload`]: a step's tokens).
    pub uploaded_bytes: u64,
    /// Bytes of results copied to the host ([`download`]).
    pub downloaded_bytes: u64,
}

impl Traffic {
    /// The sum of two counts.
    pub fn plus(self, o: Traffic) -> Traffic {
        Traffic {
            launches: self.launches + o.launches,
            products: self.products + o.products,
            staged: self.staged + o.staged,
            staged_bytes: self.staged_bytes + o.staged_bytes,
            syncs: self.syncs + o.syncs,
            uploaded_bytes: self.uploaded_bytes + o.uploaded_bytes,
            downloaded_bytes: self.downloaded_bytes + o.downloaded_bytes,
        }
    }

    /// The counts from `before` to `self`.
    pub fn since(self, before: Traffic) -> Traffic {
        Traffic {
            launches: self.launches - before.launches,
            products: self.products - before.products,
            staged: self.staged - before.staged,
            staged_bytes: self.staged_bytes - before.staged_bytes,
            syncs: self.syncs - before.syncs,
            uploaded_bytes: self.uploaded_bytes - before.uploaded_bytes,
            downloaded_bytes: self.downloaded_bytes - before.downloaded_bytes,
        }
    }
}

thread_local! {
    static TRAFFIC: std::cell::Cell<Traffic> = std::cell::Cell::new(Traffic::default());
}

/// The thread's counts so far.
pub fn traffic() -> Traffic {
    TRAFFIC.with(|t| t.get())
}

pub(crate) fn count(f: impl FnOnce(&mut Traffic)) {
    TRAFFIC.with(|t| {
        let mut v = t.get();
        f(&mut v);
        t.set(v);
    });
}

/// Device memory as the counters see it: the address ranges of the pools' buffers (in the
/// shim the host memory that stands for the device's), per thread, as a pool is.
pub mod resident {
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    thread_local! {
        static RANGES: RefCell<BTreeMap<u64, usize>> = const { RefCell::new(BTreeMap::new()) };
    }

    /// Registers `[addr, addr + bytes)` as device memory.
    pub fn insert(addr: u64, bytes: usize) {
        RANGES.with(|r| r.borrow_mut().insert(addr, bytes));
    }

    /// Forgets the range starting at `addr`.
    pub fn remove(addr: u64) {
        RANGES.with(|r| r.borrow_mut().remove(&addr));
    }

    /// Whether `[addr, addr + bytes)` lies inside one registered range.
    pub fn contains(addr: u64, bytes: usize) -> bool {
        RANGES.with(|r| {
            let r = r.borrow();
            r.range(..=addr).next_back().is_some_and(|(&start, &len)| addr + bytes as u64 <= start + len as u64)
        })
    }
}

/// Waits until the thread's device has finished every launch so far, so the host may read
/// what they wrote; counted ([`Traffic::syncs`]). In the shim launches finish before they
/// return, so only the count changes.
pub fn sync() -> Result<()> {
    count(|t| t.syncs += 1);
    #[cfg(feature = "cuda")]
    if let Some(gpu) = crate::device::current() {
        return gpu.sync("sync");
    }
    Ok(())
}

/// The values of `src` on the host: a [`sync`], then the copy (counted as downloaded).
pub fn download<T: crate::pool::DeviceElem>(src: &[T]) -> Result<Vec<T>> {
    sync()?;
    count(|t| t.downloaded_bytes += std::mem::size_of_val(src) as u64);
    Ok(src.to_vec())
}

/// Copies the host slice `src` into the device buffer `dst` of the same length, in stream
/// order (counted as uploaded).
pub fn upload<T: crate::pool::DeviceElem>(src: &[T], dst: &mut [T]) {
    count(|t| t.uploaded_bytes += std::mem::size_of_val(src) as u64);
    raw_copy(src, dst);
}

/// Copies `src` into `dst` (same length) on the device, in stream order.
pub fn copy<T: crate::pool::DeviceElem>(src: &[T], dst: &mut [T]) {
    note_buffer(src.as_ptr() as u64, std::mem::size_of_val(src));
    count(|t| t.launches += 1);
    raw_copy(src, dst);
}

/// `dst = src` as the thread's device copies (asynchronously, in stream order), else on the host.
fn raw_copy<T: crate::pool::DeviceElem>(src: &[T], dst: &mut [T]) {
    #[cfg(feature = "cuda")]
    if let Some(gpu) = crate::device::current() {
        // A failed copy means a failed device, which the next synchronization reports.
        let _ = gpu.copy(src.as_ptr() as u64, dst.as_mut_ptr() as u64, std::mem::size_of_val(src));
        return;
    }
    dst.copy_from_slice(src);
}

/// The pool that a call's temporaries (a product's bf16 operands, reduction partials) come
/// from on this thread: the model's, while a call of the model is running
/// ([`scratch_scope`]); else a fresh one, of the entered device's memory on a device (so that
/// no host memory reaches a kernel as if it were the device's).
pub fn scratch() -> crate::pool::Pool {
    if let Some(p) = SCRATCH.with(|s| s.borrow().clone()) {
        return p;
    }
    #[cfg(feature = "cuda")]
    if let Some(gpu) = crate::device::current() {
        return crate::pool::Pool::on_gpu(gpu);
    }
    crate::pool::Pool::new()
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Option<crate::pool::Pool>> = const { std::cell::RefCell::new(None) };
}

/// While alive, [`scratch`] is `pool`; the previous one comes back on drop.
#[derive(Debug)]
pub struct ScratchScope(Option<crate::pool::Pool>);

/// Makes `pool` the thread's [`scratch`] pool until the guard drops.
pub fn scratch_scope(pool: &crate::pool::Pool) -> ScratchScope {
    ScratchScope(SCRATCH.with(|s| s.borrow_mut().replace(pool.clone())))
}

impl Drop for ScratchScope {
    fn drop(&mut self) {
        let prev = self.0.take();
        SCRATCH.with(|s| *s.borrow_mut() = prev);
    }
}

/// Runs `kernel` through the shim with no check of the launch shape (the shim's own refusal,
/// which aborts the process, is what the caller tests). The arguments are still checked
/// against the signature.
///
/// # Safety
/// Every buffer must cover what the kernel indexes over `grid` and `block`.
pub unsafe fn launch_shim_unchecked(kernel: &'static str, grid: Dim3, block: Dim3, args: &mut [Arg]) -> Result<()> {
    let entry = checked(kernel, args)?;
    let mut slots: Vec<u64> = args.iter().map(Arg::slot).collect();
    let mut params: Vec<*mut c_void> = slots.iter_mut().map(|s| s as *mut u64 as *mut c_void).collect();
    // SAFETY: as `launch`, the buffers by the caller's contract.
    unsafe { (entry.launch)(entry.name, grid, block, params.as_mut_ptr()) };
    Ok(())
}

/// Where a model's launches run: the CPU shim (the default), or (feature `cuda`) a device.
/// A model holds one and enters it around each call that launches ([`Exec::enter`]).
#[derive(Clone, Debug, Default)]
pub struct Exec {
    #[cfg(feature = "cuda")]
    gpu: Option<std::rc::Rc<crate::device::Gpu>>,
}

/// While alive, the thread's launches run where the [`Exec`] says.
#[derive(Debug)]
pub struct Scope {
    #[cfg(feature = "cuda")]
    _entered: Option<crate::device::Entered>,
}

impl Exec {
    /// The CPU shim.
    pub fn shim() -> Self {
        Self::default()
    }

    /// A device.
    #[cfg(feature = "cuda")]
    pub fn gpu(gpu: std::rc::Rc<crate::device::Gpu>) -> Self {
        Self { gpu: Some(gpu) }
    }

    /// The device, if this runs on one.
    #[cfg(feature = "cuda")]
    pub fn device(&self) -> Option<&std::rc::Rc<crate::device::Gpu>> {
        self.gpu.as_ref()
    }

    /// Whether launches run on a device.
    pub fn on_device(&self) -> bool {
        #[cfg(feature = "cuda")]
        return self.gpu.is_some();
        #[cfg(not(feature = "cuda"))]
        false
    }

    /// Makes the thread's launches run here until the scope drops; fails only when the
    /// device's context cannot be made current.
    pub fn enter(&self) -> Result<Scope> {
        #[cfg(feature = "cuda")]
        {
            let entered = match &self.gpu {
                Some(g) => Some(g.enter().map_err(|e| LaunchError { kernel: "enter", why: e.to_string() })?),
                None => None,
            };
            Ok(Scope { _entered: entered })
        }
        #[cfg(not(feature = "cuda"))]
        Ok(Scope {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::FILES;

    #[test]
    fn the_shim_tables_hold_exactly_the_listed_kernels() {
        let table = shim_kernels();
        let mut listed: Vec<&str> = FILES.iter().flat_map(|f| f.kernels.iter().copied()).collect();
        listed.extend(["selftest_barrier_probe", "selftest_tree_sum", "selftest_race", "selftest_divergent"]);
        let mut have: Vec<&str> = table.keys().copied().collect();
        listed.sort_unstable();
        have.sort_unstable();
        assert_eq!(have, listed);
        assert_eq!(table["act_silu_fwd"].signature, "fF8");
        assert_eq!(table["optim_clip_factor"].signature, "dSD");
    }

    #[test]
    fn arguments_that_do_not_match_the_signature_are_refused() {
        let (x, mut y) = ([1.0f32; 4], [0.0f32; 4]);
        let l = crate::launch::elementwise(4);
        // n as an int where the kernel takes a long long.
        let e = launch("act_silu_fwd", l, &mut args![&x[..], &mut y[..], 4i32]).unwrap_err();
        assert!(e.why.contains("\"fF4\"") && e.why.contains("\"fF8\""), "{e}");
        // A read-only buffer where the kernel writes.
        assert!(launch("act_silu_fwd", l, &mut args![&x[..], &y[..], 4i64]).is_err());
        assert_eq!(y, [0.0; 4]);
        let e = launch("no_such_kernel", l, &mut []).unwrap_err();
        assert!(e.why.contains("no kernel"), "{e}");
        launch("act_silu_fwd", l, &mut args![&x[..], &mut y[..], 4i64]).unwrap();
        assert!((y[0] - 1.0 / (1.0 + (-1.0f32).exp())).abs() < 1e-6);
    }
}
