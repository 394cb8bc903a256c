//! Property tests of the core's pure maths against MODEL.md, written from the text and not
//! from the implementation: the loss floor, targets and the forecasting loss, the learning-rate
//! schedules, Adam/AdamW with their weight-decay groups, and gradient clipping.
//!
//! Every reference formula below is re-derived here on purpose (scalar, f64), so a bug in the
//! core cannot hide by being copied into its own oracle.

use boldcast_core::error::Error;
use boldcast_core::floor::{acf, ar1_floor, ar1_floor_parcels, ar1_floor_per_horizon, empirical_floor, lag};
use boldcast_core::forecast::{build_forecast_targets, forecasting_loss, per_horizon_losses};
use boldcast_core::optim::{clip_factor, decays, global_norm};
use boldcast_core::{
    Adam, Const, ForecastShape, Forecasts, HostTensor, OptimConfig, Optimizer, OptimizerKind, ParamMut, Schedule,
    ScheduleConfig, Shape, TokenShape, Tokens,
};
use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

// ---------------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------------

/// A uniform draw in `[0, 1)` from quickcheck's generator (its own `f64` includes NaN and
/// infinities, which these properties exclude by construction).
fn unit(g: &mut Gen) -> f64 {
    (u32::arbitrary(g) as f64) / (u32::MAX as f64 + 1.0)
}

fn range(g: &mut Gen, lo: usize, hi: usize) -> usize {
    lo + (u32::arbitrary(g) as usize) % (hi - lo + 1)
}

/// A stationary AR(1) coefficient in (-0.999, 0.999) and a floor configuration.
#[derive(Clone, Debug)]
struct FloorCase {
    rho: f64,
    horizons: Vec<usize>,
    d_in: usize,
}

impl Arbitrary for FloorCase {
    fn arbitrary(g: &mut Gen) -> Self {
        let rho = (2.0 * unit(g) - 1.0) * 0.999;
        let n = range(g, 1, 5);
        let horizons = (0..n).map(|_| range(g, 1, 16)).collect();
        FloorCase { rho, horizons, d_in: range(g, 1, 4) }
    }
}

/// Random token sizes and a horizon list (unsorted, repeats allowed) that fits in `T`.
#[derive(Clone, Debug)]
struct TokenCase {
    b: usize,
    t: usize,
    p: usize,
    d: usize,
    horizons: Vec<usize>,
    seed: u64,
}

impl Arbitrary for TokenCase {
    fn arbitrary(g: &mut Gen) -> Self {
        let t = range(g, 2, 14);
        let n = range(g, 1, 4);
        let horizons = (0..n).map(|_| range(g, 1, t - 1)).collect();
        TokenCase { b: range(g, 1, 3), t, p: range(g, 1, 4), d: range(g, 1, 3), horizons, seed: u64::arbitrary(g) }
    }
}

fn qc() -> QuickCheck {
    QuickCheck::new().tests(300)
}

/// Tokens whose every value is distinct (its flat index plus a random offset), so a wrong shift
/// or axis cannot produce a matching value by accident.
fn distinct_tokens(c: &TokenCase) -> Tokens<f64> {
    let shape = TokenShape::new(c.b, c.t, c.p, c.d);
    let off = (c.seed % 1000) as f64 * 0.001;
    let n = c.b * c.t * c.p * c.d;
    HostTensor::new(shape, (0..n).map(|i| i as f64 + off).collect()).unwrap()
}

fn normal_vec(rng: &mut ChaCha8Rng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.sample::<f64, _>(StandardNormal)).collect()
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * (1.0 + a.abs().max(b.abs()))
}

// ---------------------------------------------------------------------------------------------
// The loss floor
// ---------------------------------------------------------------------------------------------

#[test]
fn floor_lies_in_unit_interval_and_grows_with_the_horizon() {
    fn prop(c: FloorCase) -> bool {
        let per = ar1_floor_per_horizon(c.rho, &c.horizons, c.d_in).unwrap();
        let all = ar1_floor(c.rho, &c.horizons, c.d_in).unwrap();
        if !(0.0..=1.0).contains(&all) || per.iter().any(|f| !(0.0..=1.0).contains(f)) {
            return false;
        }
        // Order the horizons: a longer horizon can never have a lower floor.
        let mut pairs: Vec<(usize, f64)> = c.horizons.iter().copied().zip(per.iter().copied()).collect();
        pairs.sort_by_key(|&(h, _)| h);
        pairs.windows(2).all(|w| w[1].1 >= w[0].1) && close(all, per.iter().sum::<f64>() / per.len() as f64, 1e-14)
    }
    qc().quickcheck(prop as fn(FloorCase) -> bool);
}

#[test]
fn floor_with_one_tr_per_token_is_one_minus_rho_to_the_2h() {
    fn prop(c: FloorCase) -> bool {
        let per = ar1_floor_per_horizon(c.rho, &c.horizons, 1).unwrap();
        c.horizons.iter().zip(&per).all(|(&h, &f)| close(f, 1.0 - c.rho.abs().powf(2.0 * h as f64), 1e-12))
    }
    qc().quickcheck(prop as fn(FloorCase) -> bool);
}

#[test]
fn floor_with_patches_averages_the_lags_of_the_token_elements() {
    // MODEL.md: element j at horizon h lies L = (h-1) D + j + 1 TRs ahead.
    fn prop(c: FloorCase) -> bool {
        let per = ar1_floor_per_horizon(c.rho, &c.horizons, c.d_in).unwrap();
        c.horizons.iter().zip(&per).all(|(&h, &f)| {
            let want =
                (0..c.d_in).map(|j| 1.0 - c.rho.abs().powf(2.0 * ((h - 1) * c.d_in + j + 1) as f64)).sum::<f64>()
                    / c.d_in as f64;
            close(f, want, 1e-12)
        })
    }
    qc().quickcheck(prop as fn(FloorCase) -> bool);
    assert_eq!(lag(1, 0, 1), 1);
    assert_eq!(lag(2, 1, 2), 4);
    assert_eq!(lag(4, 0, 3), 10);
}

#[test]
fn floor_is_symmetric_in_the_sign_of_rho() {
    fn prop(c: FloorCase) -> bool {
        let a = ar1_floor_per_horizon(c.rho, &c.horizons, c.d_in).unwrap();
        let b = ar1_floor_per_horizon(-c.rho, &c.horizons, c.d_in).unwrap();
        a.iter().zip(&b).all(|(x, y)| close(*x, *y, 1e-15))
    }
    qc().quickcheck(prop as fn(FloorCase) -> bool);
}

#[test]
fn floor_of_parcels_is_the_mean_of_their_floors() {
    let rhos = [0.9, -0.5, 0.0, 0.3];
    let h = [1, 2, 4];
    let want = rhos.iter().map(|&r| ar1_floor(r, &h, 2).unwrap()).sum::<f64>() / 4.0;
    assert!(close(ar1_floor_parcels(&rhos, &h, 2).unwrap(), want, 1e-15));
    // rho = 0: nothing is predictable, the floor is the unit variance.
    assert_eq!(ar1_floor(0.0, &h, 2).unwrap(), 1.0);
    // A hand value: rho 0.9, horizons [1, 5], D 1 -> mean(1 - 0.81, 1 - 0.9^10).
    let hand = (0.19 + (1.0 - 0.9f64.powi(10))) / 2.0;
    assert!(close(ar1_floor(0.9, &[1, 5], 1).unwrap(), hand, 1e-14));
}

fn config_error(e: Error) -> (String, String) {
    match e {
        Error::Config { field, value, .. } => (field, value),
        other => panic!("expected Error::Config, got {other:?}"),
    }
}

#[test]
fn floor_errors_name_the_offending_value() {
    for rho in [1.0, -1.0, 1.5, -3.0] {
        let e = ar1_floor(rho, &[1], 1).unwrap_err();
        let text = e.to_string();
        let (field, value) = config_error(e);
        assert_eq!(field, "rho");
        assert_eq!(value, rho.to_string());
        assert!(text.contains("rho") && text.contains(&rho.to_string()), "{text}");
    }
    let (field, value) = config_error(ar1_floor(f64::NAN, &[1], 1).unwrap_err());
    assert_eq!((field.as_str(), value.as_str()), ("rho", "NaN"));
    let (field, value) = config_error(ar1_floor(0.5, &[1, 0, 3], 1).unwrap_err());
    assert_eq!((field.as_str(), value.as_str()), ("horizons", "0"));
    let (field, _) = config_error(ar1_floor(0.5, &[], 1).unwrap_err());
    assert_eq!(field, "horizons");
    let (field, value) = config_error(ar1_floor(0.5, &[1], 0).unwrap_err());
    assert_eq!((field.as_str(), value.as_str()), ("d_in", "0"));
    let (field, _) = config_error(ar1_floor_parcels(&[], &[1], 1).unwrap_err());
    assert_eq!(field, "rho");
    assert!(ar1_floor_parcels(&[0.5, 1.0], &[1], 1).is_err());
}

/// Simulates `len` TRs of a unit-variance AR(1) started from its stationary law.
fn ar1_series(rng: &mut ChaCha8Rng, rho: f64, len: usize) -> Vec<f64> {
    let s = (1.0 - rho * rho).sqrt();
    let mut x = Vec::with_capacity(len);
    let mut v: f64 = rng.sample(StandardNormal);
    for _ in 0..len {
        x.push(v);
        v = rho * v + s * rng.sample::<f64, _>(StandardNormal);
    }
    x
}

#[test]
fn empirical_floor_of_a_long_ar1_is_near_the_exact_floor() {
    // Tolerance. For an AR(1) the sample autocorrelation at lag L over n points has (Bartlett)
    //   var r_L ~= [ (1 + rho^2)(1 - rho^(2L)) / (1 - rho^2) - 2 L rho^(2L) ] / n,
    // and by the delta method var(1 - r_L^2) ~= (2 rho^L)^2 var r_L. The floor is a mean over
    // parcels and lags; its standard deviation is at most the mean of the per-lag standard
    // deviations (triangle inequality), divided by sqrt(parcels) as the parcels are independent
    // simulations. The biased
    // estimator also has an O(1/n) bias of about (L + (1 + |rho|)/(1 - |rho|)) / n in r_L (the
    // 1/n factor and the mean subtraction); we allow 5 standard deviations plus 3x that bias.
    let n = 100_000;
    let parcels = 4;
    let mut rng = ChaCha8Rng::seed_from_u64(20261129);
    let mut checked = 0;
    for &rho in &[0.9, -0.6, 0.3] {
        for &(ref horizons, d_in) in &[(vec![1usize, 5], 1usize), (vec![1, 2, 4], 2)] {
            let run: Vec<Vec<f64>> = (0..parcels).map(|_| ar1_series(&mut rng, rho, n)).collect();
            let got = empirical_floor(&[run], horizons, d_in).unwrap();
            let want = ar1_floor(rho, horizons, d_in).unwrap();
            let (mut sd, mut bias, mut count) = (0.0, 0.0, 0.0);
            for &h in horizons {
                for j in 0..d_in {
                    let l = ((h - 1) * d_in + j + 1) as f64;
                    let r2l = rho.abs().powf(2.0 * l);
                    let var_r = ((1.0 + rho * rho) * (1.0 - r2l) / (1.0 - rho * rho) - 2.0 * l * r2l) / n as f64;
                    sd += 2.0 * rho.abs().powf(l) * var_r.max(0.0).sqrt();
                    bias += 2.0 * rho.abs().powf(l) * (l + (1.0 + rho.abs()) / (1.0 - rho.abs())) / n as f64;
                    count += 1.0;
                }
            }
            let tol = 5.0 * sd / count / (parcels as f64).sqrt() + 3.0 * bias / count;
            assert!(
                (got - want).abs() <= tol,
                "rho {rho}, horizons {horizons:?}, d_in {d_in}: empirical {got}, exact {want}, tol {tol}"
            );
            // The tolerance is tight enough to tell rho from a rho off by 0.02.
            let off = ar1_floor((rho.abs() - 0.02) * rho.signum(), horizons, d_in).unwrap();
            assert!((off - want).abs() > 2.0 * tol, "tolerance {tol} too loose for rho {rho}");
            checked += 1;
        }
    }
    assert_eq!(checked, 6);
}

#[test]
fn acf_matches_the_biased_estimator() {
    let x = [1.0, 3.0, 2.0, 5.0, 4.0];
    // mean 3; deviations -2, 0, -1, 2, 1; den = 10; lag 1: 0 + 0 + -2 + 2 = 0; lag 2: 2 + 0 + -1 = 1.
    assert!(close(acf(&x, 0), 1.0, 1e-15));
    assert!(close(acf(&x, 1), 0.0, 1e-15));
    assert!(close(acf(&x, 2), 0.1, 1e-15));
    assert_eq!(acf(&x, 5), 0.0);
    assert_eq!(acf(&[2.0; 4], 1), 0.0);
}

// ---------------------------------------------------------------------------------------------
// Targets and the forecasting loss
// ---------------------------------------------------------------------------------------------

#[test]
fn targets_are_the_tokens_shifted_by_each_horizon() {
    fn prop(c: TokenCase) -> bool {
        let tokens = distinct_tokens(&c);
        let target: Forecasts<f64> = build_forecast_targets(&tokens, &c.horizons).unwrap();
        let hmax = *c.horizons.iter().max().unwrap();
        let s = target.shape();
        if s != ForecastShape::new(c.b, c.t - hmax, c.p, c.horizons.len(), c.d) {
            return false;
        }
        for b in 0..c.b {
            for t in 0..c.t - hmax {
                for p in 0..c.p {
                    for (i, &h) in c.horizons.iter().enumerate() {
                        for j in 0..c.d {
                            // Row-major index of tokens[b, t + h, p, j], computed here.
                            let want = tokens.data()[((b * c.t + t + h) * c.p + p) * c.d + j];
                            if target.at(b, t, p, i, j) != want {
                                return false;
                            }
                        }
                    }
                }
            }
        }
        true
    }
    qc().quickcheck(prop as fn(TokenCase) -> bool);
}

/// Random predictions covering all `T` tokens (longer than the targets, as a model gives).
fn random_pred(c: &TokenCase) -> Forecasts<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(c.seed);
    let shape = ForecastShape::new(c.b, c.t, c.p, c.horizons.len(), c.d);
    HostTensor::new(shape, normal_vec(&mut rng, shape.numel())).unwrap()
}

#[test]
fn loss_is_the_mse_over_valid_steps_and_the_mean_of_per_horizon_losses() {
    fn prop(c: TokenCase) -> bool {
        let tokens = distinct_tokens(&c);
        let target: Forecasts<f64> = build_forecast_targets(&tokens, &c.horizons).unwrap();
        let pred = random_pred(&c);
        let loss = forecasting_loss(&pred, &target).unwrap();
        let per = per_horizon_losses(&pred, &target).unwrap();
        // Direct MSE over pred[:, :T_valid] with hand-written flat indices.
        let (tv, nh) = (target.shape().time, c.horizons.len());
        let (mut sum, mut per_sum) = (0.0, vec![0.0; nh]);
        for b in 0..c.b {
            for t in 0..tv {
                for p in 0..c.p {
                    for (h, acc) in per_sum.iter_mut().enumerate() {
                        for j in 0..c.d {
                            let a = pred.data()[(((b * c.t + t) * c.p + p) * nh + h) * c.d + j];
                            let y = target.data()[(((b * tv + t) * c.p + p) * nh + h) * c.d + j];
                            sum += (a - y) * (a - y);
                            *acc += (a - y) * (a - y);
                        }
                    }
                }
            }
        }
        let n = (c.b * tv * c.p * nh * c.d) as f64;
        let mean_per = per.iter().sum::<f64>() / nh as f64;
        close(loss, sum / n, 1e-12)
            && close(loss, mean_per, 1e-12)
            && per.iter().zip(&per_sum).all(|(a, s)| close(*a, s / (n / nh as f64), 1e-12))
    }
    qc().quickcheck(prop as fn(TokenCase) -> bool);
}

#[test]
fn loss_of_the_targets_themselves_is_zero() {
    fn prop(c: TokenCase) -> bool {
        let tokens = distinct_tokens(&c);
        let target: Forecasts<f64> = build_forecast_targets(&tokens, &c.horizons).unwrap();
        forecasting_loss(&target, &target).unwrap() == 0.0
    }
    qc().quickcheck(prop as fn(TokenCase) -> bool);
}

fn shape_error(e: Error) -> String {
    match e {
        Error::Shape { what, .. } => what,
        other => panic!("expected Error::Shape, got {other:?}"),
    }
}

#[test]
fn runtime_shape_mismatches_are_shape_errors_not_panics() {
    let c = TokenCase { b: 2, t: 8, p: 3, d: 2, horizons: vec![1, 3], seed: 1 };
    let tokens = distinct_tokens(&c);
    let target: Forecasts<f64> = build_forecast_targets(&tokens, &c.horizons).unwrap();
    let tv = target.shape().time;
    let cases = [
        (ForecastShape::new(3, 8, 3, 2, 2), "pred.batch"),
        (ForecastShape::new(2, 8, 4, 2, 2), "pred.parcels"),
        (ForecastShape::new(2, 8, 3, 3, 2), "pred.horizons"),
        (ForecastShape::new(2, 8, 3, 2, 1), "pred.d_in"),
        (ForecastShape::new(2, tv - 1, 3, 2, 2), "pred.time"),
    ];
    for (shape, what) in cases {
        let pred = HostTensor::<_, f64>::zeros(shape);
        let e1 = shape_error(forecasting_loss(&pred, &target).unwrap_err());
        let e2 = shape_error(per_horizon_losses(&pred, &target).unwrap_err());
        assert!(e1.starts_with(what) && e2.starts_with(what), "{shape:?}: {e1} / {e2}");
    }
    // Exactly T_valid steps is enough.
    let pred = HostTensor::<_, f64>::zeros(ForecastShape::new(2, tv, 3, 2, 2));
    assert!(forecasting_loss(&pred, &target).is_ok());
    // A data length that does not fit the shape.
    assert_eq!(
        shape_error(HostTensor::<_, f64>::new(TokenShape::new(1, 2, 3, 1), vec![0.0; 5]).unwrap_err()),
        "tensor data length"
    );
    // A horizon list of 2 where the type fixes H = 3.
    let e = build_forecast_targets::<f64, usize, usize, usize, Const<3>, usize>(&tokens, &[1, 2]).unwrap_err();
    assert_eq!(shape_error(e), "horizons");
    // Horizons reaching past the window, and a horizon of 0, are configuration errors.
    assert!(matches!(build_forecast_targets::<f64, _, _, _, usize, _>(&tokens, &[8]), Err(Error::Config { .. })));
    assert!(matches!(build_forecast_targets::<f64, _, _, _, usize, _>(&tokens, &[0, 1]), Err(Error::Config { .. })));
    assert!(build_forecast_targets::<f64, _, _, _, usize, _>(&tokens, &[7]).is_ok());
    // An empty target (no valid step, no parcel, ...) is a shape error, not a NaN loss.
    for (shape, what) in [
        (ForecastShape::new(2, 0, 3, 2, 2), "target.time"),
        (ForecastShape::new(2, 4, 0, 2, 2), "target.parcels"),
        (ForecastShape::new(2, 4, 3, 0, 2), "target.horizons"),
    ] {
        let empty = HostTensor::<_, f64>::zeros(shape);
        let pred = HostTensor::<_, f64>::zeros(ForecastShape { time: 8, ..shape });
        assert_eq!(shape_error(forecasting_loss(&pred, &empty).unwrap_err()), what);
    }
    // No horizon at all names the horizons, not the time axis.
    let (field, value) = config_error(build_forecast_targets::<f64, _, _, _, usize, _>(&tokens, &[]).unwrap_err());
    assert_eq!((field.as_str(), value.as_str()), ("horizons", "[]"));
}

// ---------------------------------------------------------------------------------------------
// Schedules
// ---------------------------------------------------------------------------------------------

/// MODEL.md's cosine schedule, written out independently.
fn cosine_ref(lr: f64, w: u64, max_steps: u64, min_lr: f64, s: u64) -> f64 {
    if s < w {
        let w = w as f64;
        lr * (1.0 / w + (1.0 - 1.0 / w) * s as f64 / w)
    } else {
        let denom = (max_steps as f64 - w as f64).max(1.0);
        let prog = ((s as f64 - w as f64) / denom).min(1.0);
        min_lr + (lr - min_lr) * (1.0 + (std::f64::consts::PI * prog).cos()) / 2.0
    }
}

#[test]
fn cosine_schedule_at_its_boundaries() {
    let (lr, min_lr) = (1e-3, 1e-5);
    let sc = |w, m, lo| ScheduleConfig::Cosine { lr, warmup_steps: w, max_steps: m, min_lr: lo };
    let s = sc(4, 20, min_lr);
    assert!(close(s.lr(0), lr / 4.0, 1e-15), "step 0 is lr / w");
    assert!(close(s.lr(3), lr * (0.25 + 0.75 * 0.75), 1e-15), "step w-1");
    assert!(close(s.lr(4), lr, 1e-15), "step w is the peak");
    assert!(close(s.lr(12), (lr + min_lr) / 2.0, 1e-12), "half-way down the cosine");
    assert!(close(s.lr(20), min_lr, 1e-15), "max_steps reaches min_lr");
    assert!(close(s.lr(21), min_lr, 1e-15) && close(s.lr(10_000), min_lr, 1e-15), "beyond max_steps");
    // The warm-up is increasing and stays below the peak.
    assert!((0..4).all(|i| s.lr(i) < s.lr(i + 1)) && s.lr(3) < lr);
    // The cosine is non-increasing after the warm-up.
    assert!((4..30).all(|i| s.lr(i + 1) <= s.lr(i)));
    // No warm-up: step 0 is the peak, then cosine over max_steps.
    let s0 = sc(0, 10, 0.0);
    assert!(close(s0.lr(0), lr, 1e-15));
    assert!(close(s0.lr(5), lr / 2.0, 1e-12));
    assert_eq!(s0.lr(10), 0.0);
    // One warm-up step: lr * (1/1 + 0) = lr at step 0, and the cosine starts at the peak.
    let s1 = sc(1, 5, 0.0);
    assert!(close(s1.lr(0), lr, 1e-15) && close(s1.lr(1), lr, 1e-15));
    assert!(close(s1.lr(3), lr / 2.0, 1e-12));
    // max_steps at or before the warm-up end: the span is max(1, ...) = 1.
    let s2 = sc(3, 3, min_lr);
    assert!(close(s2.lr(3), lr, 1e-15) && close(s2.lr(4), min_lr, 1e-15));
    let s3 = sc(3, 1, min_lr);
    assert!(close(s3.lr(2), lr * (1.0 / 3.0 + 2.0 / 3.0 * 2.0 / 3.0), 1e-15) && close(s3.lr(4), min_lr, 1e-15));
    // The golden cases' schedule (tiny): w 2, max 6, lr 1e-3.
    let g = sc(2, 6, 0.0);
    let want = [5e-4, 7.5e-4, 1e-3, 1e-3 * (1.0 + (std::f64::consts::PI / 4.0).cos()) / 2.0, 5e-4];
    for (i, w) in want.iter().enumerate() {
        assert!(close(g.lr(i as u64), *w, 1e-14), "step {i}: {} vs {w}", g.lr(i as u64));
    }
    let c = ScheduleConfig::Constant { lr: 3e-3 };
    assert!([0, 1, 1000, u64::MAX].iter().all(|&i| c.lr(i) == 3e-3));
    assert_eq!(c.peak_lr(), 3e-3);
    assert_eq!(s.peak_lr(), lr);
}

#[test]
fn cosine_schedule_matches_the_formula_everywhere() {
    fn prop(a: u32, w: u8, span: u8, lo: u8, s: u16) -> bool {
        let lr = 1e-4 + (a as f64 / u32::MAX as f64) * 1e-2;
        let min_lr = lr * (lo as f64 / 255.0) * 0.5;
        let (w, max_steps, s) = (w as u64 % 50, (w as u64 % 50) + span as u64 % 200, s as u64 % 400);
        let sc = ScheduleConfig::Cosine { lr, warmup_steps: w, max_steps, min_lr };
        let got = sc.lr(s);
        // The warm-up starts at lr / w whatever min_lr is; after it the rate stays in [min_lr, lr].
        let in_range = s < w || got >= min_lr * (1.0 - 1e-12);
        close(got, cosine_ref(lr, w, max_steps, min_lr, s), 1e-12) && in_range && got <= lr * (1.0 + 1e-12)
    }
    qc().quickcheck(prop as fn(u32, u8, u8, u8, u16) -> bool);
}

#[test]
fn schedule_config_reads_the_golden_spelling() {
    let c: ScheduleConfig = serde_json::from_str(
        r#"{"schedule": "cosine", "lr": 0.001, "warmup_steps": 2, "max_steps": 6, "min_lr": 0.0}"#,
    )
    .unwrap();
    assert_eq!(c, ScheduleConfig::Cosine { lr: 0.001, warmup_steps: 2, max_steps: 6, min_lr: 0.0 });
    let c: ScheduleConfig = serde_json::from_str(r#"{"schedule": "constant", "lr": 0.003}"#).unwrap();
    assert_eq!(c, ScheduleConfig::Constant { lr: 0.003 });
}

// ---------------------------------------------------------------------------------------------
// Optimizers
// ---------------------------------------------------------------------------------------------

/// One tensor of a test state: name, shape, whether MODEL.md says it decays.
const PARAMS: &[(&str, &[usize], bool)] = &[
    ("embed_proj.weight", &[3, 1], true),
    ("embed_proj.bias", &[3], false),
    ("layers.0.mamba.mamba.conv1d.weight", &[2, 1, 2], true),
    ("layers.0.mamba.mamba.A_log", &[2, 2], false),
    ("layers.0.mamba.mamba.D", &[2], false),
    ("layers.1.mamba.mamba.A_log", &[2], false),
    ("layers.1.mamba.mamba.dt_bias", &[2], false),
    ("layers.0.knn.q.weight", &[2, 2], true),
    ("final_norm.weight", &[3], false),
    ("head.weight", &[2, 3], true),
];

#[derive(Copy, Clone, PartialEq, Debug)]
enum Decay {
    /// `p -= lr * wd * p` before the moments (torch.optim.AdamW).
    Decoupled,
    /// `g += wd * p` before the moments (torch.optim.Adam(weight_decay)).
    Coupled,
}

/// An independent scalar transcription of torch's `_single_tensor_adam(w)` for one element:
/// `steps` updates with gradients `grads[s]` and learning rates `lrs[s]`.
fn torch_adam_scalar(p0: f64, grads: &[f64], lrs: &[f64], wd: f64, decay: Decay, betas: (f64, f64)) -> f64 {
    let (b1, b2, eps) = (betas.0, betas.1, 1e-8);
    let (mut p, mut m, mut v) = (p0, 0.0f64, 0.0f64);
    for (s, (&g0, &lr)) in grads.iter().zip(lrs).enumerate() {
        let step = (s + 1) as f64;
        let mut g = g0;
        match decay {
            Decay::Decoupled => p *= 1.0 - lr * wd,
            Decay::Coupled => g += wd * p,
        }
        m = m * b1 + g * (1.0 - b1); // exp_avg.lerp_(grad, 1 - beta1)
        v = v * b2 + (1.0 - b2) * g * g; // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2)
        let bc1 = 1.0 - b1.powf(step);
        let bc2 = 1.0 - b2.powf(step);
        let step_size = lr / bc1;
        let denom = v.sqrt() / bc2.sqrt() + eps;
        p -= step_size * m / denom;
    }
    p
}

/// A state of [`PARAMS`] with values and per-step gradients from a seed.
struct OptRun {
    values: Vec<Vec<f64>>,
    grads: Vec<Vec<Vec<f64>>>, // [step][tensor][element]
    lrs: Vec<f64>,
}

fn opt_run(seed: u64, steps: usize) -> OptRun {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let values = PARAMS.iter().map(|(_, s, _)| normal_vec(&mut rng, s.iter().product())).collect();
    let grads =
        (0..steps).map(|_| PARAMS.iter().map(|(_, s, _)| normal_vec(&mut rng, s.iter().product())).collect()).collect();
    let lrs = (0..steps).map(|s| 1e-2 * (1.0 + s as f64) / steps as f64).collect();
    OptRun { values, grads, lrs }
}

/// Runs the core's optimizer over the whole state, in order, as a backend does.
fn run_core<E: boldcast_core::Elem>(cfg: OptimConfig, r: &OptRun) -> Vec<Vec<f64>> {
    let mut opt = Adam::<E>::new(cfg).unwrap();
    let mut values: Vec<Vec<E>> = r.values.iter().map(|v| v.iter().map(|&x| E::of(x)).collect()).collect();
    for (step, grads) in r.grads.iter().enumerate() {
        opt.begin_step();
        for (i, (name, shape, _)) in PARAMS.iter().enumerate() {
            let g: Vec<E> = grads[i].iter().map(|&x| E::of(x)).collect();
            opt.update(ParamMut { index: i, name, shape, value: &mut values[i], grad: &g }, r.lrs[step]);
        }
    }
    assert_eq!(opt.steps(), r.grads.len() as u64);
    values.into_iter().map(|v| v.into_iter().map(|x| x.f64()).collect()).collect()
}

/// The torch reference for every element, with the decay rule chosen by `decays_fn`.
fn run_ref(r: &OptRun, wd: f64, decay: Decay, betas: (f64, f64), decays_fn: impl Fn(usize) -> bool) -> Vec<Vec<f64>> {
    (0..PARAMS.len())
        .map(|i| {
            let w = if decays_fn(i) { wd } else { 0.0 };
            (0..r.values[i].len())
                .map(|k| {
                    let g: Vec<f64> = r.grads.iter().map(|gs| gs[i][k]).collect();
                    torch_adam_scalar(r.values[i][k], &g, &r.lrs, w, decay, betas)
                })
                .collect()
        })
        .collect()
}

/// Largest `|a - b| / (1e-12 + 1e-10 |b|)` per tensor, for messages.
fn worst(a: &[Vec<f64>], b: &[Vec<f64>], abs: f64, rel: f64) -> Vec<f64> {
    a.iter()
        .zip(b)
        .map(|(x, y)| x.iter().zip(y).map(|(p, q)| (p - q).abs() / (abs + rel * q.abs())).fold(0.0, f64::max))
        .collect()
}

fn assert_matches(kind: OptimizerKind, decay: Decay) {
    let betas = (0.9, 0.95);
    let wd = 0.3;
    for seed in 0..5 {
        let r = opt_run(seed, 7);
        let cfg = OptimConfig { kind, weight_decay: wd, betas, eps: 1e-8 };
        let got = run_core::<f64>(cfg.clone(), &r);
        let want = run_ref(&r, wd, decay, betas, |i| PARAMS[i].2);
        for (i, ratio) in worst(&got, &want, 1e-13, 1e-11).iter().enumerate() {
            assert!(*ratio <= 1.0, "{kind:?} {}: off by {ratio} x tolerance", PARAMS[i].0);
        }
        // The f32 optimizer tracks the same reference to f32 rounding.
        let got32 = run_core::<f32>(cfg, &r);
        for (i, ratio) in worst(&got32, &want, 1e-5, 1e-5).iter().enumerate() {
            assert!(*ratio <= 1.0, "{kind:?} f32 {}: off by {ratio} x tolerance", PARAMS[i].0);
        }
        // The comparison has teeth: each wrong variant of the rule moves some tensor far
        // outside the tolerance used above (so an implementation making that mistake fails).
        let other = if decay == Decay::Decoupled { Decay::Coupled } else { Decay::Decoupled };
        let variants: [(&str, Vec<Vec<f64>>); 5] = [
            ("no decay at all", run_ref(&r, wd, decay, betas, |_| false)),
            ("decay on every tensor", run_ref(&r, wd, decay, betas, |_| true)),
            ("A_log decays", run_ref(&r, wd, decay, betas, |i| PARAMS[i].1.len() >= 2)),
            ("1-D tensors decay", run_ref(&r, wd, decay, betas, |i| PARAMS[i].2 || PARAMS[i].1.len() == 1)),
            ("coupled/decoupled swapped", run_ref(&r, wd, other, betas, |i| PARAMS[i].2)),
        ];
        for (what, v) in variants {
            let w = worst(&v, &want, 1e-13, 1e-11);
            assert!(w.iter().any(|&x| x > 1e3), "{kind:?}: the variant `{what}` is indistinguishable");
        }
    }
}

#[test]
fn adamw_matches_torch_adamw_with_decoupled_decay_on_matrices_only() {
    assert_matches(OptimizerKind::AdamW, Decay::Decoupled);
}

#[test]
fn adam_l2_matches_torch_adam_with_coupled_decay_on_matrices_only() {
    assert_matches(OptimizerKind::AdamL2, Decay::Coupled);
}

#[test]
fn weight_decay_groups_follow_model_md() {
    for (name, shape, want) in PARAMS {
        assert_eq!(decays(name, shape), *want, "{name} {shape:?}");
    }
    // The decaying tensors shrink under AdamW with zero gradient; the others do not move.
    let r = OptRun {
        values: PARAMS.iter().map(|(_, s, _)| vec![1.0; s.iter().product()]).collect(),
        grads: vec![PARAMS.iter().map(|(_, s, _)| vec![0.0; s.iter().product()]).collect()],
        lrs: vec![0.1],
    };
    let out = run_core::<f64>(OptimConfig::adamw(0.5, (0.9, 0.999)), &r);
    for (i, (name, _, d)) in PARAMS.iter().enumerate() {
        let want = if *d { 1.0 - 0.1 * 0.5 } else { 1.0 };
        assert!(out[i].iter().all(|&x| close(x, want, 1e-15)), "{name}: {:?}", out[i]);
    }
    // Coupled L2 with zero gradient: the decaying tensors move by about lr (Adam normalizes).
    let out = run_core::<f64>(OptimConfig::adam_l2(0.5, (0.9, 0.999)), &r);
    for (i, (name, _, d)) in PARAMS.iter().enumerate() {
        let want = if *d { 0.9 } else { 1.0 };
        assert!(out[i].iter().all(|&x| (x - want).abs() < 1e-6), "{name}: {:?}", out[i]);
    }
}

#[test]
fn optimizer_matches_the_reference_for_random_hyperparameters() {
    fn prop(seed: u64, wd: u8, b1: u8, b2: u8, coupled: bool) -> TestResult {
        let wd = wd as f64 / 255.0;
        let betas = (0.5 + 0.49 * b1 as f64 / 255.0, 0.9 + 0.0999 * b2 as f64 / 255.0);
        let kind = if coupled { OptimizerKind::AdamL2 } else { OptimizerKind::AdamW };
        let decay = if coupled { Decay::Coupled } else { Decay::Decoupled };
        let r = opt_run(seed, 4);
        let got = run_core::<f64>(OptimConfig { kind, weight_decay: wd, betas, eps: 1e-8 }, &r);
        let want = run_ref(&r, wd, decay, betas, |i| PARAMS[i].2);
        TestResult::from_bool(worst(&got, &want, 1e-13, 1e-11).iter().all(|&x| x <= 1.0))
    }
    qc().tests(100).quickcheck(prop as fn(u64, u8, u8, u8, bool) -> TestResult);
}

#[test]
fn optimizer_config_rejects_bad_values_by_name() {
    let bad = [
        (OptimConfig::adamw(0.1, (1.0, 0.999)), "train.betas"),
        (OptimConfig::adamw(0.1, (0.9, -0.1)), "train.betas"),
        (OptimConfig::adamw(-0.1, (0.9, 0.999)), "train.weight_decay"),
        (OptimConfig::adamw(f64::NAN, (0.9, 0.999)), "train.weight_decay"),
        (OptimConfig { eps: 0.0, ..OptimConfig::adamw(0.1, (0.9, 0.999)) }, "train.eps"),
    ];
    for (cfg, field) in bad {
        let (f, _) = config_error(Adam::<f32>::new(cfg).unwrap_err());
        assert_eq!(f, field);
    }
}

// ---------------------------------------------------------------------------------------------
// Clipping
// ---------------------------------------------------------------------------------------------

#[test]
fn clip_factor_is_torchs_clip_grad_norm() {
    fn prop(a: u32, b: u32) -> bool {
        let norm = a as f64 / 1e6;
        let max_norm = 1e-3 + b as f64 / 1e6;
        let f = clip_factor(norm, max_norm);
        let want = (max_norm / (norm + 1e-6)).min(1.0);
        f == want && f > 0.0 && f <= 1.0 && f * norm <= max_norm * (1.0 + 1e-12)
    }
    qc().quickcheck(prop as fn(u32, u32) -> bool);
    // The 1e-6 in the denominator: a norm exactly at the threshold is still scaled (slightly).
    assert!(clip_factor(1.0, 1.0) < 1.0);
    assert_eq!(clip_factor(0.0, 1e-3), 1.0);
}

#[test]
fn global_norm_sums_every_tensor() {
    let a = [3.0f32, 0.0];
    let b = [4.0f32];
    let c: [f32; 0] = [];
    assert_eq!(global_norm([&a[..], &b[..], &c[..]]), 5.0);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let xs = normal_vec(&mut rng, 1000);
    let want = xs.iter().map(|x| x * x).sum::<f64>().sqrt();
    assert!(close(global_norm(xs.chunks(7)), want, 1e-14));
}
