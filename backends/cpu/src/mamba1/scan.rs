//! The Mamba-1 selective scan of one sequence (MODEL.md step 6) and its backward
//! (BACKWARD.md, "Mamba-1 selective scan"), checkpointed as in "Memory": the forward keeps the
//! state only at the start of every chunk of Q steps, and the backward walks the chunks from
//! the last, recomputing each chunk's states (and their decays `exp(dt A)`) from its checkpoint.

use super::Mamba1Dims;
use crate::ops::CpuElem;

/// What the scan reads, all row-major over the T steps of one sequence.
pub(super) struct Inputs<'a, E> {
    /// The mixer's sizes.
    pub dims: Mamba1Dims,
    /// `A = -exp(A_log)`, `(Di, N)`.
    pub a: &'a [E],
    /// The skip weights `D`, `(Di)`.
    pub d_skip: &'a [E],
    /// Time steps, `(T, Di)`, all `>= 0`.
    pub dt: &'a [E],
    /// The scan's input `x`, `(T, Di)`.
    pub xs: &'a [E],
    /// `[dr | B | C]`, `(T, R + 2N)`.
    pub dbc: &'a [E],
}

/// Where the backward writes.
pub(super) struct Grads<'a, E> {
    /// Gradient of `x` through the scan (`D g + dt sum_n G B`), `(T, Di)`, overwritten.
    pub g_xs: &'a mut [E],
    /// Gradient of `dt`, `(T, Di)`, overwritten.
    pub g_dt: &'a mut [E],
    /// Gradient of `[dr | B | C]`: the B and C columns are overwritten, dr is left alone.
    pub g_dbc: &'a mut [E],
    /// Gradient with respect to A (not A_log), `(Di, N)`, accumulated in f64.
    pub g_a: &'a mut [f64],
    /// Gradient of `D`, `(Di)`, accumulated in f64.
    pub g_d: &'a mut [f64],
}

/// The backward's scratch, sized once per workspace: `ceil(T / Q)` checkpoints plus one
/// chunk's `Q` states and decays plus the carry, instead of all `T` states.
pub(super) struct Buffers<E> {
    /// The state before the first step of each chunk, `(ceil(T / Q), Di, N)`.
    pub ckpt: Vec<E>,
    /// The states `h_t` of the chunk being walked back, `(Q, Di, N)`.
    hs: Vec<E>,
    /// Their decays `exp(dt_t A)`, `(Q, Di, N)`.
    decay: Vec<E>,
    /// The carry `a_{t+1} G_{t+1}`, `(Di, N)`.
    carry: Vec<E>,
}

impl<E: CpuElem> Buffers<E> {
    /// Buffers for sequences of `time` steps checkpointed every `q` steps.
    pub fn new(dims: Mamba1Dims, time: usize, q: usize) -> Self {
        let s = dims.d_inner * dims.d_state;
        let z = |len: usize| vec![E::zero(); len];
        Self { ckpt: z(time.div_ceil(q) * s), hs: z(q.min(time) * s), decay: z(q.min(time) * s), carry: z(s) }
    }
}

/// Runs the scan from a zero state over all steps, writing `y` `(T, Di)`. With
/// `Some((ckpt, q))`, the state before step `c q` is copied to chunk `c` of `ckpt` first.
///
/// The update `h = exp(dt A) h + (dt x) B` is written exactly as in [`backward`]'s
/// recomputation, so the recomputed states are bit-identical to the ones this produced.
pub(super) fn forward<E: CpuElem>(io: &Inputs<'_, E>, h: &mut [E], y: &mut [E], mut ckpt: Option<(&mut [E], usize)>) {
    let Mamba1Dims { d_inner: di, d_state: n, dt_rank: r, .. } = io.dims;
    let w = io.dims.w_dbc();
    let s = di * n;
    h.fill(E::zero());
    for t in 0..y.len() / di {
        if let Some((ck, q)) = ckpt.as_mut() {
            if t % *q == 0 {
                let c = t / *q;
                ck[c * s..(c + 1) * s].copy_from_slice(h);
            }
        }
        let (bt, ct) = (&io.dbc[t * w + r..][..n], &io.dbc[t * w + r + n..][..n]);
        for d in 0..di {
            let (dtv, xv) = (io.dt[t * di + d], io.xs[t * di + d]);
            let dx = dtv * xv;
            let (a_row, h_row) = (&io.a[d * n..(d + 1) * n], &mut h[d * n..(d + 1) * n]);
            let mut acc = E::zero();
            for ((hv, &av), (&bv, &cv)) in h_row.iter_mut().zip(a_row).zip(bt.iter().zip(ct)) {
                // dt >= 0 and A < 0, so the exponent is never positive and cannot overflow.
                *hv = (dtv * av).exp() * *hv + dx * bv;
                acc += cv * *hv;
            }
            y[t * di + d] = acc + io.d_skip[d] * xv;
        }
    }
}

/// The scan's backward for the scan-output gradient `g_y` `(T, Di)`, from the checkpoints that
/// [`forward`] left in `buf.ckpt` with the same `q`.
///
/// Walking `t = T-1 .. 0` with the carry `R_t = a_{t+1} G_{t+1}`:
/// `G_t = g_t C_t + R_t`, then `R_{t-1} = a_t G_t`. The decay-weighted previous state that the
/// A and dt gradients need, `a_t h_{t-1}`, is formed from the stored chunk states directly,
/// the same product the forward computed, so no cancellation as in `h_t - dt B x` occurs.
pub(super) fn backward<E: CpuElem>(io: &Inputs<'_, E>, g_y: &[E], q: usize, buf: &mut Buffers<E>, out: Grads<'_, E>) {
    let Mamba1Dims { d_inner: di, d_state: n, dt_rank: r, .. } = io.dims;
    let w = io.dims.w_dbc();
    let s = di * n;
    let t_len = g_y.len() / di;
    let Buffers { ckpt, hs, decay, carry } = buf;
    carry.fill(E::zero());
    for c in (0..t_len.div_ceil(q)).rev() {
        let (t0, t1) = (c * q, (c * q + q).min(t_len));
        let h0 = &ckpt[c * s..(c + 1) * s];
        // Recompute the chunk's states and decays from its checkpoint.
        for t in t0..t1 {
            let i = t - t0;
            let (done, rest) = hs.split_at_mut(i * s);
            let prev = if i == 0 { h0 } else { &done[(i - 1) * s..] };
            let (cur, dec) = (&mut rest[..s], &mut decay[i * s..(i + 1) * s]);
            let bt = &io.dbc[t * w + r..][..n];
            for d in 0..di {
                let dtv = io.dt[t * di + d];
                let dx = dtv * io.xs[t * di + d];
                let rows = (d * n)..(d + 1) * n;
                let it = cur[rows.clone()].iter_mut().zip(&mut dec[rows.clone()]).zip(&prev[rows.clone()]);
                for (((hv, dv), &hp), (&av, &bv)) in it.zip(io.a[rows].iter().zip(bt)) {
                    let e = (dtv * av).exp();
                    *dv = e;
                    *hv = e * hp + dx * bv;
                }
            }
        }
        // Walk the chunk back.
        for t in (t0..t1).rev() {
            let i = t - t0;
            let h_t = &hs[i * s..(i + 1) * s];
            let prev = if i == 0 { h0 } else { &hs[(i - 1) * s..i * s] };
            let dec = &decay[i * s..(i + 1) * s];
            let (bt, ct) = (&io.dbc[t * w + r..][..n], &io.dbc[t * w + r + n..][..n]);
            let g_row = &mut out.g_dbc[t * w + r..][..2 * n];
            g_row.fill(E::zero());
            let (g_b, g_c) = g_row.split_at_mut(n);
            for d in 0..di {
                let gd = g_y[t * di + d];
                let (dtv, xv) = (io.dt[t * di + d], io.xs[t * di + d]);
                let dx = dtv * xv;
                let rows = (d * n)..(d + 1) * n;
                let (a_row, cr, g_a) = (&io.a[rows.clone()], &mut carry[rows.clone()], &mut out.g_a[rows.clone()]);
                let (h_row, p_row, e_row) = (&h_t[rows.clone()], &prev[rows.clone()], &dec[rows]);
                let (mut s_gb, mut s_dt) = (E::zero(), E::zero());
                for j in 0..n {
                    let gg = gd * ct[j] + cr[j];
                    g_c[j] += gd * h_row[j];
                    g_b[j] += gg * dx;
                    s_gb += gg * bt[j];
                    let ht = e_row[j] * p_row[j];
                    s_dt += gg * (bt[j] * xv + a_row[j] * ht);
                    g_a[j] += (gg * dtv * ht).f64();
                    cr[j] = e_row[j] * gg;
                }
                out.g_xs[t * di + d] = io.d_skip[d] * gd + dtv * s_gb;
                out.g_dt[t * di + d] = s_dt;
                out.g_d[d] += (gd * xv).f64();
            }
        }
    }
}
