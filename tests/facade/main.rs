//! The cross-crate tests of the facade (the conformance suite on the CPU and dfdx backends,
//! the golden optimizer and trainer, the held-out floor, `scripts/gpu-check.sh run` with
//! stand-ins) in one test binary. The allocator policy check is a binary of its own (its own
//! global allocator, no libtest harness).

mod common;

mod conformance_cpu;
#[cfg(feature = "dfdx")]
mod conformance_dfdx;
mod golden_optimizer;
mod golden_trainer;
mod gpu_check_script;
mod heldout_floor;
