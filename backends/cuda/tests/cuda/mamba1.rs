//! `kernels/mamba1.cu` through the shim against a plain sequential f64 reference of the same
//! formulas (MODEL.md, Mamba-1 steps 2 and 6; BACKWARD.md, the convolution and "Mamba-1"),
//! written here from the spec; the reference's analytic gradients are themselves checked by
//! central finite differences. Sizes are awkward on purpose: 2 sequences, T = 13 (not a
//! multiple of Q = 4 or 5), d_inner 100 (two scan blocks of 64, the second partial), N = 4
//! and 16.
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

use boldcast_cuda::mamba1;
use boldcast_cuda::pool::Pool;
use boldcast_cuda::shim::{ConvDims, Scan, ScanIn};
use common::scan::{Bounds, ScanTest};
use common::{check, check_central, f64s, sig, uniform, U32 as U};

/// The scan's inputs in f64, `(seqs, time, di)` etc. as [`Scan`]'s.
#[derive(Clone)]
struct In {
    seqs: usize,
    time: usize,
    di: usize,
    n: usize,
    /// x, dt, A, B, C, D, z.
    v: [Vec<f64>; 7],
}

const NAMES: [&str; 7] = ["x", "dt", "A", "B", "C", "D", "z"];

/// Seeded f32 inputs: x, B, C in [-1, 1); dt in [0.01, 0.5) (softplus outputs); A = -exp(A_log),
/// A_log = ln(n + 1) plus noise (MODEL.md's initialisation), so |dt A| < 9; D near 1; z in [-2, 2).
fn inputs(seed: u64, seqs: usize, time: usize, di: usize, n: usize) -> [Vec<f32>; 7] {
    let len = seqs * time * di;
    let a_log = uniform(seed + 2, di * n, -0.1, 0.1);
    let a = (0..di * n).map(|i| -((((i % n) + 1) as f32).ln() + a_log[i]).exp()).collect();
    [
        uniform(seed, len, -1.0, 1.0),
        uniform(seed + 1, len, 0.01, 0.5),
        a,
        uniform(seed + 3, seqs * time * n, -1.0, 1.0),
        uniform(seed + 4, seqs * time * n, -1.0, 1.0),
        uniform(seed + 5, di, 0.5, 1.5),
        uniform(seed + 6, len, -2.0, 2.0),
    ]
}

fn scan_of<'a>(v: &'a [Vec<f32>], seqs: usize, time: usize, di: usize, n: usize, q: usize) -> Scan<'a> {
    let base = ScanIn { seqs, time, di, n, q, x: &v[0], dt: &v[1], a: &v[2], b: &v[3], c: &v[4], d: &v[5] };
    Scan { base, z: &v[6] }
}

impl In {
    fn new(v: &[Vec<f32>], seqs: usize, time: usize, di: usize, n: usize) -> In {
        In { seqs, time, di, n, v: core::array::from_fn(|k| f64s(&v[k])) }
    }

    /// `|v|` in magnitude mode (the decay `exp(dt A)` is positive either way).
    fn m(&self, abs: bool, k: usize, i: usize) -> f64 {
        if abs {
            self.v[k][i].abs()
        } else {
            self.v[k][i]
        }
    }

    /// The scan from h = 0: the gated outputs `(seqs, time, di)` and the state after every
    /// step `(seqs, time, di, n)`. With `abs`, every term by its absolute value.
    fn forward(&self, abs: bool) -> (Vec<f64>, Vec<f64>) {
        let (time, di, n) = (self.time, self.di, self.n);
        let mut out = vec![0.0; self.seqs * time * di];
        let mut hs = vec![0.0; self.seqs * time * di * n];
        for s in 0..self.seqs {
            for d in 0..di {
                let mut h = vec![0.0f64; n];
                for t in 0..time {
                    let (row, i) = (s * time + t, (s * time + t) * di + d);
                    let mut y = self.m(abs, 5, d) * self.m(abs, 0, i);
                    for j in 0..n {
                        let e = (self.v[1][i] * self.v[2][d * n + j]).exp();
                        h[j] = e * h[j] + self.m(abs, 1, i) * self.m(abs, 3, row * n + j) * self.m(abs, 0, i);
                        y += self.m(abs, 4, row * n + j) * h[j];
                        hs[i * n + j] = h[j];
                    }
                    let z = self.v[6][i];
                    out[i] = y * if abs { (z * sig(z)).abs() } else { z * sig(z) };
                }
            }
        }
        (out, hs)
    }
}

impl In {
    /// BACKWARD.md's Mamba-1 walk for the gated output's gradient `g`, over the reference's
    /// states `hs`: the gradients of x, dt, A, B, C, D, z (in [`NAMES`] order). With `abs`,
    /// every term by its absolute value (`hs` then the forward's magnitudes).
    fn backward(&self, g: &[f64], hs: &[f64], abs: bool) -> [Vec<f64>; 7] {
        let (time, di, n) = (self.time, self.di, self.n);
        let mut r: [Vec<f64>; 7] = core::array::from_fn(|k| vec![0.0; self.v[k].len()]);
        let ab = |v: f64| if abs { v.abs() } else { v };
        for s in 0..self.seqs {
            for d in 0..di {
                let mut carry = vec![0.0f64; n];
                for t in (0..time).rev() {
                    let (row, i) = (s * time + t, (s * time + t) * di + d);
                    let (x, dt, z) = (self.m(abs, 0, i), self.v[1][i], self.v[6][i]);
                    let mut y = self.m(abs, 5, d) * x;
                    for j in 0..n {
                        y += self.m(abs, 4, row * n + j) * hs[i * n + j];
                    }
                    let sz = sig(z);
                    let gy = ab(g[i]) * ab(z * sz);
                    // silu'(z) = s (1 + z (1 - s)) cancels near z = -1.28: its magnitude keeps |z|.
                    let dsilu = if abs { sz * (1.0 + z.abs() * (1.0 - sz)) } else { sz * (1.0 + z * (1.0 - sz)) };
                    r[6][i] = ab(g[i]) * y * dsilu;
                    let (mut sx, mut sd) = (0.0, 0.0);
                    for j in 0..n {
                        let (a, b, c) =
                            (self.v[2][d * n + j], self.m(abs, 3, row * n + j), self.m(abs, 4, row * n + j));
                        let e = (dt * a).exp();
                        let prev = if t == 0 { 0.0 } else { hs[(i - di) * n + j] };
                        let gg = gy * c + carry[j];
                        let qv = gg * e * prev;
                        sx += gg * b;
                        sd += qv * ab(a);
                        r[2][d * n + j] += qv * dt;
                        carry[j] = e * gg;
                        r[4][row * n + j] += gy * hs[i * n + j];
                        r[3][row * n + j] += gg * dt * x;
                    }
                    r[0][i] = self.m(abs, 5, d) * gy + dt * sx;
                    r[1][i] = x * sx + sd;
                    r[5][d] += gy * x;
                }
            }
        }
        r
    }
}

const SEQS: usize = 2;
const TIME: usize = 13;
const DI: usize = 100;

/// The Mamba-1 scan under the shared checks.
struct M1;

impl ScanTest for M1 {
    const SEQS: usize = SEQS;
    const TIME: usize = TIME;
    const DI: usize = DI;
    const NAMES: &'static [&'static str] = &NAMES;
    const OUT: &'static str = "scan out";
    type Ref = In;
    fn inputs_mut(r: &mut In) -> &mut [Vec<f64>] {
        &mut r.v
    }
    fn inputs(seed: u64, n: usize) -> Vec<Vec<f32>> {
        inputs(seed, SEQS, TIME, DI, n).into()
    }
    fn reference(v: &[Vec<f32>], n: usize) -> In {
        In::new(v, SEQS, TIME, DI, n)
    }
    fn forward(r: &In, abs: bool) -> (Vec<f64>, Vec<f64>) {
        r.forward(abs)
    }
    fn backward(r: &In, g: &[f64], hs: &[f64], abs: bool) -> Vec<Vec<f64>> {
        r.backward(g, hs, abs).into()
    }
    /// The header's `max |dt A| + 3`.
    fn decay_factor(p: &In) -> f64 {
        let n = p.n;
        let mut worst = 0.0f64;
        for (i, dt) in p.v[1].iter().enumerate() {
            let d = i % p.di;
            for j in 0..n {
                worst = worst.max((dt * p.v[2][d * n + j]).abs());
            }
        }
        worst + 3.0
    }
    fn run_forward(v: &[Vec<f32>], n: usize, q: usize) -> (Vec<f32>, Vec<f32>) {
        let s = scan_of(v, SEQS, TIME, DI, n, q);
        let (mut out, mut ckpt) = (vec![f32::NAN; s.base.len()], vec![f32::NAN; s.base.ckpt_len()]);
        mamba1::scan_forward(&s, &mut out, &mut ckpt).unwrap();
        (out, ckpt)
    }
    fn run_backward(v: &[Vec<f32>], n: usize, q: usize, g: &[f32]) -> Vec<Vec<f32>> {
        let (_, ckpt) = Self::run_forward(v, n, q);
        let r = mamba1::scan_backward(&scan_of(v, SEQS, TIME, DI, n, q), g, &ckpt, &Pool::new()).unwrap();
        [r.x, r.dt, r.a, r.b, r.c, r.d, r.z].map(|b| b.to_vec()).into()
    }
}

/// Outputs: `c = F (t + 1) + N + 6` (t + 1 decays on the oldest term of the state, the N + 1
/// terms of `C h + D x`, the gate's SiLU and product); checkpoints (the state before step t):
/// `c = F t`. Every gradient: `c = F (2T + 2) + seqs T + N + Di + 16`: a term is a product of
/// at most 2T + 2 decays or decayed states (the carry walks back over up to T decays, the
/// state it meets was built over up to T), and passes through at most seqs T (g_A, g_D over
/// time and sequences), Di (g_B, g_C over channels) or N (g_x, g_dt over states) additions,
/// plus the gate's and the products' few roundings.
const BOUNDS: Bounds = Bounds { out: 6.0, ckpt: 0.0, adds: |n| SEQS * TIME + n + DI + 16, q: 4 };

// The reference's central differences in f64 (`scan::check_reference`): step `h = 1e-5 max(1,
// |v|)`, so the truncation error (h^2 times third derivatives of order one) and the roundoff
// (`2^-53 |L| / h`, |L| < 1e3) are both under 1e-8; the tolerance 1e-6 (1 + |gradient|) leaves
// a margin of 100.
crate::scan_tests!(M1, BOUNDS);

/// The convolution of MODEL.md step 2 in f64 (with `abs`, every term by its absolute value):
/// the pre-activation `c` `(seqs, time, di)`.
fn conv_ref(dims: ConvDims, x: &[f64], w: &[f64], b: &[f64], abs: bool) -> Vec<f64> {
    let ConvDims { time, di, k, .. } = dims;
    let ab = |v: f64| if abs { v.abs() } else { v };
    (0..dims.len())
        .map(|i| {
            let (t, d) = ((i / di) % time, i % di);
            let taps = (0..k).filter(|j| t + j + 1 >= k).map(|j| ab(w[d * k + j]) * ab(x[i + (j + 1) * di - k * di]));
            ab(b[d]) + taps.sum::<f64>()
        })
        .collect()
}

/// BACKWARD.md's convolution rule after the SiLU's, in f64: `(g_x, g_w, g_b)` for `g_xs`.
fn conv_bwd_ref(dims: ConvDims, x: &[f64], c: &[f64], w: &[f64], g_xs: &[f64], abs: bool) -> [Vec<f64>; 3] {
    let ConvDims { time, di, k, .. } = dims;
    let ab = |v: f64| if abs { v.abs() } else { v };
    let g_c: Vec<f64> = (0..dims.len())
        .map(|i| {
            let (v, s) = (c[i], sig(c[i]));
            ab(g_xs[i]) * s * (1.0 + if abs { v.abs() } else { v } * (1.0 - s))
        })
        .collect();
    let (mut gx, mut gw, mut gb) = (vec![0.0; dims.len()], vec![0.0; di * k], vec![0.0; di]);
    for (i, &gc) in g_c.iter().enumerate() {
        let (t, d) = ((i / di) % time, i % di);
        gb[d] += gc;
        for j in (0..k).filter(|j| t + j + 1 >= k) {
            let src = i + (j + 1) * di - k * di;
            gw[d * k + j] += gc * ab(x[src]);
            gx[src] += ab(w[d * k + j]) * gc;
        }
    }
    [gx, gw, gb]
}

fn conv_data(dims: ConvDims) -> [Vec<f32>; 4] {
    [
        uniform(40, dims.len(), -2.0, 2.0),
        uniform(41, dims.di * dims.k, -1.0, 1.0),
        uniform(42, dims.di, -0.5, 0.5),
        uniform(43, dims.len(), -1.0, 1.0),
    ]
}

/// T = 3 < K = 4 (a sequence shorter than the kernel) and T = 13; 2 sequences of 100 channels.
const CONV: [ConvDims; 2] =
    [ConvDims { seqs: 2, time: 3, di: 100, k: 4 }, ConvDims { seqs: 2, time: 13, di: 100, k: 4 }];

/// `c`: `c = K + 1` (one rounding per fma); `xs = silu(c)`: the error of c times
/// `max |silu'| < 1.1`, plus `6 u |xs|` for the logistic and the product. Times 1.1.
#[test]
fn conv_forward_matches_the_reference() {
    for dims in CONV {
        let [x, w, b, _] = conv_data(dims);
        let (mut c, mut xs) = (vec![f32::NAN; dims.len()], vec![f32::NAN; dims.len()]);
        mamba1::conv_forward(dims, &x, &w, &b, &mut c, &mut xs).unwrap();
        let (x64, w64, b64) = (f64s(&x), f64s(&w), f64s(&b));
        let (want, mag) = (conv_ref(dims, &x64, &w64, &b64, false), conv_ref(dims, &x64, &w64, &b64, true));
        let bc: Vec<f64> = mag.iter().map(|m| 1.1 * U * (dims.k + 1) as f64 * m).collect();
        check(&format!("conv c, T {}", dims.time), &c, &want, &bc);
        let ws: Vec<f64> = want.iter().map(|&v| v * sig(v)).collect();
        let bx: Vec<f64> = (0..dims.len()).map(|i| 1.1 * (1.1 * bc[i] + 6.0 * U * ws[i].abs())).collect();
        check(&format!("conv xs, T {}", dims.time), &xs, &ws, &bx);
    }
}

/// From the same f32 `c`: `g_c = g_xs silu'(c)` within `10 u` of its magnitude (logistic,
/// the three operations of `silu'`, the product); `g_x` (K taps), `g_w` and `g_b` (sums over
/// the `seqs T` rows, in chunks then the chunks in order) add one rounding per term:
/// `c = 10 + K`, resp. `10 + seqs T + 2`. Times 1.1.
#[test]
fn conv_backward_matches_the_reference() {
    for dims in CONV {
        let [x, w, b, g] = conv_data(dims);
        let (mut c, mut xs) = (vec![0.0; dims.len()], vec![0.0; dims.len()]);
        mamba1::conv_forward(dims, &x, &w, &b, &mut c, &mut xs).unwrap();
        let (mut gx, mut gw, mut gb) =
            (vec![f32::NAN; dims.len()], uniform(44, dims.di * dims.k, -1.0, 1.0), vec![0.5; dims.di]);
        let (gw0, gb0) = (f64s(&gw), f64s(&gb));
        let grads = mamba1::ConvGrads { x: &mut gx, w: &mut gw, b: &mut gb };
        mamba1::conv_backward(dims, (&x, &c, &w), &g, grads, &Pool::new()).unwrap();
        let (x64, c64, w64, g64) = (f64s(&x), f64s(&c), f64s(&w), f64s(&g));
        let [wx, ww, wb] = conv_bwd_ref(dims, &x64, &c64, &w64, &g64, false);
        let [mx, mw, mb] = conv_bwd_ref(dims, &x64, &c64, &w64, &g64, true);
        let rows = (dims.seqs * dims.time) as f64;
        let bound = |m: &[f64], start: &[f64], c: f64| -> Vec<f64> {
            m.iter().zip(start).map(|(m, s)| 1.1 * U * (c * m + 2.0 * s.abs())).collect()
        };
        let zero = vec![0.0; dims.len()];
        check(&format!("conv g_x, T {}", dims.time), &gx, &wx, &bound(&mx, &zero, 10.0 + dims.k as f64));
        let acc = |v: &[f64], s: &[f64]| -> Vec<f64> { v.iter().zip(s).map(|(v, s)| v + s).collect() };
        check(&format!("conv g_w, T {}", dims.time), &gw, &acc(&ww, &gw0), &bound(&mw, &gw0, 12.0 + rows));
        check(&format!("conv g_b, T {}", dims.time), &gb, &acc(&wb, &gb0), &bound(&mb, &gb0, 12.0 + rows));
    }
}

/// The convolution's reference gradients against central differences of `sum xs g` (as in
/// [`reference_gradients_match_finite_differences`]), on three coordinates of x, w and b.
#[test]
fn conv_reference_gradients_match_finite_differences() {
    let dims = CONV[1];
    let [x, w, b, g] = conv_data(dims);
    let v = [f64s(&x), f64s(&w), f64s(&b)];
    let g64 = f64s(&g);
    let loss = |v: &[Vec<f64>]| -> f64 {
        conv_ref(dims, &v[0], &v[1], &v[2], false).iter().zip(&g64).map(|(c, g)| c * sig(*c) * g).sum()
    };
    let c = conv_ref(dims, &v[0], &v[1], &v[2], false);
    let an = conv_bwd_ref(dims, &v[0], &c, &v[1], &g64, false);
    check_central(&["conv x", "conv w", "conv b"], &v, &an, loss);
}

/// The convolution's backward sums have a fixed order too: two runs, the same bits.
#[test]
fn conv_backward_is_bitwise_the_same_from_run_to_run() {
    let dims = CONV[1];
    let [x, w, b, g] = conv_data(dims);
    let run = || -> Vec<u32> {
        let (mut c, mut xs) = (vec![0.0; dims.len()], vec![0.0; dims.len()]);
        mamba1::conv_forward(dims, &x, &w, &b, &mut c, &mut xs).unwrap();
        let (mut gx, mut gw, mut gb) = (vec![0.0; dims.len()], vec![0.0; dims.di * dims.k], vec![0.0; dims.di]);
        let grads = mamba1::ConvGrads { x: &mut gx, w: &mut gw, b: &mut gb };
        mamba1::conv_backward(dims, (&x, &c, &w), &g, grads, &Pool::new()).unwrap();
        [xs, gx, gw, gb].concat().iter().map(|v| v.to_bits()).collect()
    };
    assert_eq!(run(), run());
}

/// Launches the kernels could not run are refused before the shim: N over the local arrays,
/// a grid that does not cover the channels, buffers of the wrong length.
#[test]
fn bad_scan_launches_are_refused() {
    use boldcast_cuda::launch::{Dim3, Launch};
    use boldcast_cuda::shim::{mamba1_scan_fwd, SCAN_MAX_N};
    let n = SCAN_MAX_N + 1;
    let v = inputs(1, 1, 3, 8, n);
    let s = scan_of(&v, 1, 3, 8, n, 2);
    let (mut out, mut ckpt) = (vec![0.0; s.base.len()], vec![0.0; s.base.ckpt_len()]);
    let err = mamba1::scan_forward(&s, &mut out, &mut ckpt).unwrap_err();
    assert!(err.why.contains("N must be"), "{err}");
    let v = inputs(1, 1, 3, 100, 4);
    let s = scan_of(&v, 1, 3, 100, 4, 2);
    let (mut out, mut ckpt) = (vec![0.0; s.base.len()], vec![0.0; s.base.ckpt_len()]);
    let short = Launch { grid: Dim3::xy(1, 1), block: Dim3::x(64) };
    assert!(mamba1_scan_fwd(short, &s, &mut out, &mut ckpt).unwrap_err().why.contains("expected grid"));
    let mut ckpt = vec![0.0; s.base.ckpt_len() - 1];
    assert!(mamba1::scan_forward(&s, &mut out, &mut ckpt).unwrap_err().why.contains("ckpt"));
}
