//! The numbers of an evaluation: the AR(1) fit ([`fit_ar1`]), the baselines' forecasts
//! ([`baseline_forecasts`]) and the per-horizon MSE of a model and the baselines over
//! windows ([`evaluate`]).

use super::report::Row;
use crate::error::TrainError;
use boldcast_core::forecast::{build_forecast_targets, per_horizon_losses};
use boldcast_core::{ForecastShape, Forecasts, Model, Tokens};
use boldcast_data::{Dataset, WindowRef, WindowSpec};

/// Per-parcel AR(1) coefficients by least squares over `runs`: `sum x_t x_(t+1) / sum x_t^2`.
pub fn fit_ar1(ds: &Dataset, runs: &[usize]) -> Result<Vec<f64>, TrainError> {
    let p = ds.parcels;
    let (mut num, mut den) = (vec![0.0f64; p], vec![0.0f64; p]);
    for &r in runs {
        let run = &ds.runs[r];
        let x = run.rows(0, run.n_tr)?;
        for t in 0..run.n_tr.saturating_sub(1) {
            for q in 0..p {
                let (a, b) = (x[t * p + q], x[(t + 1) * p + q]);
                num[q] += a * b;
                den[q] += a * a;
            }
        }
    }
    Ok(num.iter().zip(&den).map(|(n, d)| if *d > 0.0 { n / d } else { 0.0 }).collect())
}

/// The baselines' forecasts `(B, T, P, H, D)` of `tokens`: zero, last token, window mean, AR(1)
/// (`phi`: one coefficient per parcel).
pub fn baseline_forecasts(tokens: &Tokens<f64>, horizons: &[usize], phi: &[f64]) -> [Forecasts<f64>; 4] {
    let s = tokens.shape();
    let (nb, nt, np, nd, nh) = (s.batch, s.time, s.parcels, s.d_in, horizons.len());
    let shape = ForecastShape::new(nb, nt, np, nh, nd);
    let zero = Forecasts::<f64>::zeros(shape);
    let (mut last, mut mean, mut ar1) = (zero.clone(), zero.clone(), zero.clone());
    for b in 0..nb {
        for (p, &phi_p) in phi.iter().enumerate().take(np) {
            let mut sum = vec![0.0f64; nd];
            for t in 0..nt {
                for (j, sj) in sum.iter_mut().enumerate() {
                    *sj += tokens.at(b, t, p, j);
                }
                let x_last = tokens.at(b, t, p, nd - 1);
                for (i, &h) in horizons.iter().enumerate() {
                    for (j, sj) in sum.iter().enumerate() {
                        let k = last.index(b, t, p, i, j);
                        last.data_mut()[k] = tokens.at(b, t, p, j);
                        mean.data_mut()[k] = sj / (t + 1) as f64;
                        let l = boldcast_core::floor::lag(h, j, nd) as i32;
                        ar1.data_mut()[k] = phi_p.powi(l) * x_last;
                    }
                }
            }
        }
    }
    [zero, last, mean, ar1]
}

/// Evaluates `model` and the baselines on `windows` of `ds` (batches of `batch`): the rows
/// `model`, `zero`, `last_token`, `window_mean`, `ar1`, each the window-weighted mean MSE.
pub fn evaluate<M: Model<f32>>(
    model: &M,
    ds: &Dataset,
    spec: &WindowSpec,
    windows: &[WindowRef],
    phi: &[f64],
    batch: usize,
) -> Result<Vec<Row>, TrainError> {
    let horizons = model.config().horizons.clone();
    let nh = horizons.len();
    let mut sums = vec![vec![0.0f64; nh]; 5];
    for chunk in windows.chunks(batch.max(1)) {
        let w = chunk.len() as f64;
        let t32 = ds.tokens::<f32>(chunk, spec)?;
        let pred = model.forward(&t32)?;
        let target = build_forecast_targets(&t32, &horizons)?;
        for (s, v) in sums[0].iter_mut().zip(per_horizon_losses(&pred, &target)?) {
            *s += v * w;
        }
        let t64 = ds.tokens::<f64>(chunk, spec)?;
        let target = build_forecast_targets(&t64, &horizons)?;
        for (i, f) in baseline_forecasts(&t64, &horizons, phi).iter().enumerate() {
            for (s, v) in sums[i + 1].iter_mut().zip(per_horizon_losses(f, &target)?) {
                *s += v * w;
            }
        }
    }
    let n = windows.len().max(1) as f64;
    let names = ["model", "zero", "last_token", "window_mean", "ar1"];
    Ok(names.iter().zip(sums).map(|(name, s)| Row::new(name, s.into_iter().map(|x| x / n).collect())).collect())
}
