//! The native CUDA backend's tests in shim mode, one module per piece (kernels, layers, the
//! model, the pool's memory, the shim, NVRTC's compile of every kernel), in one test binary
//! (one link instead of one per file). The conformance suite and the bf16 golden cases are
//! binaries of their own: the slow tier (`.config/nextest.toml`).

mod common;

mod act;
mod autocast;
mod knn;
mod layernorm;
mod layout;
mod loss;
mod mamba1;
mod mamba1_layer;
mod mamba2;
mod mamba2_layer;
mod memory;
mod model;
mod nvrtc;
mod optim;
mod shim;
