//! The dfdx backend's tests (golden cases, gradient checks, the model, the optimizer, against\n//! the CPU backend) in one test binary: one link instead of one per file.

mod cross_backend;
mod golden;
mod gradcheck;
mod model;
mod optimizer;
