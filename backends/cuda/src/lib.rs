//! The native CUDA backend of boldcast (issue 20, `--backend cuda`): the model's operations as
//! CUDA C kernels (`kernels/*.cu`, one file per op family, named after the CPU backend's
//! modules), compiled at run time with NVRTC on a GPU (feature `cuda`) and, in every build,
//! compiled for the CPU through a small C++ shim (`shim/`) that runs a launch over its grid
//! exactly as a GPU would order it. Without the feature this crate needs no CUDA to build or
//! test: the shim is what the tests run.
//!
//! What exists: the elementwise activations and gate ([`ops::act`]), LayerNorm ([`ops::layernorm`]),
//! the AdamW step, global norm and clipping ([`optim`]), each as kernels with a host-side
//! function that picks the launch shape ([`launch`]) and runs it through its checked launcher
//! ([`shim`]) and [`exec::launch`];
//! and the Mamba-1 mixer's sequence kernels ([`mamba1`]): the causal depthwise convolution
//! with SiLU and the checkpointed selective scan, forward and backward, deterministic.
//! The spatial mixer's attention between its projections, forward and backward with a
//! deterministic scatter through a reverse adjacency ([`knn`]).
//! The forecasting loss and its gradient, the sum in a fixed two-stage order ([`loss`]).
//! The Mamba-2 mixer's sequence kernels ([`mamba2`]): the one-group scan by its recurrence,
//! checkpointed, with its recomputing backward, and the gated RMSNorm, all deterministic.
//! One Mamba-1 layer in shim mode ([`mamba1::layer`]): forward and the backward that
//! recomputes its internals from the layer input, every buffer from the counting [`pool`],
//! the projections through [`gemm`] (the shim's stand-in for cuBLAS); and the memory model of
//! a training step ([`memory`], either mixer's layers), whose layer terms the pool's peak is tested
//! against. One Mamba-2 layer likewise ([`mamba2::layer`]): the Mamba-1 convolution kernels
//! over the `Di + 2N` channels of `xBC`, the Mamba-2 scan and gated RMSNorm, recomputing
//! backward, every buffer from the pool.
//! The whole model in shim mode ([`model::CudaModel`], `Model<f32>` + `DataParallel<f32>`):
//! Mamba-1 or Mamba-2 layers with the spatial mixer ([`spatial`]), the embedding and head
//! through [`ops::linear`], the loss, and the Adam kernel with moments held by the model; it
//! passes the conformance suite (`tests/conformance.rs`) for both temporal mixers.
//! bf16 autocast ([`autocast`], as `torch.autocast`): a thread-local mode under which every
//! matrix product of [`gemm`] takes its operands rounded to bf16 (round to nearest even, the
//! kernel of `kernels/autocast.cu`) and accumulates in f32, cuBLAS GemmEx's arithmetic, while
//! parameters, gradients, moments, scan states, reductions and the loss stay f32;
//! [`CudaModel::with_precision`] runs the model under it. In bf16 the golden cases hold to a
//! measured, looser tolerance (`tests/bf16_golden.rs`).
//!
//! Where kernels run ([`exec`]): every launch goes through [`exec::launch`], which checks its
//! arguments against the kernel's signature and runs it in the CPU shim or, with the feature
//! `cuda`, on the device the thread has entered (`device`: NVRTC at run time, cuBLAS, managed
//! memory; `CudaModel::on_gpu`, `CudaModel::new_cuda`, `--backend cuda`). The device path is
//! type-checked in CI and has not run on a GPU yet. On a device a bf16 product packs its
//! operands to bf16 (`autocast_pack_bf16`) and runs cuBLAS GemmEx; data-parallel training's
//! all-reduce sums a flat buffer of the pool (managed memory, which NCCL sums in place). Not
//! yet: bf16 storage of the activations (f32 buffers; the pool and the memory model count 2
//! bytes), and the per-launch synchronization and host staging of the device path removed.

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
pub mod trunk;

pub use autocast::Precision;
pub use error::CudaError;
pub use model::CudaModel;
