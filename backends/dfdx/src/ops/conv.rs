//! The causal depthwise convolution of both Mamba mixers, on the row layout
//! ([`crate::layout`]): rows `t * S .. (t + 1) * S` are time step `t` of the `S` sequences.
//!
//! dfdx 0.13 has no conv1d: the convolution is a sum of `K` row-shifted copies of the input
//! (zero rows prepended, then one `gather` per tap, whose backward accumulates).

use super::linear::rows_of;
use super::rows::{select_col, take_rows};
use super::tape::absorb;
use super::{Mat, Vector};
use dfdx::prelude::*;

/// `c[t] = b + sum_j w[:, j] * x[t - K + 1 + j]` with zero history, on `x (T * S, C)` with
/// weights `w (C, K)` (tap `K - 1` multiplies the current step) and bias `b (C,)`.
pub fn causal_conv<E: Dtype, D: Device<E>, T: Tape<E, D>>(
    x: Mat<E, D, T>,
    w: Mat<E, D, T>,
    b: Vector<E, D, T>,
    time: usize,
    seqs: usize,
) -> Mat<E, D, T> {
    let (ts, ch) = *x.shape();
    let k = w.shape().1;
    // xp = [K - 1 steps of zeros; x]: tap j at step t reads xp's step t + j.
    let xp = if k > 1 {
        let zeros: Mat<E, D, T> = x.device().zeros_like(&((k - 1) * seqs, ch)).retaped::<T>();
        (zeros, x).concat_along(Axis::<0>)
    } else {
        x
    };
    let (xp, xp_tape) = xp.split_tape();
    let (w, w_tape) = w.split_tape();
    let mut acc = rows_of(b, ts);
    for j in 0..k {
        let xj = take_rows(xp.retaped::<T>(), j * seqs, time * seqs);
        let wj = rows_of(select_col(w.retaped::<T>(), j), ts);
        acc = acc + xj * wj;
    }
    absorb(absorb(acc, xp_tape), w_tape)
}
