//! The model's operations, named after the CPU backend's `ops/`: each picks its kernels'
//! launch shapes ([`crate::launch`]) and runs them, today on host slices through the CPU shim
//! ([`crate::shim`]); the device path will launch the same kernels with the same shapes.

pub mod act;
pub mod layernorm;
pub mod linear;
