//! `boldcast`: the facade over the workspace's crates. It re-exports the core, the CPU and
//! dfdx backends and the fixtures, and owns the safetensors checkpoint format shared by every
//! backend ([`checkpoint`]) and the cross-crate tests and benches.
#![deny(missing_docs)]

pub use boldcast_core as core;
pub use boldcast_cpu as cpu;
pub use boldcast_dfdx as dfdx;
pub use boldcast_fixtures as fixtures;

/// The allocator policy for training processes (glibc's thresholds).
pub mod alloc;
/// Safetensors checkpoints: atomic save, f32/f64 load by MODEL.md name, i64 tensors.
pub mod checkpoint;
/// The backend conformance suite: golden cases and randomized comparisons with the CPU backend.
pub mod conformance;
/// The golden-file checker: loads a case, compares a backend and the core's optimizer with it.
pub mod golden;

/// The `[data]` and `[window]` sections of a run configuration.
pub mod config;
pub mod data;
