//! `kernels/mamba2.cu` through the shim against a plain sequential f64 reference of the same
//! formulas (MODEL.md, Mamba-2 steps 4 and 5; BACKWARD.md, "Mamba-2" and the gated RMSNorm),
//! written here from the spec; the reference's analytic gradients are themselves checked by
//! central finite differences. Sizes are awkward on purpose: 2 sequences, T = 13 (not a
//! multiple of Q = 4 or 5), 3 heads of headdim 34, so Di = 102 spans two scan blocks of 64,
//! the second partial, and head 1 straddles them; N = 4 and 16. The norm runs over 26 rows of
//! 102 (a block of 32, uneven columns per thread) and 140 rows of 300 (two row chunks).
//!
//! Tolerances (f32 kernel against f64 reference, both from the same f32 inputs): first-order
//! worst-case rounding bounds `u c mag`, u = 2^-24, where `mag` is the same quantity computed
//! with every term replaced by its absolute value (so cancellation cannot hide an error) and
//! c counts the roundings a term passes through: each decay `exp(dt A)` carries at most
//! `(|dt A| + 3) u` relative error (the product's rounding amplified by |dt A|, glibc's expf
//! within 1 ulp, the fma), a term of the state at step t carries t of them, and every sum adds
//! one rounding per term. Each comparison states its c below; the worst observed
//! `|diff| / bound` is printed.

use crate::common;

use boldcast_cuda::mamba2;
use boldcast_cuda::pool::Pool;
use boldcast_cuda::shim::{GnormBwd, Scan2, ScanIn};
use common::scan::{Bounds, ScanTest};
use common::{check, check_central, f64s, sig, uniform, U32 as U};

const SEQS: usize = 2;
const TIME: usize = 13;
const NH: usize = 3;
const PD: usize = 34;
const DI: usize = NH * PD;

/// The inputs in [`Scan2`]'s order and layouts.
const NAMES: [&str; 6] = ["x", "dt", "A", "B", "C", "D"];

/// Seeded f32 inputs: x, B, C in [-1, 1); dt in [0.01, 0.5) (softplus outputs); A = -exp(A_log),
/// A_log = ln(h + 1) plus noise (MODEL.md's initialisation); D near 1.
fn inputs(seed: u64, n: usize) -> [Vec<f32>; 6] {
    let rows = SEQS * TIME;
    let a_log = uniform(seed + 2, NH, -0.1, 0.1);
    let a = (0..NH).map(|h| -(((h + 1) as f32).ln() + a_log[h]).exp()).collect();
    [
        uniform(seed, rows * DI, -1.0, 1.0),
        uniform(seed + 1, rows * NH, 0.01, 0.5),
        a,
        uniform(seed + 3, rows * n, -1.0, 1.0),
        uniform(seed + 4, rows * n, -1.0, 1.0),
        uniform(seed + 5, NH, 0.5, 1.5),
    ]
}

fn scan_of(v: &[Vec<f32>], n: usize, q: usize) -> Scan2<'_> {
    let (x, dt, a, b, c, d) = (&v[0][..], &v[1][..], &v[2][..], &v[3][..], &v[4][..], &v[5][..]);
    Scan2 { base: ScanIn { seqs: SEQS, time: TIME, di: NH * PD, n, q, x, dt, a, b, c, d }, nh: NH }
}

/// The reference's inputs in f64.
#[derive(Clone)]
struct In {
    n: usize,
    v: [Vec<f64>; 6],
}

impl In {
    fn new(v: &[Vec<f32>], n: usize) -> In {
        In { n, v: core::array::from_fn(|k| f64s(&v[k])) }
    }

    /// Input k at i, by its absolute value in magnitude mode (the decay is positive anyway).
    fn m(&self, abs: bool, k: usize, i: usize) -> f64 {
        if abs {
            self.v[k][i].abs()
        } else {
            self.v[k][i]
        }
    }

    /// MODEL.md step 4 from S = 0, per head: `y` `(seqs, time, di)` and the state row of every
    /// channel after every step `(seqs, time, di, n)`. With `abs`, every term by its magnitude.
    fn forward(&self, abs: bool) -> (Vec<f64>, Vec<f64>) {
        let n = self.n;
        let (mut y, mut hs) = (vec![0.0; SEQS * TIME * DI], vec![0.0; SEQS * TIME * DI * n]);
        for s in 0..SEQS {
            for d in 0..DI {
                let (h, mut st) = (d / PD, vec![0.0f64; n]);
                for t in 0..TIME {
                    let (row, i) = (s * TIME + t, (s * TIME + t) * DI + d);
                    let dt = self.v[1][row * NH + h];
                    let e = (dt * self.v[2][h]).exp();
                    let mut acc = self.m(abs, 5, h) * self.m(abs, 0, i);
                    for j in 0..n {
                        st[j] = e * st[j] + dt * self.m(abs, 0, i) * self.m(abs, 3, row * n + j);
                        acc += st[j] * self.m(abs, 4, row * n + j);
                        hs[i * n + j] = st[j];
                    }
                    y[i] = acc;
                }
            }
        }
        (y, hs)
    }
}

impl In {
    /// BACKWARD.md's Mamba-2 walk for `g = g_y`, over the reference's states `hs`, one lane
    /// (row p of the head's state) at a time: the six gradients in [`NAMES`] order. With
    /// `abs`, every term by its magnitude (`hs` then the forward's magnitudes).
    fn backward(&self, g: &[f64], hs: &[f64], abs: bool) -> [Vec<f64>; 6] {
        let n = self.n;
        let mut r: [Vec<f64>; 6] = core::array::from_fn(|k| vec![0.0; self.v[k].len()]);
        let ab = |v: f64| if abs { v.abs() } else { v };
        for s in 0..SEQS {
            for d in 0..DI {
                let (h, mut carry) = (d / PD, vec![0.0f64; n]);
                for t in (0..TIME).rev() {
                    let (row, i) = (s * TIME + t, (s * TIME + t) * DI + d);
                    let (x, dt, a, gy) = (self.m(abs, 0, i), self.v[1][row * NH + h], self.v[2][h], ab(g[i]));
                    let e = (dt * a).exp();
                    let (mut u, mut q) = (0.0, 0.0);
                    for j in 0..n {
                        let (b, c) = (self.m(abs, 3, row * n + j), self.m(abs, 4, row * n + j));
                        let gg = carry[j] + gy * c;
                        let prev = if t == 0 { 0.0 } else { hs[(i - DI) * n + j] };
                        r[4][row * n + j] += hs[i * n + j] * gy;
                        r[3][row * n + j] += dt * gg * x;
                        u += gg * b;
                        q += gg * e * prev;
                        carry[j] = e * gg;
                    }
                    r[0][i] = self.m(abs, 5, h) * gy + dt * u;
                    r[1][row * NH + h] += x * u + ab(a) * q;
                    r[2][h] += dt * q;
                    r[5][h] += gy * x;
                }
            }
        }
        r
    }
}

/// The Mamba-2 scan under the shared checks.
struct M2;

impl ScanTest for M2 {
    const SEQS: usize = SEQS;
    const TIME: usize = TIME;
    const DI: usize = DI;
    const NAMES: &'static [&'static str] = &NAMES;
    const OUT: &'static str = "scan y";
    type Ref = In;
    fn inputs_mut(r: &mut In) -> &mut [Vec<f64>] {
        &mut r.v
    }
    fn inputs(seed: u64, n: usize) -> Vec<Vec<f32>> {
        inputs(seed, n).into()
    }
    fn reference(v: &[Vec<f32>], n: usize) -> In {
        In::new(v, n)
    }
    fn forward(r: &In, abs: bool) -> (Vec<f64>, Vec<f64>) {
        r.forward(abs)
    }
    fn backward(r: &In, g: &[f64], hs: &[f64], abs: bool) -> Vec<Vec<f64>> {
        r.backward(g, hs, abs).into()
    }
    /// The header's `max |dt A| + 3`.
    fn decay_factor(p: &In) -> f64 {
        let worst = p.v[1].iter().enumerate().map(|(i, dt)| (dt * p.v[2][i % NH]).abs()).fold(0.0, f64::max);
        worst + 3.0
    }
    fn run_forward(v: &[Vec<f32>], n: usize, q: usize) -> (Vec<f32>, Vec<f32>) {
        let s = scan_of(v, n, q);
        let (mut y, mut ckpt) = (vec![f32::NAN; s.base.len()], vec![f32::NAN; s.base.ckpt_len()]);
        mamba2::scan_forward(&s, &mut y, &mut ckpt).unwrap();
        (y, ckpt)
    }
    fn run_backward(v: &[Vec<f32>], n: usize, q: usize, g: &[f32]) -> Vec<Vec<f32>> {
        let (_, ckpt) = Self::run_forward(v, n, q);
        let r = mamba2::scan_backward(&scan_of(v, n, q), g, &ckpt, &Pool::new()).unwrap();
        [r.x, r.dt, r.a, r.b, r.c, r.d].map(|b| b.to_vec()).into()
    }
}

/// Outputs: `c = F (t + 1) + N + 3` (t + 1 decays on the oldest term of the state, the
/// products `dt x`, `(dt x) B`, and the N + 1 terms of `S C + D x`); checkpoints (the state
/// before step t): `c = F t + 2`. Every gradient: `c = F (2T + 2) + T + seqs Pd + Di + N +
/// 16`: a term is a product of at most 2T + 2 decays or decayed states (the carry walks back
/// over up to T decays, the state it meets was built over up to T), and passes through at
/// most T + seqs Pd additions (g_A, g_D: a thread's sum over time, then the sequences'
/// lanes), Di (g_B, g_C over channels: a block's threads, then the blocks), Pd + N (g_dt over
/// a head's lanes of N-term sums) or N (g_x), plus the products' few roundings.
const BOUNDS: Bounds = Bounds { out: 3.0, ckpt: 2.0, adds: |n| TIME + SEQS * PD + DI + n + 16, q: 5 };

// The reference's central differences in f64 (`scan::check_reference`): step `h = 1e-5 max(1,
// |v|)`, so the truncation error (h^2 times third derivatives of order one, times at most the
// Di T terms a shared input touches) and the roundoff (`2^-53 |L| / h`, |L| < 1e3) stay under
// 1e-7; the tolerance 1e-6 (1 + |gradient|) leaves a margin of 10.
crate::scan_tests!(M2, BOUNDS);

/// `(rows, m)` of the norm cases.
const NORM: [(usize, usize); 2] = [(SEQS * TIME, DI), (140, 300)];

/// MODEL.md step 5 in f64: `o` `(rows, m)` and each row's r; with `abs`, `|o|` (r is positive
/// and a sum of squares has no cancellation, so r is its own magnitude).
fn norm_ref(y: &[f64], z: &[f64], w: &[f64], m: usize, abs: bool) -> (Vec<f64>, Vec<f64>) {
    let rows = y.len() / m;
    let v: Vec<f64> = y.iter().zip(z).map(|(y, z)| y * z * sig(*z)).collect();
    let r: Vec<f64> = (0..rows)
        .map(|t| 1.0 / (v[t * m..][..m].iter().map(|v| v * v).sum::<f64>() / m as f64 + 1e-5).sqrt())
        .collect();
    let o = (0..y.len()).map(|i| v[i] * r[i / m] * w[i % m]).map(|o| if abs { o.abs() } else { o }).collect();
    (o, r)
}

/// BACKWARD.md's gated-RMSNorm rule in f64: `(g_y, g_z, g_w)` for `g_o`, with `abs` in
/// magnitude mode (`silu'` keeps `|z|`, as it cancels near z = -1.28).
fn norm_bwd_ref(y: &[f64], z: &[f64], w: &[f64], g: &[f64], m: usize, abs: bool) -> [Vec<f64>; 3] {
    let ab = |v: f64| if abs { v.abs() } else { v };
    let r = norm_ref(y, z, w, m, false).1;
    let (mut gy, mut gz, mut gw) = (vec![0.0; y.len()], vec![0.0; y.len()], vec![0.0; m]);
    for (t, &rt) in r.iter().enumerate() {
        let vr = |i: usize| ab(y[i] * z[i] * sig(z[i])) * rt;
        let c1 = (t * m..(t + 1) * m).map(|i| vr(i) * ab(w[i % m]) * ab(g[i])).sum::<f64>() / m as f64;
        for i in t * m..(t + 1) * m {
            let gv = rt * (ab(w[i % m]) * ab(g[i]) + if abs { vr(i) * c1 } else { -vr(i) * c1 });
            let s = sig(z[i]);
            gy[i] = gv * ab(z[i] * s);
            gz[i] = gv * ab(y[i]) * s * (1.0 + ab(z[i]) * (1.0 - s));
            gw[i % m] += ab(g[i]) * vr(i);
        }
    }
    [gy, gz, gw]
}

fn norm_data(rows: usize, m: usize) -> [Vec<f32>; 4] {
    [
        uniform(50, rows * m, -1.0, 1.0),
        uniform(51, rows * m, -3.0, 3.0),
        uniform(52, m, 0.5, 1.5),
        uniform(53, rows * m, -1.0, 1.0),
    ]
}

/// `c = m / 2 + 17`: the gate `v` carries 6 roundings (the logistic's expf, add, divide, the
/// two products); r's relative error is half that of `mean(v^2) + eps` (2 c_v for the square,
/// at most m additions, the 1/m product, the eps sum) plus the sqrt and division, so
/// `c_v + m / 2 + 3`; `o = v r w` adds two products. Times 1.1.
#[test]
fn gated_norm_forward_matches_the_reference() {
    for (rows, m) in NORM {
        let [y, z, w, _] = norm_data(rows, m);
        let mut o = vec![f32::NAN; rows * m];
        mamba2::gated_norm_forward(&y, &z, rows, m, &w, &mut o).unwrap();
        let (want, _) = norm_ref(&f64s(&y), &f64s(&z), &f64s(&w), m, false);
        let (mag, _) = norm_ref(&f64s(&y), &f64s(&z), &f64s(&w), m, true);
        let bound: Vec<f64> = mag.iter().map(|v| 1.1 * U * (m as f64 / 2.0 + 17.0) * v).collect();
        check(&format!("gated norm o, {rows} x {m}"), &o, &want, &bound);
    }
}

/// The gated norm's backward of `[y, z, w, g_o]` (rows of `m`) through the shim, with a pool
/// of its own.
fn norm_backward([y, z, w, g]: [&[f32]; 4], m: usize, g_yz: (&mut [f32], &mut [f32]), g_w: &mut [f32]) {
    let rows = y.len() / m;
    mamba2::gated_norm_backward(GnormBwd { m, y, z, g_o: g }, rows, w, g_yz, g_w, &Pool::new()).unwrap();
}

/// `g_v`: r twice (`2 (m / 2 + 9)`), `vr` (`m / 2 + 10`), `c1` (m additions and a few
/// products), the difference and product: `c = 2 m + 40` on the magnitude
/// `r (|w g_o| + |vr| mean|vr w g_o|)`; then `g_y` adds silu (6), `g_z` `y silu'(z)` (8): one
/// `c = 2 m + 50`. `g_w`: a term `g_o v r` carries `m / 2 + 18`, then the rows' additions in
/// chunks then chunks in order, and the initial `g_w` one rounding: `c = m / 2 + rows + 20`,
/// plus `2 u |g_w0|`. Times 1.1.
#[test]
fn gated_norm_backward_matches_the_reference() {
    for (rows, m) in NORM {
        let [y, z, w, g] = norm_data(rows, m);
        let (mut gy, mut gz, mut gw) = (vec![f32::NAN; rows * m], vec![f32::NAN; rows * m], uniform(54, m, -1.0, 1.0));
        let gw0 = f64s(&gw);
        norm_backward([&y, &z, &w, &g], m, (&mut gy, &mut gz), &mut gw);
        let (y64, z64, w64, g64) = (f64s(&y), f64s(&z), f64s(&w), f64s(&g));
        let want = norm_bwd_ref(&y64, &z64, &w64, &g64, m, false);
        let mag = norm_bwd_ref(&y64, &z64, &w64, &g64, m, true);
        let cx = 2.0 * m as f64 + 50.0;
        let bx: Vec<f64> = mag[0].iter().map(|v| 1.1 * U * cx * v).collect();
        check(&format!("gated norm g_y, {rows} x {m}"), &gy, &want[0], &bx);
        let bz: Vec<f64> = mag[1].iter().map(|v| 1.1 * U * cx * v).collect();
        check(&format!("gated norm g_z, {rows} x {m}"), &gz, &want[1], &bz);
        let cw = m as f64 / 2.0 + rows as f64 + 20.0;
        let ww: Vec<f64> = want[2].iter().zip(&gw0).map(|(v, s)| v + s).collect();
        let bw: Vec<f64> = mag[2].iter().zip(&gw0).map(|(v, s)| 1.1 * U * (cw * v + 2.0 * s.abs())).collect();
        check(&format!("gated norm g_w, {rows} x {m}"), &gw, &ww, &bw);
    }
}

/// The norm's reference gradients against central differences of `sum o g_o`, on three
/// coordinates of y, z and w (as in [`reference_gradients_match_finite_differences`]).
#[test]
fn gated_norm_reference_gradients_match_finite_differences() {
    let (rows, m) = NORM[0];
    let [y, z, w, g] = norm_data(rows, m);
    let v = [f64s(&y), f64s(&z), f64s(&w)];
    let g64 = f64s(&g);
    let loss = |v: &[Vec<f64>]| -> f64 {
        norm_ref(&v[0], &v[1], &v[2], m, false).0.iter().zip(&g64).map(|(o, g)| o * g).sum()
    };
    let an = norm_bwd_ref(&v[0], &v[1], &v[2], &g64, m, false);
    check_central(&["norm y", "norm z", "norm w"], &v, &an, loss);
}

/// The norm's sums have a fixed order: two runs of forward and backward, the same bits.
#[test]
fn gated_norm_is_bitwise_the_same_from_run_to_run() {
    let (rows, m) = NORM[1];
    let [y, z, w, g] = norm_data(rows, m);
    let run = || -> Vec<u32> {
        let (mut o, mut gy, mut gz, mut gw) =
            (vec![0.0; rows * m], vec![0.0; rows * m], vec![0.0; rows * m], vec![0.0; m]);
        mamba2::gated_norm_forward(&y, &z, rows, m, &w, &mut o).unwrap();
        norm_backward([&y, &z, &w, &g], m, (&mut gy, &mut gz), &mut gw);
        [o, gy, gz, gw].concat().iter().map(|v| v.to_bits()).collect()
    };
    assert_eq!(run(), run());
}

/// Launches the kernels could not run are refused before the shim: N over the local arrays,
/// a grid short of the channels, a short checkpoint buffer, a norm block over 256 threads.
#[test]
fn bad_launches_are_refused() {
    use boldcast_cuda::launch::{Dim3, Launch};
    use boldcast_cuda::shim::{mamba2_gnorm_fwd, mamba2_scan_fwd, SCAN_MAX_N};
    let n = SCAN_MAX_N + 1;
    let v = inputs(1, n);
    let s = scan_of(&v, n, 2);
    let (mut y, mut ckpt) = (vec![0.0; s.base.len()], vec![0.0; s.base.ckpt_len()]);
    assert!(mamba2::scan_forward(&s, &mut y, &mut ckpt).unwrap_err().why.contains("N must be"));
    let v = inputs(1, 4);
    let s = scan_of(&v, 4, 2);
    let (mut y, mut ckpt) = (vec![0.0; s.base.len()], vec![0.0; s.base.ckpt_len()]);
    let short = Launch { grid: Dim3::xy(1, SEQS as u32), block: Dim3::x(64) };
    assert!(mamba2_scan_fwd(short, &s, &mut y, &mut ckpt).unwrap_err().why.contains("expected grid"));
    let mut ckpt = vec![0.0; s.base.ckpt_len() - 1];
    assert!(mamba2::scan_forward(&s, &mut y, &mut ckpt).unwrap_err().why.contains("ckpt"));
    let (y, mut o, mut r) = (vec![0.0; 2 * 1024], vec![0.0; 2 * 1024], vec![0.0; 2]);
    let wide = Launch { grid: Dim3::x(2), block: Dim3::x(512) };
    assert!(mamba2_gnorm_fwd(wide, 1024, &y, &y, &y[..1024], &mut o, &mut r).is_err());
}
