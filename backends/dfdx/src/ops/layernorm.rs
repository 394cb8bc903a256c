//! LayerNorm over the last axis: `(x - mean) / sqrt(var + 1e-5) * w + b`, biased variance.

use super::linear::rows_of;
use super::tape::dup;
use super::{Mat, Vector};
use dfdx::prelude::*;

/// The epsilon of MODEL.md's LayerNorm (PyTorch's default).
pub const LN_EPS: f64 = 1e-5;

/// LayerNorm of every row of `x (rows, M)` with weight and bias `(M,)`.
pub fn layer_norm<E: Dtype + boldcast_core::Elem, D: Device<E>, T: Tape<E, D>>(
    x: Mat<E, D, T>,
    w: Vector<E, D, T>,
    b: Vector<E, D, T>,
) -> Mat<E, D, T> {
    let shape = *x.shape();
    let (x, x2) = dup(x);
    let mean = x2.mean::<(usize,), Axis<1>>().broadcast_like::<(usize, usize), Axis<1>>(&shape);
    let c = x - mean;
    let (c, c2) = dup(c);
    let var = c2.square().mean::<(usize,), Axis<1>>();
    let inv = (var + E::of(LN_EPS)).sqrt().recip().broadcast_like::<(usize, usize), Axis<1>>(&shape);
    c * inv * rows_of(w, shape.0) + rows_of(b, shape.0)
}
