//! The one place that turns a backend name into a model constructor. A command that runs on
//! any backend implements [`Job`] once, generically over the model, and [`dispatch`] calls it
//! with the chosen backend's constructor.

use crate::args::{Backend, Precision};
use crate::CliError;
use boldcast::core::{Adjacency, DataParallel, ModelConfig};

/// A model constructor: configuration, adjacency, seed.
pub type Builder<M> = fn(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast::core::Error>;

/// A command that runs on whichever backend is chosen.
pub trait Job {
    /// What the command returns.
    type Output;
    /// Runs with the backend called `name` (as in `train.backend`), whose models `build` makes.
    fn run<M: DataParallel<f32>>(self, name: &str, build: Builder<M>) -> Result<Self::Output, CliError>;
}

impl Backend {
    /// The backend named as in `train.backend` (`cpu`, `dfdx-cpu`, `dfdx-cuda`, `cuda`).
    pub fn from_name(name: &str) -> Result<Backend, CliError> {
        match name {
            "cpu" => Ok(Backend::Cpu),
            "dfdx-cpu" => Ok(Backend::DfdxCpu),
            "dfdx-cuda" => Ok(Backend::DfdxCuda),
            "cuda" => Ok(Backend::Cuda),
            other => Err(CliError::Msg(format!("unknown backend `{other}`: use cpu, dfdx-cpu, dfdx-cuda or cuda"))),
        }
    }

    /// The name used in configurations and reports.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::DfdxCpu => "dfdx-cpu",
            Backend::DfdxCuda => "dfdx-cuda",
            Backend::Cuda => "cuda",
        }
    }

    /// Whether the backend runs on a GPU (and its ranks talk through NCCL).
    pub fn on_gpu(self) -> bool {
        matches!(self, Backend::DfdxCuda | Backend::Cuda)
    }
}

impl Precision {
    /// The precision named as in `train.precision` (`f32`, `bf16`).
    pub fn from_name(name: &str) -> Result<Precision, CliError> {
        match name {
            "f32" => Ok(Precision::F32),
            "bf16" => Ok(Precision::Bf16),
            other => Err(CliError::Msg(format!("unknown precision `{other}`: use f32 or bf16"))),
        }
    }
}

/// Runs `job` on `backend` with its matrix products in `precision`: bf16 autocast on the
/// native CUDA backend only (any other pair is a clear error).
pub fn dispatch_in<J: Job>(backend: Backend, precision: Precision, job: J) -> Result<J::Output, CliError> {
    match (backend, precision) {
        (_, Precision::F32) => dispatch(backend, job),
        (Backend::Cuda, Precision::Bf16) => native_cuda_bf16(job),
        (b, Precision::Bf16) => Err(CliError::Msg(format!(
            "--precision bf16: bf16 autocast runs on --backend cuda only; the {} backend computes in f32",
            b.name()
        ))),
    }
}

/// Runs `job` on `backend` (f32 models).
pub fn dispatch<J: Job>(backend: Backend, job: J) -> Result<J::Output, CliError> {
    match backend {
        Backend::Cpu => job.run("cpu", boldcast::cpu::CpuModel::<f32>::new),
        Backend::DfdxCpu => job.run("dfdx-cpu", boldcast::dfdx::DfdxCpuModel::<f32>::new_cpu),
        Backend::DfdxCuda => cuda(job),
        Backend::Cuda => native_cuda(job),
    }
}

#[cfg(feature = "cuda")]
fn native_cuda<J: Job>(job: J) -> Result<J::Output, CliError> {
    job.run("cuda", boldcast::cuda::CudaModel::new_cuda)
}

#[cfg(feature = "cuda")]
fn native_cuda_bf16<J: Job>(job: J) -> Result<J::Output, CliError> {
    job.run("cuda", boldcast::cuda::CudaModel::new_cuda_bf16)
}

#[cfg(not(feature = "cuda"))]
fn native_cuda_bf16<J: Job>(job: J) -> Result<J::Output, CliError> {
    native_cuda(job)
}

/// Without the `cuda` feature the native backend's kernels exist only in the CPU shim (for
/// its tests): asking for the backend is a clear error, never a slow run on the CPU.
#[cfg(not(feature = "cuda"))]
fn native_cuda<J: Job>(_: J) -> Result<J::Output, CliError> {
    Err(CliError::Msg(
        "--backend cuda: this bc-cli was built without the `cuda` feature, so the native CUDA backend \
         cannot reach a GPU; build with `cargo build --release -p bc-cli --features cuda` on a machine with \
         the CUDA toolkit (or `scripts/gpu-check.sh build`) and run it on a machine with an NVIDIA GPU"
            .into(),
    ))
}

#[cfg(feature = "cuda")]
fn cuda<J: Job>(job: J) -> Result<J::Output, CliError> {
    job.run("dfdx-cuda", boldcast::dfdx::DfdxCudaModel::<f32>::new_cuda)
}

/// Without the `cuda` feature, asking for the CUDA device is a clear error (never a panic).
#[cfg(not(feature = "cuda"))]
fn cuda<J: Job>(_: J) -> Result<J::Output, CliError> {
    Err(CliError::Core(boldcast::dfdx::cuda_unavailable()))
}
