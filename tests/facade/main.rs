//! The cross-crate tests of the facade (the conformance suite on the CPU and dfdx backends,\n//! the golden optimizer and trainer, the held-out floor) in one test binary. The allocator\n//! policy check is a binary of its own (its own global allocator, no libtest harness).

mod common;

mod conformance_cpu;
#[cfg(feature = "dfdx")]
mod conformance_dfdx;
mod golden_optimizer;
mod golden_trainer;
mod heldout_floor;
