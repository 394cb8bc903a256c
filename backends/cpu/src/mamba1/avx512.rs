//! The selective scan's block loops in AVX-512 intrinsics, for `f32` on x86-64 CPUs with
//! AVX-512 F and VL: [`forward_gated`], [`checkpoints`], [`chunk_forward`], and the full
//! channel blocks of the backward walk ([`back_blocks`]). They compute what the portable loops
//! of [`super::scan`] compute, operation for operation, so the results are the same bits.
//!
//! Why: LLVM vectorizes the portable loops, but keeps scalar work around each vector
//! iteration (bounds checks, pointer reloads, broadcasts of `B_t[j]` and `C_t[j]`), and that
//! work bounds the loops. Here every bound is checked once at entry, `B` and `C` enter as
//! embedded broadcasts (`{1to16}`), and the exponential's `2^k` is one `vscalefps`.
//! BENCHMARKS.md, CPU backend, "The scan loops in AVX-512 intrinsics", times both versions.
//!
//! Bit-exactness: every product, sum and fused multiply-add of the portable loops appears here
//! in the same order with the same operands. `vscalefps(p, k)` is `p 2^k` rounded once, as the
//! portable `p * 2^k` (its `2^k` is exact, `k` in `[-126, 0]`), so [`exp_nonpos`] returns the
//! bits of [`crate::ops::fastmath::exp_nonpos`]. A last partial block of channels runs in the
//! same code with masked loads and stores, except in the backward: there the `B` and `C`
//! gradients of a partial block are scalar sums in channel order, which lanes cannot
//! reproduce, so [`back_blocks`] leaves those channels to the portable code. The tests at the
//! bottom compare every kernel with the portable one bit for bit.

use super::scan::{Back, Group, Inputs};
use std::arch::x86_64::*;

/// Lanes per vector.
const L: usize = 16;

/// The mask of the first `w` lanes (`w <= 16`).
#[inline(always)]
fn lanes_mask(w: usize) -> __mmask16 {
    ((1u32 << w.min(L)) - 1) as __mmask16
}

/// Loads 16 lanes from `p`; with `MASKED`, only the lanes of `m` (the others zero). A block
/// function is compiled once per value of `MASKED`, so a full block has plain loads.
///
/// # Safety
/// The lanes loaded must be readable from `p`.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn ld<const MASKED: bool>(m: __mmask16, p: *const f32) -> __m512 {
    if MASKED {
        _mm512_maskz_loadu_ps(m, p)
    } else {
        _mm512_loadu_ps(p)
    }
}

/// Stores the 16 lanes of `v` to `p`; with `MASKED`, only the lanes of `m`.
///
/// # Safety
/// The lanes stored must be writable at `p`.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn st<const MASKED: bool>(m: __mmask16, p: *mut f32, v: __m512) {
    if MASKED {
        _mm512_mask_storeu_ps(p, m, v)
    } else {
        _mm512_storeu_ps(p, v)
    }
}

/// [`crate::ops::fastmath::exp_nonpos`] on 16 lanes, the same operations: `k = round(x log2
/// e)` by adding `1.5 2^23`, `r = x - k ln 2` in two parts, the degree-6 polynomial, then
/// `2^k` applied by `vscalefps`; lanes below the smallest normal's logarithm give 0, NaN
/// propagates (the comparison is true for unordered lanes). The portable version clamps `x`
/// before forming `k`; a clamped lane is discarded by the final select either way, so no
/// clamp is needed here, and the lanes kept see the same values.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn exp_nonpos(x: __m512) -> __m512 {
    const ROUND: f32 = 12_582_912.0;
    let keep = _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(x, _mm512_set1_ps(-87.336_55));
    let t = _mm512_fmadd_ps(x, _mm512_set1_ps(std::f32::consts::LOG2_E), _mm512_set1_ps(ROUND));
    let k = _mm512_sub_ps(t, _mm512_set1_ps(ROUND));
    let r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693_359_4), x);
    let r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.121_944_4e-4), r);
    let p = _mm512_fmadd_ps(_mm512_set1_ps(1.0 / 720.0), r, _mm512_set1_ps(0.008_375_039));
    let p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0 / 24.0));
    let p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.166_664_17));
    let p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5));
    let p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0));
    let p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0));
    _mm512_maskz_scalef_ps(keep, p, k)
}

/// The state step of [`super::scan`]: `e = exp(dt a)`, `h' = e h + (dt x) B` (one fused
/// multiply-add), with `B` broadcast from memory.
///
/// # Safety
/// `b` must be readable.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn state_step(dt: __m512, a: __m512, h: __m512, dx: __m512, b: *const f32) -> (__m512, __m512) {
    let e = exp_nonpos(_mm512_mul_ps(dt, a));
    (e, _mm512_fmadd_ps(e, h, _mm512_mul_ps(dx, _mm512_set1_ps(*b))))
}

/// Panics unless every row the scan reads for `T` steps lies inside `io`'s slices.
fn check_inputs(io: &Inputs<'_, f32>) -> usize {
    let (di, n, t) = (io.di, io.n, io.time());
    assert!(io.at.len() >= n * di && io.d_skip.len() >= di, "scan: A or D shorter than ({n}, {di})");
    assert!(io.xs.len() >= t * di && io.dx.len() >= t * di, "scan: x or dt x shorter than ({t}, {di})");
    assert!(io.r + 2 * n <= io.w && io.dbc.len() >= t * io.w, "scan: dbc shorter than ({t}, {})", io.w);
    t
}

/// Where one step's rows are: the `(T, Di)` inputs at `row`, `B_t` at `bt` and `C_t` after
/// it, and the sizes.
#[derive(Copy, Clone)]
struct Step {
    dt: *const f32,
    dx: *const f32,
    xs: *const f32,
    d_skip: *const f32,
    at: *const f32,
    bt: *const f32,
    ct: *const f32,
    di: usize,
    n: usize,
}

impl Step {
    /// Step `t` of `io`.
    ///
    /// # Safety
    /// `t` must be below the number of steps that [`check_inputs`] bounded.
    unsafe fn at(io: &Inputs<'_, f32>, t: usize) -> Self {
        let (di, row) = (io.di, t * io.di);
        let bt = io.dbc.as_ptr().add(t * io.w + io.r);
        Self {
            dt: io.dt.as_ptr().add(row),
            dx: io.dx.as_ptr().add(row),
            xs: io.xs.as_ptr().add(row),
            d_skip: io.d_skip.as_ptr(),
            at: io.at.as_ptr(),
            bt,
            ct: bt.add(io.n),
            di,
            n: io.n,
        }
    }
}

/// One block of 16 channels from `c` of one forward step: the states `h` (row stride Di)
/// advance in place; returns `C_t h_t + D x_t`.
///
/// # Safety
/// The block's lanes (all 16, or those of `m` with `MASKED`) must lie inside the step's rows.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn forward_block<const MASKED: bool>(s: Step, c: usize, m: __mmask16, h: *mut f32) -> __m512 {
    let (dtc, dxc) = (ld::<MASKED>(m, s.dt.add(c)), ld::<MASKED>(m, s.dx.add(c)));
    let mut yv = _mm512_mul_ps(ld::<MASKED>(m, s.d_skip.add(c)), ld::<MASKED>(m, s.xs.add(c)));
    for j in 0..s.n {
        let hp = h.add(j * s.di + c);
        let a = ld::<MASKED>(m, s.at.add(j * s.di + c));
        let (_, v) = state_step(dtc, a, ld::<MASKED>(m, hp), dxc, s.bt.add(j));
        st::<MASKED>(m, hp, v);
        yv = _mm512_fmadd_ps(_mm512_set1_ps(*s.ct.add(j)), v, yv);
    }
    yv
}

/// [`super::scan::forward_gated`] without its `B`/`C` table (embedded broadcasts need none).
///
/// # Safety
/// The CPU must have AVX-512 F and VL, AVX2 and FMA.
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
pub(super) unsafe fn forward_gated(
    io: &Inputs<'_, f32>,
    gate: &[f32],
    h: &mut [f32],
    out: &mut [f32],
    q: usize,
    ckpt: &mut [f32],
) {
    let di = io.di;
    let tl = check_inputs(io);
    let s = di * io.n;
    assert!(gate.len() >= tl * di && out.len() >= tl * di && h.len() >= s, "scan: gate, out or h too short");
    assert!(ckpt.is_empty() || (q > 0 && ckpt.len() >= tl.div_ceil(q) * s), "scan: checkpoints too short");
    let h = &mut h[..s];
    h.fill(0.0);
    let full = di / L * L;
    for t in 0..tl {
        if !ckpt.is_empty() && t % q == 0 {
            ckpt[(t / q) * s..][..s].copy_from_slice(h);
        }
        let row = t * di;
        // SAFETY: `t < T`, bounded by `check_inputs`, as are `gate` and `out`; `h` is
        // `(N, Di)`; a masked block touches only its lanes below `di`.
        let st_ = Step::at(io, t);
        let (g, y) = (gate.as_ptr().add(row), out.as_mut_ptr().add(row));
        for c in (0..full).step_by(L) {
            let yv = forward_block::<false>(st_, c, 0, h.as_mut_ptr());
            _mm512_storeu_ps(y.add(c), _mm512_mul_ps(yv, _mm512_loadu_ps(g.add(c))));
        }
        if full < di {
            let m = lanes_mask(di - full);
            let yv = forward_block::<true>(st_, full, m, h.as_mut_ptr());
            _mm512_mask_storeu_ps(y.add(full), m, _mm512_mul_ps(yv, _mm512_maskz_loadu_ps(m, g.add(full))));
        }
    }
}

/// One block of 16 channels from `c` of one step of the states alone, in place in `h`.
///
/// # Safety
/// As [`forward_block`].
#[inline]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn state_block<const MASKED: bool>(s: Step, c: usize, m: __mmask16, h: *mut f32) {
    let (dtc, dxc) = (ld::<MASKED>(m, s.dt.add(c)), ld::<MASKED>(m, s.dx.add(c)));
    for j in 0..s.n {
        let hp = h.add(j * s.di + c);
        let a = ld::<MASKED>(m, s.at.add(j * s.di + c));
        let (_, v) = state_step(dtc, a, ld::<MASKED>(m, hp), dxc, s.bt.add(j));
        st::<MASKED>(m, hp, v);
    }
}

/// [`super::scan::checkpoints`].
///
/// # Safety
/// As [`forward_gated`].
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
pub(super) unsafe fn checkpoints(io: &Inputs<'_, f32>, q: usize, h: &mut [f32], ckpt: &mut [f32]) {
    let di = io.di;
    let tl = check_inputs(io);
    let s = di * io.n;
    assert!(h.len() >= s && q > 0 && ckpt.len() >= tl.div_ceil(q) * s, "scan: h or checkpoints too short");
    let h = &mut h[..s];
    h.fill(0.0);
    let full = di / L * L;
    for t in 0..tl {
        if t % q == 0 {
            ckpt[(t / q) * s..][..s].copy_from_slice(h);
        }
        // SAFETY: as in `forward_gated`.
        let st_ = Step::at(io, t);
        for c in (0..full).step_by(L) {
            state_block::<false>(st_, c, 0, h.as_mut_ptr());
        }
        if full < di {
            state_block::<true>(st_, full, lanes_mask(di - full), h.as_mut_ptr());
        }
    }
}

/// Where one step of a chunk's group reads its previous states and writes its states and
/// decays: `prev` with row stride `ps`, `cur` and `dec` with row stride `gw`, each at the
/// group's first channel `c0`.
#[derive(Copy, Clone)]
struct GroupStep {
    prev: *const f32,
    ps: usize,
    cur: *mut f32,
    dec: *mut f32,
    gw: usize,
    c0: usize,
}

/// One block of 16 channels from `c` of one recomputed step: states and decays stored,
/// returns `C_t h_t + D x_t`.
///
/// # Safety
/// As [`forward_block`], and the block's lanes must lie inside the group's rows.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn chunk_block<const MASKED: bool>(s: Step, g: GroupStep, c: usize, m: __mmask16) -> __m512 {
    let o = c - g.c0;
    let (dtc, dxc) = (ld::<MASKED>(m, s.dt.add(c)), ld::<MASKED>(m, s.dx.add(c)));
    let mut yv = _mm512_mul_ps(ld::<MASKED>(m, s.d_skip.add(c)), ld::<MASKED>(m, s.xs.add(c)));
    for j in 0..s.n {
        let a = ld::<MASKED>(m, s.at.add(j * s.di + c));
        let (e, v) = state_step(dtc, a, ld::<MASKED>(m, g.prev.add(j * g.ps + o)), dxc, s.bt.add(j));
        st::<MASKED>(m, g.dec.add(j * g.gw + o), e);
        st::<MASKED>(m, g.cur.add(j * g.gw + o), v);
        yv = _mm512_fmadd_ps(_mm512_set1_ps(*s.ct.add(j)), v, yv);
    }
    yv
}

/// [`super::scan::chunk_forward`]: `c0` a multiple of 16.
///
/// # Safety
/// As [`forward_gated`].
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
pub(super) unsafe fn chunk_forward(
    io: &Inputs<'_, f32>,
    grp: &Group<'_, f32>,
    t1: usize,
    hs: &mut [f32],
    decs: &mut [f32],
    y: &mut [f32],
) {
    let Group { t0, c0, c1, h0 } = *grp;
    let (di, n) = (io.di, io.n);
    let tl = check_inputs(io);
    let (gw, s) = (c1 - c0, di * n);
    let (sg, full) = (n * gw, c0 + gw / L * L);
    assert!(
        c0.is_multiple_of(L) && c1 <= di && t0 <= t1 && t1 <= tl,
        "scan: block ({t0}..{t1}, {c0}..{c1}) out of range"
    );
    assert!(h0.len() >= s && y.len() >= tl * di, "scan: h0 or y too short");
    assert!(hs.len() >= (t1 - t0) * sg && decs.len() >= (t1 - t0) * sg, "scan: chunk buffers too short");
    for t in t0..t1 {
        let i = t - t0;
        // SAFETY: the previous states are `h0` (`(N, Di)`, its channels `c0..c1`) or the
        // group's states of step `i - 1` (`(N, gw)`), both bounded above, as are the chunk's
        // rows `i` of `hs` and `decs` and the step's rows of the inputs and of `y`.
        let (prev, ps) = if i == 0 { (h0.as_ptr().add(c0), di) } else { (hs.as_ptr().add((i - 1) * sg), gw) };
        let g = GroupStep { prev, ps, cur: hs.as_mut_ptr().add(i * sg), dec: decs.as_mut_ptr().add(i * sg), gw, c0 };
        let (st_, yr) = (Step::at(io, t), y.as_mut_ptr().add(t * di));
        for c in (c0..full).step_by(L) {
            _mm512_storeu_ps(yr.add(c), chunk_block::<false>(st_, g, c, 0));
        }
        if full < c1 {
            let m = lanes_mask(c1 - full);
            _mm512_mask_storeu_ps(yr.add(full), m, chunk_block::<true>(st_, g, full, m));
        }
    }
}

/// The full 16-channel blocks of [`super::scan::back_steps`] over steps `t1 - 1` down to `lo`
/// and channels `c0..c0 + 16 * blocks`, with each step's per-channel end
/// ([`super::scan`]'s `finish_step`) for those channels, done in registers. `b.gxs_row` and
/// `b.gdt_row` are not used. The channels of a last partial block are left to the caller.
///
/// The carries and `A` gradients stay in memory across the steps: keeping them in registers
/// needs more pointers than the general registers hold, and the spills cost more than the
/// loads they save (BENCHMARKS.md, CPU backend, has the timing).
///
/// # Safety
/// As [`forward_gated`].
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
pub(super) unsafe fn back_blocks(
    io: &Inputs<'_, f32>,
    grp: &Group<'_, f32>,
    steps: std::ops::Range<usize>,
    hs: &[f32],
    decs: &[f32],
    g_y: &[f32],
    b: &mut Back<'_, f32>,
) {
    let Group { t0, c0, c1, h0 } = *grp;
    let (lo, t1) = (steps.start, steps.end);
    let (di, n, r, w) = (io.di, io.n, io.r, io.w);
    let tl = check_inputs(io);
    let (gw, s) = (c1 - c0, di * n);
    let (sg, full) = (n * gw, c0 + gw / L * L);
    let q = t1 - t0;
    assert!(
        c0.is_multiple_of(L) && c1 <= di && t0 <= lo && lo <= t1 && t1 <= tl,
        "scan: block ({lo}..{t1}, {c0}..{c1}) out of range"
    );
    assert!(
        h0.len() >= s && g_y.len() >= tl * di && hs.len() >= q * sg && decs.len() >= q * sg,
        "scan: inputs too short"
    );
    assert!(b.carry.len() >= s && b.g_a.len() >= s && b.g_d.len() >= di, "scan: carry, g_A or g_D too short");
    assert!(b.g_xs.len() >= tl * di && b.g_dt.len() >= tl * di, "scan: g_x or g_dt too short");
    assert!(b.dots.len() >= q * 2 * n * L, "scan: dot accumulators too short");
    let (carry, g_a, g_d, dots) = (b.carry.as_mut_ptr(), b.g_a.as_mut_ptr(), b.g_d.as_mut_ptr(), b.dots.as_mut_ptr());
    for t in (lo..t1).rev() {
        let i = t - t0;
        let row = t * di;
        // SAFETY: every pointer below stays within a slice bounded above: the step's rows of
        // the `(T, Di)` arrays, `A`, `carry` and `g_A` `(N, Di)`, the group's states and
        // decays of steps `i` and `i - 1` (or `h0`), and the step's accumulators in `dots`.
        let (h_t, dec) = (hs.as_ptr().add(i * sg), decs.as_ptr().add(i * sg));
        let (prev, ps) = if i == 0 { (h0.as_ptr().add(c0), di) } else { (hs.as_ptr().add((i - 1) * sg), gw) };
        let bt = io.dbc.as_ptr().add(t * w + r);
        let ct = bt.add(n);
        let (acc_c, acc_b) = (dots.add(i * 2 * n * L), dots.add(i * 2 * n * L + n * L));
        for c in (c0..full).step_by(L) {
            let o = c - c0;
            let gc = _mm512_loadu_ps(g_y.as_ptr().add(row + c));
            let dtc = _mm512_loadu_ps(io.dt.as_ptr().add(row + c));
            let dxc = _mm512_loadu_ps(io.dx.as_ptr().add(row + c));
            let (mut sx, mut sd) = (_mm512_setzero_ps(), _mm512_setzero_ps());
            for j in 0..n {
                let at = j * di + c;
                let (cr, ga) = (carry.add(at), g_a.add(at));
                let (ac, ab) = (acc_c.add(j * L), acc_b.add(j * L));
                let ej = _mm512_loadu_ps(dec.add(j * gw + o));
                let gg = _mm512_fmadd_ps(gc, _mm512_set1_ps(*ct.add(j)), _mm512_loadu_ps(cr));
                sx = _mm512_fmadd_ps(gg, _mm512_set1_ps(*bt.add(j)), sx);
                let qv = _mm512_mul_ps(gg, _mm512_mul_ps(ej, _mm512_loadu_ps(prev.add(j * ps + o))));
                sd = _mm512_fmadd_ps(qv, _mm512_loadu_ps(io.at.as_ptr().add(at)), sd);
                _mm512_storeu_ps(ga, _mm512_fmadd_ps(qv, dtc, _mm512_loadu_ps(ga)));
                _mm512_storeu_ps(cr, _mm512_mul_ps(ej, gg));
                _mm512_storeu_ps(ac, _mm512_fmadd_ps(gc, _mm512_loadu_ps(h_t.add(j * gw + o)), _mm512_loadu_ps(ac)));
                _mm512_storeu_ps(ab, _mm512_fmadd_ps(gg, dxc, _mm512_loadu_ps(ab)));
            }
            // `finish_step` for these channels: g_x = D g + dt sx, g_dt = x sx + sd, g_D += g x.
            let xsc = _mm512_loadu_ps(io.xs.as_ptr().add(row + c));
            let dsk = _mm512_loadu_ps(io.d_skip.as_ptr().add(c));
            _mm512_storeu_ps(b.g_xs.as_mut_ptr().add(row + c), _mm512_fmadd_ps(dsk, gc, _mm512_mul_ps(dtc, sx)));
            _mm512_storeu_ps(b.g_dt.as_mut_ptr().add(row + c), _mm512_fmadd_ps(xsc, sx, sd));
            _mm512_storeu_ps(g_d.add(c), _mm512_fmadd_ps(gc, xsc, _mm512_loadu_ps(g_d.add(c))));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::scan::{self, Back, Inputs};
    use crate::ops::simd::{level, Level, LANES};

    /// Whether these loops can run here (and the scan's dispatch takes them).
    fn available() -> bool {
        let ok = level() == Level::Avx512;
        if !ok {
            eprintln!("no AVX-512 on this CPU (or BOLDCAST_SIMD asks for less): the loops under test never run here");
        }
        ok
    }

    /// Deterministic values in `[lo, hi)`.
    fn values(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(3_037_000_493);
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                lo + ((s >> 40) as f32 / (1u64 << 24) as f32) * (hi - lo)
            })
            .collect()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// A scan's inputs: `di` channels (37 leaves a partial block and a short group), some
    /// time steps large enough that `dt A` falls below the exponential's cut-off (its masked
    /// lanes), and `A` uneven across channels.
    struct Data {
        di: usize,
        n: usize,
        r: usize,
        w: usize,
        at: Vec<f32>,
        d_skip: Vec<f32>,
        dt: Vec<f32>,
        xs: Vec<f32>,
        dx: Vec<f32>,
        dbc: Vec<f32>,
        gate: Vec<f32>,
        g_y: Vec<f32>,
    }

    impl Data {
        fn new(di: usize, n: usize, t: usize, seed: u64) -> Self {
            let (r, w) = (3, 3 + 2 * n);
            let mut dt = values(t * di, seed + 1, 0.0, 0.6);
            for (i, v) in dt.iter_mut().enumerate() {
                if i % 53 == 7 {
                    *v = 40.0; // dt A well below ln(f32::MIN_POSITIVE)
                }
            }
            let xs = values(t * di, seed + 2, -1.5, 1.5);
            let dx = dt.iter().zip(&xs).map(|(a, b)| a * b).collect();
            Self {
                di,
                n,
                r,
                w,
                at: values(n * di, seed + 3, -4.0, -0.05),
                d_skip: values(di, seed + 4, 0.5, 1.5),
                dt,
                xs,
                dx,
                dbc: values(t * w, seed + 5, -1.0, 1.0),
                gate: values(t * di, seed + 6, -1.0, 1.0),
                g_y: values(t * di, seed + 7, -1.0, 1.0),
            }
        }

        fn inputs(&self) -> Inputs<'_, f32> {
            Inputs {
                di: self.di,
                n: self.n,
                r: self.r,
                w: self.w,
                at: &self.at,
                d_skip: &self.d_skip,
                dt: &self.dt,
                xs: &self.xs,
                dx: &self.dx,
                dbc: &self.dbc,
            }
        }
    }

    #[test]
    fn exp_is_the_portable_exp_bit_for_bit() {
        if !available() {
            return;
        }
        let mut xs: Vec<f32> = (0..=400_000).map(|i| -(i as f32) * 2.3e-4).collect();
        xs.extend([0.0, -0.0, -1e-30, -87.336_55, -87.336_56, -87.4, -103.0, -104.0, -1e6, -1e30]);
        xs.extend([f32::NEG_INFINITY, f32::NAN, -f32::MIN_POSITIVE]);
        while !xs.len().is_multiple_of(16) {
            xs.push(-1.0);
        }
        for chunk in xs.chunks_exact(16) {
            let mut got = [0f32; 16];
            // SAFETY: `available()` checked the CPU; 16 values in and out.
            unsafe {
                std::arch::x86_64::_mm512_storeu_ps(
                    got.as_mut_ptr(),
                    super::exp_nonpos(std::arch::x86_64::_mm512_loadu_ps(chunk.as_ptr())),
                )
            };
            for (&x, &g) in chunk.iter().zip(&got) {
                let want = crate::ops::fastmath::exp_nonpos(x);
                assert!(g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()), "exp({x}): {g} against {want}");
            }
        }
    }

    #[test]
    fn forward_and_checkpoints_are_the_portable_bits() {
        if !available() {
            return;
        }
        for (di, n, t, q) in [(37, 5, 21, 4), (128, 16, 24, 8), (16, 3, 9, 9), (5, 2, 7, 2)] {
            let d = Data::new(di, n, t, di as u64);
            let io = d.inputs();
            let (s, nc) = (di * n, t.div_ceil(q));
            let (mut h, mut bc) = (vec![0f32; s], vec![0f32; 2 * n * LANES]);
            let (mut out, mut ck) = (vec![0f32; t * di], vec![0f32; nc * s]);
            let (mut out2, mut ck2) = (vec![0f32; t * di], vec![0f32; nc * s]);
            // SAFETY: `available()` checked the CPU.
            unsafe { super::forward_gated(&io, &d.gate, &mut h, &mut out, q, &mut ck) };
            scan::forward_gated_portable(&io, &d.gate, &mut h, &mut bc, &mut out2, q, &mut ck2);
            assert_eq!(bits(&out), bits(&out2), "forward output, di {di}");
            assert_eq!(bits(&ck), bits(&ck2), "forward checkpoints, di {di}");
            assert!(out.iter().all(|v| v.is_finite()) && out.iter().any(|&v| v != 0.0));
            let mut ck3 = vec![0f32; nc * s];
            // SAFETY: as above.
            unsafe { super::checkpoints(&io, q, &mut h, &mut ck3) };
            assert_eq!(bits(&ck3), bits(&ck2), "checkpoint pass, di {di}");
        }
    }

    /// Every output of a sequence's chunked backward (recomputation, walk, dot products), as
    /// `seq::backward` drives it, through the dispatching kernels or the portable ones.
    fn backward(d: &Data, t: usize, q: usize, portable: bool) -> Vec<Vec<u32>> {
        let io = d.inputs();
        let (di, n) = (d.di, d.n);
        let s = di * n;
        let (mut h, mut ck) = (vec![0f32; s], vec![0f32; t.div_ceil(q) * s]);
        scan::checkpoints_portable(&io, q, &mut h, &mut ck);
        let gmax = scan::GROUP.min(di);
        let (mut hs, mut decs, mut y) = (vec![0f32; q * n * gmax], vec![0f32; q * n * gmax], vec![0f32; t * di]);
        let (mut carry, mut gxs_row, mut gdt_row) = (vec![0f32; s], vec![0f32; di], vec![0f32; di]);
        let (mut g_xs, mut g_dt, mut g_a, mut g_d) =
            (vec![0f32; t * di], vec![0f32; t * di], vec![0f32; s], vec![0f32; di]);
        let (mut dots, mut tails, mut g_dbc) =
            (vec![0f32; q * 2 * n * LANES], vec![0f32; q * 2 * n], vec![0f32; t * d.w]);
        for c in (0..t.div_ceil(q)).rev() {
            let (t0, t1) = (c * q, (c * q + q).min(t));
            let h0 = &ck[c * s..][..s];
            dots.fill(0.0);
            tails.fill(0.0);
            for (c0, c1) in scan::groups(di) {
                let grp = scan::Group { t0, c0, c1, h0 };
                if portable {
                    scan::chunk_forward_portable(&io, &grp, t1, &mut hs, &mut decs, &mut y);
                } else {
                    scan::chunk_forward(&io, &grp, t1, &mut hs, &mut decs, &mut y);
                }
                // Two walks per chunk where it is long enough, as the flushes split them.
                let mid = (t0 + t1) / 2;
                for (lo, hi) in [(mid, t1), (t0, mid)] {
                    let mut b = Back {
                        carry: &mut carry,
                        gxs_row: &mut gxs_row,
                        gdt_row: &mut gdt_row,
                        g_xs: &mut g_xs,
                        g_dt: &mut g_dt,
                        g_a: &mut g_a,
                        g_d: &mut g_d,
                        dots: &mut dots,
                        tails: &mut tails,
                    };
                    if portable {
                        scan::back_steps_portable(&io, &grp, lo..hi, &hs, &decs, &d.g_y, &mut b);
                    } else {
                        scan::back_steps(&io, &grp, lo..hi, &hs, &decs, &d.g_y, &mut b);
                    }
                }
            }
            scan::finish_dots(&io, t0, t1, &dots, &tails, &mut g_dbc);
        }
        [y, g_xs, g_dt, g_a, g_d, g_dbc, carry].iter().map(|v| bits(v)).collect()
    }

    #[test]
    fn backward_is_the_portable_bits() {
        if !available() {
            return;
        }
        for (di, n, t, q) in [(37, 5, 21, 4), (128, 16, 24, 8), (48, 4, 10, 10), (5, 2, 7, 2)] {
            let d = Data::new(di, n, t, 100 + di as u64);
            let (fast, slow) = (backward(&d, t, q, false), backward(&d, t, q, true));
            for (k, name) in ["y", "g_x", "g_dt", "g_A", "g_D", "g_dbc", "carry"].iter().enumerate() {
                assert_eq!(fast[k], slow[k], "{name}, di {di}, n {n}");
                assert!(fast[k].iter().any(|&b| b != 0), "{name} is all zero, di {di}");
            }
        }
    }
}
