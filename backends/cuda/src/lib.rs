//! The native CUDA backend of boldcast (`--backend cuda`): the model's operations as CUDA C
//! kernels (`kernels/*.cu`, one file per op family, named after the CPU backend's modules,
//! each preceded by the shared helpers of `kernels/common.cuh`).
//!
//! Every kernel runs in one of two places, chosen per thread by [`exec`]:
//! - the CPU shim (`shim/`, built by `build.rs` in every build): g++ compiles each kernel
//!   file with a small CUDA stand-in that runs a launch over its grid as a GPU orders it, so
//!   the crate builds and tests without CUDA;
//! - a GPU (feature `cuda`, `device`): NVRTC compiles the same sources at run time, the
//!   products go to cuBLAS and the buffers are managed memory.
//!
//! Where to start reading: [`model::CudaModel`] is the `Model<f32>` + `DataParallel<f32>` of
//! the trunk (Mamba-1 or Mamba-2 layers, [`mamba1::layer`], [`mamba2::layer`], on the layer
//! skeleton of [`trunk`], with the spatial mixer of [`spatial`]), every buffer from the counting [`pool`] that [`memory`]
//! models. Below it, each op picks its launch shape ([`launch`]) and runs its kernels
//! through the checked launchers of [`shim`], which check every length before [`exec::launch`].
//! Products go through [`gemm`]; under bf16 autocast ([`autocast`],
//! [`CudaModel::with_precision`]) their operands are rounded to bf16 and accumulated in f32.
//! Every sum has a fixed order (no atomics), so results are bitwise reproducible. Failures
//! are a [`CudaError`], which becomes the core's error through `From`.

#![deny(missing_docs)]

pub mod autocast;
#[cfg(feature = "cuda")]
pub mod device;
pub mod error;
pub mod exec;
pub mod gemm;
pub mod kernels;
pub mod knn;
pub mod launch;
pub mod loss;
pub mod mamba1;
pub mod mamba2;
pub mod memory;
pub mod model;
pub mod ops;
pub mod optim;
pub mod pool;
pub mod shim;
pub mod spatial;
pub mod stored;
pub mod timed;
pub mod trunk;

pub use autocast::Precision;
pub use error::CudaError;
pub use model::CudaModel;
