//! `boldcast-testkit`: what every backend is tested with. The golden-file checker
//! ([`golden`]) compares a backend and the core's optimizer with the PyTorch reference's
//! golden cases; [`cases`] says where those cases are (the repository's `golden/cases`, and
//! `../shared/golden` when present); the conformance suite ([`conformance`], run with
//! [`conformance_tests!`]) runs every golden case and randomized comparisons with the CPU
//! backend, the suite's reference; [`offset`] runs a case whose forecasts add a fixed
//! offset; [`fd`] holds the finite differences of the gradient checks; [`loose`] holds a golden case to looser, measured tolerances (a mode such as bf16
//! autocast that cannot meet f32's); [`fuzz`] is the fuzz harnesses' engine and checker, and
//! the targets of the data crate and the golden cases. The golden files'
//! safetensors are read with `boldcast-data`'s [`tensorfile`](boldcast_storage::tensorfile).
//!
//! Start here when adding a backend: implement [`boldcast_core::Model`], then put one
//! [`conformance_tests!`] in a test file of your crate.
//!
//! The kit depends on the core, the CPU backend (the reference), the fixtures and the data
//! crate (for its safetensors reader), never on
//! the dfdx backend, the CLI or the training crate: the dfdx backend's own tests use it as a
//! dev-dependency, without a cycle (the fuzz harness takes the training crate as a
//! dev-dependency the same way).
#![deny(missing_docs)]

pub mod cases;
pub mod conformance;
pub mod fd;
pub mod fuzz;
pub mod golden;
pub mod loose;
pub mod offset;
