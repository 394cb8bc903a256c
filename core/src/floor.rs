//! The loss floor (MODEL.md, "The loss floor"): the exact floor of a stationary AR(1) signal,
//! and the empirical single-lag floor `1 - acf(L)^2` estimated from data.
//!
//! Element `j` of the target at horizon `h` lies `L = (h - 1) D + j + 1` TRs past the last TR
//! the model has seen; the best predictor of an AR(1) value `L` steps ahead has MSE
//! `1 - rho^(2L)`.

use crate::error::{Error, Result};
use alloc::vec::Vec;
use num_traits::Float;

/// The lag in TRs of element `j < d_in` of the target at horizon `h >= 1`.
pub fn lag(h: usize, j: usize, d_in: usize) -> usize {
    (h - 1) * d_in + j + 1
}

fn check_rho(rho: f64) -> Result<()> {
    if rho.is_finite() && rho > -1.0 && rho < 1.0 {
        Ok(())
    } else {
        Err(Error::config("rho", rho, "must lie in (-1, 1) for a stationary AR(1)"))
    }
}

fn check_horizons(horizons: &[usize], d_in: usize) -> Result<()> {
    if horizons.is_empty() {
        return Err(Error::config("horizons", "[]", "at least one horizon is needed"));
    }
    if let Some(h) = horizons.iter().find(|&&h| h == 0) {
        return Err(Error::config("horizons", h, "must be at least 1"));
    }
    if d_in == 0 {
        return Err(Error::config("d_in", 0, "must be at least 1"));
    }
    Ok(())
}

/// The AR(1) floor of each horizon: the mean over token elements of `1 - rho^(2L)`.
pub fn ar1_floor_per_horizon(rho: f64, horizons: &[usize], d_in: usize) -> Result<Vec<f64>> {
    check_rho(rho)?;
    check_horizons(horizons, d_in)?;
    Ok(horizons
        .iter()
        .map(|&h| (0..d_in).map(|j| 1.0 - Float::powi(rho, 2 * lag(h, j, d_in) as i32)).sum::<f64>() / d_in as f64)
        .collect())
}

/// The AR(1) floor of the whole loss: the mean over horizons of [`ar1_floor_per_horizon`].
pub fn ar1_floor(rho: f64, horizons: &[usize], d_in: usize) -> Result<f64> {
    let per = ar1_floor_per_horizon(rho, horizons, d_in)?;
    Ok(per.iter().sum::<f64>() / per.len() as f64)
}

/// The floor of parcels with different rhos: the mean over parcels of [`ar1_floor`].
pub fn ar1_floor_parcels(rhos: &[f64], horizons: &[usize], d_in: usize) -> Result<f64> {
    if rhos.is_empty() {
        return Err(Error::config("rho", "[]", "at least one parcel is needed"));
    }
    let mut s = 0.0;
    for &r in rhos {
        s += ar1_floor(r, horizons, d_in)?;
    }
    Ok(s / rhos.len() as f64)
}

/// The biased sample autocorrelation of one series at lag `l`:
/// `sum_t (x_t - m)(x_{t+l} - m) / sum_t (x_t - m)^2`. A constant series, or `l >= len`, gives
/// 0 (no linear predictability).
pub fn acf(x: &[f64], l: usize) -> f64 {
    let n = x.len();
    if n == 0 || l >= n {
        return 0.0;
    }
    let m = x.iter().sum::<f64>() / n as f64;
    let den: f64 = x.iter().map(|v| (v - m) * (v - m)).sum();
    if den == 0.0 {
        return 0.0;
    }
    let num: f64 = (0..n - l).map(|t| (x[t] - m) * (x[t + l] - m)).sum();
    num / den
}

/// The empirical single-lag floor of a dataset.
///
/// `runs[r][p]` is parcel `p` of run `r` as a series of TRs. Per parcel and lag, `acf` is
/// averaged over runs; the floor of a parcel is the mean over horizons and token elements of
/// `1 - acf(L)^2`. Returns the per-parcel floors; the overall floor is their mean.
pub fn empirical_floor_per_parcel(runs: &[Vec<Vec<f64>>], horizons: &[usize], d_in: usize) -> Result<Vec<f64>> {
    check_horizons(horizons, d_in)?;
    let first = runs.first().ok_or_else(|| Error::config("runs", "[]", "at least one run is needed"))?;
    let np = first.len();
    for (r, run) in runs.iter().enumerate() {
        if run.len() != np {
            return Err(Error::shape(alloc::format!("runs[{r}].parcels"), np, run.len()));
        }
    }
    let mut out = Vec::with_capacity(np);
    for p in 0..np {
        let mut s = 0.0;
        let mut count = 0usize;
        for &h in horizons {
            for j in 0..d_in {
                let l = lag(h, j, d_in);
                let a = runs.iter().map(|run| acf(&run[p], l)).sum::<f64>() / runs.len() as f64;
                s += 1.0 - a * a;
                count += 1;
            }
        }
        out.push(s / count as f64);
    }
    Ok(out)
}

/// The overall empirical floor: the mean of [`empirical_floor_per_parcel`].
pub fn empirical_floor(runs: &[Vec<Vec<f64>>], horizons: &[usize], d_in: usize) -> Result<f64> {
    let per = empirical_floor_per_parcel(runs, horizons, d_in)?;
    Ok(per.iter().sum::<f64>() / per.len().max(1) as f64)
}
