//! The loss floor (MODEL.md, "The loss floor"): the exact floor of a stationary AR(1) signal,
//! and the empirical single-lag floor `1 - acf(L)^2` estimated from data.
//!
//! Element `j` of the target at horizon `h` lies `L = (h - 1) D + j + 1` TRs past the last TR
//! the model has seen; the best predictor of an AR(1) value `L` steps ahead has MSE
//! `1 - rho^(2L)`.

use crate::error::{Error, Result};
use alloc::vec::Vec;
use num_traits::Float;

/// The lag in TRs of element `j < d_in` of the target at horizon `h >= 1`; a lag past
/// `usize::MAX` saturates there (no series is that long: its autocorrelation is 0).
pub fn lag(h: usize, j: usize, d_in: usize) -> usize {
    usize::try_from(lag_wide(h, j, d_in)).unwrap_or(usize::MAX)
}

/// [`lag`] in a `u128`, which holds it for every `h`, `j` and `d_in` without overflow.
fn lag_wide(h: usize, j: usize, d_in: usize) -> u128 {
    (h as u128 - 1) * d_in as u128 + j as u128 + 1
}

/// `rho^(2L)` at the lag `L` of element `j` of horizon `h`, for any horizon. An exponent that
/// fits an `i32` is `powi`'s (the familiar values, bit for bit); a larger one would wrap there,
/// so it is `exp(2L ln|rho|)` (`2L` is even, so the sign of rho does not matter).
fn rho_pow_2lag(rho: f64, h: usize, j: usize, d_in: usize) -> f64 {
    let two_l = 2 * lag_wide(h, j, d_in);
    match i32::try_from(two_l) {
        Ok(e) => Float::powi(rho, e),
        Err(_) => Float::exp(two_l as f64 * Float::ln(Float::abs(rho))),
    }
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

/// Above this many TRs per token the mean over a token's elements is summed in closed form
/// (`mean_rho_pow_closed`), so the floor of any `d_in` takes time independent of it.
pub const SUMMED_D_IN_MAX: usize = 1 << 16;

/// The mean over `j < d_in` of `rho^(2L)` for horizon `h` as a geometric series: with
/// `r = rho^2` and `a = (h - 1) D + 1`, `r^a (1 - r^D) / (D (1 - r))`, in logarithms (exact
/// enough where `r` is near 1 or the powers underflow).
fn mean_rho_pow_closed(rho: f64, h: usize, d_in: usize) -> f64 {
    if rho == 0.0 {
        return 0.0;
    }
    let ln_r = 2.0 * Float::ln(Float::abs(rho));
    let a = lag_wide(h, 0, d_in) as f64;
    let d = d_in as f64;
    Float::exp(a * ln_r) * Float::exp_m1(d * ln_r) / (d * Float::exp_m1(ln_r))
}

/// The AR(1) floor of each horizon: the mean over token elements of `1 - rho^(2L)` (summed
/// term by term up to [`SUMMED_D_IN_MAX`] TRs per token, in closed form above).
pub fn ar1_floor_per_horizon(rho: f64, horizons: &[usize], d_in: usize) -> Result<Vec<f64>> {
    check_rho(rho)?;
    check_horizons(horizons, d_in)?;
    Ok(horizons
        .iter()
        .map(|&h| match d_in > SUMMED_D_IN_MAX {
            true => 1.0 - mean_rho_pow_closed(rho, h, d_in),
            false => (0..d_in).map(|j| 1.0 - rho_pow_2lag(rho, h, j, d_in)).sum::<f64>() / d_in as f64,
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_of_a_horizon_past_i32_lags_is_finite_and_right() {
        // 2L = 2^31 does not fit an i32 exponent: it used to wrap to i32::MIN and give -inf.
        let per = ar1_floor_per_horizon(0.9, &[1 << 30], 1).unwrap();
        assert_eq!(per, [1.0]);
        assert_eq!(ar1_floor(0.9, &[1, 1 << 30], 1).unwrap(), (0.19 + 1.0) / 2.0);
        // (h - 1) D overflows a usize: still the floor of an unpredictable target.
        assert_eq!(ar1_floor_per_horizon(0.9, &[usize::MAX], 2).unwrap(), [1.0]);
        assert_eq!(ar1_floor_per_horizon(-0.5, &[usize::MAX], 3).unwrap(), [1.0]);
        // A rho so near 1 that the power is not 0 at such a lag: 1 - rho^(2L) = 1 - exp(2L ln rho).
        let rho = 1.0 - 1e-12;
        let got = ar1_floor_per_horizon(rho, &[1 << 30], 1).unwrap()[0];
        let want = 1.0 - (-2.0 * (1u64 << 30) as f64 * 1e-12).exp();
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        // Small lags keep their old values exactly.
        assert_eq!(ar1_floor_per_horizon(0.9, &[1, 5], 1).unwrap(), {
            let r = core::hint::black_box(0.9f64);
            [1.0 - Float::powi(r, 2), 1.0 - Float::powi(r, 10)]
        });
    }

    #[test]
    fn a_huge_d_in_is_summed_in_closed_form() {
        // Term by term and in closed form agree where both are computed.
        let d = SUMMED_D_IN_MAX;
        let summed: f64 = (0..d).map(|j| 1.0 - rho_pow_2lag(0.999, 2, j, d)).sum::<f64>() / d as f64;
        let closed = 1.0 - mean_rho_pow_closed(0.999, 2, d);
        assert!((summed - closed).abs() < 1e-9, "{summed} vs {closed}");
        // d_in = u64::MAX returns at once: every lag is far past the correlation.
        assert_eq!(ar1_floor_per_horizon(0.9, &[1, 5], usize::MAX).unwrap(), [1.0, 1.0]);
        assert_eq!(ar1_floor_per_horizon(0.0, &[1], d + 1).unwrap(), [1.0]);
        // r^D is not yet 0: mean r^(j+1) = r (1 - r^D) / (D (1 - r)).
        let (rho, d) = (1.0 - 1e-7, d + 1);
        let r: f64 = rho * rho;
        let want = 1.0 - r * (1.0 - r.powi(d as i32)) / (d as f64 * (1.0 - r));
        let got = ar1_floor_per_horizon(rho, &[1], d).unwrap()[0];
        assert!((got - want).abs() < 1e-9, "{got} vs {want}");
    }

    #[test]
    fn lag_saturates_instead_of_overflowing() {
        assert_eq!(lag(4, 0, 3), 10);
        assert_eq!(lag(usize::MAX, 1, 2), usize::MAX);
    }
}
