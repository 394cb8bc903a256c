//! The dfdx devices this backend runs on, and how to get one without panicking.
//!
//! [`cpu_device`] always works. [`cuda_device`] exists only with the cargo feature `cuda`; it
//! turns "no driver", "no GPU" and "bad ordinal" into an [`Error::Backend`]. A build without
//! the feature answers a request for CUDA with [`cuda_unavailable`].

use boldcast_core::Error;
use dfdx::dtypes::Dtype;
use dfdx::tensor::Cpu;
use dfdx::tensor_ops::Device;

/// The backend names a command line offers for this crate: `dfdx-cpu`, and `dfdx-cuda`.
pub const BACKEND_NAMES: [&str; 2] = ["dfdx-cpu", "dfdx-cuda"];

/// Whether this build has the `Cuda` device (cargo feature `cuda`).
pub const CUDA_BUILT: bool = cfg!(feature = "cuda");

/// A dfdx device the model can run on with element type `E`: every tensor op of dfdx for
/// `E`, and for `f64` (the gradient norm is accumulated in `f64` on the device).
pub trait DfdxDevice<E: Dtype>: Device<E> + Device<f64> {}

impl<E: Dtype, D: Device<E> + Device<f64>> DfdxDevice<E> for D {}

/// The CPU device. dfdx's device RNG is seeded but unused here: the model draws its initial
/// weights on the host ([`crate::init`]).
pub fn cpu_device() -> Cpu {
    Cpu::default()
}

/// The error for a CUDA request in a build without the `cuda` feature.
pub fn cuda_unavailable() -> Error {
    Error::Backend(
        "this build of boldcast has no CUDA support: rebuild with `--features cuda` (needs the CUDA toolkit), \
         or use --backend dfdx-cpu"
            .into(),
    )
}

/// The CUDA device with the given ordinal, or an [`Error::Backend`] saying why there is none
/// (no driver, no GPU, ordinal out of range). cudarc 0.9 unwraps driver errors while it opens
/// a device, so a panic inside it is caught and reported the same way, with the driver's error
/// in the message; the panic hook is silenced meanwhile, so the user sees one clear error
/// rather than a backtrace.
#[cfg(feature = "cuda")]
pub fn cuda_device(ordinal: usize) -> Result<dfdx::tensor::Cuda, Error> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let built = std::panic::catch_unwind(|| dfdx::tensor::Cuda::try_build(ordinal, 0));
    std::panic::set_hook(hook);
    match built {
        Ok(Ok(dev)) => Ok(dev),
        Ok(Err(e)) => Err(Error::Backend(format!("no usable CUDA device {ordinal}: {e:?}"))),
        Err(payload) => {
            let why = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("unknown error");
            Err(Error::Backend(format!(
                "no usable CUDA device {ordinal}: the CUDA driver could not be initialised (is there an NVIDIA GPU?): \
                 {why}"
            )))
        }
    }
}

/// Without the `cuda` feature there is no CUDA device: always [`cuda_unavailable`].
#[cfg(not(feature = "cuda"))]
pub fn cuda_device(_ordinal: usize) -> Result<core::convert::Infallible, Error> {
    Err(cuda_unavailable())
}
