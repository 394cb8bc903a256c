//! The one backend registry: a backend's name (`train.backend`) and precision
//! (`train.precision`) become a model constructor here and nowhere else. A program that runs
//! on any backend implements [`Job`] once, generically over the model, and [`dispatch_in`]
//! calls it with the chosen backend's constructor.
//!
//! ```
//! use boldcast::backend::{dispatch, Backend, Builder, Job};
//! use boldcast::core::{DataParallel, Model, ModelConfig};
//!
//! struct Count;
//! impl Job for Count {
//!     type Output = usize;
//!     type Error = boldcast::core::Error;
//!     fn run<M: DataParallel<f32>>(self, _name: &str, build: Builder<M>) -> Result<usize, Self::Error> {
//!         let cfg = ModelConfig::builder().d_model(8).n_layers(1).k_neighbors(0).build()?;
//!         Ok(build(cfg, None, 0)?.config().n_params())
//!     }
//! }
//! let n = dispatch(Backend::from_name("cpu")?, Count)?;
//! assert!(n > 0);
//! # Ok::<(), boldcast::core::Error>(())
//! ```

use boldcast_core::{Adjacency, DataParallel, Error, ModelConfig};
use boldcast_train::config::{BACKENDS, PRECISIONS};

/// A model constructor: configuration, adjacency, seed.
pub type Builder<M> = fn(ModelConfig, Option<Adjacency>, u64) -> Result<M, Error>;

/// A program that runs on whichever backend is chosen.
pub trait Job {
    /// What it returns.
    type Output;
    /// What it fails with; a backend that cannot run is a [`boldcast_core::Error`].
    type Error: From<Error>;
    /// Runs with the backend called `name` (as in `train.backend`), whose models `build` makes.
    fn run<M: DataParallel<f32>>(self, name: &str, build: Builder<M>) -> Result<Self::Output, Self::Error>;
}

/// The backend that runs the model.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Backend {
    /// The pure-Rust CPU backend with hand-written gradients.
    Cpu,
    /// The dfdx backend on the CPU (tape-based autodiff; both temporal mixers).
    DfdxCpu,
    /// The dfdx backend on an NVIDIA GPU: needs a build with `--features cuda`.
    DfdxCuda,
    /// The native CUDA backend (hand-written kernels, NVRTC, cuBLAS) on GPU 0: needs a build
    /// with `--features cuda` (scripts/gpu-check.sh build makes one) and a GPU.
    Cuda,
}

/// The precision of the matrix products (`train.precision`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Precision {
    /// Everything in f32.
    F32,
    /// bf16 autocast: bf16 operands with f32 accumulation, everything else f32 (cuda only).
    Bf16,
}

const ALL: [Backend; 4] = [Backend::Cpu, Backend::DfdxCpu, Backend::DfdxCuda, Backend::Cuda];

impl Backend {
    /// The backend named as in `train.backend` (one of [`BACKENDS`]).
    pub fn from_name(name: &str) -> Result<Backend, Error> {
        ALL.into_iter()
            .find(|b| b.name() == name)
            .ok_or_else(|| Error::config("train.backend", name, format!("must be one of {}", BACKENDS.join(", "))))
    }

    /// The name used in configurations and reports.
    pub fn name(self) -> &'static str {
        BACKENDS[self as usize]
    }

    /// Whether the backend runs on a GPU (and its ranks talk through NCCL).
    pub fn on_gpu(self) -> bool {
        matches!(self, Backend::DfdxCuda | Backend::Cuda)
    }
}

impl Precision {
    /// The precision named as in `train.precision` (one of [`PRECISIONS`]).
    pub fn from_name(name: &str) -> Result<Precision, Error> {
        match name {
            "f32" => Ok(Precision::F32),
            "bf16" => Ok(Precision::Bf16),
            other => Err(Error::config("train.precision", other, format!("must be one of {}", PRECISIONS.join(", ")))),
        }
    }
}

/// Runs `job` on the backend and precision a configuration names (`train.backend`,
/// `train.precision`).
pub fn dispatch_named<J: Job>(backend: &str, precision: &str, job: J) -> Result<J::Output, J::Error> {
    dispatch_in(Backend::from_name(backend)?, Precision::from_name(precision)?, job)
}

/// Runs `job` on `backend` with its matrix products in `precision`: bf16 autocast on the
/// native CUDA backend only (any other pair is a clear error).
pub fn dispatch_in<J: Job>(backend: Backend, precision: Precision, job: J) -> Result<J::Output, J::Error> {
    match (backend, precision) {
        (_, Precision::F32) => dispatch(backend, job),
        (Backend::Cuda, Precision::Bf16) => native_cuda_bf16(job),
        (b, Precision::Bf16) => Err(Error::config(
            "train.precision",
            "bf16",
            format!(
                "bf16 autocast (--precision bf16) runs on the cuda backend only; the {} backend computes in f32",
                b.name()
            ),
        )
        .into()),
    }
}

/// Runs `job` on `backend` (f32 models).
pub fn dispatch<J: Job>(backend: Backend, job: J) -> Result<J::Output, J::Error> {
    match backend {
        Backend::Cpu => job.run("cpu", boldcast_cpu::CpuModel::<f32>::new),
        Backend::DfdxCpu => dfdx_cpu(job),
        Backend::DfdxCuda => dfdx_cuda(job),
        Backend::Cuda => native_cuda(job),
    }
}

#[cfg(feature = "dfdx")]
fn dfdx_cpu<J: Job>(job: J) -> Result<J::Output, J::Error> {
    job.run("dfdx-cpu", boldcast_dfdx::DfdxCpuModel::<f32>::new_cpu)
}

#[cfg(not(feature = "dfdx"))]
fn dfdx_cpu<J: Job>(_: J) -> Result<J::Output, J::Error> {
    Err(unbuilt("dfdx-cpu", "dfdx").into())
}

#[cfg(feature = "cuda")]
fn dfdx_cuda<J: Job>(job: J) -> Result<J::Output, J::Error> {
    job.run("dfdx-cuda", boldcast_dfdx::DfdxCudaModel::<f32>::new_cuda)
}

/// Without the `cuda` feature, asking for the CUDA device is a clear error (never a panic).
#[cfg(all(not(feature = "cuda"), feature = "dfdx"))]
fn dfdx_cuda<J: Job>(_: J) -> Result<J::Output, J::Error> {
    Err(boldcast_dfdx::cuda_unavailable().into())
}

#[cfg(all(not(feature = "cuda"), not(feature = "dfdx")))]
fn dfdx_cuda<J: Job>(_: J) -> Result<J::Output, J::Error> {
    Err(unbuilt("dfdx-cuda", "cuda").into())
}

#[cfg(feature = "cuda")]
fn native_cuda<J: Job>(job: J) -> Result<J::Output, J::Error> {
    job.run("cuda", boldcast_cuda::CudaModel::new_cuda)
}

#[cfg(feature = "cuda")]
fn native_cuda_bf16<J: Job>(job: J) -> Result<J::Output, J::Error> {
    job.run("cuda", boldcast_cuda::CudaModel::new_cuda_bf16)
}

#[cfg(not(feature = "cuda"))]
fn native_cuda_bf16<J: Job>(job: J) -> Result<J::Output, J::Error> {
    native_cuda(job)
}

/// Without the `cuda` feature the native backend's kernels exist only in the CPU shim (for
/// its tests): asking for the backend is a clear error, never a slow run on the CPU.
#[cfg(not(feature = "cuda"))]
fn native_cuda<J: Job>(_: J) -> Result<J::Output, J::Error> {
    Err(unbuilt("cuda", "cuda").into())
}

/// The error for a backend this build was made without.
#[cfg(any(not(feature = "cuda"), not(feature = "dfdx")))]
fn unbuilt(backend: &str, feature: &str) -> Error {
    let how = if feature == "cuda" {
        "build with `cargo build --release -p bc-cli --features cuda` on a machine with the CUDA toolkit (or \
         `scripts/gpu-check.sh build`) and run it on a machine with an NVIDIA GPU"
    } else {
        "build with the feature `dfdx` (on by default)"
    };
    let why = format!("this build has no `{feature}` feature, which --backend {backend} needs; {how}");
    Error::config("train.backend", backend, why)
}
