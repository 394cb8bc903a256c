//! The Mamba-1 selective scan of one sequence (MODEL.md step 6) and its backward
//! (BACKWARD.md, "Mamba-1 selective scan"), checkpointed as in "Memory": a first pass keeps
//! the state only at the start of every chunk of Q steps, and the backward walks the chunks
//! from the last, recomputing each chunk's states (and their decays `exp(dt A)`) from its
//! checkpoint.
//!
//! Layout: the state is held channel-minor, `h[n, d]` (`(N, Di)`), and `A` transposed to match,
//! so that every inner loop runs over the `Di` channels of one state index: contiguous,
//! independent lanes, no horizontal sums except the two dot products per state index that the
//! `B` and `C` gradients need (written with fixed lane accumulators). The exponential is inlined
//! ([`CpuElem::exp_nonpos`]) and every kernel is compiled for the best vector width
//! ([`crate::multiversion`]), so the scan runs at the machine's vector width.
//!
//! Bit-exactness: the state update `h = exp(dt A) h + (dt x) B` (one fused multiply-add,
//! [`CpuElem::fma`]) is one function, [`state_step`], called by the plain forward, the
//! checkpoint pass and the chunk recomputation, and the output sums the state indices in the
//! same order in each, so the recomputed states are the forward's states exactly, and the
//! gradients do not depend on the chunk length nor on whether the forward left the
//! checkpoints.

use crate::multiversion;
use crate::ops::simd::{dot, LANES};
use crate::ops::CpuElem;

/// What the scan reads, row-major over the T steps of one sequence.
pub(super) struct Inputs<'a, E> {
    /// Di.
    pub di: usize,
    /// N.
    pub n: usize,
    /// Offset of `B` in a `dbc` row (the time-step rank R); `C` follows at `r + n`.
    pub r: usize,
    /// Row width of `dbc` (`R + 2N`).
    pub w: usize,
    /// `A = -exp(A_log)` transposed, `(N, Di)`.
    pub at: &'a [E],
    /// The skip weights `D`, `(Di)`.
    pub d_skip: &'a [E],
    /// Time steps, `(T, Di)`, all `>= 0`.
    pub dt: &'a [E],
    /// The scan's input `x`, `(T, Di)`.
    pub xs: &'a [E],
    /// `dt * x`, `(T, Di)`.
    pub dx: &'a [E],
    /// `[dr | B | C]`, `(T, R + 2N)`.
    pub dbc: &'a [E],
}

impl<E: CpuElem> Inputs<'_, E> {
    /// Number of steps.
    pub fn time(&self) -> usize {
        self.dt.len() / self.di
    }
}

/// One state element's step: the decay `e = exp(dt a)` and the new state
/// `e h + (dt x) B`, one fused multiply-add. Every pass over the states (the forward, the
/// checkpoint pass, the chunk recomputation) goes through this one expression, which is what
/// makes their states the same bits.
#[inline(always)]
fn state_step<E: CpuElem>(dt: E, a: E, h: E, dx: E, b: E) -> (E, E) {
    let e = (dt * a).exp_nonpos();
    (e, e.fma(h, dx * b))
}

multiversion! {
    /// The scan from a zero state over all steps, gated: `out[t] = (C_t h_t + D x_t) * gate[t]`
    /// `(T, Di)`. `h` is scratch, `(N, Di)`. Unless `ckpt` is empty, the state before step
    /// `c q` is also copied to chunk `c` of `ckpt` (`(ceil(T / q), N, Di)`), as [`checkpoints`]
    /// does: the same states, so a backward may start from them.
    pub(super) fn forward_gated<E: CpuElem>(io: &Inputs<'_, E>, gate: &[E], h: &mut [E], out: &mut [E], q: usize, ckpt: &mut [E]) {
        let (di, n, r, w) = (io.di, io.n, io.r, io.w);
        h.fill(E::zero());
        let (s, full) = (di * n, di / LANES * LANES);
        for t in 0..io.time() {
            if !ckpt.is_empty() && t % q == 0 {
                ckpt[(t / q) * s..][..s].copy_from_slice(h);
            }
            let (dt, xs, dx) = (&io.dt[t * di..][..di], &io.xs[t * di..][..di], &io.dx[t * di..][..di]);
            let (bt, ct) = (&io.dbc[t * w + r..][..n], &io.dbc[t * w + r + n..][..n]);
            let (y, d_skip, g) = (&mut out[t * di..][..di], &io.d_skip[..di], &gate[t * di..][..di]);
            // Blocks of LANES channels, every state index within the block: the block's output
            // stays in registers while the N state rows are added to it.
            for c in (0..full).step_by(LANES) {
                let lanes = |v: &[E]| -> [E; LANES] { v[c..c + LANES].try_into().expect("a full block") };
                let (dtc, dxc, xsc, dsc) = (lanes(dt), lanes(dx), lanes(xs), lanes(d_skip));
                let mut yv = [E::zero(); LANES];
                for k in 0..LANES {
                    yv[k] = dsc[k] * xsc[k];
                }
                for j in 0..n {
                    let (bn, cn) = (bt[j], ct[j]);
                    let a: &[E; LANES] = io.at[j * di + c..][..LANES].try_into().expect("a full block");
                    let hj: &mut [E; LANES] = (&mut h[j * di + c..][..LANES]).try_into().expect("a full block");
                    for k in 0..LANES {
                        let (_, v) = state_step(dtc[k], a[k], hj[k], dxc[k], bn);
                        hj[k] = v;
                        yv[k] = cn.fma(v, yv[k]);
                    }
                }
                let gc = lanes(g);
                for k in 0..LANES {
                    y[c + k] = yv[k] * gc[k];
                }
            }
            for d in full..di {
                let mut yd = d_skip[d] * xs[d];
                for j in 0..n {
                    let (_, v) = state_step(dt[d], io.at[j * di + d], h[j * di + d], dx[d], bt[j]);
                    h[j * di + d] = v;
                    yd = ct[j].fma(v, yd);
                }
                y[d] = yd * g[d];
            }
        }
    }
}

multiversion! {
    /// The states only, from zero over all steps: the state before step `c q` is copied to
    /// chunk `c` of `ckpt` (`(ceil(T / q), N, Di)`). `h` is scratch, `(N, Di)`.
    pub(super) fn checkpoints<E: CpuElem>(io: &Inputs<'_, E>, q: usize, h: &mut [E], ckpt: &mut [E]) {
        let (di, n, r, w) = (io.di, io.n, io.r, io.w);
        let s = di * n;
        h.fill(E::zero());
        for t in 0..io.time() {
            if t % q == 0 {
                ckpt[(t / q) * s..][..s].copy_from_slice(h);
            }
            let (dt, dx) = (&io.dt[t * di..][..di], &io.dx[t * di..][..di]);
            let bt = &io.dbc[t * w + r..][..n];
            for j in 0..n {
                let (a, hj) = (&io.at[j * di..][..di], &mut h[j * di..][..di]);
                let bn = bt[j];
                for d in 0..di {
                    hj[d] = state_step(dt[d], a[d], hj[d], dx[d], bn).1;
                }
            }
        }
    }
}

multiversion! {
    /// Recomputes steps `t0..t1` from the state `h0` before `t0`: the states into `hs`, the
    /// decays into `decs` (both `(t1 - t0, N, Di)`), and the scan output
    /// `y[t] = C_t h_t + D x_t` into rows `t0..t1` of `y` `(T, Di)`.
    pub(super) fn chunk_forward<E: CpuElem>(
        io: &Inputs<'_, E>,
        t0: usize,
        t1: usize,
        h0: &[E],
        hs: &mut [E],
        decs: &mut [E],
        y: &mut [E],
    ) {
        let (di, n, r, w) = (io.di, io.n, io.r, io.w);
        let (s, full) = (di * n, di / LANES * LANES);
        for t in t0..t1 {
            let i = t - t0;
            let (done, rest) = hs.split_at_mut(i * s);
            let cur = &mut rest[..s];
            let prev = if i == 0 { &h0[..s] } else { &done[(i - 1) * s..][..s] };
            let dec = &mut decs[i * s..][..s];
            let (dt, xs, dx) = (&io.dt[t * di..][..di], &io.xs[t * di..][..di], &io.dx[t * di..][..di]);
            let (bt, ct) = (&io.dbc[t * w + r..][..n], &io.dbc[t * w + r + n..][..n]);
            let (yr, d_skip) = (&mut y[t * di..][..di], &io.d_skip[..di]);
            // Blocks of LANES channels as in [`forward_gated`], the same operations in the
            // same order, so the recomputed states are the forward's.
            for c in (0..full).step_by(LANES) {
                let lanes = |v: &[E]| -> [E; LANES] { v[c..c + LANES].try_into().expect("a full block") };
                let (dtc, dxc, xsc, dsc) = (lanes(dt), lanes(dx), lanes(xs), lanes(d_skip));
                let mut yv = [E::zero(); LANES];
                for k in 0..LANES {
                    yv[k] = dsc[k] * xsc[k];
                }
                for j in 0..n {
                    let (bn, cn) = (bt[j], ct[j]);
                    let at = j * di + c;
                    let a: &[E; LANES] = io.at[at..][..LANES].try_into().expect("a full block");
                    let pj: &[E; LANES] = prev[at..][..LANES].try_into().expect("a full block");
                    let hj: &mut [E; LANES] = (&mut cur[at..][..LANES]).try_into().expect("a full block");
                    let ej: &mut [E; LANES] = (&mut dec[at..][..LANES]).try_into().expect("a full block");
                    for k in 0..LANES {
                        let (e, v) = state_step(dtc[k], a[k], pj[k], dxc[k], bn);
                        ej[k] = e;
                        hj[k] = v;
                        yv[k] = cn.fma(v, yv[k]);
                    }
                }
                yr[c..c + LANES].copy_from_slice(&yv);
            }
            for d in full..di {
                let mut yd = d_skip[d] * xs[d];
                for j in 0..n {
                    let at = j * di + d;
                    let (e, v) = state_step(dt[d], io.at[at], prev[at], dx[d], bt[j]);
                    dec[at] = e;
                    cur[at] = v;
                    yd = ct[j].fma(v, yd);
                }
                yr[d] = yd;
            }
        }
    }
}

/// The backward's running state and outputs for one sequence.
pub(super) struct Back<'a, E> {
    /// The carry `a_{t+1} G_{t+1}`, `(N, Di)`; zero before the last step.
    pub carry: &'a mut [E],
    /// Scratch: `G_t` of one state index, `(Di)`.
    pub grow: &'a mut [E],
    /// Scratch: `sum_n G B` per channel, `(Di)`.
    pub gxs_row: &'a mut [E],
    /// Scratch: `sum_n A q` per channel, `(Di)`.
    pub gdt_row: &'a mut [E],
    /// Gradient of `x` through the scan (`D g + dt sum_n G B`), `(T, Di)`, overwritten per step.
    pub g_xs: &'a mut [E],
    /// Gradient of `dt`, `(T, Di)`, overwritten per step.
    pub g_dt: &'a mut [E],
    /// Gradient of `[dr | B | C]`: the B and C columns are overwritten, dr is left alone.
    pub g_dbc: &'a mut [E],
    /// Gradient with respect to `A` (not `A_log`), transposed `(N, Di)`, accumulated.
    pub g_a: &'a mut [E],
    /// Gradient of `D`, `(Di)`, accumulated.
    pub g_d: &'a mut [E],
}

multiversion! {
    /// Walks steps `t1 - 1` down to `lo` of the chunk that starts at `t0` (`t0 <= lo < t1`),
    /// whose states and decays [`chunk_forward`] left in `hs` and `decs` (`h0` is the state
    /// before `t0`), for the scan-output gradient `g_y` `(T, Di)`:
    /// `G_t = g_t C_t + carry`, then `carry = a_t G_t`; with `q = G a_t h_{t-1}`,
    /// `g_x = D g + dt sum_n G B`, `g_dt = x sum_n G B + sum_n A q`, `g_A += dt q`,
    /// `g_B = sum_d G dt x`, `g_C = sum_d g h`, `g_D += g x`.
    pub(super) fn back_steps<E: CpuElem>(
        io: &Inputs<'_, E>,
        t0: usize,
        lo: usize,
        t1: usize,
        h0: &[E],
        hs: &[E],
        decs: &[E],
        g_y: &[E],
        b: &mut Back<'_, E>,
    ) {
        let (di, n, r, w) = (io.di, io.n, io.r, io.w);
        let s = di * n;
        for t in (lo..t1).rev() {
            let i = t - t0;
            let (h_t, dec) = (&hs[i * s..][..s], &decs[i * s..][..s]);
            let prev = if i == 0 { &h0[..s] } else { &hs[(i - 1) * s..][..s] };
            let (dt, xs, dx) = (&io.dt[t * di..][..di], &io.xs[t * di..][..di], &io.dx[t * di..][..di]);
            let (bt, ct) = (&io.dbc[t * w + r..][..n], &io.dbc[t * w + r + n..][..n]);
            let g = &g_y[t * di..][..di];
            let (gxs, gdt, grow) = (&mut b.gxs_row[..di], &mut b.gdt_row[..di], &mut b.grow[..di]);
            gxs.fill(E::zero());
            gdt.fill(E::zero());
            let g_bc = &mut b.g_dbc[t * w + r..][..2 * n];
            for j in 0..n {
                let (bn, cn) = (bt[j], ct[j]);
                let rows = j * di..(j + 1) * di;
                let (a, hj, pj, ej) = (&io.at[rows.clone()], &h_t[rows.clone()], &prev[rows.clone()], &dec[rows.clone()]);
                let (cr, ga) = (&mut b.carry[rows.clone()], &mut b.g_a[rows]);
                for d in 0..di {
                    let gg = g[d].fma(cn, cr[d]);
                    grow[d] = gg;
                    gxs[d] = gg.fma(bn, gxs[d]);
                    let qv = gg * (ej[d] * pj[d]);
                    gdt[d] = qv.fma(a[d], gdt[d]);
                    ga[d] = qv.fma(dt[d], ga[d]);
                    cr[d] = ej[d] * gg;
                }
                g_bc[n + j] = dot(g, hj);
                g_bc[j] = dot(grow, dx);
            }
            let (g_xs, g_dt) = (&mut b.g_xs[t * di..][..di], &mut b.g_dt[t * di..][..di]);
            finish_step(g_xs, g_dt, b.g_d, io.d_skip, g, dt, xs, gxs, gdt);
        }
    }
}

/// The per-channel end of one step of [`back_steps`]: `g_x = D g + dt gxs`,
/// `g_dt = x gxs + gdt`, `g_D += g x`. A function of its own so that its slices arrive as
/// distinct parameters: taken from one `Back` they may alias as far as LLVM knows, and the
/// loop stayed scalar.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn finish_step<E: CpuElem>(
    g_xs: &mut [E],
    g_dt: &mut [E],
    g_d: &mut [E],
    d_skip: &[E],
    g: &[E],
    dt: &[E],
    xs: &[E],
    gxs: &[E],
    gdt: &[E],
) {
    let di = g_xs.len();
    let (g_dt, g_d, d_skip, g, dt, xs, gxs, gdt) =
        (&mut g_dt[..di], &mut g_d[..di], &d_skip[..di], &g[..di], &dt[..di], &xs[..di], &gxs[..di], &gdt[..di]);
    for d in 0..di {
        g_xs[d] = d_skip[d].fma(g[d], dt[d] * gxs[d]);
        g_dt[d] = xs[d].fma(gxs[d], gdt[d]);
        g_d[d] = g[d].fma(xs[d], g_d[d]);
    }
}
