//! The native CUDA backend's tests in shim mode, one module per piece (kernels, layers, the
//! model, the pool's memory, the shim, NVRTC's compile of every kernel, the conformance suite,
//! the bf16 golden cases), in one test binary (one link instead of one per file).

mod common;

mod act;
mod autocast;
mod bf16_golden;
mod conformance;
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
mod traffic;
