//! Every kernel file compiles with NVRTC for `compute_80` and `compute_90`, and its PTX
//! defines each kernel the crate lists, under its unmangled name. No GPU or driver is needed:
//! NVRTC is a library (`scripts/nvrtc.sh` installs it from PyPI into `target/nvrtc`), loaded
//! at run time from `BOLDCAST_NVRTC`, else from under `target/nvrtc`.
//!
//! Without the library: when `CI` is set the test fails, saying to run `scripts/nvrtc.sh`
//! (CI must compile the kernels; `.ci/run` installs NVRTC first), otherwise it prints that
//! message and passes, so that `cargo test` works on a machine that never installed NVRTC.
//! A `BOLDCAST_NVRTC` naming no file fails everywhere: the caller asked for that library.
//! The shim tests catch a wrong kernel; only this test catches one that g++ accepts and
//! NVRTC rejects.

use boldcast_cuda::kernels::{nvrtc_options, KernelFile, FILES};
use libloading::{Library, Symbol};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};

type Program = *mut c_void;
type CreateFn = unsafe extern "C" fn(
    *mut Program,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> c_int;
type CompileFn = unsafe extern "C" fn(Program, c_int, *const *const c_char) -> c_int;
type SizeFn = unsafe extern "C" fn(Program, *mut usize) -> c_int;
type TextFn = unsafe extern "C" fn(Program, *mut c_char) -> c_int;
type DestroyFn = unsafe extern "C" fn(*mut Program) -> c_int;
type ErrorStringFn = unsafe extern "C" fn(c_int) -> *const c_char;

/// Compute capabilities 8.0 (A100) and 9.0 (H100, H200).
const ARCHS: [(i32, i32); 2] = [(8, 0), (9, 0)];

/// The library: `BOLDCAST_NVRTC`, else the newest `libnvrtc.so.*` under `target/nvrtc`.
fn library_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BOLDCAST_NVRTC") {
        return Some(PathBuf::from(p));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/nvrtc/nvidia/cuda_nvrtc/lib");
    let mut libs: Vec<PathBuf> = std::fs::read_dir(root)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("libnvrtc.so.")))
        .collect();
    libs.sort();
    libs.pop()
}

struct Nvrtc<'l> {
    create: Symbol<'l, CreateFn>,
    compile: Symbol<'l, CompileFn>,
    log_size: Symbol<'l, SizeFn>,
    log: Symbol<'l, TextFn>,
    ptx_size: Symbol<'l, SizeFn>,
    ptx: Symbol<'l, TextFn>,
    destroy: Symbol<'l, DestroyFn>,
    error: Symbol<'l, ErrorStringFn>,
}

impl<'l> Nvrtc<'l> {
    fn new(lib: &'l Library) -> Nvrtc<'l> {
        // SAFETY: the symbols have NVRTC's documented signatures (nvrtc.h, CUDA 12).
        unsafe {
            Nvrtc {
                create: lib.get(b"nvrtcCreateProgram").unwrap(),
                compile: lib.get(b"nvrtcCompileProgram").unwrap(),
                log_size: lib.get(b"nvrtcGetProgramLogSize").unwrap(),
                log: lib.get(b"nvrtcGetProgramLog").unwrap(),
                ptx_size: lib.get(b"nvrtcGetPTXSize").unwrap(),
                ptx: lib.get(b"nvrtcGetPTX").unwrap(),
                destroy: lib.get(b"nvrtcDestroyProgram").unwrap(),
                error: lib.get(b"nvrtcGetErrorString").unwrap(),
            }
        }
    }

    /// Compiles one file for one architecture: `Ok(ptx)` or `Err(message with the log)`.
    /// With the options the device path compiles with (`kernels::nvrtc_options`).
    fn compile(&self, file: &KernelFile, (major, minor): (i32, i32)) -> Result<String, String> {
        let (src, name) = (CString::new(file.source).unwrap(), CString::new(file.name).unwrap());
        let arch = format!("compute_{major}{minor}");
        let opts: Vec<CString> = nvrtc_options(major, minor).into_iter().map(|o| CString::new(o).unwrap()).collect();
        let ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
        let mut prog: Program = std::ptr::null_mut();
        // SAFETY: valid C strings that outlive the calls; the program is destroyed below.
        unsafe {
            let rc = (self.create)(&mut prog, src.as_ptr(), name.as_ptr(), 0, std::ptr::null(), std::ptr::null());
            assert_eq!(rc, 0, "nvrtcCreateProgram({}): {}", file.name, self.error_string(rc));
            let rc = (self.compile)(prog, ptrs.len() as c_int, ptrs.as_ptr());
            let log = self.text(prog, &self.log_size, &self.log);
            let out = if rc == 0 { Ok(self.text(prog, &self.ptx_size, &self.ptx)) } else { Err(log.clone()) };
            (self.destroy)(&mut prog);
            if !log.trim_matches(char::from(0)).trim().is_empty() {
                println!("nvrtc {} {arch}:\n{log}", file.name);
            }
            out.map_err(|log| format!("{}: {}\n{log}", file.name, self.error_string(rc)))
        }
    }

    unsafe fn text(&self, prog: Program, size: &SizeFn, get: &TextFn) -> String {
        let mut n = 0usize;
        // SAFETY: the buffer holds the size NVRTC reports (with its terminating zero).
        unsafe {
            assert_eq!(size(prog, &mut n), 0);
            let mut buf = vec![0u8; n.max(1)];
            assert_eq!(get(prog, buf.as_mut_ptr().cast()), 0);
            String::from_utf8_lossy(&buf).trim_end_matches('\0').to_string()
        }
    }

    fn error_string(&self, rc: c_int) -> String {
        // SAFETY: NVRTC returns a static string for any result code.
        unsafe { CStr::from_ptr((self.error)(rc)).to_string_lossy().into_owned() }
    }
}

#[test]
fn every_kernel_compiles_with_nvrtc_for_sm80_and_sm90() {
    if let Some(p) = std::env::var_os("BOLDCAST_NVRTC").filter(|p| !Path::new(p).exists()) {
        panic!("BOLDCAST_NVRTC={}: no such file; `scripts/nvrtc.sh` prints the path to set", Path::new(&p).display());
    }
    let Some(path) = library_path() else {
        let msg = "libnvrtc not found (BOLDCAST_NVRTC unset and nothing under target/nvrtc): \
                   run `export BOLDCAST_NVRTC=\"$(scripts/nvrtc.sh)\"` to install it and compile the kernels";
        assert!(std::env::var_os("CI").is_none(), "{msg}");
        println!("skipped: {msg}");
        return;
    };
    // SAFETY: loading NVRTC runs its initializers only.
    let lib = unsafe { Library::new(&path) }.unwrap_or_else(|e| panic!("loading {}: {e}", path.display()));
    let nvrtc = Nvrtc::new(&lib);
    let mut failures = Vec::new();
    for file in FILES {
        for arch in ARCHS {
            match nvrtc.compile(file, arch) {
                Ok(ptx) => {
                    for k in file.kernels {
                        assert!(
                            ptx.contains(&format!(".entry {k}(")),
                            "{} ({arch:?}): no `.entry {k}` in the PTX",
                            file.name
                        );
                    }
                }
                Err(e) => failures.push(format!("{arch:?}: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "NVRTC ({}) rejected:\n{}", path.display(), failures.join("\n"));
    println!("compiled {} kernel files for {ARCHS:?} with {}", FILES.len(), path.display());
}
