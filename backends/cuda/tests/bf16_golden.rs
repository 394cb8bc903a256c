//! Every golden case (the conformance suite's loader, [`default_golden_cases`]) with
//! [`CudaModel`] in bf16 autocast ([`Precision::Bf16`]: bf16 matrix-product operands, f32
//! accumulation, everything else f32), measured against the golden values (PyTorch in f32):
//! the loss, the forecast, the embedding, every gradient tensor and the case's real
//! training-loss series. MODEL.md's tolerances are for f32 and bf16 cannot meet them; this
//! test holds bf16 to looser ones picked from the measurements below, and checks that the
//! mode is not a silent no-op (the bf16 forecast differs from the f32 one by far more than
//! f32 rounding) and that bf16 training decreases the loss.
//!
//! The measure of a tensor `a` against its expected `b` is `max |a - b| / max |b|` (the error
//! relative to the tensor's own scale; elementwise ratios are meaningless for entries near
//! zero), plain relative error for the loss. `knn.kproj.bias`'s gradient is zero in exact
//! arithmetic (MODEL.md), its golden value rounding noise, so it is measured relative to the
//! largest gradient entry of the whole model instead.
//!
//! Measured (`cargo test -p boldcast-cuda --test bf16_golden -- --nocapture`, shim mode,
//! the six cases of golden/cases; BENCHMARKS.md, "CUDA backend bf16 autocast (shim mode)"):
//!
//! ```text
//! case           loss     pred     embed    worst grad (tensor)                      train.loss
//! deep-k0        2.61e-4  2.37e-3  2.09e-3  1.98e-2 (layers.0 dt_proj.weight)       1.21e-3
//! flat-d3        4.56e-4  3.78e-3  1.81e-3  6.72e-3 (final_norm.weight)              4.56e-4
//! mamba2-full-k  1.72e-4  7.68e-3  6.08e-3  1.09e-2 (layers.0 in_proj.weight)        3.24e-4
//! tiny           2.48e-5  3.71e-3  2.72e-3  4.55e-2 (layers.1 x_proj.weight)         7.89e-4
//! tiny-l2-clip   6.04e-4  6.66e-3  5.51e-3  1.66e-2 (layers.0 knn.q.weight)          6.24e-4
//! tiny-mamba2    1.06e-3  7.13e-3  4.67e-3  3.94e-2 (layers.1 A_log)                 1.51e-3
//! worst          1.06e-3  7.68e-3  6.08e-3  4.55e-2                                  1.51e-3
//! tolerance      5e-3     3e-2     3e-2     1.2e-1                                   5e-3
//! ```
//!
//! The tolerances are 2.6x (gradients) to 4x (forecast and embedding) the worst measured,
//! the loss and the series sharing one (3.3x the series' worst). The errors are
//! deterministic here (fixed inputs, fixed summation order); the margin is for what a device
//! changes (cuBLAS's summation order, which moves the f32 accumulation only, about 1e-7) and
//! for new golden cases of the same sizes. The f32 model measured the same way stays at or
//! below 1.3e-6 (tiny-l2-clip and tiny-mamba2, kproj.bias aside), so the errors above are
//! bf16's: 2^-9 (2e-3) relative per rounded operand, grown through the layers and, for the
//! gradients, the backward; the bf16 forecast differs from the f32 one by 2.4e-3 or more.

use boldcast_core::{Adam, Model, StepRecord, Tokens, Trainer};
use boldcast_cuda::{CudaModel, Precision};
use boldcast_testkit::conformance::default_golden_cases;
use boldcast_testkit::golden::GoldenCase;

/// bf16 tolerance of the forecast and the embedding (`max |a - b| / max |b|`).
const FORWARD_TOL: f64 = 3e-2;
/// bf16 tolerance of the loss and of every value of the training-loss series (relative).
const LOSS_TOL: f64 = 5e-3;
/// bf16 tolerance of every gradient tensor (`max |a - b| / max |b|`).
const GRAD_TOL: f64 = 1.2e-1;
/// The least the bf16 forecast must differ from the f32 one (`max |a - b| / max |b|`): the
/// f32 model's error against the golden forecast is below 1e-6, bf16's above 1e-3.
const NOT_A_NO_OP: f64 = 1e-4;

/// `max |a - b| / scale`, with `scale = max |b|` unless given.
fn rel(a: &[f64], b: &[f64], scale: Option<f64>) -> f64 {
    assert_eq!(a.len(), b.len(), "lengths");
    let scale = scale.unwrap_or_else(|| b.iter().fold(0.0f64, |m, v| m.max(v.abs())));
    a.iter().zip(b).fold(0.0f64, |m, (x, y)| m.max((x - y).abs())) / scale
}

fn widen(x: &[f32]) -> Vec<f64> {
    x.iter().map(|&v| f64::from(v)).collect()
}

/// One case's measured errors in bf16 against the golden values.
#[derive(Debug, Default)]
struct Errors {
    loss: f64,
    pred: f64,
    embed: f64,
    /// The worst gradient tensor and its error.
    grad: (f64, String),
    /// The worst value of the training-loss series.
    train: f64,
    /// The bf16 forecast against the f32 model's.
    vs_f32: f64,
    /// The bf16 training-loss series.
    series: Vec<f64>,
}

fn model(case: &GoldenCase, p: Precision) -> CudaModel {
    let mut m = CudaModel::new(case.model_config(), case.adjacency()).unwrap().with_precision(p);
    m.load_state(&case.weights()).unwrap();
    m
}

/// The worst gradient error of a bf16 model that has run `loss_and_grads`.
fn grad_error(case: &GoldenCase, m: &CudaModel) -> (f64, String) {
    let want = |n: &str| case.expected(&format!("grad.{n}")).unwrap().1;
    let all_max = m.grads().iter().flat_map(|g| want(&g.name)).fold(0.0f64, |a, v| a.max(v.abs()));
    let mut worst = (0.0, String::new());
    for g in m.grads() {
        let scale = g.name.ends_with("knn.kproj.bias").then_some(all_max);
        let e = rel(&widen(&g.data), &want(&g.name), scale);
        if e > worst.0 || e.is_nan() {
            worst = (e, g.name.clone());
        }
    }
    worst
}

fn measure(case: &GoldenCase) -> Errors {
    let want = |n: &str| case.expected(n).unwrap_or_else(|| panic!("{}: no `{n}`", case.name())).1;
    let tokens: Tokens<f32> = case.tokens();
    let mut m = model(case, Precision::Bf16);
    let pred = widen(m.forward(&tokens).unwrap().data());
    let f32_pred = widen(model(case, Precision::F32).forward(&tokens).unwrap().data());
    let embed = widen(m.embed(&tokens).unwrap().data());
    let loss = m.loss_and_grads(&tokens).unwrap();
    let grad = grad_error(case, &m);
    let opt = Adam::<f32>::new(case.optim_config()).unwrap();
    let mut tr = Trainer::new(&mut m, opt, case.schedule(), Vec::<StepRecord>::new(), case.grad_clip_norm());
    for _ in 0..case.steps() {
        tr.step(&tokens).unwrap();
    }
    let series: Vec<f64> = tr.logger.iter().map(|r| r.loss).collect();
    let golden_series = want("train.loss");
    let train = series.iter().zip(&golden_series).fold(0.0f64, |w, (a, b)| w.max((a - b).abs() / b.abs()));
    Errors {
        loss: (loss - want("loss")[0]).abs() / want("loss")[0].abs(),
        pred: rel(&pred, &want("pred"), None),
        embed: rel(&embed, &want("embed"), None),
        grad,
        train,
        vs_f32: rel(&pred, &f32_pred, None),
        series,
    }
}

/// `v <= tol`, false for NaN.
fn within(v: f64, tol: f64) -> bool {
    v <= tol
}

/// What is wrong with one case's errors, if anything.
fn judge(name: &str, e: &Errors) -> Vec<String> {
    let mut bad = Vec::new();
    for (what, v, tol) in [
        ("pred", e.pred, FORWARD_TOL),
        ("embed", e.embed, FORWARD_TOL),
        ("loss", e.loss, LOSS_TOL),
        ("train.loss", e.train, LOSS_TOL),
    ] {
        if !within(v, tol) {
            bad.push(format!("{name}: {what} {v:.3e} over {tol:e}"));
        }
    }
    if !within(e.grad.0, GRAD_TOL) {
        bad.push(format!("{name}: grad.{} {:.3e} over {GRAD_TOL:e}", e.grad.1, e.grad.0));
    }
    if within(e.vs_f32, NOT_A_NO_OP) || e.vs_f32.is_nan() {
        bad.push(format!("{name}: the bf16 forecast is within {:.3e} of the f32 one: autocast did nothing", e.vs_f32));
    }
    let (first, last) = (e.series.first().copied(), e.series.last().copied());
    if !matches!((first, last), (Some(f), Some(l)) if e.series.len() > 1 && l < f) {
        bad.push(format!("{name}: the bf16 training loss did not decrease: {:?}", e.series));
    }
    bad
}

#[test]
fn every_golden_case_in_bf16_is_within_the_measured_tolerance() {
    let (mut bad, mut ran) = (Vec::new(), 0);
    for dir in default_golden_cases() {
        let case = GoldenCase::load(&dir).unwrap();
        let e = measure(&case);
        println!(
            "{:<14} loss {:.2e}  pred {:.2e}  embed {:.2e}  grad {:.2e} ({})  train.loss {:.2e}  bf16 vs f32 pred {:.2e}  \
             series {:.4?}",
            case.name(),
            e.loss,
            e.pred,
            e.embed,
            e.grad.0,
            e.grad.1,
            e.train,
            e.vs_f32,
            e.series
        );
        bad.extend(judge(&case.name(), &e));
        ran += 1;
    }
    assert!(ran >= 6, "only {ran} golden cases");
    assert!(bad.is_empty(), "bf16 outside its tolerance:\n{}", bad.join("\n"));
}
