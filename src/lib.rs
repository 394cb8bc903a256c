//! `boldcast`: the facade over the workspace's crates. It re-exports the core, the CPU
//! backend (with the training process's allocator policy, [`cpu::alloc`]), the dfdx backend
//! (feature `dfdx`, on by default) and the fixtures. The golden-file checker and the
//! conformance suite are in `boldcast-testkit`; the cross-crate tests and benches are here.
#![deny(missing_docs)]

pub use boldcast_core as core;
pub use boldcast_cpu as cpu;
#[cfg(feature = "dfdx")]
pub use boldcast_dfdx as dfdx;
pub use boldcast_fixtures as fixtures;

/// Safetensors checkpoints: atomic save, f32/f64 load by MODEL.md name, i64 tensors.
pub mod checkpoint;

pub mod config;
pub use boldcast_data as data;
