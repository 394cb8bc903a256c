//! `boldcast`: the facade over the workspace's crates. It re-exports the core, the CPU
//! backend and the fixtures, and owns the safetensors checkpoint format shared by every
//! backend ([`checkpoint`]) and the cross-crate tests and benches.
#![deny(missing_docs)]

pub use boldcast_core as core;
pub use boldcast_cpu as cpu;
pub use boldcast_fixtures as fixtures;

pub mod config;
pub mod data;
