//! `boldcast-cpu`: the BOLDcast model on the CPU in pure Rust, with gradients written by hand
//! from BACKWARD.md (no tape, no autodiff crate).
//!
//! Module map (each file has one job):
//! - [`ops`]: the small pieces shared by the blocks: matrix products ([`ops::gemm`]),
//!   linear layers ([`ops::linear`]), activations ([`ops::act`]), LayerNorm
//!   ([`ops::layernorm`]), the vectorizable f32 `exp`, sigmoid and softplus
//!   ([`ops::fastmath`]) and the run-time choice of the vector instruction set for the hot
//!   kernels, with fixed-order lane reductions ([`ops::simd`]);
//! - [`par`]: deterministic data parallelism (fixed blocks, partial sums reduced in order),
//!   disjoint writes from parallel blocks, and per-thread cached scratch;
//! - [`mamba1`]: the Mamba-1 temporal mixer, forward and backward over every parcel's sequence,
//!   with a checkpointed scan;
//! - [`mamba2`]: the Mamba-2 (SSD) temporal mixer, likewise;
//! - [`mixer`]: what both mixers share: the call's shape ([`mixer::Seqs`]), the backward's
//!   buffers ([`mixer::BackwardIo`]), size checks, the `(B, T, P, M)` sequence layout and the
//!   skeleton of a call (blocks of sequences in cached workspaces, partials in block order);
//! - [`knn`]: the spatial mixer, k-nearest-neighbour attention, forward and backward;
//! - [`model`]: [`CpuModel`], the whole forecaster behind [`boldcast_core::Model`];
//! - [`alloc`]: the training process's allocator policy (glibc keeps freed large buffers,
//!   and [`alloc::CacheAligned`] puts buffers on cache-line boundaries for the 16-lane loops).
#![deny(missing_docs)]

pub mod alloc;
pub mod knn;
/// The Mamba-1 temporal mixer: parameters, forward, and hand-written backward.
pub mod mamba1;
/// The Mamba-2 (SSD) temporal mixer: parameters, chunked and sequential forward, and hand-written backward.
pub mod mamba2;
pub mod mixer;
pub mod model;
pub mod ops;
pub mod par;

pub use model::CpuModel;
