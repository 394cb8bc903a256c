//! Behaviour of [`CpuModel`] beyond its gradients: seeded initialization, validation errors
//! that name the offending value, the state dictionary, output shapes, bit-identical results
//! across runs and thread counts (the determinism contract), the public demo's parameter count; for Mamba-2 the same where it
//! differs (initialization, names and count, determinism, state round trip, weight decay).

use boldcast_core::model::NamedTensor;
use boldcast_core::optim::OptimConfig;
use boldcast_core::{
    Adam, Adjacency, Elem, Error, Model, ModelConfig, Optimizer, ParamMut, ScheduleConfig, StepRecord, Temporal,
    TokenShape, Tokens, Trainer,
};
use boldcast_cpu::ops::act::softplus;
use boldcast_cpu::CpuModel;
use boldcast_testkit::fd;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn small_cfg() -> ModelConfig {
    ModelConfig::builder()
        .temporal(Temporal::Mamba)
        .d_in(1)
        .d_model(8)
        .n_layers(2)
        .d_state(4)
        .expand(2)
        .d_conv(3)
        .headdim(64)
        .chunk_size(64)
        .k_neighbors(3)
        .horizons(&[1, 3])
        .build()
        .unwrap()
}

/// A Mamba-2 counterpart of [`small_cfg`]: 4 heads of 4, chunks of 5 (so T = 40 has 8 and
/// T = 12 a partial one).
fn small_mamba2_cfg() -> ModelConfig {
    small_cfg().into_builder().temporal(Temporal::Mamba2).headdim(4).chunk_size(5).build().unwrap()
}

fn model<E: boldcast_cpu::ops::CpuElem>(cfg: &ModelConfig, parcels: usize, seed: u64) -> CpuModel<E> {
    let adj = (cfg.k_neighbors > 0).then(|| Adjacency::ring(parcels, cfg.k_neighbors).unwrap());
    CpuModel::new(cfg.clone(), adj, seed).unwrap()
}

fn tokens<E: Elem>(b: usize, t: usize, p: usize, d: usize, seed: u64) -> Tokens<E> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let data = (0..b * t * p * d).map(|_| E::of(rng.random::<f64>() * 2.0 - 1.0)).collect();
    Tokens::new(TokenShape::new(b, t, p, d), data).unwrap()
}

fn err_text(e: Error) -> String {
    format!("{e}")
}

#[test]
fn same_seed_same_model_and_different_seed_different_model() {
    for c in [small_cfg(), small_mamba2_cfg()] {
        let (a, b, d) = (model::<f32>(&c, 5, 7), model::<f32>(&c, 5, 7), model::<f32>(&c, 5, 8));
        assert_eq!(a.state(), b.state());
        // Every randomly drawn tensor differs between seeds; the constant ones (norms, A_log, D) agree.
        for (x, y) in a.state().iter().zip(d.state()) {
            let random = !(x.name.contains("norm.") || x.name.ends_with("A_log") || x.name.ends_with(".D"));
            assert_eq!(x.data != y.data, random, "{}", x.name);
        }
        // f32 and f64 models of one seed hold the same draws up to rounding.
        let w = model::<f64>(&c, 5, 7);
        for (x, y) in a.state().iter().zip(w.state()) {
            for (&u, &v) in x.data.iter().zip(&y.data) {
                assert_eq!(u, v as f32, "{}", x.name);
            }
        }
    }
}

#[test]
fn initialization_follows_the_spec() {
    let c = ModelConfig::boldcast_demo();
    let m = model::<f64>(&c, 12, 3);
    let (di, n, r) = (c.d_inner(), c.d_state, c.dt_rank());
    for t in m.state() {
        let name = t.name.as_str();
        if name.ends_with("A_log") {
            assert_eq!(t.shape, vec![di, n]);
            for (i, &v) in t.data.iter().enumerate() {
                assert_eq!(v, ((i % n) as f64 + 1.0).ln(), "{name}[{i}]");
            }
        } else if name.ends_with("mamba.D") || name.ends_with("norm.weight") {
            assert!(t.data.iter().all(|&v| v == 1.0), "{name}");
        } else if name.ends_with("norm.bias") {
            assert!(t.data.iter().all(|&v| v == 0.0), "{name}");
        } else if name.ends_with("dt_proj.bias") {
            // softplus(bias) = dt in [1e-3, 1e-1], spread log-uniformly over it.
            let dts: Vec<f64> = t.data.iter().map(|&b| softplus(b)).collect();
            assert!(dts.iter().all(|&dt| (1e-3 * (1.0 - 1e-9)..=1e-1 * (1.0 + 1e-9)).contains(&dt)), "{name}");
            let mean_log = dts.iter().map(|d| d.ln()).sum::<f64>() / dts.len() as f64;
            assert!((mean_log - (1e-2f64).ln()).abs() < 0.4, "{name}: mean ln dt {mean_log}");
        } else {
            let fan_in = if name.ends_with("conv1d.weight") || name.ends_with("conv1d.bias") {
                c.d_conv
            } else if name.ends_with("dt_proj.weight") {
                r
            } else if name.starts_with("embed_proj") {
                c.d_in
            } else if name.ends_with("x_proj.weight") || name.ends_with("out_proj.weight") {
                di
            } else {
                c.d_model
            };
            let bound = 1.0 / (fan_in as f64).sqrt();
            let max = t.data.iter().fold(0.0f64, |a, &v| a.max(v.abs()));
            assert!(max <= bound, "{name}: |w| up to {max} > {bound}");
            if t.data.len() >= 64 {
                // A uniform draw fills its range: the largest of 64+ samples is near the bound,
                // and the mean is near zero.
                assert!(max > 0.9 * bound, "{name}: largest |w| {max} for bound {bound}");
                let mean = t.data.iter().sum::<f64>() / t.data.len() as f64;
                assert!(mean.abs() < 0.25 * bound, "{name}: mean {mean}");
            }
        }
    }
}

/// softplus(bias) = dt in [1e-3, 1e-1], spread log-uniformly over it (mean ln dt near ln 1e-2,
/// within `tol`).
fn assert_dt_bias(name: &str, bias: &[f64], tol: f64) {
    let dts: Vec<f64> = bias.iter().map(|&b| softplus(b)).collect();
    assert!(dts.iter().all(|&dt| (1e-3 * (1.0 - 1e-9)..=1e-1 * (1.0 + 1e-9)).contains(&dt)), "{name}: {dts:?}");
    let mean_log = dts.iter().map(|d| d.ln()).sum::<f64>() / dts.len() as f64;
    assert!((mean_log - (1e-2f64).ln()).abs() < tol, "{name}: mean ln dt {mean_log}");
}

#[test]
fn mamba2_initialization_follows_the_spec() {
    // 64 heads of 2 per layer, so the per-head draws are enough to test their spread.
    let c = ModelConfig::builder()
        .temporal(Temporal::Mamba2)
        .d_model(64)
        .d_state(16)
        .expand(2)
        .d_conv(4)
        .headdim(2)
        .chunk_size(16)
        .build()
        .unwrap();
    let (m, di, nh, k) = (c.d_model, c.d_inner(), c.nheads(), c.d_conv);
    assert_eq!(nh, 64);
    let model = model::<f64>(&c, 12, 3);
    let mut seen = 0;
    for t in model.state() {
        let name = t.name.as_str();
        let Some(suffix) = name.split_once(".mamba.mamba.").map(|x| x.1) else { continue };
        seen += 1;
        let bound = |fan_in: usize| 1.0 / (fan_in as f64).sqrt();
        match suffix {
            "A_log" => {
                assert_eq!(t.shape, vec![nh]);
                for (h, &v) in t.data.iter().enumerate() {
                    assert_eq!(v, (h as f64 + 1.0).ln(), "{name}[{h}]");
                }
            }
            "D" => assert!(t.shape == vec![nh] && t.data.iter().all(|&v| v == 1.0), "{name}"),
            "norm.weight" => assert!(t.shape == vec![di] && t.data.iter().all(|&v| v == 1.0), "{name}"),
            "dt_bias" => {
                assert_eq!(t.shape, vec![nh]);
                assert_dt_bias(name, &t.data, 0.6);
            }
            _ => {
                let (shape, fan_in) = match suffix {
                    "conv1d.weight" => (vec![di + 2 * c.d_state, 1, k], k),
                    "conv1d.bias" => (vec![di + 2 * c.d_state], k),
                    "in_proj.weight" => (vec![2 * di + 2 * c.d_state + nh, m], m),
                    "out_proj.weight" => (vec![m, di], di),
                    other => panic!("unexpected Mamba-2 tensor {other}"),
                };
                assert_eq!(t.shape, shape, "{name}");
                let b = bound(fan_in);
                let max = t.data.iter().fold(0.0f64, |a, &v| a.max(v.abs()));
                assert!(max <= b && max > 0.9 * b, "{name}: |w| up to {max} for bound {b}");
                let mean = t.data.iter().sum::<f64>() / t.data.len() as f64;
                assert!(mean.abs() < 0.25 * b, "{name}: mean {mean}");
            }
        }
    }
    assert_eq!(seen, 8 * c.n_layers);
}

#[test]
fn invalid_configurations_name_the_value() {
    let mut c = small_cfg();
    c.horizons = vec![1, 0];
    let e = err_text(CpuModel::<f32>::new(c, Some(Adjacency::ring(5, 3).unwrap()), 0).unwrap_err());
    assert!(e.contains("model.horizons") && e.contains("= 0"), "{e}");

    let mut c = small_cfg();
    c.d_model = 0;
    let e = err_text(CpuModel::<f32>::new(c, Some(Adjacency::ring(5, 3).unwrap()), 0).unwrap_err());
    assert!(e.contains("model.d_model") && e.contains("= 0"), "{e}");

    // k > P: the adjacency cannot be built.
    let e = err_text(Adjacency::ring(3, 4).unwrap_err());
    assert!(e.contains("k_neighbors") && e.contains("= 4"), "{e}");
    // An adjacency whose k differs from the config's.
    let e = err_text(CpuModel::<f32>::new(small_cfg(), Some(Adjacency::ring(5, 2).unwrap()), 0).unwrap_err());
    assert!(e.contains("adjacency.k") && e.contains("= 2") && e.contains("k_neighbors = 3"), "{e}");
    // Attention without an adjacency, and an adjacency without attention.
    let e = err_text(CpuModel::<f32>::new(small_cfg(), None, 0).unwrap_err());
    assert!(e.contains("model.k_neighbors") && e.contains("= 3"), "{e}");
    let mut c = small_cfg();
    c.k_neighbors = 0;
    let e = err_text(CpuModel::<f32>::new(c, Some(Adjacency::ring(5, 3).unwrap()), 0).unwrap_err());
    assert!(e.contains("model.k_neighbors") && e.contains("= 0"), "{e}");
    // The first neighbour of a parcel must be itself.
    let e = err_text(Adjacency::new(3, 2, vec![1, 0, 1, 2, 2, 0]).unwrap_err());
    assert!(e.contains("adjacency[0][0]") && e.contains("= 1"), "{e}");

    // Data that does not fit the model.
    let m = model::<f32>(&small_cfg(), 5, 0);
    let e = err_text(m.forward(&tokens(1, 8, 4, 1, 0)).unwrap_err());
    assert!(e.contains("tokens.parcels") && e.contains("expected 5, found 4"), "{e}");
    let e = err_text(m.loss(&tokens(1, 8, 5, 2, 0)).unwrap_err());
    assert!(e.contains("tokens.d_in") && e.contains("expected 1, found 2"), "{e}");
    let mut m2 = m.clone();
    let e = err_text(m2.loss_and_grads(&tokens(1, 3, 5, 1, 0)).unwrap_err());
    assert!(e.contains("tokens.time") && e.contains("= 3"), "{e}");
    assert!(matches!(m.embed(&tokens(1, 8, 6, 1, 0)), Err(Error::Shape { .. })));
    // k = 3 neighbours cannot come from 2 parcels.
    let e = err_text(m.forward(&tokens(1, 8, 2, 1, 0)).unwrap_err());
    assert!(e.contains("model.k_neighbors") && e.contains("= 3") && e.contains("2 parcels"), "{e}");
}

#[test]
fn mamba2_builds_with_the_spec_names_shapes_and_count() {
    let c = small_mamba2_cfg();
    let m = model::<f32>(&c, 5, 0);
    let specs = c.param_specs();
    for tensors in [m.state(), m.grads()] {
        assert_eq!(tensors.len(), specs.len());
        for (t, s) in tensors.iter().zip(&specs) {
            assert_eq!((&t.name, &t.shape), (&s.name, &s.shape));
            assert_eq!(t.data.len(), s.numel(), "{}", t.name);
        }
    }
    assert_eq!(m.param_specs(), &specs[..]);
    let n: usize = m.state().iter().map(|t| t.data.len()).sum();
    assert_eq!(n, c.n_params());
    // Per layer: 2 LayerNorm + 8 Mamba-2 + 10 attention tensors; no Mamba-1 names.
    assert_eq!(specs.len(), 2 + 2 * 20 + 4);
    assert!(specs.iter().all(|s| !s.name.contains("x_proj") && !s.name.contains("dt_proj")));
    // By hand (M 8, Di 16, N 4, K 3, 4 heads, conv channels 24, in_proj rows 2*16 + 2*4 + 4 = 44):
    // embed 8 + 8; per layer norm 16, dt_bias 4, conv 72 + 24, in_proj 352, A_log 4, D 4,
    // gated norm 16, out_proj 128, attention 16 + 4 * 72 = 924; final norm 16; head 16 + 2.
    assert_eq!(n, 16 + 2 * 924 + 16 + 18);

    // The mixer's own constraint is still checked: headdim must divide d_inner = 16.
    let mut c = small_mamba2_cfg();
    c.headdim = 5;
    let e = err_text(CpuModel::<f32>::new(c, Some(Adjacency::ring(5, 3).unwrap()), 0).unwrap_err());
    assert!(e.contains("model.headdim") && e.contains("= 5"), "{e}");
}

#[test]
fn mamba2_state_round_trips_and_rejects_mamba1_dictionaries() {
    let c = small_mamba2_cfg();
    let a = model::<f64>(&c, 5, 1);
    let mut b = model::<f64>(&c, 5, 2);
    assert_ne!(a.state(), b.state());
    let mut shuffled = a.state();
    shuffled.reverse();
    b.load_state(&shuffled).unwrap();
    assert_eq!(b.state(), a.state());
    let x = tokens::<f64>(2, 12, 5, 1, 4);
    assert_eq!(a.forward(&x).unwrap().data(), b.forward(&x).unwrap().data());
    assert_eq!(a.loss(&x).unwrap().to_bits(), b.loss(&x).unwrap().to_bits());

    // A Mamba-1 dictionary of the same sizes does not fit (other names, other shapes): the
    // error names a mixer tensor, and nothing changes.
    let before = b.state();
    let e = err_text(b.load_state(&model::<f64>(&small_cfg(), 5, 1).state()).unwrap_err());
    assert!(e.contains(".mamba.mamba."), "{e}");
    assert_eq!(b.state(), before);
}

#[test]
fn mamba2_weight_decay_applies_to_the_2d_tensors_except_a_log() {
    let c = small_mamba2_cfg();
    let specs = c.param_specs();
    let decaying: Vec<&str> = specs.iter().filter(|s| s.decays()).map(|s| s.name.as_str()).collect();
    let mut want = vec!["embed_proj.weight"];
    let names: Vec<String> = (0..c.n_layers)
        .flat_map(|i| {
            let mut v: Vec<String> = ["conv1d.weight", "in_proj.weight", "out_proj.weight"]
                .iter()
                .map(|s| format!("layers.{i}.mamba.mamba.{s}"))
                .collect();
            v.extend(["q", "kproj", "v", "out"].iter().map(|s| format!("layers.{i}.knn.{s}.weight")));
            v
        })
        .collect();
    want.extend(names.iter().map(String::as_str));
    want.push("head.weight");
    assert_eq!(decaying, want);
    for s in &specs {
        if s.name.ends_with("A_log") || s.name.ends_with(".D") || s.name.ends_with("dt_bias") {
            assert!(!s.decays(), "{}", s.name);
        }
    }

    // And the optimizer sees the same split: with zero gradients an AdamW step moves exactly the
    // decaying tensors, each by the factor 1 - lr * wd.
    use boldcast_core::Adam;
    let mut m = model::<f64>(&c, 5, 3);
    m.scale_grads(0.0);
    let before = m.state();
    let mut opt = Adam::new(OptimConfig::adamw(0.5, (0.9, 0.999))).unwrap();
    m.apply_optimizer(&mut opt, 0.1).unwrap();
    for (a, b) in m.state().iter().zip(&before) {
        let factor = if want.contains(&a.name.as_str()) { 1.0 - 0.1 * 0.5 } else { 1.0 };
        for (&x, &y) in a.data.iter().zip(&b.data) {
            assert!((x - factor * y).abs() <= 1e-15 * y.abs(), "{}: {y} -> {x}", a.name);
        }
    }
}

#[test]
fn load_state_rejects_bad_dictionaries_and_changes_nothing() {
    let mut m = model::<f32>(&small_cfg(), 5, 1);
    let before = m.state();
    let other = model::<f32>(&small_cfg(), 5, 2).state();

    let mut missing = other.clone();
    let gone = missing.remove(7);
    let e = err_text(m.load_state(&missing).unwrap_err());
    assert!(e.contains(&gone.name) && e.contains("missing"), "{e}");

    let mut extra = other.clone();
    extra.push(NamedTensor { name: "layers.9.knn.q.weight".into(), shape: vec![8, 8], data: vec![0.0; 64] });
    let e = err_text(m.load_state(&extra).unwrap_err());
    assert!(e.contains("layers.9.knn.q.weight"), "{e}");

    let mut wrong = other.clone();
    let i = wrong.iter().position(|t| t.name == "layers.1.mamba.mamba.A_log").unwrap();
    wrong[i].shape = vec![4, 16];
    let e = err_text(m.load_state(&wrong).unwrap_err());
    assert!(e.contains("layers.1.mamba.mamba.A_log") && e.contains("[4, 16]"), "{e}");

    assert_eq!(m.state(), before, "a failed load changed the parameters");
    // A good dictionary, in any order, replaces everything.
    let mut shuffled = other.clone();
    shuffled.reverse();
    m.load_state(&shuffled).unwrap();
    assert_eq!(m.state(), other);
}

#[test]
fn output_shapes_include_the_horizon_axis() {
    for (horizons, d_in) in [(vec![2], 1), (vec![1, 4, 2], 2)] {
        let mut c = small_cfg();
        c.horizons = horizons.clone();
        c.d_in = d_in;
        let m = model::<f32>(&c, 5, 0);
        let x = tokens::<f32>(2, 6, 5, d_in, 1);
        let y = m.forward(&x).unwrap();
        let s = y.shape();
        assert_eq!((s.batch, s.time, s.parcels, s.horizons, s.d_in), (2, 6, 5, horizons.len(), d_in));
        assert_eq!(y.data().len(), 2 * 6 * 5 * horizons.len() * d_in);
        assert!(y.data().iter().all(|v| v.is_finite()));
        let e = m.embed(&x).unwrap();
        let s = e.shape();
        assert_eq!((s.batch, s.time, s.parcels, s.d_model), (2, 6, 5, 8));
        assert_eq!(m.state().len(), c.param_specs().len());
    }
}

#[test]
fn public_demo_shape_has_732930_parameters() {
    let m = model::<f32>(&ModelConfig::boldcast_demo(), 16, 0);
    let n: usize = m.state().iter().map(|t| t.data.len()).sum();
    assert_eq!(n, 732_930);
    assert_eq!(m.grads().iter().map(|t| t.data.len()).sum::<usize>(), 732_930);
}

/// What a run on a pool of `threads` threads gives: the loss, gradients and forecasts of one
/// batch, then the record of three clipped AdamW training steps and the weights after them.
struct ThreadRun {
    loss: f64,
    grads: Vec<NamedTensor<f32>>,
    pred: Vec<f32>,
    steps: Vec<StepRecord>,
    trained: Vec<NamedTensor<f32>>,
}

fn run_with_threads(cfg: &ModelConfig, threads: usize) -> ThreadRun {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    pool.install(|| {
        let mut m = model::<f32>(cfg, 8, 5);
        // 2 * 40 * 8 = 640 rows: several blocks in every parallel reduction.
        let x = tokens::<f32>(2, 40, 8, 1, 9);
        let loss = m.loss_and_grads(&x).unwrap();
        let (grads, pred) = (m.grads(), m.forward(&x).unwrap().into_data());
        let opt = Adam::new(OptimConfig::adamw(0.1, (0.9, 0.95))).unwrap();
        let sched = ScheduleConfig::Constant { lr: 1e-2 };
        let mut tr = Trainer::new(&mut m, opt, sched, Vec::new(), Some(0.5));
        for _ in 0..3 {
            tr.step(&x).unwrap();
        }
        let steps = tr.logger;
        ThreadRun { loss, grads, pred, steps, trained: m.state() }
    })
}

/// The CPU backend's determinism contract (README.md, "Determinism"): the bits do not depend
/// on the thread count, and a run repeats exactly.
#[test]
fn thread_counts_give_identical_bits_and_runs_repeat_exactly() {
    for cfg in [small_cfg(), small_mamba2_cfg()] {
        let what = cfg.temporal.as_str();
        let one = run_with_threads(&cfg, 1);
        for threads in [1, 2, 3] {
            let r = run_with_threads(&cfg, threads);
            assert_eq!(r.loss.to_bits(), one.loss.to_bits(), "{what}: loss on {threads} threads vs 1");
            assert_eq!(r.grads, one.grads, "{what}: gradients on {threads} threads vs 1");
            let same_pred = r.pred.iter().zip(&one.pred).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same_pred && r.pred.len() == one.pred.len(), "{what}: forecasts on {threads} threads vs 1");
            let bits =
                |s: &[StepRecord]| s.iter().map(|r| (r.loss.to_bits(), r.grad_norm.to_bits())).collect::<Vec<_>>();
            assert_eq!(bits(&r.steps), bits(&one.steps), "{what}: training steps on {threads} threads vs 1");
            assert_eq!(r.trained, one.trained, "{what}: weights after training on {threads} threads vs 1");
            println!(
                "{what}: {threads} thread(s): loss, gradients, forecasts, 3 training steps bit-identical to 1 thread"
            );
        }
    }
}

/// Records what the model hands to the optimizer.
struct Recorder {
    begun: usize,
    seen: Vec<(usize, String, Vec<usize>, f64)>,
}

impl Optimizer<f64> for Recorder {
    fn begin_step(&mut self) {
        self.begun += 1;
    }
    fn update(&mut self, p: ParamMut<'_, f64>, lr: f64) {
        assert_eq!(self.begun, 1, "begin_step must come first, once");
        assert_eq!(p.value.len(), p.grad.len());
        self.seen.push((p.index, p.name.to_string(), p.shape.to_vec(), p.grad.iter().sum()));
        // A plain SGD step, to see it land on the right tensor.
        for (v, g) in p.value.iter_mut().zip(p.grad) {
            *v -= lr * g;
        }
    }
    fn steps(&self) -> u64 {
        self.begun as u64
    }
}

#[test]
fn gradients_overwrite_scale_and_feed_the_optimizer_in_order() {
    let c = small_cfg();
    let mut m = model::<f64>(&c, 5, 4);
    let x = tokens::<f64>(2, 7, 5, 1, 3);
    let l1 = m.loss_and_grads(&x).unwrap();
    let g1 = m.grads();
    let l2 = m.loss_and_grads(&x).unwrap();
    assert_eq!(l1, l2);
    assert_eq!(m.grads(), g1, "a second loss_and_grads must overwrite, not add");
    assert_eq!(l1, m.loss(&x).unwrap());

    let sq: f64 = g1.iter().flat_map(|t| t.data.iter()).map(|v| v * v).sum();
    assert!((m.grad_sq_norm() - sq).abs() <= 1e-12 * sq && sq > 0.0);
    m.scale_grads(0.5);
    assert!((m.grad_sq_norm() - 0.25 * sq).abs() <= 1e-12 * sq);

    let before = m.state();
    let mut opt = Recorder { begun: 0, seen: Vec::new() };
    m.apply_optimizer(&mut opt, 0.1).unwrap();
    assert_eq!(opt.begun, 1);
    let specs = c.param_specs();
    assert_eq!(opt.seen.len(), specs.len());
    for (i, ((idx, name, shape, gsum), s)) in opt.seen.iter().zip(&specs).enumerate() {
        assert_eq!((*idx, name, shape), (i, &s.name, &s.shape));
        let want: f64 = g1[i].data.iter().sum::<f64>() * 0.5;
        assert!((gsum - want).abs() <= 1e-12 * want.abs().max(1e-12), "{name}");
    }
    for ((a, b), g) in m.state().iter().zip(&before).zip(&g1) {
        for ((&x, &y), &gg) in a.data.iter().zip(&b.data).zip(&g.data) {
            assert!((x - (y - 0.1 * 0.5 * gg)).abs() <= 1e-15 * y.abs().max(1.0), "{}", a.name);
        }
    }
}

#[test]
fn a_few_adam_steps_lower_the_loss() {
    use boldcast_core::{Adam, ScheduleConfig, Trainer};
    for cfg in [small_cfg(), small_mamba2_cfg()] {
        let m = model::<f32>(&cfg, 5, 6);
        let x = tokens::<f32>(2, 12, 5, 1, 5);
        let opt = Adam::new(OptimConfig::adamw(0.0, (0.9, 0.999))).unwrap();
        let mut tr = Trainer::new(m, opt, ScheduleConfig::Constant { lr: 3e-3 }, Vec::new(), Some(1.0));
        for _ in 0..30 {
            tr.step(&x).unwrap();
        }
        let (first, last) = (tr.logger[0].loss, tr.logger.last().unwrap().loss);
        assert!(last < 0.9 * first, "{}: loss {first} -> {last}", cfg.temporal.as_str());
    }
}

/// A training step reuses the buffers of the steps before it (stale contents, and buffers of
/// another batch shape in between): its loss and gradients are a fresh model's, bit for bit.
#[test]
fn a_step_after_other_steps_gives_a_fresh_models_results() {
    for c in [small_cfg(), small_mamba2_cfg()] {
        let t_a = tokens::<f32>(2, 24, 5, 1, 1);
        let t_b = tokens::<f32>(2, 24, 5, 1, 2);
        let t_c = tokens::<f32>(1, 12, 5, 1, 3);
        let mut fresh = model::<f32>(&c, 5, 4);
        let want = (fresh.loss_and_grads(&t_a).unwrap(), fresh.grads());
        assert!(want.1.iter().all(|t| t.data.iter().any(|&v| v != 0.0)), "{:?}: every gradient is there", c.temporal);
        let mut used = model::<f32>(&c, 5, 4);
        used.loss_and_grads(&t_b).unwrap();
        used.loss_and_grads(&t_c).unwrap();
        let got = (used.loss_and_grads(&t_a).unwrap(), used.grads());
        assert!(got == want, "{:?}: after steps on other tokens", c.temporal);
        let again = (used.loss_and_grads(&t_a).unwrap(), used.grads());
        assert!(again == want, "{:?}: a second step on the same tokens", c.temporal);
        // The evaluation paths agree with the training forward.
        assert_eq!(used.loss(&t_a).unwrap(), want.0);
    }
}

/// Random forecasts of the shape `tokens` gives under `cfg`.
fn offset_for(cfg: &ModelConfig, tok: &Tokens<f64>, seed: u64) -> boldcast_core::Forecasts<f64> {
    let s = tok.shape();
    let shape = boldcast_core::ForecastShape::new(s.batch, s.time, s.parcels, cfg.n_horizons(), s.d_in);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = s.batch * s.time * s.parcels * cfg.n_horizons() * s.d_in;
    boldcast_core::Forecasts::new(shape, (0..n).map(|_| rng.random::<f64>() - 0.5).collect()).unwrap()
}

#[test]
fn an_offset_is_added_to_the_forecasts_the_loss_and_its_gradients_see() {
    use boldcast_core::forecast::{build_forecast_targets, forecasting_loss};
    for c in [small_cfg(), small_mamba2_cfg()] {
        let tok = tokens::<f64>(2, 12, 5, 1, 3);
        let off = offset_for(&c, &tok, 4);
        let mut m = model::<f64>(&c, 5, 11);
        let loss = m.loss_and_grads_offset(&tok, &off).unwrap();
        // The loss is MODEL.md's of forward + offset.
        let mut pred = m.forward(&tok).unwrap();
        for (v, o) in pred.data_mut().iter_mut().zip(off.data()) {
            *v += o;
        }
        let want = forecasting_loss(&pred, &build_forecast_targets(&tok, &c.horizons).unwrap()).unwrap();
        assert!((loss - want).abs() < 1e-12 * want, "{loss} vs {want}");
        // The gradients are of that loss: a central difference along a random direction.
        let grads = m.grads();
        let state = m.state();
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let dir: Vec<Vec<f64>> =
            state.iter().map(|t| t.data.iter().map(|_| rng.random::<f64>() - 0.5).collect()).collect();
        let along = |m: &mut CpuModel<f64>, eps: f64| {
            let moved: Vec<NamedTensor<f64>> = state
                .iter()
                .zip(&dir)
                .map(|(t, d)| NamedTensor {
                    data: t.data.iter().zip(d).map(|(v, dv)| v + eps * dv).collect(),
                    ..t.clone()
                })
                .collect();
            m.load_state(&moved).unwrap();
            m.loss_and_grads_offset(&tok, &off).unwrap()
        };
        let eps = 1e-6;
        let fd = fd::along(eps, |e| along(&mut m, e));
        let dot: f64 = grads.iter().zip(&dir).flat_map(|(g, d)| g.data.iter().zip(d)).map(|(g, d)| g * d).sum();
        assert!((fd - dot).abs() < 1e-6 * dot.abs().max(1.0), "finite difference {fd}, gradient {dot}");
        // A zero offset is the plain loss, bit for bit.
        m.load_state(&state).unwrap();
        let zero = boldcast_core::Forecasts::zeros(off.shape());
        let a = m.loss_and_grads_offset(&tok, &zero).unwrap();
        let ga = m.grads();
        assert_eq!(a, m.loss_and_grads(&tok).unwrap());
        assert_eq!(ga, m.grads());
    }
}

#[test]
fn an_offset_of_another_shape_is_refused_by_name() {
    let c = small_cfg();
    let tok = tokens::<f64>(2, 12, 5, 1, 3);
    let other = c.clone().into_builder().horizons(&[1]).build().unwrap();
    let off = offset_for(&other, &tok, 4);
    let e = err_text(model::<f64>(&c, 5, 11).loss_and_grads_offset(&tok, &off).unwrap_err());
    assert!(e.contains("offset.horizons"), "{e}");
}
