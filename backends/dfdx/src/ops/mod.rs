//! The building blocks of the model, as compositions of dfdx tensor ops that work for any
//! tape: [`NoneTape`](dfdx::tensor::NoneTape) for inference, an
//! [`OwnedTape`](dfdx::tensor::OwnedTape) when gradients are wanted.
//!
//! - [`tape`]: using one traced tensor more than once;
//! - [`rows`]: picking rows of a matrix with `gather`/`select` (never `slice`, whose CPU
//!   backward pass in dfdx 0.13 overwrites instead of accumulating);
//! - [`linear`]: `x W^T + b` with PyTorch-layout weights;
//! - [`layernorm`]: LayerNorm over the last axis;
//! - [`act`]: SiLU and softplus;
//! - [`conv`]: the causal depthwise convolution of both mixers.

pub mod act;
pub mod conv;
pub mod layernorm;
pub mod linear;
pub mod rows;
pub mod tape;

use dfdx::tensor::Tensor;

/// A runtime-sized matrix on device `D` with tape `T`.
pub type Mat<E, D, T> = Tensor<(usize, usize), E, D, T>;
/// A runtime-sized vector on device `D` with tape `T`.
pub type Vector<E, D, T> = Tensor<(usize,), E, D, T>;
/// A runtime-sized 3-D tensor on device `D` with tape `T`.
pub type Cube<E, D, T> = Tensor<(usize, usize, usize), E, D, T>;
/// A device index vector (`usize` entries) for `gather`/`select`.
pub type Index<D> = Tensor<(usize,), usize, D>;
