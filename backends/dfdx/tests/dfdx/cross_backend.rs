//! The two backends against each other in f64: the tape gradients of this crate check the
//! hand-written gradients of `boldcast-cpu` (and the other way round) far below the golden
//! files' f32 tolerances, on models with every block (two layers, kNN attention, d_in 2), once
//! with the Mamba-1 mixer (dt_rank 2) and once with the Mamba-2 mixer (four heads, 12 tokens
//! in chunks of 5: two whole chunks and a partial one). Weights move between the two through
//! `state` / `load_state`, the checkpoint path.

use boldcast_core::model::NamedTensor;
use boldcast_core::optim::{Adam, OptimConfig};
use boldcast_core::{Adjacency, ForecastShape, Forecasts, Model, ModelConfig, Shape, Temporal, TokenShape, Tokens};
use boldcast_cpu::CpuModel;
use boldcast_dfdx::{cpu_device, Cpu, DfdxModel};

fn cfg(temporal: Temporal) -> ModelConfig {
    ModelConfig::builder()
        .temporal(temporal)
        .d_in(2)
        .d_model(20)
        .n_layers(2)
        .d_state(5)
        .expand(2)
        .d_conv(4)
        // Mamba-2 only: Di = 40 in four heads of 10; 12 tokens in chunks 0..5, 5..10, 10..12.
        .headdim(10)
        .chunk_size(5)
        .k_neighbors(3)
        .horizons(&[1, 3])
        .build()
        .unwrap()
}

fn tokens() -> Tokens<f64> {
    let (b, t, p, d) = (2, 12, 6, 2);
    let data = (0..b * t * p * d).map(|i| ((i as f64) * 0.71).sin() * 1.3 + ((i % 5) as f64 - 2.0) * 0.2).collect();
    Tokens::new(TokenShape::new(b, t, p, d), data).unwrap()
}

fn pair(cfg: ModelConfig) -> (CpuModel<f64>, DfdxModel<f64, Cpu>) {
    let adj = Adjacency::ring(6, 3).unwrap();
    let cpu = CpuModel::<f64>::new(cfg.clone(), Some(adj.clone()), 17).unwrap();
    let mut dfdx = DfdxModel::<f64, _>::new(cfg, Some(adj), 99, cpu_device()).unwrap();
    dfdx.load_state(&cpu.state()).unwrap();
    (cpu, dfdx)
}

/// Checks `|a - b| <= 1e-10 + 1e-8 |b|` everywhere; returns the largest `|a - b|`.
fn assert_close(what: &str, a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    let mut worst = 0.0f64;
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= 1e-10 + 1e-8 * y.abs(), "{what}[{i}]: dfdx {x:e}, cpu {y:e}");
        worst = worst.max((x - y).abs());
    }
    worst
}

fn assert_states_close(what: &str, a: &[NamedTensor<f64>], b: &[NamedTensor<f64>]) -> f64 {
    assert_eq!(a.len(), b.len());
    let mut worst = 0.0f64;
    for (x, y) in a.iter().zip(b) {
        assert_eq!((&x.name, &x.shape), (&y.name, &y.shape));
        worst = worst.max(assert_close(&format!("{what} {}", x.name), &x.data, &y.data));
    }
    worst
}

fn forward_loss_and_every_gradient_agree(cfg: ModelConfig) {
    let (mut cpu, mut dfdx) = pair(cfg);
    let x = tokens();
    let mut worst = assert_close("pred", dfdx.forward(&x).unwrap().data(), cpu.forward(&x).unwrap().data());
    worst = worst.max(assert_close("embed", dfdx.embed(&x).unwrap().data(), cpu.embed(&x).unwrap().data()));
    let (ld, lc) = (dfdx.loss_and_grads(&x).unwrap(), cpu.loss_and_grads(&x).unwrap());
    worst = worst.max(assert_close("loss", &[ld], &[lc]));
    worst = worst.max(assert_states_close("grad", &dfdx.grads(), &cpu.grads()));
    assert_close("grad norm^2", &[dfdx.grad_sq_norm()], &[cpu.grad_sq_norm()]);
    // With a forecast offset: the same loss and gradients, and not those without it.
    let off = offset(dfdx.config(), &x);
    let (od, oc) = (dfdx.loss_and_grads_offset(&x, &off).unwrap(), cpu.loss_and_grads_offset(&x, &off).unwrap());
    assert!((od - ld).abs() > 1e-3, "the offset changed nothing: {od} vs {ld}");
    worst = worst.max(assert_close("loss with offset", &[od], &[oc]));
    worst = worst.max(assert_states_close("grad with offset", &dfdx.grads(), &cpu.grads()));
    eprintln!(
        "{:?}: largest |dfdx - cpu| over pred, embed, loss and gradients, with and without an offset: {worst:.3e}",
        dfdx.config().temporal
    );
}

/// A forecast offset `(B, T, P, H, D)` for `x` under `cfg`, values in about ±0.5.
fn offset(cfg: &ModelConfig, x: &Tokens<f64>) -> Forecasts<f64> {
    let s = x.shape();
    let shape = ForecastShape::new(s.batch, s.time, s.parcels, cfg.n_horizons(), s.d_in);
    Forecasts::new(shape, (0..shape.numel()).map(|i| ((i as f64) * 0.37).cos() * 0.5).collect()).unwrap()
}

#[test]
fn an_offset_of_another_shape_is_refused_by_name() {
    let (_, mut dfdx) = pair(cfg(Temporal::Mamba));
    let x = tokens();
    let other = cfg(Temporal::Mamba).into_builder().horizons(&[1]).build().unwrap();
    let e = dfdx.loss_and_grads_offset(&x, &offset(&other, &x)).unwrap_err().to_string();
    assert!(e.contains("offset.horizons"), "{e}");
}

#[test]
fn mamba1_forward_loss_and_every_gradient_agree() {
    forward_loss_and_every_gradient_agree(cfg(Temporal::Mamba));
}

#[test]
fn mamba2_forward_loss_and_every_gradient_agree() {
    forward_loss_and_every_gradient_agree(cfg(Temporal::Mamba2));
}

#[test]
fn mamba2_chunk_length_changes_nothing() {
    // One chunk per step, a chunk that divides T, partial last chunks, one chunk for the whole
    // sequence (padded or not): the same function of the weights, as the CPU backend's
    // chunked scan with its default chunk length.
    let cpu = CpuModel::<f64>::new(cfg(Temporal::Mamba2), Some(Adjacency::ring(6, 3).unwrap()), 5).unwrap();
    let x = tokens();
    let want = cpu.forward(&x).unwrap();
    for chunk in [1, 3, 4, 5, 7, 12, 64] {
        let c = cfg(Temporal::Mamba2).into_builder().chunk_size(chunk).build().unwrap();
        let mut m = DfdxModel::<f64, _>::new(c, Some(Adjacency::ring(6, 3).unwrap()), 1, cpu_device()).unwrap();
        m.load_state(&cpu.state()).unwrap();
        assert_close(&format!("pred, chunk {chunk}"), m.forward(&x).unwrap().data(), want.data());
    }
}

fn training_steps_agree_and_checkpoints_cross_over(cfg: ModelConfig) {
    let (mut cpu, mut dfdx) = pair(cfg.clone());
    let x = tokens();
    let ocfg = OptimConfig::adamw(0.05, (0.9, 0.95));
    let (mut oc, mut od) = (Adam::<f64>::new(ocfg.clone()).unwrap(), Adam::<f64>::new(ocfg).unwrap());
    for s in 0..3 {
        let (lc, ld) = (cpu.loss_and_grads(&x).unwrap(), dfdx.loss_and_grads(&x).unwrap());
        assert_close(&format!("loss at step {s}"), &[ld], &[lc]);
        cpu.scale_grads(0.5);
        dfdx.scale_grads(0.5);
        cpu.apply_optimizer(&mut oc, 1e-2).unwrap();
        dfdx.apply_optimizer(&mut od, 1e-2).unwrap();
        assert_states_close(&format!("params after step {s}"), &dfdx.state(), &cpu.state());
    }
    // A checkpoint written by the dfdx model loads into the CPU model, and back.
    let mut fresh_cpu = CpuModel::<f64>::new(cfg.clone(), Some(Adjacency::ring(6, 3).unwrap()), 1).unwrap();
    fresh_cpu.load_state(&dfdx.state()).unwrap();
    assert_close("pred after crossing", fresh_cpu.forward(&x).unwrap().data(), dfdx.forward(&x).unwrap().data());
    let mut fresh_dfdx = DfdxModel::<f64, _>::new(cfg, Some(Adjacency::ring(6, 3).unwrap()), 2, cpu_device()).unwrap();
    fresh_dfdx.load_state(&cpu.state()).unwrap();
    assert_close("pred after crossing back", fresh_dfdx.forward(&x).unwrap().data(), cpu.forward(&x).unwrap().data());
}

#[test]
fn mamba1_training_steps_agree_and_checkpoints_cross_over() {
    training_steps_agree_and_checkpoints_cross_over(cfg(Temporal::Mamba));
}

#[test]
fn mamba2_training_steps_agree_and_checkpoints_cross_over() {
    // With AdamW's decay: A_log, D, dt_bias and norm.weight must not decay on either side, or
    // the parameters part after the first step.
    training_steps_agree_and_checkpoints_cross_over(cfg(Temporal::Mamba2));
}

#[test]
fn mamba2_extreme_decays_stay_finite_and_agree() {
    // dt = softplus(30) ~ 30 and A = -exp(4) ~ -55: log-decays near -1600 a step, so the
    // within-chunk sums reach -8000 and their differences above the diagonal +8000, whose
    // exponential is infinite. Clamping before the exponential keeps every value finite (a mask
    // multiplied into an infinity would give NaN), and the result still matches the CPU
    // backend's running products.
    let (mut cpu, mut dfdx) = pair(cfg(Temporal::Mamba2));
    let mut state = cpu.state();
    for t in &mut state {
        if t.name.ends_with("dt_bias") {
            t.data.iter_mut().for_each(|v| *v = 30.0);
        } else if t.name.ends_with("A_log") {
            t.data.iter_mut().for_each(|v| *v = 4.0);
        }
    }
    cpu.load_state(&state).unwrap();
    dfdx.load_state(&state).unwrap();
    let x = tokens();
    let pred = dfdx.forward(&x).unwrap();
    assert!(pred.data().iter().all(|v| v.is_finite()));
    assert_close("pred", pred.data(), cpu.forward(&x).unwrap().data());
    let (ld, lc) = (dfdx.loss_and_grads(&x).unwrap(), cpu.loss_and_grads(&x).unwrap());
    assert_close("loss", &[ld], &[lc]);
    let grads = dfdx.grads();
    assert!(grads.iter().all(|g| g.data.iter().all(|v| v.is_finite())));
    assert_states_close("grad", &grads, &cpu.grads());

    // The same in f32.
    let mut m32 =
        DfdxModel::<f32, _>::new(cfg(Temporal::Mamba2), Some(Adjacency::ring(6, 3).unwrap()), 3, cpu_device()).unwrap();
    let state32: Vec<NamedTensor<f32>> = state
        .iter()
        .map(|t| NamedTensor {
            name: t.name.clone(),
            shape: t.shape.clone(),
            data: t.data.iter().map(|&v| v as f32).collect(),
        })
        .collect();
    m32.load_state(&state32).unwrap();
    let x32 = Tokens::new(x.shape(), x.data().iter().map(|&v| v as f32).collect()).unwrap();
    let l32 = m32.loss_and_grads(&x32).unwrap();
    assert!((l32 - lc).abs() <= 1e-4 + 1e-3 * lc.abs(), "f32 loss {l32}, f64 {lc}");
    assert!(m32.grads().iter().all(|g| g.data.iter().all(|v| v.is_finite())));
}

/// Both backends draw their initial parameters through the core's `initialize`, so one seed
/// gives one model: the states agree bit for bit (f64 and f32), for both mixers.
#[test]
fn one_seed_gives_the_same_parameters_on_both_backends() {
    for temporal in [Temporal::Mamba, Temporal::Mamba2] {
        let c = cfg(temporal);
        let adj = Adjacency::ring(6, 3).unwrap();
        let cpu = CpuModel::<f64>::new(c.clone(), Some(adj.clone()), 23).unwrap().state();
        let dfdx = DfdxModel::<f64, _>::new(c.clone(), Some(adj.clone()), 23, cpu_device()).unwrap().state();
        assert_eq!(dfdx.len(), c.param_specs().len());
        assert!(dfdx == cpu, "{temporal:?}: the f64 states differ");
        let cpu32 = CpuModel::<f32>::new(c.clone(), Some(adj.clone()), 23).unwrap().state();
        let dfdx32 = DfdxModel::<f32, _>::new(c.clone(), Some(adj.clone()), 23, cpu_device()).unwrap().state();
        assert!(dfdx32 == cpu32, "{temporal:?}: the f32 states differ");
        // Not vacuous: another seed gives other weights.
        let other = CpuModel::<f64>::new(c, Some(adj), 24).unwrap().state();
        assert!(other != cpu, "{temporal:?}: seeds 23 and 24 give one model");
    }
}
