//! Forecast targets and the forecasting loss (MODEL.md, "Targets and loss"), as pure functions
//! on host tensors. Backends compute the same loss on their own tensors; these are the
//! reference the tests and the trainer's bookkeeping use.

use crate::elem::Elem;
use crate::error::{Error, Result};
use crate::shape::{Dim, ForecastShape};
use crate::tensor::{Forecasts, Tokens};
use alloc::vec::Vec;

/// `target[b, t, p, i, :] = tokens[b, t + horizons[i], p, :]` for `t < T_valid = T - max(h)`.
///
/// The horizon axis takes the dim type `H` (`Const<2>` for `[1, 5]`, or `usize`); a horizon
/// list whose length `H` cannot hold, a horizon of 0, or `T <= max(horizons)` is an error.
pub fn build_forecast_targets<E: Elem, B: Dim, T: Dim, P: Dim, H: Dim, D: Dim>(
    tokens: &Tokens<E, B, T, P, D>,
    horizons: &[usize],
) -> Result<Forecasts<E, B, usize, P, H, D>> {
    let s = tokens.shape();
    let h_dim: H = crate::shape::convert_dim("horizons", horizons.len())?;
    if horizons.is_empty() {
        return Err(Error::config("horizons", "[]", "at least one horizon is needed"));
    }
    if let Some(&h) = horizons.iter().find(|&&h| h == 0) {
        return Err(Error::config("horizons", h, "must be at least 1"));
    }
    let hmax = horizons.iter().copied().max().unwrap_or(0);
    let t = s.time.size();
    if t <= hmax {
        return Err(Error::config("tokens.time", t, "must exceed the largest horizon"));
    }
    let tv = t - hmax;
    let (b, p, d) = (s.batch.size(), s.parcels.size(), s.d_in.size());
    let shape = ForecastShape::new(s.batch, tv, s.parcels, h_dim, s.d_in);
    let mut data = Vec::with_capacity(b * tv * p * horizons.len() * d);
    for bi in 0..b {
        for ti in 0..tv {
            for pi in 0..p {
                for &h in horizons {
                    let src = tokens.index(bi, ti + h, pi, 0);
                    data.extend_from_slice(&tokens.data()[src..src + d]);
                }
            }
        }
    }
    Forecasts::new(shape, data)
}

/// Checks that `pred` covers `target`: same B, P, H, D, and at least `T_valid` time steps.
fn check<E: Elem, B: Dim, T1: Dim, T2: Dim, P: Dim, H: Dim, D: Dim>(
    pred: &Forecasts<E, B, T1, P, H, D>,
    target: &Forecasts<E, B, T2, P, H, D>,
) -> Result<()> {
    let (a, b) = (pred.shape(), target.shape());
    let pairs = [
        ("pred.batch", b.batch.size(), a.batch.size()),
        ("pred.parcels", b.parcels.size(), a.parcels.size()),
        ("pred.horizons", b.horizons.size(), a.horizons.size()),
        ("pred.d_in", b.d_in.size(), a.d_in.size()),
    ];
    for (what, want, got) in pairs {
        if want != got {
            return Err(Error::shape(what, want, got));
        }
    }
    // An empty target would make the mean 0 / 0 = NaN, reported later as a non-finite loss.
    let axes = [("target.batch", b.batch.size()), ("target.time", b.time.size()), ("target.parcels", b.parcels.size())];
    let axes = axes.into_iter().chain([("target.horizons", b.horizons.size()), ("target.d_in", b.d_in.size())]);
    if let Some((what, _)) = axes.into_iter().find(|&(_, n)| n == 0) {
        return Err(Error::shape(what, 1, 0));
    }
    if a.time.size() < b.time.size() {
        return Err(Error::shape("pred.time (at least T_valid)", b.time.size(), a.time.size()));
    }
    Ok(())
}

/// Per-horizon mean squared error over `pred[:, :T_valid]`, accumulated in f64.
pub fn per_horizon_losses<E: Elem, B: Dim, T1: Dim, T2: Dim, P: Dim, H: Dim, D: Dim>(
    pred: &Forecasts<E, B, T1, P, H, D>,
    target: &Forecasts<E, B, T2, P, H, D>,
) -> Result<Vec<f64>> {
    check(pred, target)?;
    let s = target.shape();
    let (nb, tv, np, nh, nd) = (s.batch.size(), s.time.size(), s.parcels.size(), s.horizons.size(), s.d_in.size());
    let mut sums = alloc::vec![0.0f64; nh];
    for b in 0..nb {
        for t in 0..tv {
            for p in 0..np {
                for (h, sum) in sums.iter_mut().enumerate() {
                    let (i, j) = (pred.index(b, t, p, h, 0), target.index(b, t, p, h, 0));
                    for k in 0..nd {
                        let e = pred.data()[i + k].f64() - target.data()[j + k].f64();
                        *sum += e * e;
                    }
                }
            }
        }
    }
    let n = (nb * tv * np * nd) as f64;
    Ok(sums.into_iter().map(|x| x / n).collect())
}

/// The forecasting loss: MSE over all `B * T_valid * P * H * D` elements of
/// `pred[:, :T_valid]` against `target`; equal to the mean of [`per_horizon_losses`].
pub fn forecasting_loss<E: Elem, B: Dim, T1: Dim, T2: Dim, P: Dim, H: Dim, D: Dim>(
    pred: &Forecasts<E, B, T1, P, H, D>,
    target: &Forecasts<E, B, T2, P, H, D>,
) -> Result<f64> {
    let per = per_horizon_losses(pred, target)?;
    Ok(per.iter().sum::<f64>() / per.len().max(1) as f64)
}
