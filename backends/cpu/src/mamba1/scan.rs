//! The Mamba-1 selective scan of one sequence (MODEL.md step 6) and its backward
//! (BACKWARD.md, "Mamba-1 selective scan"), checkpointed as in "Memory": a first pass keeps
//! the state only at the start of every chunk of Q steps, and the backward walks the chunks
//! from the last, recomputing each chunk's states (and their decays `exp(dt A)`) from its
//! checkpoint. Within a chunk the backward goes one group of [`GROUP`] channels at a time
//! (recompute, then walk back), so the group's states and decays are read back from the L1
//! cache; only the `B` and `C` gradients sum over channels, and their lane accumulators carry
//! over from group to group ([`Back::dots`], [`finish_dots`]).
//!
//! Layout: the state is held channel-minor, `h[n, d]` (`(N, Di)`), and `A` transposed to match,
//! so that every inner loop runs over the `Di` channels of one state index: contiguous,
//! independent lanes, no horizontal sums except the two dot products per state index that the
//! `B` and `C` gradients need (written with fixed lane accumulators). The exponential is inlined
//! ([`CpuElem::exp_nonpos`]) and every kernel is compiled for the best vector width
//! ([`crate::multiversion`]), so the scan runs at the machine's vector width.
//!
//! Two versions of each loop: the public entry points here ([`forward_gated`],
//! [`checkpoints`], [`chunk_forward`], [`back_steps`]) run the AVX-512 intrinsics of
//! [`super::avx512`] for `f32` on a CPU that has them, else the portable loops below
//! (`*_portable`), which every other element type and vector level uses. Both compute the same
//! operations in the same order (the tests in `avx512.rs` compare them bit for bit).
//!
//! Bit-exactness: the state update `h = exp(dt A) h + (dt x) B` (one fused multiply-add,
//! [`CpuElem::fma`]) is one function, [`state_step`], called by the plain forward, the
//! checkpoint pass and the chunk recomputation, and the output sums the state indices in the
//! same order in each, so the recomputed states are the forward's states exactly, and the
//! gradients do not depend on the chunk length nor on whether the forward left the
//! checkpoints.

use crate::multiversion;
use crate::ops::simd::{fold_lanes, LANES};
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

impl<'a, E: CpuElem> Inputs<'a, E> {
    /// Number of steps.
    pub fn time(&self) -> usize {
        self.dt.len() / self.di
    }

    /// The same inputs as `f32` slices when `E` is `f32`.
    fn as_f32(&self) -> Option<Inputs<'a, f32>> {
        let (at, d_skip, dt) = (E::as_f32(self.at)?, E::as_f32(self.d_skip)?, E::as_f32(self.dt)?);
        let (xs, dx, dbc) = (E::as_f32(self.xs)?, E::as_f32(self.dx)?, E::as_f32(self.dbc)?);
        Some(Inputs { di: self.di, n: self.n, r: self.r, w: self.w, at, d_skip, dt, xs, dx, dbc })
    }
}

/// One channel group's part of one chunk: channels `c0..c1` (`c0` a multiple of [`LANES`]) from
/// step `t0`, where the group's states and decays (`hs`, `decs`: `(steps, N, c1 - c0)`) start,
/// and `h0`, the state `(N, Di)` before `t0`.
#[derive(Copy, Clone)]
pub(super) struct Group<'a, E> {
    /// The chunk's first step.
    pub t0: usize,
    /// The group's first channel.
    pub c0: usize,
    /// One past the group's last channel.
    pub c1: usize,
    /// The state before `t0`, `(N, Di)`.
    pub h0: &'a [E],
}

impl<'a, E: CpuElem> Group<'a, E> {
    /// The same group with `h0` as an `f32` slice when `E` is `f32`.
    fn as_f32(&self) -> Option<Group<'a, f32>> {
        Some(Group { t0: self.t0, c0: self.c0, c1: self.c1, h0: E::as_f32(self.h0)? })
    }
}

/// Whether the scan runs the AVX-512 loops of [`super::avx512`] (for `f32`): the CPU has
/// them and `BOLDCAST_SIMD` does not ask for less ([`crate::ops::simd::level`]).
fn avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    return crate::ops::simd::level() == crate::ops::simd::Level::Avx512;
    #[cfg(not(target_arch = "x86_64"))]
    return false;
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

/// Writes `B_t[j]` and `C_t[j]` each repeated over [`LANES`] lanes into `bc`
/// (`(N, 2, LANES)`), so that [`forward_gated`]'s block loop reads them as whole vectors: a
/// broadcast from a register takes a slot on the vector ports the exponential saturates, a
/// vector load does not (BENCHMARKS.md, CPU backend, "B and C loaded as vectors in the
/// forward scan", has the kernel's timing).
#[inline(always)]
fn broadcast_rows<E: CpuElem>(bt: &[E], ct: &[E], bc: &mut [E]) {
    for (j, (&b, &c)) in bt.iter().zip(ct).enumerate() {
        bc[2 * j * LANES..][..LANES].fill(b);
        bc[(2 * j + 1) * LANES..][..LANES].fill(c);
    }
}

/// The scan from a zero state over all steps, gated: `out[t] = (C_t h_t + D x_t) * gate[t]`
/// `(T, Di)`. `h` `(N, Di)` and `bc` `(N, 2, LANES)` are scratch. Unless `ckpt` is empty, the
/// state before step `c q` is also copied to chunk `c` of `ckpt` (`(ceil(T / q), N, Di)`), as
/// [`checkpoints`] does: the same states, so a backward may start from them. In `f32` on an
/// AVX-512 CPU, [`super::avx512::forward_gated`] (the same bits).
pub(super) fn forward_gated<E: CpuElem>(
    io: &Inputs<'_, E>,
    gate: &[E],
    h: &mut [E],
    bc: &mut [E],
    out: &mut [E],
    q: usize,
    ckpt: &mut [E],
) {
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        if let (Some(io), Some(gate), Some(h), Some(out), Some(ckpt)) =
            (io.as_f32(), E::as_f32(gate), E::as_f32_mut(h), E::as_f32_mut(out), E::as_f32_mut(ckpt))
        {
            // SAFETY: `avx512()` holds only on a CPU with the features the loops need.
            return unsafe { super::avx512::forward_gated(&io, gate, h, out, q, ckpt) };
        }
    }
    forward_gated_portable(io, gate, h, bc, out, q, ckpt)
}

multiversion! {
    /// [`forward_gated`] in portable code, vectorized by the compiler for each level.
    pub(super) fn forward_gated_portable<E: CpuElem>(
        io: &Inputs<'_, E>,
        gate: &[E],
        h: &mut [E],
        bc: &mut [E],
        out: &mut [E],
        q: usize,
        ckpt: &mut [E],
    ) {
        let (di, n, r, w) = (io.di, io.n, io.r, io.w);
        h.fill(E::zero());
        let (s, full) = (di * n, di / LANES * LANES);
        let bc = &mut bc[..2 * n * LANES];
        for t in 0..io.time() {
            if !ckpt.is_empty() && t % q == 0 {
                ckpt[(t / q) * s..][..s].copy_from_slice(h);
            }
            let (dt, xs, dx) = (&io.dt[t * di..][..di], &io.xs[t * di..][..di], &io.dx[t * di..][..di]);
            let (bt, ct) = (&io.dbc[t * w + r..][..n], &io.dbc[t * w + r + n..][..n]);
            let (y, d_skip, g) = (&mut out[t * di..][..di], &io.d_skip[..di], &gate[t * di..][..di]);
            broadcast_rows(bt, ct, bc);
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
                    let bn: &[E; LANES] = bc[2 * j * LANES..][..LANES].try_into().expect("a full block");
                    let cn: &[E; LANES] = bc[(2 * j + 1) * LANES..][..LANES].try_into().expect("a full block");
                    let a: &[E; LANES] = io.at[j * di + c..][..LANES].try_into().expect("a full block");
                    let hj: &mut [E; LANES] = (&mut h[j * di + c..][..LANES]).try_into().expect("a full block");
                    for k in 0..LANES {
                        let (_, v) = state_step(dtc[k], a[k], hj[k], dxc[k], bn[k]);
                        hj[k] = v;
                        yv[k] = cn[k].fma(v, yv[k]);
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

/// The states only, from zero over all steps: the state before step `c q` is copied to chunk
/// `c` of `ckpt` (`(ceil(T / q), N, Di)`). `h` is scratch, `(N, Di)`. In `f32` on an AVX-512
/// CPU, [`super::avx512::checkpoints`].
pub(super) fn checkpoints<E: CpuElem>(io: &Inputs<'_, E>, q: usize, h: &mut [E], ckpt: &mut [E]) {
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        if let (Some(io), Some(h), Some(ckpt)) = (io.as_f32(), E::as_f32_mut(h), E::as_f32_mut(ckpt)) {
            // SAFETY: as in `forward_gated`.
            return unsafe { super::avx512::checkpoints(&io, q, h, ckpt) };
        }
    }
    checkpoints_portable(io, q, h, ckpt)
}

multiversion! {
    /// [`checkpoints`] in portable code.
    pub(super) fn checkpoints_portable<E: CpuElem>(io: &Inputs<'_, E>, q: usize, h: &mut [E], ckpt: &mut [E]) {
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

/// Channels per group of the chunked backward: [`chunk_forward`] and [`back_steps`] run over
/// one group of channels at a time, so a chunk's states and decays of the group
/// (`2 Q N GROUP` values, 32 KiB at `cpu-demo`) stay in the L1 cache between being written and
/// walked back. The scan is independent per channel except for the `B` and `C` gradients,
/// which sum over channels; their lane accumulators carry over from group to group in
/// [`Back::dots`]. A multiple of [`LANES`].
pub(super) const GROUP: usize = 2 * LANES;

/// The channel groups of `di` channels: `[c0, c1)` ranges of [`GROUP`] channels, the last
/// one shorter when `GROUP` does not divide `di`.
pub(super) fn groups(di: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..di).step_by(GROUP).map(move |c0| (c0, (c0 + GROUP).min(di)))
}

/// Where the state before a step of a chunk lives: the chunk's checkpoint `h0` `(N, Di)` for
/// its first step, the group's own recomputed states `(N, c1 - c0)` after that. Returns the
/// slice, its row stride and the offset of the group's first channel in a row.
#[inline(always)]
fn prev_states<'a, E>(
    h0: &'a [E],
    done: &'a [E],
    i: usize,
    di: usize,
    c0: usize,
    gw: usize,
    n: usize,
) -> (&'a [E], usize, usize) {
    if i == 0 {
        (h0, di, c0)
    } else {
        (&done[(i - 1) * n * gw..][..n * gw], gw, 0)
    }
}

/// Recomputes steps `t0..t1` of the group `g` from its state `h0`: the group's states into
/// `hs` and their decays into `decs` (both `(t1 - t0, N, c1 - c0)`), and the scan output
/// `y[t] = C_t h_t + D x_t` into rows `t0..t1`, channels `c0..c1`, of `y` `(T, Di)`. In `f32`
/// on an AVX-512 CPU, [`super::avx512::chunk_forward`].
pub(super) fn chunk_forward<E: CpuElem>(
    io: &Inputs<'_, E>,
    g: &Group<'_, E>,
    t1: usize,
    hs: &mut [E],
    decs: &mut [E],
    y: &mut [E],
) {
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        if let (Some(io), Some(g), Some(hs), Some(decs), Some(y)) =
            (io.as_f32(), g.as_f32(), E::as_f32_mut(hs), E::as_f32_mut(decs), E::as_f32_mut(y))
        {
            // SAFETY: as in `forward_gated`.
            return unsafe { super::avx512::chunk_forward(&io, &g, t1, hs, decs, y) };
        }
    }
    chunk_forward_portable(io, g, t1, hs, decs, y)
}

multiversion! {
    /// [`chunk_forward`] in portable code.
    pub(super) fn chunk_forward_portable<E: CpuElem>(
        io: &Inputs<'_, E>,
        g: &Group<'_, E>,
        t1: usize,
        hs: &mut [E],
        decs: &mut [E],
        y: &mut [E],
    ) {
        let Group { t0, c0, c1, h0 } = *g;
        let (di, n, r, w) = (io.di, io.n, io.r, io.w);
        let gw = c1 - c0;
        let (sg, full) = (n * gw, c0 + gw / LANES * LANES);
        for t in t0..t1 {
            let i = t - t0;
            let (done, rest) = hs.split_at_mut(i * sg);
            let cur = &mut rest[..sg];
            let (prev, ps, po) = prev_states(h0, done, i, di, c0, gw, n);
            let dec = &mut decs[i * sg..][..sg];
            let (dt, xs, dx) = (&io.dt[t * di..][..di], &io.xs[t * di..][..di], &io.dx[t * di..][..di]);
            let (bt, ct) = (&io.dbc[t * w + r..][..n], &io.dbc[t * w + r + n..][..n]);
            let (yr, d_skip) = (&mut y[t * di..][..di], &io.d_skip[..di]);
            // Blocks of LANES channels as in [`forward_gated`], the same operations in the
            // same order, so the recomputed states are the forward's.
            for c in (c0..full).step_by(LANES) {
                let lanes = |v: &[E]| -> [E; LANES] { v[c..c + LANES].try_into().expect("a full block") };
                let (dtc, dxc, xsc, dsc) = (lanes(dt), lanes(dx), lanes(xs), lanes(d_skip));
                let mut yv = [E::zero(); LANES];
                for k in 0..LANES {
                    yv[k] = dsc[k] * xsc[k];
                }
                for j in 0..n {
                    let (bn, cn) = (bt[j], ct[j]);
                    let (at, loc, pat) = (j * di + c, j * gw + (c - c0), j * ps + (c - c0) + po);
                    let a: &[E; LANES] = io.at[at..][..LANES].try_into().expect("a full block");
                    let pj: &[E; LANES] = prev[pat..][..LANES].try_into().expect("a full block");
                    let hj: &mut [E; LANES] = (&mut cur[loc..][..LANES]).try_into().expect("a full block");
                    let ej: &mut [E; LANES] = (&mut dec[loc..][..LANES]).try_into().expect("a full block");
                    let mut v = [E::zero(); LANES];
                    for k in 0..LANES {
                        let (e, h) = state_step(dtc[k], a[k], pj[k], dxc[k], bn);
                        ej[k] = e;
                        v[k] = h;
                    }
                    *hj = v;
                    // A loop of its own, so that `yv` stays in a register (in one loop with
                    // the step above it was kept in memory, a store and reload per index).
                    for k in 0..LANES {
                        yv[k] = cn.fma(v[k], yv[k]);
                    }
                }
                yr[c..c + LANES].copy_from_slice(&yv);
            }
            for d in full..c1 {
                let mut yd = d_skip[d] * xs[d];
                for j in 0..n {
                    let (at, loc, pat) = (j * di + d, j * gw + (d - c0), j * ps + (d - c0) + po);
                    let (e, v) = state_step(dt[d], io.at[at], prev[pat], dx[d], bt[j]);
                    dec[loc] = e;
                    cur[loc] = v;
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
    /// Scratch: `sum_n G B` per channel, `(Di)`.
    pub gxs_row: &'a mut [E],
    /// Scratch: `sum_n A q` per channel, `(Di)`.
    pub gdt_row: &'a mut [E],
    /// Gradient of `x` through the scan (`D g + dt sum_n G B`), `(T, Di)`, overwritten per step.
    pub g_xs: &'a mut [E],
    /// Gradient of `dt`, `(T, Di)`, overwritten per step.
    pub g_dt: &'a mut [E],
    /// Gradient with respect to `A` (not `A_log`), transposed `(N, Di)`, accumulated.
    pub g_a: &'a mut [E],
    /// Gradient of `D`, `(Di)`, accumulated.
    pub g_d: &'a mut [E],
    /// The chunk's `C` and `B` gradient sums over the channels so far, as lane accumulators:
    /// `(Q, 2, N, LANES)`, `C` first; zeroed per chunk, finished by [`finish_dots`].
    pub dots: &'a mut [E],
    /// Their sums over the channels past the last full block of [`LANES`], `(Q, 2, N)`.
    pub tails: &'a mut [E],
}

impl<E: CpuElem> Back<'_, E> {
    /// The same buffers as `f32` slices when `E` is `f32`.
    fn as_f32(&mut self) -> Option<Back<'_, f32>> {
        Some(Back {
            carry: E::as_f32_mut(self.carry)?,
            gxs_row: E::as_f32_mut(self.gxs_row)?,
            gdt_row: E::as_f32_mut(self.gdt_row)?,
            g_xs: E::as_f32_mut(self.g_xs)?,
            g_dt: E::as_f32_mut(self.g_dt)?,
            g_a: E::as_f32_mut(self.g_a)?,
            g_d: E::as_f32_mut(self.g_d)?,
            dots: E::as_f32_mut(self.dots)?,
            tails: E::as_f32_mut(self.tails)?,
        })
    }
}

/// Walks steps `t1 - 1` down to `lo` (`steps = lo..t1`, `t0 <= lo < t1`) of the group `grp`,
/// whose states and decays [`chunk_forward`] left in `hs` and `decs`, for the scan-output
/// gradient `g_y` `(T, Di)`:
/// `G_t = g_t C_t + carry`, then `carry = a_t G_t`; with `q = G a_t h_{t-1}`,
/// `g_x = D g + dt sum_n G B`, `g_dt = x sum_n G B + sum_n A q`, `g_A += dt q`, `g_D += g x`;
/// and the channel sums `g_B = sum_d G dt x`, `g_C = sum_d g h` go on in `b.dots` and
/// `b.tails`. In `f32` on an AVX-512 CPU, the full blocks of channels run in
/// [`super::avx512::back_blocks`] and a last partial block here ([`tail_step`]); the channels
/// are independent but for the dot products, whose full-block lanes and tail sums are kept
/// apart, so the order between the two does not matter.
pub(super) fn back_steps<E: CpuElem>(
    io: &Inputs<'_, E>,
    grp: &Group<'_, E>,
    steps: std::ops::Range<usize>,
    hs: &[E],
    decs: &[E],
    g_y: &[E],
    b: &mut Back<'_, E>,
) {
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        if let (Some(io32), Some(g32), Some(hs), Some(decs), Some(g_y), Some(mut b32)) =
            (io.as_f32(), grp.as_f32(), E::as_f32(hs), E::as_f32(decs), E::as_f32(g_y), b.as_f32())
        {
            // SAFETY: as in `forward_gated`.
            unsafe { super::avx512::back_blocks(&io32, &g32, steps.clone(), hs, decs, g_y, &mut b32) };
            if grp.c0 + (grp.c1 - grp.c0) / LANES * LANES < grp.c1 {
                for t in steps.rev() {
                    tail_step(&io32, &g32, t, hs, decs, g_y, &mut b32);
                }
            }
            return;
        }
    }
    back_steps_portable(io, grp, steps, hs, decs, g_y, b)
}

/// Step `t` of [`back_steps`] for the channels `full..c1` past the group's last full block of
/// [`LANES`]: the scalar walk, its dot products summed in `b.tails` in channel order, then the
/// per-channel end ([`finish_step`]) for those channels.
#[inline(always)]
fn tail_step<E: CpuElem>(
    io: &Inputs<'_, E>,
    grp: &Group<'_, E>,
    t: usize,
    hs: &[E],
    decs: &[E],
    g_y: &[E],
    b: &mut Back<'_, E>,
) {
    let Group { t0, c0, c1, h0 } = *grp;
    let (di, n, r, w) = (io.di, io.n, io.r, io.w);
    let gw = c1 - c0;
    let full = c0 + gw / LANES * LANES;
    let (i, sg) = (t - t0, n * gw);
    let (h_t, dec) = (&hs[i * sg..][..sg], &decs[i * sg..][..sg]);
    let (prev, ps, po) = prev_states(h0, hs, i, di, c0, gw, n);
    let (dt, dx) = (&io.dt[t * di..][..di], &io.dx[t * di..][..di]);
    let (bt, ct) = (&io.dbc[t * w + r..][..n], &io.dbc[t * w + r + n..][..n]);
    let g = &g_y[t * di..][..di];
    let (a_all, carry, g_a) = (&io.at[..di * n], &mut b.carry[..di * n], &mut b.g_a[..di * n]);
    let (gxs, gdt) = (&mut b.gxs_row[..di], &mut b.gdt_row[..di]);
    let tails = &mut b.tails[i * 2 * n..][..2 * n];
    for d in full..c1 {
        let (mut sx, mut sd) = (E::zero(), E::zero());
        for j in 0..n {
            let (at, loc, pat) = (j * di + d, j * gw + (d - c0), j * ps + (d - c0) + po);
            let (e, p) = (dec[loc], prev[pat]);
            let gg = g[d].fma(ct[j], carry[at]);
            sx = gg.fma(bt[j], sx);
            let qv = gg * (e * p);
            sd = qv.fma(a_all[at], sd);
            g_a[at] = qv.fma(dt[d], g_a[at]);
            carry[at] = e * gg;
            tails[j] = g[d].fma(h_t[loc], tails[j]);
            tails[n + j] = gg.fma(dx[d], tails[n + j]);
        }
        gxs[d] = sx;
        gdt[d] = sd;
    }
    finish_channels(io, g_y, t, full..c1, b);
}

/// [`finish_step`] for step `t` and channels `cs`, from the step's sums in `b.gxs_row` and
/// `b.gdt_row`.
#[inline(always)]
fn finish_channels<E: CpuElem>(
    io: &Inputs<'_, E>,
    g_y: &[E],
    t: usize,
    cs: std::ops::Range<usize>,
    b: &mut Back<'_, E>,
) {
    let row = t * io.di;
    let (g, dt, xs) = (&g_y[row..][cs.clone()], &io.dt[row..][cs.clone()], &io.xs[row..][cs.clone()]);
    finish_step(
        &mut b.g_xs[row..][cs.clone()],
        &mut b.g_dt[row..][cs.clone()],
        &mut b.g_d[cs.clone()],
        &io.d_skip[cs.clone()],
        g,
        dt,
        xs,
        &b.gxs_row[cs.clone()],
        &b.gdt_row[cs],
    );
}

multiversion! {
    /// [`back_steps`] in portable code.
    pub(super) fn back_steps_portable<E: CpuElem>(
        io: &Inputs<'_, E>,
        grp: &Group<'_, E>,
        steps: std::ops::Range<usize>,
        hs: &[E],
        decs: &[E],
        g_y: &[E],
        b: &mut Back<'_, E>,
    ) {
        let (Group { t0, c0, c1, h0 }, lo, t1) = (*grp, steps.start, steps.end);
        let (di, n, r, w) = (io.di, io.n, io.r, io.w);
        let gw = c1 - c0;
        let (sg, full) = (n * gw, c0 + gw / LANES * LANES);
        for t in (lo..t1).rev() {
            let i = t - t0;
            let (a_all, carry, g_a) = (&io.at[..di * n], &mut b.carry[..di * n], &mut b.g_a[..di * n]);
            let (h_t, dec) = (&hs[i * sg..][..sg], &decs[i * sg..][..sg]);
            let (prev, ps, po) = prev_states(h0, hs, i, di, c0, gw, n);
            let (dt, dx) = (&io.dt[t * di..][..di], &io.dx[t * di..][..di]);
            let (bt, ct) = (&io.dbc[t * w + r..][..n], &io.dbc[t * w + r + n..][..n]);
            let g = &g_y[t * di..][..di];
            let (gxs, gdt) = (&mut b.gxs_row[..di], &mut b.gdt_row[..di]);
            let acc = &mut b.dots[i * 2 * n * LANES..][..2 * n * LANES];
            let (acc_c, acc_b) = acc.split_at_mut(n * LANES);
            // Blocks of LANES channels, every state index within the block: the per-channel
            // sums `gxs` and `gdt` stay in registers while the N state rows pass; the two dot
            // products go on in their lane accumulators, block after block in channel order,
            // which is [`dot`](crate::ops::simd::dot)'s order.
            for c in (c0..full).step_by(LANES) {
                let lanes = |v: &[E]| -> [E; LANES] { v[c..c + LANES].try_into().expect("a full block") };
                let (gc, dtc, dxc) = (lanes(g), lanes(dt), lanes(dx));
                let mut sx = [E::zero(); LANES];
                let mut sd = [E::zero(); LANES];
                for j in 0..n {
                    let (bn, cn) = (bt[j], ct[j]);
                    let (at, loc, pat) = (j * di + c, j * gw + (c - c0), j * ps + (c - c0) + po);
                    let row = |v: &[E], o: usize| -> [E; LANES] { v[o..o + LANES].try_into().expect("a full block") };
                    let (a, hj, pj, ej) = (row(a_all, at), row(h_t, loc), row(prev, pat), row(dec, loc));
                    let cr: &mut [E; LANES] = (&mut carry[at..at + LANES]).try_into().expect("a full block");
                    let ga: &mut [E; LANES] = (&mut g_a[at..at + LANES]).try_into().expect("a full block");
                    let ac: &mut [E; LANES] = (&mut acc_c[j * LANES..][..LANES]).try_into().expect("a full block");
                    let ab: &mut [E; LANES] = (&mut acc_b[j * LANES..][..LANES]).try_into().expect("a full block");
                    // One operation per loop: small loops are unrolled and kept in registers,
                    // where one loop holding all of them kept `sx` and `sd` in memory.
                    let mut gg = [E::zero(); LANES];
                    for k in 0..LANES {
                        gg[k] = gc[k].fma(cn, cr[k]);
                    }
                    for k in 0..LANES {
                        sx[k] = gg[k].fma(bn, sx[k]);
                    }
                    let mut qv = [E::zero(); LANES];
                    for k in 0..LANES {
                        qv[k] = gg[k] * (ej[k] * pj[k]);
                    }
                    for k in 0..LANES {
                        sd[k] = qv[k].fma(a[k], sd[k]);
                    }
                    for k in 0..LANES {
                        ga[k] = qv[k].fma(dtc[k], ga[k]);
                    }
                    for k in 0..LANES {
                        cr[k] = ej[k] * gg[k];
                    }
                    for k in 0..LANES {
                        ac[k] = gc[k].fma(hj[k], ac[k]);
                    }
                    for k in 0..LANES {
                        ab[k] = gg[k].fma(dxc[k], ab[k]);
                    }
                }
                gxs[c..c + LANES].copy_from_slice(&sx);
                gdt[c..c + LANES].copy_from_slice(&sd);
            }
            finish_channels(io, g_y, t, c0..full, b);
            if full < c1 {
                tail_step(io, grp, t, hs, decs, g_y, b);
            }
        }
    }
}

/// After every channel group of a chunk (steps `t0..t1`) has been walked back: the `C` and `B`
/// gradients of those steps from their lane accumulators and tails ([`fold_lanes`], as
/// [`dot`](crate::ops::simd::dot) finishes), into the `B` and `C` columns of `g_dbc`
/// `(T, R + 2N)`.
pub(super) fn finish_dots<E: CpuElem>(
    io: &Inputs<'_, E>,
    t0: usize,
    t1: usize,
    dots: &[E],
    tails: &[E],
    g_dbc: &mut [E],
) {
    let (n, r, w) = (io.n, io.r, io.w);
    for t in t0..t1 {
        let i = t - t0;
        let (acc, tl) = (&dots[i * 2 * n * LANES..][..2 * n * LANES], &tails[i * 2 * n..][..2 * n]);
        let lanes = |x: usize| -> [E; LANES] { acc[x * LANES..][..LANES].try_into().expect("a full block") };
        let g_bc = &mut g_dbc[t * w + r..][..2 * n];
        for j in 0..n {
            g_bc[n + j] = fold_lanes(lanes(j), tl[j]);
            g_bc[j] = fold_lanes(lanes(n + j), tl[n + j]);
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
