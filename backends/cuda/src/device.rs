//! The device path (feature `cuda`): a [`Gpu`] opens one CUDA device through the driver API,
//! compiles every kernel file of [`crate::kernels::FILES`] with NVRTC for the device's
//! compute capability, and runs the crate's launches there. It plugs in below the host
//! functions: [`crate::exec::launch`] hands a launch to the [`Gpu`] the calling thread has
//! entered ([`Gpu::enter`]), [`crate::gemm::gemm`] hands its product to cuBLAS, and a
//! [`crate::pool::Pool`] made by [`crate::pool::Pool::on_gpu`] lends buffers of CUDA managed
//! memory. So the same host code, launch shapes and kernels run in shim mode and on a device.
//!
//! Memory and order: pool buffers are managed (`cuMemAllocManaged`), one address valid on the
//! host and on the device. A training step's parameters, gradients, Adam moments and
//! activations all live there, so launches and products go to the null stream one after
//! another without synchronizing, and the host waits only where it reads a result
//! ([`crate::exec::sync`]: the loss and the gradient norm of a step). Any other host buffer a
//! launch is given is the fallback: it is staged (copied to a device allocation before the
//! launch, the stream synchronized and the buffer copied back after, when written) and
//! counted ([`crate::exec::Traffic::staged`]), so the counters say whether a step stayed on
//! the device. A step's tokens come from pageable host memory, whose asynchronous copy the
//! driver begins only once the stream is idle: one implicit wait at the start of each step,
//! which page-locked input buffers would remove.
//!
//! Nothing here runs without a GPU: CI type-checks this module with `--features cuda,ci-check`
//! (cudarc's switch to build without a toolkit), and `scripts/gpu-check.sh` runs it on a GPU
//! machine. [`Gpu::new`] on a machine without a usable device returns a [`DeviceError`] that
//! says so; it never panics.

use crate::exec::Arg;
use crate::gemm::{Op, Operands, Shape};
use crate::kernels::FILES;
use crate::launch::Launch;
use crate::shim::{LaunchError, Result};
use cudarc::cublas::{result as blas, sys as blas_sys};
use cudarc::driver::{result as drv, sys};
use cudarc::nvrtc::result as nvrtc;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_void, CStr, CString};
use std::fmt;
use std::rc::Rc;

/// Why a device could not be opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceError {
    /// The driver failed (no driver, no device, out of memory, ...): the call and the error.
    Driver {
        /// The driver call.
        call: &'static str,
        /// The driver's error.
        error: String,
    },
    /// No device of this ordinal.
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// The devices the driver sees.
        count: usize,
    },
    /// NVRTC rejected a kernel file: its name, NVRTC's error and its log.
    Compile {
        /// The kernel file.
        file: &'static str,
        /// NVRTC's error and the compile log.
        log: String,
    },
    /// cuBLAS could not start.
    Blas(String),
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Driver { call, error } => write!(f, "CUDA driver: {call} failed: {error}"),
            Self::NoDevice { ordinal, count } => {
                write!(f, "no CUDA device {ordinal}: the driver sees {count} device(s)")
            }
            Self::Compile { file, log } => write!(f, "NVRTC could not compile kernels/{file}: {log}"),
            Self::Blas(e) => write!(f, "cuBLAS could not start: {e}"),
        }
    }
}

impl std::error::Error for DeviceError {}

fn driver(call: &'static str) -> impl FnOnce(drv::DriverError) -> DeviceError {
    move |e| DeviceError::Driver { call, error: e.to_string() }
}

/// One CUDA device with the crate's kernels loaded and a cuBLAS handle; single-threaded, as
/// one stream is (share it with `Rc`, enter it on the thread that launches).
pub struct Gpu {
    ordinal: usize,
    name: String,
    capability: (i32, i32),
    ctx: sys::CUcontext,
    functions: HashMap<&'static str, sys::CUfunction>,
    blas: blas_sys::cublasHandle_t,
    /// The managed allocations alive: start address -> bytes.
    managed: RefCell<BTreeMap<u64, usize>>,
}

impl fmt::Debug for Gpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gpu")
            .field("ordinal", &self.ordinal)
            .field("name", &self.name)
            .field("capability", &self.capability)
            .finish_non_exhaustive()
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<Gpu>>> = const { RefCell::new(None) };
}

/// The device the calling thread has entered, if any.
pub fn current() -> Option<Rc<Gpu>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// While alive, the thread's launches and products run on a [`Gpu`] (see [`Gpu::enter`]).
#[derive(Debug)]
pub struct Entered {
    previous: Option<Rc<Gpu>>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

impl Gpu {
    /// Opens device `ordinal`: the driver, its primary context bound to this thread, every
    /// kernel file compiled by NVRTC for the device's capability (with
    /// [`crate::kernels::nvrtc_options`], those CI compiles with), and a cuBLAS handle.
    pub fn new(ordinal: usize) -> core::result::Result<Rc<Self>, DeviceError> {
        drv::init().map_err(driver("cuInit"))?;
        let count = drv::device::get_count().map_err(driver("cuDeviceGetCount"))? as usize;
        if ordinal >= count {
            return Err(DeviceError::NoDevice { ordinal, count });
        }
        let dev = drv::device::get(ordinal as i32).map_err(driver("cuDeviceGet"))?;
        // SAFETY: `dev` is a device the driver returned; the context is retained for the
        // process (a `Gpu` lives as long as the training run).
        let ctx = unsafe { drv::primary_ctx::retain(dev) }.map_err(driver("cuDevicePrimaryCtxRetain"))?;
        // SAFETY: a context just retained.
        unsafe { drv::ctx::set_current(ctx) }.map_err(driver("cuCtxSetCurrent"))?;
        let attr = |a| {
            // SAFETY: a valid device and attribute.
            unsafe { drv::device::get_attribute(dev, a) }.map_err(driver("cuDeviceGetAttribute"))
        };
        let capability = (
            attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let name = device_name(dev);
        let functions = load_kernels(capability)?;
        let blas = blas::create_handle().map_err(|e| DeviceError::Blas(e.to_string()))?;
        let managed = Default::default();
        Ok(Rc::new(Self { ordinal, name, capability, ctx, functions, blas, managed }))
    }

    /// The device's name, as the driver gives it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The compute capability, (major, minor).
    pub fn capability(&self) -> (i32, i32) {
        self.capability
    }

    /// The device memory the driver reports, (free, total) bytes.
    pub fn memory(&self) -> core::result::Result<(usize, usize), DeviceError> {
        drv::mem_get_info().map_err(driver("cuMemGetInfo"))
    }

    /// Runs this thread's launches and products on this device until the guard drops.
    pub fn enter(self: &Rc<Self>) -> core::result::Result<Entered, DeviceError> {
        // SAFETY: the context was retained by `new` and is never released.
        unsafe { drv::ctx::set_current(self.ctx) }.map_err(driver("cuCtxSetCurrent"))?;
        let previous = CURRENT.with(|c| c.borrow_mut().replace(self.clone()));
        Ok(Entered { previous })
    }
}

fn device_name(dev: sys::CUdevice) -> String {
    let mut buf = [0 as std::ffi::c_char; 256];
    // SAFETY: the buffer holds the length given.
    let ok = unsafe { sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, dev) };
    if ok != sys::CUresult::CUDA_SUCCESS {
        return "unknown device".into();
    }
    // SAFETY: the driver wrote a NUL-terminated name into the buffer.
    unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
}

/// Every kernel of every file, compiled and loaded into the current context.
fn load_kernels(cap: (i32, i32)) -> core::result::Result<HashMap<&'static str, sys::CUfunction>, DeviceError> {
    let opts = crate::kernels::nvrtc_options(cap.0, cap.1);
    let mut functions = HashMap::new();
    for file in FILES {
        let ptx = compile(file.name, file.source, &opts)?;
        // SAFETY: `ptx` is NUL-terminated PTX text, which cuModuleLoadData accepts.
        let module =
            unsafe { drv::module::load_data(ptx.as_ptr() as *const c_void) }.map_err(driver("cuModuleLoadData"))?;
        for &k in file.kernels {
            let name = CString::new(k).expect("kernel names have no NUL");
            // SAFETY: a module just loaded.
            let f = unsafe { drv::module::get_function(module, name) }.map_err(driver("cuModuleGetFunction"))?;
            functions.insert(k, f);
        }
    }
    Ok(functions)
}

/// One NVRTC program to PTX (NUL-terminated), or its log.
fn compile(
    file: &'static str,
    source: &str,
    opts: &[String],
) -> core::result::Result<Vec<std::ffi::c_char>, DeviceError> {
    let fail = |e: nvrtc::NvrtcError, log: String| DeviceError::Compile { file, log: format!("{e:?}: {log}") };
    let prog = nvrtc::create_program(source).map_err(|e| fail(e, String::new()))?;
    // SAFETY: `prog` was just created and is destroyed once, below.
    let compiled = unsafe { nvrtc::compile_program(prog, opts) };
    let out = match compiled {
        Ok(()) => unsafe { nvrtc::get_ptx(prog) }.map_err(|e| fail(e, String::new())),
        Err(e) => {
            // SAFETY: as above.
            let log = unsafe { nvrtc::get_program_log(prog) }.unwrap_or_default();
            // SAFETY: the log is NUL-terminated.
            let log = unsafe { CStr::from_ptr(log.as_ptr()) }.to_string_lossy().into_owned();
            Err(fail(e, log))
        }
    };
    // SAFETY: created above, not destroyed before.
    let _ = unsafe { nvrtc::destroy_program(prog) };
    out
}

/// cuBLAS's name of a transpose.
fn blas_op(o: Op) -> blas_sys::cublasOperation_t {
    match o {
        Op::N => blas_sys::cublasOperation_t::CUBLAS_OP_N,
        Op::T => blas_sys::cublasOperation_t::CUBLAS_OP_T,
    }
}

/// `(m, n, k, lda, ldb)` of a row-major product for cuBLAS, which reads the operands as the
/// column-major transposes.
fn blas_dims(s: Shape, ta: Op, tb: Op) -> (i32, i32, i32, i32, i32) {
    let (m, n, k) = (s.m as i32, s.n as i32, s.k as i32);
    (m, n, k, if ta == Op::N { k } else { m }, if tb == Op::N { n } else { k })
}

/// A host buffer copied to the device for one call.
struct Staged {
    arg: usize,
    dev: u64,
    bytes: usize,
    write: bool,
}

impl Gpu {
    /// Whether `[addr, addr + bytes)` lies inside one managed allocation of this device.
    fn is_managed(&self, addr: u64, bytes: usize) -> bool {
        let m = self.managed.borrow();
        m.range(..=addr).next_back().is_some_and(|(&start, &len)| addr + bytes as u64 <= start + len as u64)
    }

    /// The parameter slots of `args`, host buffers staged to device memory (see the module doc).
    fn stage(&self, kernel: &'static str, args: &[Arg]) -> Result<(Vec<u64>, Vec<Staged>)> {
        let mut slots: Vec<u64> = args.iter().map(Arg::slot).collect();
        let mut staged = Vec::new();
        for (i, a) in args.iter().enumerate() {
            let Some((bytes, write)) = a.buffer() else { continue };
            if bytes == 0 || self.is_managed(slots[i], bytes) {
                continue;
            }
            let fail = |e: drv::DriverError| LaunchError { kernel, why: format!("staging an argument: {e}") };
            // SAFETY: a fresh allocation of `bytes`, filled from the host buffer of that size.
            let dev = unsafe { drv::malloc_sync(bytes) }.map_err(fail)?;
            // SAFETY: `slots[i]` is the address of the argument's `bytes` bytes, alive for the call.
            let host = unsafe { std::slice::from_raw_parts(slots[i] as *const u8, bytes) };
            unsafe { drv::memcpy_htod_sync(dev, host) }.map_err(fail)?;
            staged.push(Staged { arg: i, dev, bytes, write });
            slots[i] = dev;
        }
        Ok((slots, staged))
    }

    /// Copies the staged buffers the call wrote back to the host and frees every staging copy.
    fn unstage(&self, kernel: &'static str, args: &mut [Arg], staged: Vec<Staged>) -> Result<()> {
        if staged.is_empty() {
            return Ok(());
        }
        // The fallback's cost: the host waits for the call before it copies back and frees.
        crate::exec::count(|t| t.syncs += 1);
        let mut first = self.sync(kernel);
        for s in staged {
            if s.write {
                let host = args[s.arg].slot() as *mut u8;
                // SAFETY: the argument is a `&mut` buffer of `s.bytes` bytes held by `args`.
                let host = unsafe { std::slice::from_raw_parts_mut(host, s.bytes) };
                if let Err(e) = unsafe { drv::memcpy_dtoh_sync(host, s.dev) } {
                    first = first.and(Err(LaunchError { kernel, why: format!("copying a result back: {e}") }));
                }
            }
            // SAFETY: allocated by `stage` with malloc_sync, freed once.
            let _ = unsafe { drv::free_sync(s.dev) };
        }
        first
    }

    /// Waits for every call so far on the null stream (count it with [`crate::exec::sync`]).
    pub(crate) fn sync(&self, kernel: &'static str) -> Result<()> {
        // SAFETY: the null stream of the current context.
        unsafe { drv::stream::synchronize(drv::stream::null()) }
            .map_err(|e| LaunchError { kernel, why: format!("the device failed running it: {e}") })
    }

    /// Runs `kernel` over `l` with `args` (checked against its signature by the caller).
    pub(crate) fn launch(&self, kernel: &'static str, l: Launch, args: &mut [Arg]) -> Result<()> {
        let f = *self
            .functions
            .get(kernel)
            .ok_or_else(|| LaunchError { kernel, why: "not compiled for the device (a shim-only kernel)".into() })?;
        let (mut slots, staged) = self.stage(kernel, args)?;
        let mut params: Vec<*mut c_void> = slots.iter_mut().map(|s| s as *mut u64 as *mut c_void).collect();
        let (g, b) = (l.grid, l.block);
        // SAFETY: the parameters match the kernel's (checked against the shim's signature of
        // the same source), every buffer is device-accessible, and the launch was checked
        // against CUDA's limits by the caller.
        let launched =
            unsafe { drv::launch_kernel(f, (g.x, g.y, g.z), (b.x, b.y, b.z), 0, drv::stream::null(), &mut params) }
                .map_err(|e| LaunchError { kernel, why: format!("cuLaunchKernel: {e}") });
        let back = self.unstage(kernel, args, staged);
        launched.and(back)
    }

    /// `C = op(A) op(B) + beta C` in row-major layout through `cublasSgemm` (lengths checked
    /// by the caller): row-major `C` is column-major `C^T = op(B)^T op(A)^T`.
    pub(crate) fn gemm(&self, o: Operands<'_>, c: &mut [f32]) -> Result<()> {
        let Operands { s, a: (a, ta), b: (b, tb), beta } = o;
        let k = "gemm";
        let mut args = [Arg::F32s(a), Arg::F32s(b), Arg::F32sMut(c)];
        let (slots, staged) = self.stage(k, &args)?;
        let (m, n, kk, lda, ldb) = blas_dims(s, ta, tb);
        let alpha = 1.0f32;
        // SAFETY: the three buffers are device-accessible and hold m k, k n and m n elements
        // (checked by `gemm::gemm`), which these leading dimensions index within.
        let done = unsafe {
            blas::sgemm(
                self.blas,
                blas_op(tb),
                blas_op(ta),
                n,
                m,
                kk,
                &alpha,
                slots[1] as *const f32,
                ldb,
                slots[0] as *const f32,
                lda,
                &beta,
                slots[2] as *mut f32,
                n,
            )
        }
        .map_err(|e| LaunchError { kernel: k, why: format!("cublasSgemm: {e}") });
        let back = self.unstage(k, &mut args, staged);
        done.and(back)
    }

    /// The bf16 autocast product: `A` and `B` packed to bf16 by the autocast kernel into
    /// temporaries of the thread's scratch pool ([`crate::exec::scratch`]), then
    /// `cublasGemmEx` (CUDA_R_16BF inputs, f32 output, CUBLAS_COMPUTE_32F), the row-major
    /// layout as in [`Gpu::gemm`].
    pub(crate) fn gemm_bf16(&self, o: Operands<'_>, c: &mut [f32]) -> Result<()> {
        let Operands { s, a: (a, ta), b: (b, tb), beta } = o;
        let pool = crate::exec::scratch();
        let (mut a16, mut b16) = (pool.zeros_of::<u16>(a.len()), pool.zeros_of::<u16>(b.len()));
        crate::autocast::pack_bf16(a, &mut a16)?;
        crate::autocast::pack_bf16(b, &mut b16)?;
        let (pa, pb) = (a16.as_ptr() as u64, b16.as_ptr() as u64);
        // The temporaries go back to the pool after the call is queued: the stream runs the
        // next user of their memory after this product.
        self.gemm_ex(s, (pa, ta), (pb, tb), beta, c)
    }

    /// `C = op(A) op(B) + beta C` with `A`, `B` bf16 at device addresses (lengths checked).
    fn gemm_ex(&self, s: Shape, (pa, ta): (u64, Op), (pb, tb): (u64, Op), beta: f32, c: &mut [f32]) -> Result<()> {
        let k = "gemm_bf16";
        let mut args = [Arg::F32sMut(c)];
        let (slots, staged) = self.stage(k, &args)?;
        let (m, n, kk, lda, ldb) = blas_dims(s, ta, tb);
        let alpha = 1.0f32;
        let bf16 = blas_sys::cudaDataType_t::CUDA_R_16BF;
        // SAFETY: `pa` and `pb` hold m k and k n bf16 values, `slots[0]` m n f32, all
        // device-accessible; alpha and beta are f32 host scalars, as COMPUTE_32F reads them.
        let done = unsafe {
            blas::gemm_ex(
                self.blas,
                blas_op(tb),
                blas_op(ta),
                n,
                m,
                kk,
                &alpha as *const f32 as *const c_void,
                pb as *const c_void,
                bf16,
                ldb,
                pa as *const c_void,
                bf16,
                lda,
                &beta as *const f32 as *const c_void,
                slots[0] as *mut c_void,
                blas_sys::cudaDataType_t::CUDA_R_32F,
                n,
                blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| LaunchError { kernel: k, why: format!("cublasGemmEx: {e}") });
        let back = self.unstage(k, &mut args, staged);
        done.and(back)
    }

    /// `bytes` of zeroed managed memory (at least 4, so that every buffer has an address of
    /// its own).
    pub(crate) fn alloc_managed(&self, bytes: usize) -> core::result::Result<u64, DeviceError> {
        let bytes = bytes.max(4);
        let mut p: sys::CUdeviceptr = 0;
        // SAFETY: the driver writes the new allocation's address into `p`.
        let r = unsafe { sys::cuMemAllocManaged(&mut p, bytes, sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as u32) };
        r.result().map_err(driver("cuMemAllocManaged"))?;
        self.managed.borrow_mut().insert(p, bytes);
        self.zero(p, bytes)?;
        Ok(p)
    }

    /// Sets `bytes` at `p` to zero on the device, in stream order.
    pub(crate) fn zero(&self, p: u64, bytes: usize) -> core::result::Result<(), DeviceError> {
        // SAFETY: `p` holds at least `bytes` (a managed allocation of this device).
        unsafe { drv::memset_d8_async(p, 0, bytes, drv::stream::null()) }.map_err(driver("cuMemsetD8Async"))
    }

    /// Copies `bytes` from `src` to `dst` (device or host addresses: unified addressing), in
    /// stream order; a pageable host source is read before the call returns.
    pub(crate) fn copy(&self, src: u64, dst: u64, bytes: usize) -> core::result::Result<(), DeviceError> {
        // SAFETY: both addresses hold `bytes` (the caller's slices of that length).
        unsafe { sys::cuMemcpyAsync(dst, src, bytes, drv::stream::null()) }.result().map_err(driver("cuMemcpyAsync"))
    }

    /// Frees a managed allocation of [`Gpu::alloc_managed`].
    pub(crate) fn free_managed(&self, p: u64) {
        if self.managed.borrow_mut().remove(&p).is_some() {
            // SAFETY: allocated by alloc_managed, removed from the live set, freed once.
            let _ = unsafe { drv::free_sync(p) };
        }
    }
}
