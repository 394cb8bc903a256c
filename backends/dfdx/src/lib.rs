//! The dfdx backend of boldcast: the BOLDcast model of MODEL.md on dfdx 0.13 tensors, with
//! gradients from dfdx's tape-based autodiff instead of hand-written backward passes.
//!
//! It serves two purposes: it is the path to GPUs (the `Cuda` device, cudarc underneath,
//! behind the cargo feature `cuda`), and it is an independent second implementation that
//! checks the hand-written gradients of the CPU backend.
//!
//! - [`DfdxModel`] implements [`boldcast_core::Model`] for `f32` and `f64`, generic over the
//!   dfdx device ([`Cpu`], and `Cuda` with the feature `cuda`).
//! - Parameters, gradients and Adam moments stay on the device; the optimizer update runs
//!   there with dfdx tensor ops ([`optim`]), and the gradient norm comes back as one scalar.
//! - [`cpu_device`] and [`cuda_device`] build the devices; asking for CUDA in a build without
//!   the feature, or on a machine without a GPU, is an [`Error::Backend`], never a panic.
//!
//! Layout: activations are 2-D tensors `(T * B * P, width)` whose row `(t * B + b) * P + p`
//! holds token `(b, t, p)`: time outermost, so one time step of every sequence is a block of
//! rows (the scan), and the parcels of one `(t, b)` are contiguous (the kNN attention).
//!
//! dfdx 0.13's `slice` overwrites instead of accumulating in its CPU backward pass, so this
//! crate never slices a traced tensor: rows and columns are picked with `gather`/`select`,
//! whose backward passes accumulate on both devices.
#![deny(missing_docs)]

pub mod device;
pub mod init;
pub mod knn;
pub mod layout;
pub mod mamba1;
pub mod mamba2;
pub mod model;
pub mod ops;
pub mod optim;
pub mod params;

pub use device::{cpu_device, cuda_device, cuda_unavailable, DfdxDevice, BACKEND_NAMES, CUDA_BUILT};
/// The dfdx crate this backend is built on, for code that builds its tensors directly (the
/// facade's benches) with the backend's own version.
pub use dfdx;
pub use dfdx::tensor::Cpu;
#[cfg(feature = "cuda")]
pub use dfdx::tensor::Cuda;
pub use model::DfdxModel;

/// The dfdx model on the CPU device.
pub type DfdxCpuModel<E> = DfdxModel<E, Cpu>;

/// The dfdx model on the CUDA device.
#[cfg(feature = "cuda")]
pub type DfdxCudaModel<E> = DfdxModel<E, Cuda>;

pub use boldcast_core::Error;

/// Compile-time proof that the CUDA model implements the core trait in both element types
/// (`cargo check --features cuda,ci-check` type-checks it without a GPU or toolkit).
#[cfg(feature = "cuda")]
#[allow(dead_code)]
fn cuda_model_is_a_model() {
    fn is_model<E: boldcast_core::Elem, M: boldcast_core::Model<E>>() {}
    is_model::<f32, DfdxCudaModel<f32>>();
    is_model::<f64, DfdxCudaModel<f64>>();
}
