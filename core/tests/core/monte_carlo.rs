//! Monte-Carlo check that the forecasting loss of the oracle AR(1) predictor equals the loss
//! floor of MODEL.md: simulated AR(1) runs are patched into tokens exactly as "Data to tokens"
//! says (`tokens[t, p, j] = x[t*D + j, p]`), targets come from the core's
//! `build_forecast_targets`, and the oracle predicts `rho^L` times the last TR of each token,
//! with `L = (h - 1) D + j + 1`.
//!
//! This ties three pieces together: the patching convention, the target shift, and the lag
//! formula of the floor. An off-by-one in any of them moves the loss away from the floor by far
//! more than the sampling error.

use boldcast_core::floor::{ar1_floor, ar1_floor_per_horizon};
use boldcast_core::forecast::{build_forecast_targets, forecasting_loss, per_horizon_losses};
use boldcast_core::{ForecastShape, Forecasts, HostTensor, TokenShape, Tokens};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

/// `batch * parcels` independent unit-variance AR(1) series of `t * d` TRs, started from the
/// stationary law, as tokens `(B, T, P, D)`.
fn ar1_tokens(rng: &mut ChaCha8Rng, rho: f64, b: usize, t: usize, p: usize, d: usize) -> Tokens<f64> {
    let n = t * d;
    let s = (1.0 - rho * rho).sqrt();
    let mut data = vec![0.0; b * t * p * d];
    for bi in 0..b {
        for pi in 0..p {
            let mut x: f64 = rng.sample(StandardNormal);
            for tr in 0..n {
                // x[tr, p] goes to tokens[b, tr / D, p, tr % D].
                let (ti, j) = (tr / d, tr % d);
                data[((bi * t + ti) * p + pi) * d + j] = x;
                x = rho * x + s * rng.sample::<f64, _>(StandardNormal);
            }
        }
    }
    HostTensor::new(TokenShape::new(b, t, p, d), data).unwrap()
}

/// The oracle: `pred[b, t, p, h, j] = rho^L * tokens[b, t, p, D - 1]`, `L = (h-1) D + j + 1`.
fn oracle(tokens: &Tokens<f64>, rho: f64, horizons: &[usize]) -> Forecasts<f64> {
    let s = tokens.shape();
    let (b, t, p, d, nh) = (s.batch, s.time, s.parcels, s.d_in, horizons.len());
    let mut out = vec![0.0; b * t * p * nh * d];
    for bi in 0..b {
        for ti in 0..t {
            for pi in 0..p {
                let last = tokens.at(bi, ti, pi, d - 1);
                for (hi, &h) in horizons.iter().enumerate() {
                    for j in 0..d {
                        let l = (h - 1) * d + j + 1;
                        out[(((bi * t + ti) * p + pi) * nh + hi) * d + j] = rho.powi(l as i32) * last;
                    }
                }
            }
        }
    }
    HostTensor::new(ForecastShape::new(b, t, p, nh, d), out).unwrap()
}

/// The mean squared error of each independent series (window `b`, parcel `p`), over its
/// `T_valid * H * D` target elements.
fn series_mse(pred: &Forecasts<f64>, target: &Forecasts<f64>) -> Vec<f64> {
    let s = target.shape();
    let mut out = Vec::with_capacity(s.batch * s.parcels);
    for b in 0..s.batch {
        for p in 0..s.parcels {
            let mut sum = 0.0;
            for t in 0..s.time {
                for h in 0..s.horizons {
                    for j in 0..s.d_in {
                        let e = pred.at(b, t, p, h, j) - target.at(b, t, p, h, j);
                        sum += e * e;
                    }
                }
            }
            out.push(sum / (s.time * s.horizons * s.d_in) as f64);
        }
    }
    out
}

/// Tolerance. The `B * P` simulated series are independent and identically distributed, and
/// each contributes the same number of target elements, so the loss is exactly the mean of `R =
/// B * P` i.i.d. per-series MSEs. Its standard error is `s / sqrt(R)` with `s` the sample
/// standard deviation of those per-series MSEs; this accounts for every correlation inside a
/// series (overlapping innovations across time steps, horizons and token elements) without
/// modelling it. Each per-series MSE has expectation exactly the floor: an oracle error
/// `x_{s+L} - rho^L x_s` is a sum of the innovations after `s`, Gaussian with variance
/// `1 - rho^(2L)`, whatever `s` (the series starts from its stationary law). We allow 4
/// standard errors, plus a 1e-12 slack for the summation order.
fn tolerance(series: &[f64]) -> f64 {
    let r = series.len() as f64;
    let m = series.iter().sum::<f64>() / r;
    let var = series.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (r - 1.0);
    4.0 * (var / r).sqrt() + 1e-12
}

#[test]
fn oracle_loss_on_simulated_ar1_tokens_is_the_floor() {
    let mut rng = ChaCha8Rng::seed_from_u64(0xB01D_CA57);
    let (b, t, p) = (8, 500, 16);
    let mut cases = 0;
    let mut rejected = [0usize; 4];
    for &rho in &[0.9, -0.7, 0.5] {
        for d in [1usize, 2] {
            for horizons in [vec![1usize, 5], vec![1, 2, 4]] {
                let tokens = ar1_tokens(&mut rng, rho, b, t, p, d);
                let target: Forecasts<f64> = build_forecast_targets(&tokens, &horizons).unwrap();
                let pred = oracle(&tokens, rho, &horizons);
                let hmax = *horizons.iter().max().unwrap();
                assert_eq!(target.shape(), ForecastShape::new(b, t - hmax, p, horizons.len(), d));
                let what = format!("rho {rho}, D {d}, horizons {horizons:?}");

                let series = series_mse(&pred, &target);
                let loss = forecasting_loss(&pred, &target).unwrap();
                let mean_series = series.iter().sum::<f64>() / series.len() as f64;
                assert!((loss - mean_series).abs() <= 1e-12, "{what}: loss {loss} vs series mean {mean_series}");
                let floor = ar1_floor(rho, &horizons, d).unwrap();
                let tol = tolerance(&series);
                assert!((loss - floor).abs() <= tol, "{what}: loss {loss}, floor {floor}, tol {tol}");

                // Each horizon on its own, with the same replicate argument applied to the
                // per-series MSEs of that horizon.
                let per = per_horizon_losses(&pred, &target).unwrap();
                let per_floor = ar1_floor_per_horizon(rho, &horizons, d).unwrap();
                for (hi, (&l, &f)) in per.iter().zip(&per_floor).enumerate() {
                    let one = |x: &Forecasts<f64>| {
                        let s = x.shape();
                        let mut data = Vec::with_capacity(s.batch * s.time * s.parcels * s.d_in);
                        for bi in 0..s.batch {
                            for ti in 0..s.time {
                                for pi in 0..s.parcels {
                                    for j in 0..s.d_in {
                                        data.push(x.at(bi, ti, pi, hi, j));
                                    }
                                }
                            }
                        }
                        HostTensor::new(ForecastShape::new(s.batch, s.time, s.parcels, 1, s.d_in), data).unwrap()
                    };
                    let (ph, th) = (one(&pred), one(&target));
                    let tol_h = tolerance(&series_mse(&ph, &th));
                    assert!((l - f).abs() <= tol_h, "{what}, horizon {}: {l} vs floor {f}, tol {tol_h}", horizons[hi]);
                }

                // The tolerance has teeth: plausible wrong floor formulas, and the unit loss of
                // the mean predictor, are rejected by several cases (counted below).
                let zero = HostTensor::<_, f64>::zeros(pred.shape());
                let l0 = forecasting_loss(&zero, &target).unwrap();
                assert!(l0 > loss, "{what}: the mean predictor {l0} beats the oracle {loss}");
                if (loss - 1.0).abs() > tol {
                    rejected[3] += 1;
                }
                let mean_over = |f: &dyn Fn(usize, usize) -> f64| {
                    let v: Vec<f64> =
                        horizons.iter().flat_map(|&h| (0..d).map(move |j| (h, j))).map(|(h, j)| f(h, j)).collect();
                    v.iter().sum::<f64>() / v.len() as f64
                };
                let wrong = [
                    // L = h, ignoring the TRs inside a token.
                    mean_over(&|h, _| 1.0 - rho.powi(2 * h as i32)),
                    // L = h D for every element (the lag of the token's last TR).
                    mean_over(&|h, _| 1.0 - rho.powi(2 * (h * d) as i32)),
                    // L = h D + j (counted from the token's first TR; differs when D > 1).
                    mean_over(&|h, j| 1.0 - rho.powi(2 * (h * d + j) as i32)),
                ];
                for (k, w) in wrong.iter().enumerate() {
                    if (loss - w).abs() > tol {
                        rejected[k] += 1;
                    }
                }
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 12);
    // Each wrong lag formula, and a floor of 1, is caught by several cases.
    assert!(
        rejected.iter().all(|&r| r >= 3),
        "wrong floor formulas and the unit loss rejected in {rejected:?} of 12 cases"
    );
}
