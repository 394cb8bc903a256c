//! Fourth-order central finite differences (f64) of the forecasting loss with respect to every
//! parameter tensor of [`CpuModel`], on small random configurations drawn by quickcheck:
//! either temporal mixer, n_layers 0..=2, k_neighbors 0..=P (ring adjacency), d_in 1..=2,
//! random non-empty horizon sets, T from max(h) + 1. Mamba-2 cases have two or more heads
//! (headdim a proper divisor of d_inner), chunk_size 1..=8 and T longer than one chunk and not
//! a multiple of it, so chunk boundaries fall inside the sequence and the last chunk is partial.
//! Big tensors are sampled; every tensor is checked at least once.

use boldcast_core::model::NamedTensor;
use boldcast_core::{Adjacency, Model, ModelConfig, Temporal, TokenShape, Tokens};
use boldcast_cpu::CpuModel;
use boldcast_testkit::fd::five_point;
use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::{AtomicU64, Ordering};

/// Steps of the central difference, tried in order until one agrees. The stencil is the
/// fourth-order `(8 (f(h) - f(-h)) - (f(2h) - f(-2h))) / 12h`. With d_model 2 a LayerNorm over
/// two nearly equal entries is badly conditioned both ways, and random cases showed it: near
/// such a point the truncation error at h = 1e-6 reached 1.4e-5 relative (3e-10 at h = 1e-7),
/// while elsewhere the rounding it amplifies put a small gradient 4e-8 off at h = 1e-6 and
/// within 1e-7 relative at h = 1e-4. A wrong gradient agrees at no h.
const STEPS: [f64; 4] = [1e-6, 1e-7, 1e-5, 1e-4];
/// Relative tolerance.
const REL: f64 = 1e-5;
/// Absolute floor: the FD error of an O(1) loss is ~1e-10 (rounding 1e-16 / h plus h^2 terms).
const ABS: f64 = 1e-8;
/// Entries checked per tensor at most.
const SAMPLES: usize = 4;

#[derive(Clone, Debug)]
struct Case {
    cfg: ModelConfig,
    batch: usize,
    time: usize,
    parcels: usize,
    seed: u64,
}

impl Arbitrary for Case {
    fn arbitrary(g: &mut Gen) -> Self {
        let pick = |g: &mut Gen, lo: usize, hi: usize| lo + usize::arbitrary(g) % (hi - lo + 1);
        let parcels = pick(g, 1, 5);
        let mut horizons: Vec<usize> = (1..=4).filter(|_| bool::arbitrary(g)).collect();
        if horizons.is_empty() {
            horizons.push(pick(g, 1, 4));
        }
        // Random order: the horizon axis follows the list, not the sorted values.
        if bool::arbitrary(g) {
            horizons.reverse();
        }
        let temporal = if bool::arbitrary(g) { Temporal::Mamba2 } else { Temporal::Mamba };
        let (d_model, expand) = (pick(g, 2, 6), pick(g, 1, 2));
        // Mamba-2: a proper divisor of d_inner (>= 2 heads), chunks of 1..=8 steps.
        let di = d_model * expand;
        let divisors: Vec<usize> = (1..di).filter(|h| di % h == 0).collect();
        let headdim = divisors[usize::arbitrary(g) % divisors.len()];
        let chunk_size = pick(g, 1, 8);
        // The draws in this order (the builder's arguments are evaluated left to right).
        let cfg = ModelConfig::builder()
            .temporal(temporal)
            .d_in(pick(g, 1, 2))
            .d_model(d_model)
            .n_layers(pick(g, 0, 2))
            .d_state(pick(g, 1, 3))
            .expand(expand)
            .d_conv(pick(g, 1, 4))
            .headdim(headdim)
            .chunk_size(chunk_size)
            .k_neighbors(pick(g, 0, parcels))
            .horizons(&horizons)
            .build()
            .expect("a valid random configuration");
        let mut time = cfg.max_horizon() + pick(g, 1, 5);
        if temporal == Temporal::Mamba2 {
            // At least one full chunk and a partial last one (chunk_size 1 has no partial chunk).
            time = time.max(chunk_size + 1) + pick(g, 0, chunk_size);
            if chunk_size > 1 && time.is_multiple_of(chunk_size) {
                time += 1;
            }
        }
        Case { cfg, batch: pick(g, 1, 2), time, parcels, seed: u64::arbitrary(g) }
    }
}

fn build(c: &Case) -> CpuModel<f64> {
    let adj = (c.cfg.k_neighbors > 0).then(|| Adjacency::ring(c.parcels, c.cfg.k_neighbors).unwrap());
    CpuModel::new(c.cfg.clone(), adj, c.seed).unwrap()
}

fn tokens(c: &Case, rng: &mut ChaCha8Rng) -> Tokens<f64> {
    let shape = TokenShape::new(c.batch, c.time, c.parcels, c.cfg.d_in);
    let n = c.batch * c.time * c.parcels * c.cfg.d_in;
    Tokens::new(shape, (0..n).map(|_| rng.random::<f64>() * 2.0 - 1.0).collect()).unwrap()
}

/// Perturbs the initial parameters so no gradient is special (LayerNorm weights 1 and biases 0
/// at init would hide a swapped weight/bias gradient).
fn jitter(model: &mut CpuModel<f64>, rng: &mut ChaCha8Rng) {
    let mut st = model.state();
    for t in &mut st {
        for v in &mut t.data {
            *v += (rng.random::<f64>() * 2.0 - 1.0) * 0.2;
        }
    }
    model.load_state(&st).unwrap();
}

/// Checks every tensor; returns the worst `|a - n| / max(|n|, ABS / REL)`.
fn check_case(c: &Case) -> Result<f64, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(c.seed ^ 0x5eed);
    let mut model = build(c);
    jitter(&mut model, &mut rng);
    let x = tokens(c, &mut rng);
    let loss = model.loss_and_grads(&x).unwrap();
    let eval = model.loss(&x).unwrap();
    if (loss - eval).abs() > 1e-12 * loss.abs().max(1.0) {
        return Err(format!("loss_and_grads {loss} != loss {eval}"));
    }
    let grads = model.grads();
    let state = model.state();
    let mut probe = model.clone();
    let mut worst = 0.0f64;
    for (ti, (g, p)) in grads.iter().zip(&state).enumerate() {
        assert_eq!(g.name, p.name);
        let n = p.data.len();
        let idx: Vec<usize> =
            if n <= SAMPLES { (0..n).collect() } else { (0..SAMPLES).map(|_| rng.random_range(0..n)).collect() };
        for i in idx {
            let at = |delta: f64, probe: &mut CpuModel<f64>| {
                let mut s: Vec<NamedTensor<f64>> = state.clone();
                s[ti].data[i] += delta;
                probe.load_state(&s).unwrap();
                probe.loss(&x).unwrap()
            };
            let ana = g.data[i];
            let mut best = (f64::INFINITY, 0.0, 0.0);
            for h in STEPS {
                let num = five_point(h, |d| at(d, &mut probe));
                let err = (ana - num).abs();
                let ratio = err / (REL * num.abs() + ABS);
                if ratio < best.0 {
                    best = (ratio, num, err);
                }
                if ratio <= 1.0 {
                    break;
                }
            }
            let (ratio, num, err) = best;
            worst = worst.max(err / num.abs().max(ABS / REL));
            if ratio > 1.0 {
                return Err(format!("{}[{i}]: analytic {ana:e}, numeric {num:e} ({c:?})", g.name));
            }
        }
    }
    Ok(worst)
}

#[test]
fn gradients_match_finite_differences_on_random_configs() {
    // The worst relative error over all cases per mixer, as f64 bits (quickcheck takes a plain
    // fn), and how many cases each mixer got.
    static WORST: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
    static CASES: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
    fn prop(c: Case) -> TestResult {
        let i = usize::from(c.cfg.temporal == Temporal::Mamba2);
        match check_case(&c) {
            Ok(w) => {
                WORST[i].fetch_max(w.to_bits(), Ordering::Relaxed);
                CASES[i].fetch_add(1, Ordering::Relaxed);
                TestResult::passed()
            }
            Err(e) => TestResult::error(e),
        }
    }
    QuickCheck::new().tests(60).quickcheck(prop as fn(Case) -> TestResult);
    for (i, name) in ["mamba", "mamba2"].into_iter().enumerate() {
        let worst = f64::from_bits(WORST[i].load(Ordering::Relaxed));
        let n = CASES[i].load(Ordering::Relaxed);
        println!("{name}: worst relative error over {n} random cases (floor {}): {worst:e}", ABS / REL);
        // Every coordinate passed `err <= REL |num| + ABS`, so `err / max(|num|, ABS / REL)`
        // is at most 2 REL (REL plus the absolute allowance's share): the random cases of one
        // run reach 1.05e-5 at times, which is within that, not a regression.
        assert!(worst <= 2.0 * REL, "{name}: {worst:e}");
        assert!(n >= 10, "only {n} random {name} cases were drawn");
    }
}

/// A fixed case touching everything at once (2 layers, attention with shared neighbours,
/// d_in 2, three horizons out of order), reporting the worst relative error.
#[test]
fn gradients_match_finite_differences_on_a_full_case() {
    let c = Case {
        cfg: ModelConfig::builder()
            .temporal(Temporal::Mamba)
            .d_in(2)
            .d_model(5)
            .n_layers(2)
            .d_state(3)
            .expand(2)
            .d_conv(3)
            .headdim(64)
            .chunk_size(64)
            .k_neighbors(3)
            .horizons(&[2, 1, 3])
            .build()
            .unwrap(),
        batch: 2,
        time: 7,
        parcels: 4,
        seed: 42,
    };
    let worst = check_case(&c).unwrap();
    println!("worst relative error (floor {}): {worst:e}", ABS / REL);
    assert!(worst < REL);
}

/// The Mamba-2 counterpart: 2 layers with attention, 4 heads of 3, chunks of 3 over T = 11
/// (three full chunks and a partial one), d_in 2, three horizons out of order.
#[test]
fn gradients_match_finite_differences_on_a_full_mamba2_case() {
    let c = Case {
        cfg: ModelConfig::builder()
            .temporal(Temporal::Mamba2)
            .d_in(2)
            .d_model(6)
            .n_layers(2)
            .d_state(3)
            .expand(2)
            .d_conv(3)
            .headdim(3)
            .chunk_size(3)
            .k_neighbors(3)
            .horizons(&[2, 1, 3])
            .build()
            .unwrap(),
        batch: 2,
        time: 11,
        parcels: 4,
        seed: 43,
    };
    assert_eq!(c.cfg.nheads(), 4);
    let worst = check_case(&c).unwrap();
    println!("mamba2: worst relative error (floor {}): {worst:e}", ABS / REL);
    assert!(worst < REL);
}
