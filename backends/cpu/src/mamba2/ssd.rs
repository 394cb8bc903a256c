//! The chunked (SSD) evaluation of the Mamba-2 scan of one sequence: the fast forward path.
//!
//! Within a chunk of `L <= Q` steps starting at `c0`, with the per-step log-decays
//! `l_k = dt_k A <= 0` and the state `S0` entering the chunk, the recurrence unrolls to
//!
//! ```text
//! y_i  = sum_{j <= i} exp(l_{j+1} + .. + l_i) dt_j (C_i . B_j) x_j        (intra-chunk)
//!      + exp(l_0 + .. + l_i) S0 C_i                                        (inter-chunk)
//!      + D x_i
//! S_L  = exp(l_0 + .. + l_{L-1}) S0 + sum_j exp(l_{j+1} + .. + l_{L-1}) dt_j x_j B_j^T
//! ```
//!
//! so each chunk is three matrix products per head (`C B^T` is shared by all heads: one group).
//! The decays `exp(l_{j+1} + .. + l_i)` are running products of the per-step factors
//! `exp(l_k) <= 1`: only single non-positive exponents are ever exponentiated (never a
//! difference of two cumulative sums, which loses precision and can form `inf - inf`), the
//! products underflow gracefully to 0, they round like the sequential recurrence (which
//! multiplies the same factors), and a chunk costs `L` exponentials per head instead of
//! `L^2 / 2`. Entries of the decay matrix above the diagonal are set to 0 directly rather than
//! masked by multiplication.

use super::scan::Inputs;
use super::Mamba2Dims;
use crate::ops::gemm::{gemm, Mat};
use crate::ops::CpuElem;

/// The scratch of one chunk, sized once per workspace.
pub(super) struct Scratch<E> {
    /// `C B^T` of the chunk, `(L, L)`, shared by the heads.
    cb: Vec<E>,
    /// The masked decay-weighted matrix of one head, `(L, L)`.
    m: Vec<E>,
    /// `exp(l_0 + .. + l_i) C_i`, `(L, N)`.
    cs: Vec<E>,
    /// `exp(l_{j+1} + .. + l_{L-1}) dt_j B_j`, `(L, N)`.
    wb: Vec<E>,
    /// The per-step decays `exp(dt A)` of one head over the chunk, `(L)`.
    decay: Vec<E>,
    /// The running state of every head, `(nheads, Pd, N)`.
    state: Vec<E>,
}

impl<E: CpuElem> Scratch<E> {
    /// Scratch for sequences of `time` steps.
    pub fn new(dims: Mamba2Dims, time: usize) -> Self {
        let q = dims.chunk_size.min(time).max(1);
        let n = dims.d_state;
        let z = |len: usize| vec![E::zero(); len];
        Self { cb: z(q * q), m: z(q * q), cs: z(q * n), wb: z(q * n), decay: z(q), state: z(dims.d_inner * n) }
    }
}

/// Runs the scan in chunks of `dims.chunk_size` steps from a zero state, writing `y` `(T, Di)`.
/// With `Some(ckpt)`, the state of every head entering chunk `k` is copied to
/// `ckpt[k]` `(ceil(T / Q), nheads, Pd, N)` for the backward.
pub(super) fn forward<E: CpuElem>(io: &Inputs<'_, E>, sc: &mut Scratch<E>, y: &mut [E], mut ckpt: Option<&mut [E]>) {
    let Mamba2Dims { d_inner: di, d_state: n, nheads, headdim: pd, chunk_size: q, .. } = io.dims;
    let (time, cd, sz) = (io.time(), io.dims.conv_dim(), pd * n);
    sc.state.fill(E::zero());
    for k in 0..time.div_ceil(q) {
        let (c0, c1) = (k * q, ((k + 1) * q).min(time));
        let l = c1 - c0;
        if let Some(ck) = ckpt.as_deref_mut() {
            ck[k * nheads * sz..][..nheads * sz].copy_from_slice(&sc.state);
        }
        let last = c1 == time;
        // Views of the chunk's rows of x | B | C (row stride Di + 2N).
        let rows = &io.xbc[c0 * cd..];
        let b_mat = Mat { data: &rows[di..], rows: l, cols: n, rs: cd, cs: 1 };
        let c_mat = Mat { data: &rows[di + n..], rows: l, cols: n, rs: cd, cs: 1 };
        gemm(E::one(), c_mat, b_mat.t(), E::zero(), &mut sc.cb, l);
        for h in 0..nheads {
            let dt = |i: usize| io.dt[(c0 + i) * nheads + h];
            for i in 0..l {
                sc.decay[i] = (dt(i) * io.a[h]).exp_nonpos();
            }
            // M[i, j] = exp(l_{j+1} + .. + l_i) dt_j (C_i . B_j) for j <= i, exactly 0 above.
            for i in 0..l {
                let mrow = &mut sc.m[i * l..(i + 1) * l];
                let cbrow = &sc.cb[i * l..(i + 1) * l];
                let mut seg = E::one();
                mrow[i] = cbrow[i] * dt(i);
                for j in (0..i).rev() {
                    seg *= sc.decay[j + 1];
                    mrow[j] = cbrow[j] * seg * dt(j);
                }
                mrow[i + 1..].fill(E::zero());
            }
            let x_mat = Mat { data: &rows[h * pd..], rows: l, cols: pd, rs: cd, cs: 1 };
            let y_h = &mut y[c0 * di + h * pd..];
            gemm(E::one(), Mat::rm(&sc.m[..l * l], l, l), x_mat, E::zero(), y_h, di);
            let s_h = &mut sc.state[h * sz..(h + 1) * sz];
            if k > 0 {
                // The state entering the chunk, decayed to each step: y += diag(exp(cum)) C S0^T.
                let mut w = E::one();
                for i in 0..l {
                    w *= sc.decay[i];
                    for (dst, &cv) in sc.cs[i * n..(i + 1) * n].iter_mut().zip(&rows[i * cd + di + n..][..n]) {
                        *dst = w * cv;
                    }
                }
                gemm(E::one(), Mat::rm(&sc.cs[..l * n], l, n), Mat::rm(s_h, pd, n).t(), E::one(), y_h, di);
            }
            let dh = io.d_skip[h];
            for i in 0..l {
                let (yr, xr) = (&mut y_h[i * di..][..pd], &rows[i * cd + h * pd..][..pd]);
                for (yv, &xv) in yr.iter_mut().zip(xr) {
                    *yv += dh * xv;
                }
            }
            if !last {
                // S <- exp(l_0 + .. + l_{L-1}) S + X^T (w B), w_j = exp(l_{j+1} + .. + l_{L-1}) dt_j.
                let mut rev = E::one();
                for j in (0..l).rev() {
                    let w = rev * dt(j);
                    for (dst, &bv) in sc.wb[j * n..(j + 1) * n].iter_mut().zip(&rows[j * cd + di..][..n]) {
                        *dst = w * bv;
                    }
                    rev *= sc.decay[j];
                }
                gemm(E::one(), x_mat.t(), Mat::rm(&sc.wb[..l * n], l, n), rev, s_h, n);
            }
        }
    }
}
