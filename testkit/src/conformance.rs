//! The backend conformance suite, written once and run for every backend (the CPU backend,
//! the dfdx backend, and any backend a user writes against [`boldcast_core::Model`]).
//!
//! Two parts:
//!
//! - **Golden cases**: every case directory (the repository's `golden/cases`, and the cases
//!   of `../shared/golden` when that folder is present: [`crate::cases::CaseSet`]) through
//!   [`crate::golden::check_case_dir`]: forward, embed, loss, every gradient, the optimizer
//!   and a real training-loss series, with the tolerances of MODEL.md.
//! - **Randomized comparison with the CPU backend**: configurations drawn from a seeded RNG
//!   (temporal mixer, layers, widths, state size, conv width, heads and chunk length, parcels,
//!   neighbours from 0 to P, `d_in`, horizon sets, sequence lengths). The CPU backend draws
//!   the weights; the candidate loads them; forward, embed, loss and every gradient, and the
//!   loss and gradients with a random forecast offset ([`Model::loss_and_grads_offset`]), must
//!   agree within `1e-4 + 1e-3 |b|`, one optimizer step must move every parameter alike, and
//!   a few real training steps must give the same loss series. A fresh model resumed from
//!   the trained weights and optimizer state ([`boldcast_core::Model::optimizer_state`] or the
//!   host Adam's) must then take the same step as the one that never stopped. The flat
//!   gradient buffer of data-parallel training ([`boldcast_core::DataParallel`], which the
//!   candidate implements) must round-trip.
//!
//! A backend runs both with the [`conformance_tests!`](crate::conformance_tests) macro in a
//! test file (see ARCHITECTURE.md, "Writing a backend of your own").

use crate::cases::CaseSet;
use crate::golden::{check_case_dir, compare_values, Check, Tolerance};
use boldcast_core::error::Result;
use boldcast_core::model::NamedTensor;
use boldcast_core::{
    Adam, Adjacency, DataParallel, ForecastShape, Forecasts, Model, ModelConfig, OptimConfig, Optimizer, Shape,
    StepRecord, Temporal, TokenShape, Tokens, Trainer,
};
use boldcast_cpu::CpuModel;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::PathBuf;

/// Builds a backend's model from a configuration and an adjacency (weights are loaded after).
pub trait Build<M>: Fn(ModelConfig, Option<Adjacency>) -> Result<M> {}
impl<M, F: Fn(ModelConfig, Option<Adjacency>) -> Result<M>> Build<M> for F {}

/// The golden cases of this repository ([`CaseSet::repository`]): `golden/cases`, and the
/// cases of `../shared/golden` when that folder is present (the line saying so is printed).
pub fn default_golden_cases() -> Vec<PathBuf> {
    CaseSet::repository().all()
}

/// Runs every golden case of `cases` (case directories) whose temporal mixer is in
/// `temporals`; panics with every failing report printed, or when no case ran.
pub fn assert_golden_cases<M: Model<f32>>(build: &impl Build<M>, temporals: &[Temporal], cases: &[PathBuf]) {
    let mut failures = Vec::new();
    let mut ran = 0;
    assert!(!cases.is_empty(), "no golden case given (the suite fails rather than skips)");
    for dir in cases {
        let case = crate::golden::GoldenCase::load(dir).unwrap_or_else(|e| panic!("{e}"));
        if !temporals.contains(&case.model_config().temporal) {
            continue;
        }
        ran += 1;
        match check_case_dir(dir, build) {
            Ok(r) if r.passed() => {}
            Ok(r) => failures.push(r.to_string()),
            Err(e) => failures.push(format!("{}: {e}", dir.display())),
        }
    }
    assert!(ran > 0, "no golden case uses one of the temporal mixers {temporals:?}");
    assert!(failures.is_empty(), "{} golden case(s) failed:\n{}", failures.len(), failures.join("\n\n"));
}

/// One randomized configuration: model sizes, adjacency and a batch shape.
#[derive(Clone, Debug)]
pub struct RandomCase {
    /// The model configuration.
    pub model: ModelConfig,
    /// The adjacency (`None` when `k_neighbors == 0`).
    pub adjacency: Option<Adjacency>,
    /// The batch shape.
    pub tokens: TokenShape,
    /// The AR(1) coefficient of the tokens.
    pub rho: f64,
}

/// Draws case `i` of the stream seeded by `seed`, with a temporal mixer from `temporals`.
pub fn random_case(seed: u64, i: u64, temporals: &[Temporal]) -> RandomCase {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (i.wrapping_mul(0x9E37_79B9_7F4A_7C15)));
    let temporal = temporals[rng.random_range(0..temporals.len())];
    let d_model = [4, 8, 12, 16][rng.random_range(0..4)];
    let expand = rng.random_range(1..=2);
    let d_inner = d_model * expand;
    let divisors: Vec<usize> = (1..=d_inner).filter(|h| d_inner % h == 0 && *h >= 2).collect();
    let headdim = divisors[rng.random_range(0..divisors.len())];
    let mut horizons: Vec<usize> = (1..=5).filter(|_| rng.random_bool(0.4)).collect();
    if horizons.is_empty() {
        horizons.push(rng.random_range(1..=5));
    }
    let parcels = rng.random_range(1..=5);
    let k = rng.random_range(0..=parcels);
    let model = ModelConfig {
        temporal,
        d_in: rng.random_range(1..=3),
        d_model,
        n_layers: rng.random_range(0..=2),
        d_state: rng.random_range(1..=4),
        expand,
        d_conv: rng.random_range(1..=4),
        headdim,
        chunk_size: rng.random_range(1..=8),
        k_neighbors: k,
        horizons,
        linear_path: boldcast_core::LinearPath::Off,
    };
    let time = model.max_horizon() + rng.random_range(1..=12);
    let tokens = TokenShape::new(rng.random_range(1..=3), time, parcels, model.d_in);
    let adjacency = (k > 0).then(|| Adjacency::ring(parcels, k).expect("a ring with k <= P is valid"));
    RandomCase { model, adjacency, tokens, rho: rng.random_range(-0.95..0.95) }
}

fn widen(xs: &[f32]) -> Vec<f64> {
    xs.iter().map(|&x| x as f64).collect()
}

/// Compares `candidate` with the CPU backend on one random case: forward, embed, loss and
/// gradients with a random forecast offset and without, one optimizer step, three training steps' losses and norms, and a resumed step.
pub fn compare_with_cpu<M: DataParallel<f32>>(
    case: &RandomCase,
    build: &impl Build<M>,
    seed: u64,
) -> Result<Vec<Check>> {
    let mut reference = CpuModel::<f32>::new(case.model.clone(), case.adjacency.clone(), seed)?;
    let mut candidate = build(case.model.clone(), case.adjacency.clone())?;
    candidate.load_state(&reference.state())?;
    let tokens: Tokens<f32> = boldcast_fixtures::ar1_tokens(case.tokens, case.rho, seed.wrapping_add(1));
    let mut checks =
        compare_passes(&mut Pair { candidate: &mut candidate, reference: &mut reference, tokens: &tokens }, seed)?;
    let gb = reference.grads();
    checks.extend(compare_flat(&mut candidate)?);
    checks.extend(compare_adam_step(&mut candidate, &mut reference, &gb)?);
    let again = || build(case.model.clone(), case.adjacency.clone());
    checks.extend(compare_training_and_resume(candidate, reference, again, &tokens)?);
    Ok(checks)
}

/// Two tensors of any shape, by name, within `tol`.
fn compare_tensors(group: &str, name: &str, a: (&[usize], &[f64]), b: (&[usize], &[f64]), tol: Tolerance) -> Check {
    compare_values(group, name, a.0, a.1, b.0, b.1, tol)
}

/// A yes-or-no property, which must hold.
fn compare_flag(group: &str, name: &str, holds: bool) -> Check {
    compare_values(group, name, &[1], &[f64::from(u8::from(holds))], &[1], &[1.0], Tolerance::FORWARD)
}

/// A candidate model and the CPU reference, on one batch of tokens.
struct Pair<'a, M> {
    candidate: &'a mut M,
    reference: &'a mut CpuModel<f32>,
    tokens: &'a Tokens<f32>,
}

/// The forward, the embedding, the offset path, the loss and the gradients of one backward.
fn compare_passes<M: DataParallel<f32>>(p: &mut Pair<'_, M>, seed: u64) -> Result<Vec<Check>> {
    let Pair { candidate, reference, tokens } = p;
    let tol = Tolerance::FORWARD;
    let mut checks = Vec::new();
    let (a, b) = (candidate.forward(tokens)?, reference.forward(tokens)?);
    let (da, db) = (a.shape().dims(), b.shape().dims());
    checks.push(compare_tensors("pred", "pred", (&da, &widen(a.data())), (&db, &widen(b.data())), tol));
    let (a, b) = (candidate.embed(tokens)?, reference.embed(tokens)?);
    let (da, db) = (a.shape().dims(), b.shape().dims());
    checks.push(compare_tensors("embed", "embed", (&da, &widen(a.data())), (&db, &widen(b.data())), tol));
    // Before the plain backward, whose gradients the later checks use.
    checks.extend(compare_offset(p, seed.wrapping_add(2))?);
    let Pair { candidate, reference, tokens } = p;
    let (la, lb) = (candidate.loss_and_grads(tokens)?, reference.loss_and_grads(tokens)?);
    checks.push(compare_values("loss", "loss", &[1], &[la], &[1], &[lb], tol));
    checks.extend(compare_grads("grad", &candidate.grads(), &reference.grads()));
    Ok(checks)
}

/// The flat gradient buffer of data-parallel training: halved through `grads_from_flat` it
/// reads back halved, a buffer of the wrong length is refused, and the original restores the
/// gradients bit for bit.
fn compare_flat<M: DataParallel<f32>>(candidate: &mut M) -> Result<Vec<Check>> {
    let mut flat = Vec::new();
    candidate.grads_to_flat(&mut flat);
    let half: Vec<f32> = flat.iter().map(|g| g * 0.5).collect();
    candidate.grads_from_flat(&half)?;
    let mut back = Vec::new();
    candidate.grads_to_flat(&mut back);
    let (want, got) = (widen(&half), widen(&back));
    let n = [want.len()];
    let mut checks = vec![compare_tensors("flat", "grads_from_flat", (&n, &got), (&n, &want), Tolerance::FORWARD)];
    let refused = candidate.grads_from_flat(&flat[1..]).is_err();
    checks.push(compare_flag("flat", "grads_from_flat(wrong length) refused", refused));
    candidate.grads_from_flat(&flat)?;
    candidate.grads_to_flat(&mut back);
    let same = back.iter().zip(&flat).all(|(a, b)| a.to_bits() == b.to_bits()) && back.len() == flat.len();
    checks.push(compare_flag("flat", "grads restored bit for bit", same));
    Ok(checks)
}

/// One AdamW step with decay: where the gradient is clearly non-zero, Adam's first update is
/// lr * g / (|g| + eps), insensitive to the gradients' f32 differences, so the new parameters
/// must agree to the optimizer tolerance plus 1e-3 of the step. Entries whose gradient `gb`
/// is within a few gradient tolerances of zero are left out: there the sign of a
/// rounding-level gradient decides the direction of a full step.
fn compare_adam_step<M: DataParallel<f32>>(
    candidate: &mut M,
    reference: &mut CpuModel<f32>,
    gb: &[NamedTensor<f32>],
) -> Result<Vec<Check>> {
    let (lr, cfg) = (1e-2, OptimConfig::adamw(0.1, (0.9, 0.95)));
    candidate.apply_optimizer(&mut Adam::new(cfg.clone())?, lr)?;
    reference.apply_optimizer(&mut Adam::new(cfg)?, lr)?;
    let (sa, sb) = (candidate.state(), reference.state());
    let step_tol = Tolerance { abs: Tolerance::OPTIMIZER.abs + 1e-3 * lr, rel: Tolerance::OPTIMIZER.rel };
    let mut checks = Vec::new();
    for (t, g) in sb.iter().zip(gb) {
        let name = format!("opt.{}", t.name);
        let Some(x) = sa.iter().find(|x| x.name == t.name) else {
            checks.push(compare_tensors("opt", &name, (&[0], &[]), (&t.shape, &widen(&t.data)), step_tol));
            continue;
        };
        let keep: Vec<usize> = (0..t.data.len()).filter(|&i| g.data[i].abs() > 1e-3).collect();
        let pick = |d: &[f32]| keep.iter().map(|&i| d[i] as f64).collect::<Vec<_>>();
        let n = [keep.len()];
        checks.push(compare_tensors("opt", &name, (&n, &pick(&x.data)), (&n, &pick(&t.data)), step_tol));
    }
    Ok(checks)
}

/// Three real training steps from the stepped weights, through the core's trainer; then
/// resuming: a fresh candidate (from `build`) given the trained weights and the optimizer
/// state (from the backend when it holds its own moments, else from the host Adam, as a
/// checkpoint takes them) must take the same next step as the candidate that never stopped.
fn compare_training_and_resume<M: DataParallel<f32>>(
    candidate: M,
    reference: CpuModel<f32>,
    build: impl Fn() -> Result<M>,
    tokens: &Tokens<f32>,
) -> Result<Vec<Check>> {
    let series = |m: &mut dyn FnMut(&Tokens<f32>) -> Result<StepRecord>| -> Result<Vec<StepRecord>> {
        (0..3).map(|_| m(tokens)).collect()
    };
    let sched = boldcast_core::ScheduleConfig::Constant { lr: 1e-3 };
    let opt = || Adam::<f32>::new(OptimConfig::adam_l2(0.01, (0.9, 0.999)));
    let mut ta = Trainer::new(candidate, opt()?, sched.clone(), (), Some(0.5));
    let mut tb = Trainer::new(reference, opt()?, sched.clone(), (), Some(0.5));
    let ra = series(&mut |t| ta.step(t))?;
    let rb = series(&mut |t| tb.step(t))?;
    let mut checks = Vec::new();
    for (name, f) in
        [("train.loss", (|r: &StepRecord| r.loss) as fn(&StepRecord) -> f64), ("train.grad_norm", |r| r.grad_norm)]
    {
        let (xa, xb): (Vec<f64>, Vec<f64>) = (ra.iter().map(f).collect(), rb.iter().map(f).collect());
        checks.push(compare_values(name, name, &[xa.len()], &xa, &[xb.len()], &xb, Tolerance::FORWARD));
    }
    let mut resumed = build()?;
    resumed.load_state(&ta.model.state())?;
    let (t, moments) = match ta.model.optimizer_state() {
        Some(held) => held,
        None => (ta.optimizer.steps(), ta.optimizer.moments().to_vec()),
    };
    resumed.restore_optimizer_state(t, &moments)?;
    let mut host = opt()?;
    host.restore(t, moments);
    let mut tr = Trainer::new(resumed, host, sched, (), Some(0.5));
    ta.step(tokens)?;
    tr.step(tokens)?;
    for (x, y) in tr.model.state().iter().zip(ta.model.state().iter()) {
        let name = format!("resume.{}", x.name);
        let (a, b) = (widen(&x.data), widen(&y.data));
        checks.push(compare_tensors("resume", &name, (&x.shape, &a), (&y.shape, &b), Tolerance::OPTIMIZER));
    }
    Ok(checks)
}

/// Every gradient of `got` against the tensor of the same name in `want`, named
/// `<group>.<param>`; a missing one fails.
fn compare_grads(group: &str, got: &[NamedTensor<f32>], want: &[NamedTensor<f32>]) -> Vec<Check> {
    let tol = Tolerance::FORWARD;
    let mut checks = Vec::with_capacity(want.len());
    for g in want {
        let name = format!("{group}.{}", g.name);
        checks.push(match got.iter().find(|x| x.name == g.name) {
            Some(x) => compare_values(group, &name, &x.shape, &widen(&x.data), &g.shape, &widen(&g.data), tol),
            None => compare_values(group, &name, &[0], &[], &g.shape, &widen(&g.data), tol),
        });
    }
    checks
}

/// [`Model::loss_and_grads_offset`] of `candidate` and the CPU backend with one random
/// offset (uniform in ±0.5, from `seed`): the loss (`offset.loss`) and every gradient
/// (`offset.<param>`). Overwrites both models' gradients.
fn compare_offset<M: Model<f32>>(p: &mut Pair<'_, M>, seed: u64) -> Result<Vec<Check>> {
    let Pair { candidate, reference, tokens } = p;
    let s = tokens.shape();
    let shape = ForecastShape::new(s.batch, s.time, s.parcels, reference.config().n_horizons(), s.d_in);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let offset = Forecasts::new(shape, (0..shape.numel()).map(|_| rng.random_range(-0.5f32..0.5)).collect())?;
    let la = candidate.loss_and_grads_offset(tokens, &offset)?;
    let lb = reference.loss_and_grads_offset(tokens, &offset)?;
    let mut checks = vec![compare_values("offset", "offset.loss", &[1], &[la], &[1], &[lb], Tolerance::FORWARD)];
    checks.extend(compare_grads("offset", &candidate.grads(), &reference.grads()));
    Ok(checks)
}

/// Runs `n` random cases against the CPU backend; panics listing every failing check with the
/// case that produced it.
pub fn assert_random_vs_cpu<M: DataParallel<f32>>(build: &impl Build<M>, temporals: &[Temporal], n: u64, seed: u64) {
    let mut failures = Vec::new();
    for i in 0..n {
        let case = random_case(seed, i, temporals);
        match compare_with_cpu(&case, build, seed.wrapping_add(i)) {
            Ok(checks) => {
                for c in checks.iter().filter(|c| !c.passed()) {
                    failures.push(format!(
                        "case {i} ({:?}, tokens {:?}): {} ratio {:.3e} at [{}]: got {:.6e}, cpu {:.6e}{}",
                        case.model,
                        case.tokens,
                        c.tensor,
                        c.worst_ratio,
                        c.worst_index,
                        c.got,
                        c.want,
                        c.note.as_deref().map(|n| format!(" ({n})")).unwrap_or_default()
                    ));
                }
            }
            Err(e) => failures.push(format!("case {i} ({:?}): {e}", case.model)),
        }
    }
    assert!(failures.is_empty(), "{} conformance failure(s):\n{}", failures.len(), failures.join("\n"));
}

/// Expands to the conformance tests of one backend.
///
/// `golden` is the list of case directories, usually [`default_golden_cases`]:
///
/// ```text
/// boldcast_testkit::conformance_tests! {
///     build = |cfg, adj| my_backend::MyModel::new(cfg, adj),
///     temporals = [boldcast::core::Temporal::Mamba, boldcast::core::Temporal::Mamba2],
///     golden = boldcast_testkit::conformance::default_golden_cases(),
///     random_cases = 16,
/// }
/// ```
#[macro_export]
macro_rules! conformance_tests {
    (build = $build:expr, temporals = [$($t:expr),+ $(,)?], golden = $cases:expr, random_cases = $n:expr $(,)?) => {
        #[test]
        fn conformance_golden_cases() {
            $crate::conformance::assert_golden_cases(&$build, &[$($t),+], &$cases);
        }

        #[test]
        fn conformance_random_configs_match_the_cpu_backend() {
            $crate::conformance::assert_random_vs_cpu(&$build, &[$($t),+], $n, 0xB01D_CA57);
        }
    };
}
