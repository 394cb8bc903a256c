//! The Mamba-1 temporal mixer (MODEL.md, "Temporal mixer, `temporal = \"mamba\"`") from
//! dfdx tensor ops, over all `S = B * P` sequences at once in the row layout
//! ([`crate::layout`]): rows `t * S .. (t + 1) * S` are time step `t`.
//!
//! dfdx 0.13 has no conv1d and no cumsum: the causal depthwise convolution is a sum of `K`
//! row-shifted copies of the input (zero rows prepended, then one gather per tap), and the
//! selective scan runs sequentially over time, one `select` of the step's decay and input per
//! step, the states stacked back for the readout.

use crate::ops::act::{silu, softplus};
use crate::ops::linear::{linear, matmul_t, rows_of};
use crate::ops::rows::{select_col, select_row, take_cols, take_rows};
use crate::ops::tape::{absorb, dup};
use crate::ops::{Mat, Vector};
use boldcast_core::Elem;
use dfdx::prelude::*;

/// One layer's Mamba-1 parameters, as matrices and vectors with tape `T`.
pub struct Mamba1Params<E: Dtype, D: Device<E>, T> {
    /// `conv1d.weight` as `(Di, K)`.
    pub conv_w: Mat<E, D, T>,
    /// `conv1d.bias` `(Di,)`.
    pub conv_b: Vector<E, D, T>,
    /// `in_proj.weight` `(2 Di, M)`.
    pub in_proj: Mat<E, D, T>,
    /// `x_proj.weight` `(R + 2N, Di)`.
    pub x_proj: Mat<E, D, T>,
    /// `dt_proj.weight` `(Di, R)`.
    pub dt_w: Mat<E, D, T>,
    /// `dt_proj.bias` `(Di,)`.
    pub dt_b: Vector<E, D, T>,
    /// `A_log` `(Di, N)`.
    pub a_log: Mat<E, D, T>,
    /// `D` `(Di,)`.
    pub d: Vector<E, D, T>,
    /// `out_proj.weight` `(M, Di)`.
    pub out_proj: Mat<E, D, T>,
}

/// The mixer on `u (T * S, M)` (already layer-normed): returns `(T * S, M)`.
pub fn mamba1<E: Dtype + Elem, D: Device<E>, T: Tape<E, D>>(
    u: Mat<E, D, T>,
    p: Mamba1Params<E, D, T>,
    time: usize,
    seqs: usize,
) -> Mat<E, D, T> {
    let ts = time * seqs;
    let (di, k) = *p.conv_w.shape();
    let n = p.a_log.shape().1;
    let r = p.dt_w.shape().1;

    // 1. [x | z] = u W_in^T.
    let (xz, xz2) = dup(matmul_t(u, p.in_proj));
    let x = take_cols(xz, 0, di);
    let z = take_cols(xz2, di, di);

    // 2. Causal depthwise conv, then SiLU.
    let x = silu(causal_conv(x, p.conv_w, p.conv_b, time, seqs, k));

    // 3. [dr | Bc | Cc] = x W_x^T.
    let (x, x_proj_in) = dup(x);
    let (dbc, dbc2) = dup(matmul_t(x_proj_in, p.x_proj));
    let (dbc2, dbc3) = dup(dbc2);
    let dr = take_cols(dbc, 0, r);
    let bc = take_cols(dbc2, r, n);
    let cc = take_cols(dbc3, r + n, n);

    // 4. dt = softplus(dr W_dt^T + dt_b); 5. A = -exp(A_log).
    let dt = softplus(linear(dr, p.dt_w, p.dt_b));
    let a = p.a_log.exp().negate();

    // 6. Scan over time; dA = exp(dt A) and dB x = dt x Bc for every step at once.
    let sh3 = (ts, di, n);
    let (dt, dt2) = dup(dt);
    let (x, x2) = dup(x);
    let da = (dt.broadcast_like::<(usize, usize, usize), Axis<2>>(&sh3)
        * a.broadcast_like::<(usize, usize, usize), Axis<0>>(&sh3))
    .exp()
    .reshape_like(&(time, seqs * di * n));
    let dbx = ((dt2 * x2).broadcast_like::<(usize, usize, usize), Axis<2>>(&sh3)
        * bc.broadcast_like::<(usize, usize, usize), Axis<1>>(&sh3))
    .reshape_like(&(time, seqs * di * n));
    let hs = scan(da, dbx);
    let hs = hs.reshape_like(&sh3);
    let y = (hs * cc.broadcast_like::<(usize, usize, usize), Axis<1>>(&sh3)).sum::<(usize, usize), Axis<2>>();
    let y = y + x * rows_of(p.d, ts);

    // 7. out = (y * silu(z)) W_out^T.
    matmul_t(y * silu(z), p.out_proj)
}

/// `c[t] = b + sum_j w[:, j] * x[t - K + 1 + j]` with zero history, on `x (T * S, Di)`.
fn causal_conv<E: Dtype, D: Device<E>, T: Tape<E, D>>(
    x: Mat<E, D, T>,
    w: Mat<E, D, T>,
    b: Vector<E, D, T>,
    time: usize,
    seqs: usize,
    k: usize,
) -> Mat<E, D, T> {
    let (ts, di) = *x.shape();
    // xp = [K - 1 steps of zeros; x]: tap j at step t reads xp's step t + j.
    let xp = if k > 1 {
        let zeros: Mat<E, D, T> = x.device().zeros_like(&((k - 1) * seqs, di)).retaped::<T>();
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

/// `h_t = dA_t * h_{t-1} + dBx_t` from `h_{-1} = 0`, for `dA`, `dBx` of shape `(T, X)`:
/// returns every `h_t` as `(T, X)`.
fn scan<E: Dtype, D: Device<E>, T: Tape<E, D>>(da: Mat<E, D, T>, dbx: Mat<E, D, T>) -> Mat<E, D, T> {
    let time = da.shape().0;
    let (da, da_tape) = da.split_tape();
    let (dbx, dbx_tape) = dbx.split_tape();
    let mut hs = Vec::with_capacity(time);
    let mut h: Vector<E, D, T> = select_row(dbx.retaped::<T>(), 0);
    for t in 1..time {
        let (prev, keep) = dup(h);
        hs.push(keep);
        h = select_row(da.retaped::<T>(), t) * prev + select_row(dbx.retaped::<T>(), t);
    }
    hs.push(h);
    absorb(absorb(hs.stack(), da_tape), dbx_tape)
}
