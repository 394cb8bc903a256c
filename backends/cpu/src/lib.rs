//! `boldcast-cpu`: the BOLDcast model on the CPU in pure Rust, with gradients written by hand
//! from BACKWARD.md (no tape, no autodiff crate).
//!
//! Module map (each file has one job):
//! - [`ops`]: the small pieces shared by the blocks: matrix products ([`ops::gemm`]),
//!   linear layers ([`ops::linear`]) and activations ([`ops::act`]).
#![deny(missing_docs)]

pub mod ops;
