//! The Mamba-1 temporal mixer (MODEL.md, "Temporal mixer, `temporal = \"mamba\"`") from
//! dfdx tensor ops, over all `S = B * P` sequences at once in the row layout
//! ([`crate::layout`]): rows `t * S .. (t + 1) * S` are time step `t`.
//!
//! dfdx 0.13 has no conv1d and no cumsum: the causal depthwise convolution is a sum of `K`
//! row-shifted copies of the input ([`crate::ops::conv`]), and the
//! selective scan runs sequentially over time: per step it `select`s that step's `dt`,
//! `dt * x`, `Bc` and `Cc`, forms `exp(dt A)` and `dt x Bc` for that step only, updates the
//! `(S, Di, N)` state and reads it out with a batched matrix-vector product; the per-step
//! outputs are stacked. The tape still keeps every state (and dfdx keeps every gradient
//! until the backward pass ends), so memory grows as `T * S * Di * N` per layer.

use crate::ops::act::{silu, softplus};
use crate::ops::conv::causal_conv;
use crate::ops::linear::{linear, matmul_t, rows_of};
use crate::ops::rows::{select_row, take_cols};
use crate::ops::tape::{absorb, dup};
use crate::ops::{Cube, Mat, Vector};
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
    let di = p.conv_w.shape().0;
    let n = p.a_log.shape().1;
    let r = p.dt_w.shape().1;

    // 1. [x | z] = u W_in^T.
    let (xz, xz2) = dup(matmul_t(u, p.in_proj));
    let x = take_cols(xz, 0, di);
    let z = take_cols(xz2, di, di);

    // 2. Causal depthwise conv, then SiLU.
    let x = silu(causal_conv(x, p.conv_w, p.conv_b, time, seqs));

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

    // 6. Scan over time, one step at a time: dA_t = exp(dt_t A) and dB_t x_t = dt_t x_t Bc_t
    // are formed per step, so no (T, S, Di, N) tensor exists besides the states themselves.
    let (dt, dt2) = dup(dt);
    let (x, x2) = dup(x);
    let per_step = |m: Mat<E, D, T>| -> Mat<E, D, T> {
        let w = m.shape().1;
        m.reshape_like(&(time, seqs * w))
    };
    let y = scan(per_step(dt), per_step(dt2 * x2), a, per_step(bc), per_step(cc), (seqs, di, n));
    let y = y + x * rows_of(p.d, ts);

    // 7. out = (y * silu(z)) W_out^T.
    matmul_t(y * silu(z), p.out_proj)
}

/// The selective scan: with `dt`, `dtx = dt * x` as `(T, S * Di)`, `bc`, `cc` as
/// `(T, S * N)` and `a (Di, N)`, runs `h_t = exp(dt_t A) * h_{t-1} + dtx_t Bc_t` from
/// `h_{-1} = 0` over states `(S, Di, N)` and returns `y_t = h_t Cc_t` as `(T * S, Di)`.
fn scan<E: Dtype, D: Device<E>, T: Tape<E, D>>(
    dt: Mat<E, D, T>,
    dtx: Mat<E, D, T>,
    a: Mat<E, D, T>,
    bc: Mat<E, D, T>,
    cc: Mat<E, D, T>,
    (seqs, di, n): (usize, usize, usize),
) -> Mat<E, D, T> {
    let time = dt.shape().0;
    let sh3 = (seqs, di, n);
    let (dt, dt_tape) = dt.split_tape();
    let (dtx, dtx_tape) = dtx.split_tape();
    let (a, a_tape) = a.split_tape();
    let (bc, bc_tape) = bc.split_tape();
    let (cc, cc_tape) = cc.split_tape();
    let step = |m: &Mat<E, D, NoneTape>, t: usize, w: usize| -> Mat<E, D, T> {
        select_row(m.retaped::<T>(), t).reshape_like(&(seqs, w))
    };
    let mut ys = Vec::with_capacity(time);
    let mut h: Option<Cube<E, D, T>> = None;
    for t in 0..time {
        let dbx = step(&dtx, t, di).broadcast_like::<(usize, usize, usize), Axis<2>>(&sh3)
            * step(&bc, t, n).broadcast_like::<(usize, usize, usize), Axis<1>>(&sh3);
        let next = match h {
            None => dbx,
            Some(prev) => {
                let da = (step(&dt, t, di).broadcast_like::<(usize, usize, usize), Axis<2>>(&sh3)
                    * a.retaped::<T>().broadcast_like::<(usize, usize, usize), Axis<0>>(&sh3))
                .exp();
                da * prev + dbx
            }
        };
        let (next, keep) = dup(next);
        // y_t[s, d] = sum_n h_t[s, d, n] Cc_t[s, n]: a batched matrix-vector product, which
        // keeps no (S, Di, N) temporary (nor its gradient) on the tape.
        let c = step(&cc, t, n).reshape_like(&(seqs, n, Const::<1>));
        ys.push(keep.matmul(c).reshape_like(&(seqs, di)));
        h = Some(next);
    }
    let y = ys.stack().reshape_like(&(time * seqs, di));
    let y = absorb(absorb(absorb(y, dt_tape), dtx_tape), a_tape);
    let y = absorb(absorb(y, bc_tape), cc_tape);
    // The last state carries the recurrence's tape: it joins the output's.
    match h {
        Some(last) => {
            let (_, tape) = last.split_tape();
            absorb(y, tape)
        }
        None => y,
    }
}
