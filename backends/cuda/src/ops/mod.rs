//! The model's operations, named after the CPU backend's `ops/`: each picks its kernels'
//! launch shapes ([`crate::launch`]) and runs them through [`crate::exec`], in the CPU shim
//! or on the thread's device.

pub mod act;
pub mod layernorm;
pub mod layout;
pub mod linear;
