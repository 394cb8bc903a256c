//! Unit tests of the Mamba-2 mixer: the chunked SSD forward against the sequential recurrence
//! (f64 and f32, chunk boundaries inside the sequence, T not a multiple of Q, several heads,
//! decays that underflow), and determinism across thread counts and runs. The
//! finite-difference checks of the backward live in `tests/mamba2_fd.rs`.

use super::*;

/// SplitMix64: reproducible test data without a dependency.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        lo + (hi - lo) * ((z >> 11) as f64 / (1u64 << 53) as f64)
    }
    fn vec(&mut self, len: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..len).map(|_| self.uniform(lo, hi)).collect()
    }
}

fn dims(d_model: usize, expand: usize, headdim: usize, d_state: usize, d_conv: usize, chunk_size: usize) -> Mamba2Dims {
    let d_inner = expand * d_model;
    Mamba2Dims { d_model, d_inner, d_state, nheads: d_inner / headdim, headdim, d_conv, chunk_size }
}

/// Random parameters; `a_log_hi` sets how fast the fastest head decays.
fn params(dims: Mamba2Dims, seed: u64, a_log_hi: f64) -> Mamba2Params<Vec<f64>> {
    let mut g = Rng(seed);
    let mut p = Mamba2Params::zeros(dims);
    let sc = 1.0 / (dims.d_model as f64).sqrt();
    p.in_proj = g.vec(p.in_proj.len(), -sc, sc);
    p.conv_w = g.vec(p.conv_w.len(), -0.6, 0.6);
    p.conv_b = g.vec(p.conv_b.len(), -0.2, 0.2);
    p.dt_bias = g.vec(p.dt_bias.len(), -3.0, 1.0);
    p.a_log = g.vec(p.a_log.len(), -1.5, a_log_hi);
    p.d = g.vec(p.d.len(), -1.0, 1.0);
    p.norm_w = g.vec(p.norm_w.len(), 0.5, 1.5);
    p.out_proj = g.vec(p.out_proj.len(), -sc, sc);
    p
}

/// `max |a - b| / max |b|`.
fn rel_err<A: CpuElem, B: CpuElem>(a: &[A], b: &[B]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.f64().abs()));
    a.iter().zip(b).fold(0.0f64, |m, (x, y)| m.max((x.f64() - y.f64()).abs())) / scale
}

/// (dims, batch, time, parcels): several heads, chunk boundaries inside the sequence, T not a
/// multiple of Q, Q = 1, Q > T, a head width of 1.
fn shapes() -> Vec<(Mamba2Dims, usize, usize, usize)> {
    vec![
        (dims(8, 2, 4, 4, 4, 5), 2, 23, 3),
        (dims(6, 1, 2, 3, 2, 1), 1, 9, 2),
        (dims(4, 2, 8, 2, 3, 64), 1, 17, 2),
        (dims(5, 2, 1, 4, 1, 7), 2, 14, 1),
        (dims(16, 2, 8, 8, 4, 8), 1, 64, 2),
        (dims(3, 1, 3, 1, 4, 3), 3, 1, 1),
    ]
}

#[test]
fn chunked_matches_sequential_in_f64_and_f32() {
    let (mut worst64, mut worst32) = (0.0f64, 0.0f64);
    for (k, (d, b, t, p)) in shapes().into_iter().enumerate() {
        for a_log_hi in [0.5, 3.0] {
            let pr = params(d, k as u64 + 11, a_log_hi);
            let u = Rng(k as u64 + 99).vec(b * t * p * d.d_model, -2.0, 2.0);
            let (mut yc, mut ys) = (vec![f64::NAN; u.len()], vec![f64::NAN; u.len()]);
            forward(d, &pr, &u, Seqs::new(b, t, p), &mut yc);
            forward_sequential(d, &pr, &u, Seqs::new(b, t, p), &mut ys);
            let e64 = rel_err(&yc, &ys);
            assert!(e64 < 1e-12, "{d:?} T {t}: f64 chunked vs sequential {e64:e}");
            worst64 = worst64.max(e64);

            let (p32, u32) = (pr.cast::<f32>(d), u.iter().map(|&v| v as f32).collect::<Vec<_>>());
            let (mut yc32, mut ys32) = (vec![f32::NAN; u.len()], vec![f32::NAN; u.len()]);
            forward(d, &p32, &u32, Seqs::new(b, t, p), &mut yc32);
            forward_sequential(d, &p32, &u32, Seqs::new(b, t, p), &mut ys32);
            // Both f32 paths sit within f32 rounding of the f64 result (and so of each other).
            let (ec, es) = (rel_err(&yc32, &ys), rel_err(&ys32, &ys));
            assert!(ec < 2e-6 && es < 2e-6, "{d:?} T {t}: f32 chunked {ec:e}, sequential {es:e} vs f64");
            worst32 = worst32.max(rel_err(&yc32, &ys32));
        }
    }
    println!("chunked vs sequential, max |diff| / max |y|: f64 {worst64:.2e}, f32 {worst32:.2e}");
}

#[test]
fn decays_that_underflow_stay_finite_and_match() {
    // A = -exp(8) ~ -3000 and dt up to ~20: exp(dt A) underflows to exactly 0 inside long chunks.
    let d = dims(4, 2, 2, 3, 4, 32);
    let mut pr = params(d, 5, 0.0);
    pr.a_log[0] = 8.0;
    pr.dt_bias[0] = 20.0;
    let (b, t, p) = (1, 70, 2);
    let u = Rng(6).vec(b * t * p * d.d_model, -2.0, 2.0);
    let (mut yc, mut ys) = (vec![0.0; u.len()], vec![0.0; u.len()]);
    forward(d, &pr, &u, Seqs::new(b, t, p), &mut yc);
    forward_sequential(d, &pr, &u, Seqs::new(b, t, p), &mut ys);
    assert!(yc.iter().all(|v| v.is_finite()));
    assert!(rel_err(&yc, &ys) < 1e-12);
    let p32 = pr.cast::<f32>(d);
    let u32: Vec<f32> = u.iter().map(|&v| v as f32).collect();
    let mut y32 = vec![0.0f32; u.len()];
    forward(d, &p32, &u32, Seqs::new(b, t, p), &mut y32);
    assert!(y32.iter().all(|v| v.is_finite()) && rel_err(&y32, &ys) < 2e-6);
    let (mut g_u, mut g) = (vec![0.0; u.len()], Mamba2Params::zeros(d));
    backward(d, &pr, Seqs::new(b, t, p), BackwardIo { u: &u, g_y: &u, g_u: &mut g_u }, &mut g);
    assert!(g_u.iter().chain(g.view().named().iter().flat_map(|(_, v)| v.iter())).all(|v| v.is_finite()));
}

#[test]
fn one_and_two_threads_agree_bit_for_bit_and_runs_repeat() {
    let d = dims(8, 2, 4, 4, 4, 6);
    let pr = params(d, 3, 1.0).cast::<f32>(d);
    let (b, t, p) = (3, 19, 5);
    let mut g = Rng(4);
    let u: Vec<f32> = g.vec(b * t * p * d.d_model, -2.0, 2.0).iter().map(|&v| v as f32).collect();
    let gy: Vec<f32> = g.vec(u.len(), -1.0, 1.0).iter().map(|&v| v as f32).collect();
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            let mut y = vec![0.0f32; u.len()];
            forward(d, &pr, &u, Seqs::new(b, t, p), &mut y);
            let (mut g_u, mut gr) = (vec![0.0f32; u.len()], Mamba2Params::zeros(d));
            backward(d, &pr, Seqs::new(b, t, p), BackwardIo { u: &u, g_y: &gy, g_u: &mut g_u }, &mut gr);
            (y, g_u, gr)
        })
    };
    let one = run(1);
    assert_eq!(one, run(2), "1 vs 2 threads");
    assert_eq!(one, run(2), "repeated run");
    assert_eq!(one, run(4), "4 threads");
}

#[test]
fn sequences_are_independent_and_placed_by_layout() {
    // Each (b, p) sequence of the (B, T, P, M) tensor goes through the mixer alone: running it
    // as a batch of one gives the same rows.
    let d = dims(4, 2, 4, 2, 3, 4);
    let pr = params(d, 8, 1.0);
    let (b, t, p, m) = (2, 7, 3, d.d_model);
    let u = Rng(9).vec(b * t * p * m, -2.0, 2.0);
    let mut y = vec![0.0; u.len()];
    forward(d, &pr, &u, Seqs::new(b, t, p), &mut y);
    for bi in 0..b {
        for pi in 0..p {
            let idx = |ti: usize| ((bi * t + ti) * p + pi) * m;
            let us: Vec<f64> = (0..t).flat_map(|ti| u[idx(ti)..idx(ti) + m].to_vec()).collect();
            let mut ys = vec![0.0; us.len()];
            forward(d, &pr, &us, Seqs::new(1, t, 1), &mut ys);
            for ti in 0..t {
                assert_eq!(&y[idx(ti)..idx(ti) + m], &ys[ti * m..(ti + 1) * m], "b {bi} p {pi} t {ti}");
            }
        }
    }
}
