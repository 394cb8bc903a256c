//! `boldcast`: the facade over the workspace's crates. It re-exports the core, the CPU
//! backend (with the training process's allocator policy, [`cpu::alloc`]), the native CUDA
//! backend ([`cuda`]: its kernels run in the CPU shim in every build, on a GPU with the
//! feature `cuda`), the dfdx backend (feature `dfdx`, on by default), the fixtures, the data layer, the training library, the baselines and the analyses. The golden-file checker and the
//! conformance suite are in `boldcast-testkit`; the cross-crate tests and benches are here.
#![deny(missing_docs)]

pub use boldcast_core as core;
pub use boldcast_cpu as cpu;
pub use boldcast_cuda as cuda;
#[cfg(feature = "dfdx")]
pub use boldcast_dfdx as dfdx;
pub use boldcast_fixtures as fixtures;

pub use boldcast_analysis as analysis;
pub use boldcast_baselines as baselines;
pub use boldcast_data as data;
pub use boldcast_storage as storage;
pub use boldcast_train as train;

pub mod backend;
