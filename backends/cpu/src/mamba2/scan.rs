//! The Mamba-2 scan of one sequence by the sequential recurrence (MODEL.md step 4; the
//! reference for the chunked SSD form in `ssd.rs`) and its backward (BACKWARD.md, "Mamba-2
//! scan"), checkpointed as in "Memory": the backward walks the chunks of Q steps from the last,
//! recomputing each chunk's states from the state at the chunk's start, which the forward left
//! behind, so it holds `ceil(T / Q) + Q` states per head instead of `T`.

use super::Mamba2Dims;
use crate::multiversion;
use crate::ops::CpuElem;

/// What the scan reads, all row-major over the T steps of one sequence.
pub(super) struct Inputs<'a, E> {
    /// The mixer's sizes.
    pub dims: Mamba2Dims,
    /// `A = -exp(A_log)`, `(nheads)`.
    pub a: &'a [E],
    /// The skip weights `D`, `(nheads)`.
    pub d_skip: &'a [E],
    /// Time steps, `(T, nheads)`, all `>= 0`.
    pub dt: &'a [E],
    /// The convolution's activated output `x | B | C`, `(T, Di + 2N)`; head `h` reads
    /// `x[h Pd .. (h + 1) Pd]`.
    pub xbc: &'a [E],
}

impl<E: CpuElem> Inputs<'_, E> {
    /// Steps in the sequence.
    pub fn time(&self) -> usize {
        self.dt.len() / self.dims.nheads
    }

    /// Step `t`'s `(x of head h, B, C)`.
    #[inline(always)]
    pub fn step(&self, t: usize, h: usize) -> (&[E], &[E], &[E]) {
        let Mamba2Dims { d_inner: di, d_state: n, headdim: pd, .. } = self.dims;
        let row = &self.xbc[t * self.dims.conv_dim()..][..di + 2 * n];
        (&row[h * pd..(h + 1) * pd], &row[di..di + n], &row[di + n..])
    }
}

/// One step of the recurrence, `S = a S + (dt x) B^T`, in place. Shared by the forward and
/// the backward's recomputation so that both produce bit-identical states. Always inlined, so
/// it is compiled for the vector level of the kernel that calls it.
#[inline(always)]
fn advance<E: CpuElem>(s: &mut [E], decay: E, dtv: E, x: &[E], b: &[E]) {
    let n = b.len();
    for (row, &xp) in s.chunks_exact_mut(n).zip(x) {
        let dx = dtv * xp;
        for (v, &bn) in row.iter_mut().zip(b) {
            *v = decay * *v + dx * bn;
        }
    }
}

/// The sequential recurrence from a zero state: per head `S_t = exp(dt_t A) S_{t-1} +
/// dt_t x_t B_t^T`, `y_t = S_t C_t + D x_t`. Writes `y` `(T, Di)`; `state` is scratch of at
/// least `Pd * N`.
pub(super) fn sequential<E: CpuElem>(io: &Inputs<'_, E>, state: &mut [E], y: &mut [E]) {
    let Mamba2Dims { d_inner: di, d_state: n, nheads, headdim: pd, .. } = io.dims;
    let s = &mut state[..pd * n];
    for h in 0..nheads {
        s.fill(E::zero());
        for t in 0..io.time() {
            let (x, b, c) = io.step(t, h);
            let dtv = io.dt[t * nheads + h];
            advance(s, (dtv * io.a[h]).exp_nonpos(), dtv, x, b);
            let yt = &mut y[t * di + h * pd..][..pd];
            for ((yp, row), &xp) in yt.iter_mut().zip(s.chunks_exact(n)).zip(x) {
                let sc: E = row.iter().zip(c).map(|(&v, &cn)| v * cn).sum();
                *yp = sc + io.d_skip[h] * xp;
            }
        }
    }
}

/// Where the backward writes.
pub(super) struct Grads<'a, E> {
    /// Gradient of `x | B | C`, `(T, Di + 2N)`, overwritten (B and C summed over heads).
    pub g_xbc: &'a mut [E],
    /// Gradient of `dt`, `(T, nheads)`, overwritten.
    pub g_dt: &'a mut [E],
    /// Gradient with respect to A (not A_log), `(nheads)`, accumulated in f64.
    pub g_a: &'a mut [f64],
    /// Gradient of `D`, `(nheads)`, accumulated in f64.
    pub g_d: &'a mut [f64],
}

/// The backward's scratch, sized once per workspace.
pub(super) struct Buffers<E> {
    /// The states `S_t` of the chunk being walked back, for one head: `(Q, Pd, N)`.
    states: Vec<E>,
    /// `G` of the step walked last, per head, `(nheads, Pd, N)`: the carry before its decay.
    carry: Vec<E>,
    /// The decay `a_{t+1}` still owed to each head's carry (`R = a_{t+1} G_{t+1}` is formed
    /// inside the next step's loop instead of in a pass of its own), `(nheads)`.
    owed: Vec<E>,
    /// Per-column partial sums of `<G, S_{t-1}>`, `(N)`: independent accumulators keep the
    /// step's inner loop free of a serial reduction, so it vectorizes.
    qacc: Vec<E>,
}

impl<E: CpuElem> Buffers<E> {
    /// Buffers for sequences of `time` steps checkpointed every `dims.chunk_size` steps.
    pub fn new(dims: Mamba2Dims, time: usize) -> Self {
        let s = dims.headdim * dims.d_state;
        let z = |len: usize| vec![E::zero(); len];
        Self {
            states: z(dims.chunk_size.min(time) * s),
            carry: z(dims.nheads * s),
            owed: z(dims.nheads),
            qacc: z(dims.d_state),
        }
    }
}

/// `sum_j a_j b_j` with four independent accumulators (a fixed order, so deterministic; the
/// short dot products of a step would otherwise be one serial dependency chain).
#[inline(always)]
fn dot<E: CpuElem>(a: &[E], b: &[E]) -> E {
    let mut acc = [E::zero(); 4];
    let (ac, bc) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for l in 0..4 {
            acc[l] += x[l] * y[l];
        }
    }
    let tail: E = ar.iter().zip(br).map(|(&x, &y)| x * y).sum();
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

multiversion! {
    /// The backward of the scan, given `g_y` `(T, Di)` (the gradient of the scan output before the
    /// gate) and `ckpt` `(ceil(T / Q), nheads, Pd, N)`, the state entering each chunk of Q steps.
    /// Per head, with the carry `R` from 0, for `t = T-1 .. 0`:
    /// `G = R + g_y C^T`, `g_C += S^T g_y`, `g_B += dt G^T x`, `u = G B`, `g_x = D g_y + dt u`,
    /// `q = <G, a_t S_{t-1}>`, `g_dt = x . u + A q`, `g_A += dt q`, `g_D += g_y . x`, `R = a_t G`.
    pub(super) fn backward<E: CpuElem>(
        io: &Inputs<'_, E>,
        ckpt: &[E],
        g_y: &[E],
        bufs: &mut Buffers<E>,
        out: Grads<'_, E>,
    ) {
        let Mamba2Dims { d_inner: di, d_state: n, nheads, headdim: pd, chunk_size: q, .. } = io.dims;
        let (time, cd, sz) = (io.time(), io.dims.conv_dim(), pd * n);
        let Buffers { states, carry, owed, qacc } = bufs;
        // B and C gradients are sums over heads, so they start from zero; the x columns are
        // overwritten below, zeroing them too keeps the whole buffer well defined.
        out.g_xbc.fill(E::zero());
        carry.fill(E::zero());
        owed.fill(E::zero());
        for k in (0..time.div_ceil(q)).rev() {
            let (c0, c1) = (k * q, ((k + 1) * q).min(time));
            for h in 0..nheads {
                let entry = &ckpt[(k * nheads + h) * sz..][..sz];
                // Recompute the chunk's states S_{c0} .. S_{c1-1} from the entry state.
                for t in c0..c1 {
                    let i = t - c0;
                    let (done, rest) = states.split_at_mut(i * sz);
                    let cur = &mut rest[..sz];
                    cur.copy_from_slice(if i == 0 { entry } else { &done[(i - 1) * sz..] });
                    let (x, b, _) = io.step(t, h);
                    let dtv = io.dt[t * nheads + h];
                    advance(cur, (dtv * io.a[h]).exp_nonpos(), dtv, x, b);
                }
                let r = &mut carry[h * sz..][..sz];
                let (ah, dh) = (io.a[h], io.d_skip[h]);
                let (mut ga, mut gd) = (0.0f64, 0.0f64);
                for t in (c0..c1).rev() {
                    let i = t - c0;
                    let st = &states[i * sz..][..sz];
                    // S_{t-1}; a_t S_{t-1} (= S_t - dt x B^T) avoids the cancellation of the difference.
                    let prev = if i == 0 { entry } else { &states[(i - 1) * sz..][..sz] };
                    let (x, b, c) = io.step(t, h);
                    let dtv = io.dt[t * nheads + h];
                    let decay = (dtv * ah).exp_nonpos();
                    let gy = &g_y[t * di + h * pd..][..pd];
                    let row = &mut out.g_xbc[t * cd..][..cd];
                    let (gx_all, gbc) = row.split_at_mut(di);
                    let (gb, gc) = gbc.split_at_mut(n);
                    let gx = &mut gx_all[h * pd..(h + 1) * pd];
                    let a_next = owed[h];
                    qacc.fill(E::zero());
                    let (mut xu, mut gyx) = (E::zero(), E::zero());
                    for p in 0..pd {
                        let (gyp, xp) = (gy[p], x[p]);
                        let dxp = dtv * xp;
                        let (rp, sp, pp) = (&mut r[p * n..][..n], &st[p * n..][..n], &prev[p * n..][..n]);
                        // Zipped slices of one length: no bounds checks, so the loop vectorizes.
                        let cols = rp.iter_mut().zip(c).zip(sp.iter().zip(pp));
                        for (((rj, &cj), (&sj, &pj)), (gcj, (gbj, qj))) in
                            cols.zip(gc.iter_mut().zip(gb.iter_mut().zip(qacc.iter_mut())))
                        {
                            // G = a_{t+1} G_{t+1} + g_y C^T, in place of the carry.
                            let g = a_next * *rj + gyp * cj;
                            *rj = g;
                            *gcj += sj * gyp;
                            *gbj += dxp * g;
                            *qj += g * pj;
                        }
                        let up = dot(rp, b);
                        gx[p] = dh * gyp + dtv * up;
                        xu += xp * up;
                        gyx += gyp * xp;
                    }
                    let qf = decay * qacc.iter().copied().sum::<E>();
                    out.g_dt[t * nheads + h] = xu + ah * qf;
                    ga += (dtv * qf).f64();
                    gd += gyx.f64();
                    owed[h] = decay;
                }
                out.g_a[h] += ga;
                out.g_d[h] += gd;
            }
        }
    }
}
