//! Activations: SiLU and softplus.

use super::tape::dup;
use dfdx::prelude::*;

/// `silu(x) = x * sigmoid(x)`.
pub fn silu<S: Shape, E: Dtype, D: Device<E>, T: Tape<E, D>>(x: Tensor<S, E, D, T>) -> Tensor<S, E, D, T> {
    let (x, x2) = dup(x);
    x2.sigmoid() * x
}

/// `softplus(v) = relu(v) + ln(1 + exp(-|v|))`: equal to `ln(1 + e^v)` without overflow, and
/// within f32 rounding of PyTorch's thresholded softplus (`v` itself above 20). Its
/// derivative is `sigmoid(v)` everywhere but `v = 0`.
pub fn softplus<S: Shape, E: Dtype, D: Device<E>, T: Tape<E, D>>(v: Tensor<S, E, D, T>) -> Tensor<S, E, D, T> {
    let (v, v2) = dup(v);
    let tail = (v2.abs().negate().exp() + E::ONE).ln();
    v.relu() + tail
}
