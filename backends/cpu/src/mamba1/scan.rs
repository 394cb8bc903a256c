//! The Mamba-1 selective scan of one sequence (MODEL.md step 6) and its backward
//! (BACKWARD.md, "Mamba-1 selective scan"), checkpointed as in "Memory": the forward keeps the
//! state only at the start of every chunk of Q steps, and the backward walks the chunks from
//! the last, recomputing each chunk's states (and their decays `exp(dt A)`) from its checkpoint.

use super::exp::exp_nonpos_in_place;
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
    /// `G_t` of one channel, `(N)`.
    g_row: Vec<E>,
    /// `G_t * a_t h_{t-1}` of one channel, `(N)`.
    q_row: Vec<E>,
}

impl<E: CpuElem> Buffers<E> {
    /// Buffers for sequences of `time` steps checkpointed every `q` steps.
    pub fn new(dims: Mamba1Dims, time: usize, q: usize) -> Self {
        let s = dims.d_inner * dims.d_state;
        let z = |len: usize| vec![E::zero(); len];
        let chunk = q.min(time) * s;
        Self {
            ckpt: z(time.div_ceil(q) * s),
            hs: z(chunk),
            decay: z(chunk),
            carry: z(s),
            g_row: z(dims.d_state),
            q_row: z(dims.d_state),
        }
    }
}

/// The decays of one step for every channel, `dec[d, n] = exp(dt[d] A[d, n])`. They are
/// computed in a pass of their own so that the state update, free of function calls, can be
/// vectorized, and so that the exponential runs over one contiguous slice.
#[inline]
fn decays<E: CpuElem>(a: &[E], dt_row: &[E], n: usize, dec: &mut [E]) {
    for ((dec_d, a_d), &dtv) in dec.chunks_exact_mut(n).zip(a.chunks_exact(n)).zip(dt_row) {
        for (e, &av) in dec_d.iter_mut().zip(a_d) {
            *e = dtv * av;
        }
    }
    // dt >= 0 and A < 0, so every exponent is non-positive and the result cannot overflow.
    exp_nonpos_in_place(dec);
}

/// One channel's state update `h = dec h + (dt x) B`, in place. Both the forward and the
/// backward's recomputation call this very function, so they produce the same bits.
#[inline]
fn update<E: CpuElem>(h: &mut [E], dec: &[E], dx: E, bt: &[E]) {
    let n = h.len();
    let (dec, bt) = (&dec[..n], &bt[..n]);
    for j in 0..n {
        h[j] = dec[j] * h[j] + dx * bt[j];
    }
}

/// `sum_j a[j] b[j]` with eight independent partial sums (a fixed order, so deterministic),
/// which lets the compiler vectorize the reduction.
#[inline]
fn dot<E: CpuElem>(a: &[E], b: &[E]) -> E {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [E::zero(); 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let mut tail = E::zero();
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        tail += *x * *y;
    }
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail
}

/// What one channel's backward step reads (see [`channel_back`]).
struct StepIn<'a, E> {
    /// `g_y_t[d]`.
    gd: E,
    /// `dt_t[d] x_t[d]`.
    dx: E,
    /// `dt_t[d]`.
    dtv: E,
    /// `C_t`, `(N)`.
    ct: &'a [E],
    /// `h_t[d, :]`.
    h: &'a [E],
    /// `h_{t-1}[d, :]`.
    h_prev: &'a [E],
    /// `exp(dt_t[d] A[d, :])`.
    dec: &'a [E],
}

/// The elementwise part of one channel's backward step: `G = g C + carry`, the contributions
/// to `g_C`, `g_B` and `g_A`, `G` and `q = G a_t h_{t-1}` for the two reductions that follow,
/// and the new carry `a_t G`. Every output is a separate `&mut` argument, which tells the
/// compiler they do not alias, and every slice is cut to `n` first, which removes the bounds
/// checks: both are needed for the loop to vectorize.
#[inline]
fn channel_back<E: CpuElem>(
    st: StepIn<'_, E>,
    carry: &mut [E],
    g_c: &mut [E],
    g_b: &mut [E],
    g_a: &mut [f64],
    g_row: &mut [E],
    q_row: &mut [E],
) {
    let n = carry.len();
    let (ct, h, h_prev, dec) = (&st.ct[..n], &st.h[..n], &st.h_prev[..n], &st.dec[..n]);
    let (g_c, g_b, g_a, g_row, q_row) = (&mut g_c[..n], &mut g_b[..n], &mut g_a[..n], &mut g_row[..n], &mut q_row[..n]);
    for j in 0..n {
        let gg = st.gd * ct[j] + carry[j];
        g_c[j] += st.gd * h[j];
        g_b[j] += gg * st.dx;
        let qv = gg * (dec[j] * h_prev[j]);
        g_a[j] += (qv * st.dtv).f64();
        g_row[j] = gg;
        q_row[j] = qv;
        carry[j] = dec[j] * gg;
    }
}

/// Runs the scan from a zero state over all steps, writing `y` `(T, Di)`. With
/// `Some((ckpt, q))`, the state before step `c q` is copied to chunk `c` of `ckpt` first.
/// `dec` is scratch for one step's decays, `(Di, N)`.
pub(super) fn forward<E: CpuElem>(
    io: &Inputs<'_, E>,
    h: &mut [E],
    dec: &mut [E],
    y: &mut [E],
    mut ckpt: Option<(&mut [E], usize)>,
) {
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
        let (dt_row, x_row) = (&io.dt[t * di..(t + 1) * di], &io.xs[t * di..(t + 1) * di]);
        decays(io.a, dt_row, n, dec);
        for d in 0..di {
            let h_d = &mut h[d * n..(d + 1) * n];
            update(h_d, &dec[d * n..(d + 1) * n], dt_row[d] * x_row[d], bt);
            y[t * di + d] = dot(ct, h_d) + io.d_skip[d] * x_row[d];
        }
    }
}

/// The scan's backward for the scan-output gradient `g_y` `(T, Di)`, from the checkpoints that
/// [`forward`] left in `buf.ckpt` with the same `q`.
///
/// Walking `t = T-1 .. 0` with the carry `R_t = a_{t+1} G_{t+1}`:
/// `G_t = g_t C_t + R_t`, then `R_{t-1} = a_t G_t`. The decay-weighted previous state that the
/// A and dt gradients need, `ht = a_t h_{t-1}`, is formed from the stored chunk states
/// directly, the same product the forward computed, so the cancellation of `h_t - dt B x`
/// cannot occur. With `q = G ht`: `g_dt = x sum_n G B + sum_n A q` and `g_A += dt q`.
pub(super) fn backward<E: CpuElem>(io: &Inputs<'_, E>, g_y: &[E], q: usize, buf: &mut Buffers<E>, out: Grads<'_, E>) {
    let Mamba1Dims { d_inner: di, d_state: n, dt_rank: r, .. } = io.dims;
    let w = io.dims.w_dbc();
    let s = di * n;
    let t_len = g_y.len() / di;
    let Buffers { ckpt, hs, decay, carry, g_row, q_row } = buf;
    carry.fill(E::zero());
    for c in (0..t_len.div_ceil(q)).rev() {
        let (t0, t1) = (c * q, (c * q + q).min(t_len));
        let h0 = &ckpt[c * s..(c + 1) * s];
        // Recompute the chunk's states and decays from its checkpoint.
        for t in t0..t1 {
            let i = t - t0;
            let (done, rest) = hs.split_at_mut(i * s);
            let cur = &mut rest[..s];
            cur.copy_from_slice(if i == 0 { h0 } else { &done[(i - 1) * s..] });
            let dec = &mut decay[i * s..(i + 1) * s];
            let bt = &io.dbc[t * w + r..][..n];
            let (dt_row, x_row) = (&io.dt[t * di..(t + 1) * di], &io.xs[t * di..(t + 1) * di]);
            decays(io.a, dt_row, n, dec);
            for d in 0..di {
                update(&mut cur[d * n..(d + 1) * n], &dec[d * n..(d + 1) * n], dt_row[d] * x_row[d], bt);
            }
        }
        // Walk the chunk back.
        for t in (t0..t1).rev() {
            let i = t - t0;
            let h_t = &hs[i * s..(i + 1) * s];
            let prev = if i == 0 { h0 } else { &hs[(i - 1) * s..i * s] };
            let dec = &decay[i * s..(i + 1) * s];
            let (bt, ct) = (&io.dbc[t * w + r..][..n], &io.dbc[t * w + r + n..][..n]);
            let g_bc = &mut out.g_dbc[t * w + r..][..2 * n];
            g_bc.fill(E::zero());
            let (g_b, g_c) = g_bc.split_at_mut(n);
            for d in 0..di {
                let gd = g_y[t * di + d];
                let (dtv, xv) = (io.dt[t * di + d], io.xs[t * di + d]);
                let dx = dtv * xv;
                let rows = (d * n)..(d + 1) * n;
                let (cr, g_a) = (&mut carry[rows.clone()], &mut out.g_a[rows.clone()]);
                let (h_d, p_d, e_d) = (&h_t[rows.clone()], &prev[rows.clone()], &dec[rows.clone()]);
                let st = StepIn { gd, dx, dtv, ct, h: h_d, h_prev: p_d, dec: e_d };
                channel_back(st, cr, g_c, g_b, g_a, g_row, q_row);
                let s_gb = dot(g_row, bt);
                out.g_xs[t * di + d] = io.d_skip[d] * gd + dtv * s_gb;
                out.g_dt[t * di + d] = xv * s_gb + dot(q_row, &io.a[rows]);
                out.g_d[d] += (gd * xv).f64();
            }
        }
    }
}
