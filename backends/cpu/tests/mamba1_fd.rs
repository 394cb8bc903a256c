//! Checks of the Mamba-1 mixer (`boldcast_cpu::mamba1`) through its public API:
//! - the backward against f64 central finite differences of `L = sum(y * R)`, for every entry
//!   of every parameter tensor and of the input, over quickcheck-drawn small sizes (chunk
//!   boundaries of the checkpointed scan fall inside the longer sequences);
//! - a forward value computed by hand for a one-channel mixer;
//! - the `(B, T, P, M)` layout: each `(b, p)` sequence is mixed on its own;
//! - determinism: bit-identical results from run to run and for 1 and 2 threads;
//! - f32 against f64.

use boldcast_cpu::mamba1::{backward, forward, Mamba1Dims, Mamba1Params};
use boldcast_cpu::mixer::{BackwardIo, Seqs};
use boldcast_testkit::fd::{central, central_at};
use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Mutex;

/// Step of the central differences.
const H: f64 = 1e-6;
/// Relative tolerance of a finite-difference check.
const REL: f64 = 1e-5;
/// Absolute floor of a finite-difference check, plus [`ABS_PER_TERM`] times `sum |y R|`.
const ABS: f64 = 1e-7;
/// The rounding error of `L` grows with the size of its terms (about 1e-16 of `sum |y R|`
/// per operation), and the central difference divides it by `2H`; with `dt` past the softplus
/// threshold `L` reaches the hundreds and this term dominates.
const ABS_PER_TERM: f64 = 2e-9;

/// The worst `|fd - analytic| / (|analytic| + floor / REL)` seen, printed by the tests.
static WORST: Mutex<f64> = Mutex::new(0.0);

/// One random problem: sizes and a seed for every value.
#[derive(Clone, Debug)]
struct Case {
    dims: Mamba1Dims,
    batch: usize,
    time: usize,
    parcels: usize,
    /// Push the softplus argument past its threshold of 20 (the linear branch).
    big_dt: bool,
    seed: u64,
}

impl Arbitrary for Case {
    fn arbitrary(g: &mut Gen) -> Self {
        let mut pick = |lo: usize, hi: usize| lo + usize::arbitrary(g) % (hi - lo + 1);
        let d_model = pick(1, 8);
        let expand = pick(1, 2);
        let dims = Mamba1Dims {
            d_model,
            d_inner: expand * d_model,
            d_state: pick(1, 4),
            // MODEL.md's R is 1 for d_model <= 16; a larger rank exercises the dr columns.
            dt_rank: pick(1, 3),
            d_conv: pick(1, 4),
        };
        let (batch, time, parcels) = (pick(1, 3), pick(1, 12), pick(1, 3));
        let big_dt = pick(0, 5) == 0;
        Case { dims, batch, time, parcels, big_dt, seed: u64::arbitrary(g) }
    }
}

fn uniform(rng: &mut ChaCha8Rng, v: &mut [f64], lo: f64, hi: f64) {
    for x in v {
        *x = rng.random_range(lo..hi);
    }
}

fn random_params(dims: Mamba1Dims, rng: &mut ChaCha8Rng, big_dt: bool) -> Mamba1Params<Vec<f64>> {
    let mut p = Mamba1Params::zeros(dims);
    for (name, t) in p.view_mut().named() {
        let (lo, hi) = match name {
            "dt_proj.bias" if big_dt => (22.0, 24.0),
            "dt_proj.bias" => (-3.0, 1.0),
            "A_log" => (-1.0, 1.5),
            "D" => (-1.0, 1.0),
            _ => (-0.7, 0.7),
        };
        uniform(rng, t, lo, hi);
    }
    p
}

impl Case {
    fn seqs(&self) -> Seqs {
        Seqs::new(self.batch, self.time, self.parcels)
    }
}

fn len(c: &Case) -> usize {
    c.batch * c.time * c.parcels * c.dims.d_model
}

/// `L = sum(forward(p, u) * r)`.
fn loss(c: &Case, p: &Mamba1Params<Vec<f64>>, u: &[f64], r: &[f64]) -> f64 {
    let mut y = vec![0.0; len(c)];
    forward(c.dims, p, u, c.seqs(), &mut y);
    y.iter().zip(r).map(|(a, b)| a * b).sum()
}

/// `sum |y R|`, the size of the terms of `L`.
fn loss_scale(c: &Case, p: &Mamba1Params<Vec<f64>>, u: &[f64], r: &[f64]) -> f64 {
    let mut y = vec![0.0; len(c)];
    forward(c.dims, p, u, c.seqs(), &mut y);
    y.iter().zip(r).map(|(a, b)| (a * b).abs()).sum()
}

/// Compares one analytic derivative with its central difference, with absolute floor
/// `floor`; returns the failure text.
fn compare(what: &str, i: usize, fd: f64, an: f64, floor: f64) -> Option<String> {
    let err = (fd - an).abs();
    let scaled = err / (an.abs() + floor / REL);
    let mut w = WORST.lock().unwrap();
    *w = w.max(scaled);
    (err > REL * an.abs() + floor).then(|| format!("{what}[{i}]: finite difference {fd:e}, backward {an:e}"))
}

fn fd_matches(c: Case) -> TestResult {
    let mut rng = ChaCha8Rng::seed_from_u64(c.seed);
    let p = random_params(c.dims, &mut rng, c.big_dt);
    let n = len(&c);
    let (mut u, mut r) = (vec![0.0; n], vec![0.0; n]);
    uniform(&mut rng, &mut u, -1.5, 1.5);
    uniform(&mut rng, &mut r, -1.0, 1.0);

    // `backward` accumulates into `grads`: start from random values and subtract them after.
    let mut g0 = Mamba1Params::zeros(c.dims);
    for (_, t) in g0.view_mut().named() {
        uniform(&mut rng, t, -1.0, 1.0);
    }
    let mut grads = g0.clone();
    // `g_u` is overwritten: NaNs left anywhere would fail the comparison below.
    let mut g_u = vec![f64::NAN; n];
    backward(c.dims, &p, c.seqs(), BackwardIo { u: &u, g_y: &r, g_u: &mut g_u }, &mut grads, None);

    let floor = ABS + ABS_PER_TERM * loss_scale(&c, &p, &u, &r);
    let mut failures = Vec::new();
    for (k, ((name, g), (_, g_start))) in grads.view().named().into_iter().zip(g0.view().named()).enumerate() {
        for i in 0..g.len() {
            let fd = central(&p, H, |q, d| q.view_mut().named()[k].1[i] += d, |q| loss(&c, q, &u, &r));
            failures.extend(compare(name, i, fd, g[i] - g_start[i], floor));
        }
    }
    for (i, &an) in g_u.iter().enumerate() {
        let fd = central_at(&u, i, H, |v| loss(&c, &p, v, &r));
        failures.extend(compare("u", i, fd, an, floor));
    }
    if failures.is_empty() {
        TestResult::passed()
    } else {
        failures.truncate(8);
        TestResult::error(format!("{c:?}:\n{}", failures.join("\n")))
    }
}

#[test]
fn backward_matches_finite_differences() {
    QuickCheck::new().tests(20).quickcheck(fd_matches as fn(Case) -> TestResult);
    eprintln!("worst scaled finite-difference error: {:e}", *WORST.lock().unwrap());
}

/// Sequences long enough that the checkpointed scan (Q = ceil(sqrt(T))) has several chunks
/// and a short last one, against finite differences; sizes fixed so the case always runs.
#[test]
fn backward_matches_finite_differences_over_several_chunks() {
    let dims = Mamba1Dims { d_model: 3, d_inner: 5, d_state: 3, dt_rank: 2, d_conv: 3 };
    for (time, seed) in [(17, 1), (26, 2)] {
        let c = Case { dims, batch: 1, time, parcels: 2, big_dt: false, seed };
        let res = fd_matches(c.clone());
        assert!(!res.is_failure(), "{c:?}: {res:?}");
    }
}

/// d_model = d_inner = d_state = dt_rank = 1, d_conv = 2, T = 3: every step written out by
/// hand, and the values pinned to numbers computed independently (Python, `math` module).
#[test]
fn forward_matches_a_hand_computed_case() {
    let dims = Mamba1Dims { d_model: 1, d_inner: 1, d_state: 1, dt_rank: 1, d_conv: 2 };
    let p = Mamba1Params {
        in_proj: vec![2.0, 0.5],
        conv_w: vec![0.3, 0.7],
        conv_b: vec![0.1],
        x_proj: vec![0.4, 0.6, -0.5],
        dt_proj_w: vec![1.5],
        dt_proj_b: vec![-0.2],
        a_log: vec![2f64.ln()],
        d: vec![0.9],
        out_proj: vec![1.3],
    };
    let u = [1.0, -1.0, 0.5];
    let mut y = [0.0; 3];
    forward(dims, &p, &u, Seqs::new(1, 3, 1), &mut y);

    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let silu = |v: f64| v * sig(v);
    let (mut h, mut prev_x) = (0.0, 0.0);
    for t in 0..3 {
        let (x, z) = (2.0 * u[t], 0.5 * u[t]);
        let xs = silu(0.1 + 0.3 * prev_x + 0.7 * x);
        prev_x = x;
        let dt = (1.5 * (0.4 * xs) - 0.2f64).exp().ln_1p();
        h = (-2.0 * dt).exp() * h + dt * (0.6 * xs) * xs;
        let want = 1.3 * ((-0.5 * xs) * h + 0.9 * xs) * silu(z);
        assert!((y[t] - want).abs() <= 1e-15, "t = {t}: {} vs {want}", y[t]);
    }
    let pinned = [0.22347161187297104, 0.042061413313513846, 0.017110128885556374];
    for (a, b) in y.iter().zip(pinned) {
        assert!((a - b).abs() <= 1e-15, "{a} vs {b}");
    }
}

fn random_problem(c: &Case) -> (Mamba1Params<Vec<f64>>, Vec<f64>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(c.seed);
    let p = random_params(c.dims, &mut rng, false);
    let (mut u, mut g) = (vec![0.0; len(c)], vec![0.0; len(c)]);
    uniform(&mut rng, &mut u, -1.5, 1.5);
    uniform(&mut rng, &mut g, -1.0, 1.0);
    (p, u, g)
}

/// Each `(b, p)` sequence of the `(B, T, P, M)` tensor goes through the mixer on its own: the
/// full call equals one call per gathered sequence (bit for bit for `y` and `g_u`; the
/// parameter gradients are the sum over sequences).
#[test]
fn sequences_are_mixed_independently_in_the_model_layout() {
    let dims = Mamba1Dims { d_model: 4, d_inner: 8, d_state: 3, dt_rank: 1, d_conv: 4 };
    let c = Case { dims, batch: 2, time: 9, parcels: 3, big_dt: false, seed: 5 };
    let (p, u, g) = random_problem(&c);
    let m = dims.d_model;
    let at = |b: usize, t: usize, pp: usize| ((b * c.time + t) * c.parcels + pp) * m;
    let (y, g_u, grads) = run_all(&c, &p, &u, &g);

    let mut sum = Mamba1Params::zeros(dims);
    for b in 0..c.batch {
        for pp in 0..c.parcels {
            let gather =
                |v: &[f64]| (0..c.time).flat_map(|t| v[at(b, t, pp)..at(b, t, pp) + m].to_vec()).collect::<Vec<_>>();
            let (us, gs) = (gather(&u), gather(&g));
            let mut ys = vec![0.0; c.time * m];
            forward(dims, &p, &us, Seqs::new(1, c.time, 1), &mut ys);
            assert_eq!(ys, gather(&y), "y of (b, p) = ({b}, {pp})");
            let mut gus = vec![0.0; c.time * m];
            backward(dims, &p, Seqs::new(1, c.time, 1), BackwardIo { u: &us, g_y: &gs, g_u: &mut gus }, &mut sum, None);
            assert_eq!(gus, gather(&g_u), "g_u of (b, p) = ({b}, {pp})");
        }
    }
    for ((name, a), (_, b)) in grads.view().named().into_iter().zip(sum.view().named()) {
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-12 * (1.0 + y.abs()), "{name}: {x} vs {y}");
        }
    }
}

type Outputs<E> = (Vec<E>, Vec<E>, Mamba1Params<Vec<E>>);

fn run_all<E: boldcast_cpu::ops::CpuElem>(c: &Case, p: &Mamba1Params<Vec<E>>, u: &[E], g: &[E]) -> Outputs<E> {
    let mut y = vec![E::zero(); len(c)];
    forward(c.dims, p, u, c.seqs(), &mut y);
    let mut g_u = vec![E::zero(); len(c)];
    let mut grads = Mamba1Params::zeros(c.dims);
    backward(c.dims, p, c.seqs(), BackwardIo { u, g_y: g, g_u: &mut g_u }, &mut grads, None);
    (y, g_u, grads)
}

/// The gradient partials are reduced in an order fixed by the sizes alone, so results are
/// bit-identical from run to run and between pools of 1 and 2 threads.
#[test]
fn results_are_deterministic_and_independent_of_the_thread_count() {
    let dims = Mamba1Dims { d_model: 6, d_inner: 12, d_state: 4, dt_rank: 1, d_conv: 4 };
    // 40 sequences: more than the 32 blocks, so blocks hold one or two sequences.
    let c = Case { dims, batch: 4, time: 21, parcels: 10, big_dt: false, seed: 9 };
    let (p, u, g) = random_problem(&c);
    let pool = |n| rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap();
    let (one, two) = (pool(1), pool(2));
    let a = one.install(|| run_all(&c, &p, &u, &g));
    let b = two.install(|| run_all(&c, &p, &u, &g));
    let b2 = two.install(|| run_all(&c, &p, &u, &g));
    assert!(b == b2, "two runs on 2 threads differ");
    assert!(a == b, "1 and 2 threads differ");
    // Not vacuous: the gradients are there.
    assert!(a.2.view().named().iter().all(|(_, t)| t.iter().any(|v| v.abs() > 1e-6)));

    // The f32 path too.
    let p32 = p.cast::<f32>(c.dims);
    let (u32, g32): (Vec<f32>, Vec<f32>) =
        (u.iter().map(|&v| v as f32).collect(), g.iter().map(|&v| v as f32).collect());
    let a = one.install(|| run_all(&c, &p32, &u32, &g32));
    let b = two.install(|| run_all(&c, &p32, &u32, &g32));
    assert!(a == b, "f32: 1 and 2 threads differ");
}

/// f32 gives the f64 results to f32 rounding (the golden files are f32).
#[test]
fn f32_agrees_with_f64() {
    let dims = Mamba1Dims { d_model: 16, d_inner: 32, d_state: 8, dt_rank: 1, d_conv: 4 };
    let c = Case { dims, batch: 2, time: 64, parcels: 3, big_dt: false, seed: 13 };
    let (p, u, g) = random_problem(&c);
    let p32 = p.cast::<f32>(c.dims);
    let (u32, g32): (Vec<f32>, Vec<f32>) =
        (u.iter().map(|&v| v as f32).collect(), g.iter().map(|&v| v as f32).collect());
    let (y, g_u, grads) = run_all(&c, &p, &u, &g);
    let (y32, g_u32, grads32) = run_all(&c, &p32, &u32, &g32);
    let close = |what: &str, a: &[f64], b: &[f32]| {
        let scale = a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        assert!(scale > 1e-3, "{what}: all near zero");
        for (i, (x, &y)) in a.iter().zip(b).enumerate() {
            assert!((x - y as f64).abs() <= 1e-4 * scale, "{what}[{i}]: f64 {x} vs f32 {y} (scale {scale})");
        }
    };
    close("y", &y, &y32);
    close("g_u", &g_u, &g_u32);
    for ((name, a), (_, b)) in grads.view().named().into_iter().zip(grads32.view().named()) {
        close(name, a, b);
    }
}
