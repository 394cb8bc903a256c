//! The squared errors of every row kept per held-out subject, horizon and parcel
//! ([`ErrorSums`]), beside the targets' sums, from which come the coefficient of
//! determination ([`RSquared`]) and the paired bootstrap over subjects (`boldcast_analysis::eval::bootstrap`).
//!
//! `R^2 = 1 - SSE / SST`, with `SST` the sum of squares of the targets about their mean: per
//! parcel and horizon over every held-out target of it (all windows, tokens and elements);
//! per horizon pooled over the parcels, `1 - sum SSE / sum SST`; and pooled over everything.
//! On standardized data `SST / n` is near 1 but not 1 (the held-out subjects are standardized
//! per run over the whole run, the targets are a part of it), so `1 - MSE` is not `R^2`.

use boldcast_core::{Elem, Forecasts};
use serde::Serialize;

/// Squared errors per row, subject, horizon and parcel, and the targets' sums.
#[derive(Clone, Debug, PartialEq)]
pub struct ErrorSums {
    /// The held-out subjects, sorted (the index of a window's subject).
    pub subjects: Vec<String>,
    horizons: usize,
    parcels: usize,
    /// `sse[row][(s H + h) P + p]`.
    sse: Vec<Vec<f64>>,
    /// `sum y` per `(h, p)`.
    ysum: Vec<f64>,
    /// `sum y^2` per `(h, p)`.
    yy: Vec<f64>,
    /// Targets per `(h, p)` (the same for each).
    count: f64,
}

impl ErrorSums {
    /// Zero sums of `rows` rows over `subjects`.
    pub fn new(rows: usize, subjects: Vec<String>, horizons: usize, parcels: usize) -> ErrorSums {
        let n = subjects.len() * horizons * parcels;
        let hp = horizons * parcels;
        ErrorSums {
            subjects,
            horizons,
            parcels,
            sse: vec![vec![0.0; n]; rows],
            ysum: vec![0.0; hp],
            yy: vec![0.0; hp],
            count: 0.0,
        }
    }

    /// Adds the targets `target` (`(B, T_valid, P, H, D)`) to the targets' sums.
    pub fn add_targets<E: Elem>(&mut self, target: &Forecasts<E>) {
        let s = target.shape();
        for (b, t, p, h, j) in cells(target) {
            let y = target.at(b, t, p, h, j).f64();
            self.ysum[h * self.parcels + p] += y;
            self.yy[h * self.parcels + p] += y * y;
        }
        self.count += (s.batch * s.time * s.d_in) as f64;
    }

    /// Adds the squared errors of `pred` against `target` to row `row`; `subject[b]` is the
    /// subject of window `b`.
    pub fn add_errors<E: Elem>(&mut self, row: usize, pred: &Forecasts<E>, target: &Forecasts<E>, subject: &[usize]) {
        let (nh, np) = (self.horizons, self.parcels);
        let sse = &mut self.sse[row];
        for (b, t, p, h, j) in cells(target) {
            let e = pred.at(b, t, p, h, j).f64() - target.at(b, t, p, h, j).f64();
            sse[(subject[b] * nh + h) * np + p] += e * e;
        }
    }

    /// Row `row`'s squared error of each subject at horizon index `h` (summed over parcels).
    pub fn subject_sse(&self, row: usize, h: usize) -> Vec<f64> {
        let (nh, np) = (self.horizons, self.parcels);
        (0..self.subjects.len()).map(|s| self.sse[row][(s * nh + h) * np..][..np].iter().sum()).collect()
    }

    /// Row `row`'s squared error at `(h, p)`, summed over subjects.
    fn cell_sse(&self, row: usize, h: usize, p: usize) -> f64 {
        let (nh, np) = (self.horizons, self.parcels);
        (0..self.subjects.len()).map(|s| self.sse[row][(s * nh + h) * np + p]).sum()
    }

    /// The targets' sum of squares about their mean at `(h, p)`.
    fn sst(&self, h: usize, p: usize) -> f64 {
        let k = h * self.parcels + p;
        (self.yy[k] - self.ysum[k] * self.ysum[k] / self.count.max(1.0)).max(0.0)
    }

    /// The `R^2` of row `row`, called `name`.
    pub fn r_squared(&self, row: usize, name: &str) -> RSquared {
        let (nh, np) = (self.horizons, self.parcels);
        let r2 = |sse: f64, sst: f64| if sst > 0.0 { 1.0 - sse / sst } else { f64::NAN };
        let per_parcel: Vec<Vec<f64>> =
            (0..nh).map(|h| (0..np).map(|p| r2(self.cell_sse(row, h, p), self.sst(h, p))).collect()).collect();
        let sums = |h: usize| (0..np).fold((0.0, 0.0), |(e, t), p| (e + self.cell_sse(row, h, p), t + self.sst(h, p)));
        let per_horizon = (0..nh).map(sums).map(|(e, t)| r2(e, t)).collect();
        let (e, t) = (0..nh).map(sums).fold((0.0, 0.0), |(a, b), (e, t)| (a + e, b + t));
        let parcel_median = per_parcel.iter().map(|v| median(v)).collect();
        RSquared { name: name.into(), per_horizon, pooled: r2(e, t), parcel_median, per_parcel }
    }
}

/// Every `(b, t, p, h, j)` of a forecast tensor's shape.
fn cells<E: Elem>(f: &Forecasts<E>) -> impl Iterator<Item = (usize, usize, usize, usize, usize)> {
    let s = f.shape();
    let (nt, np, nh, nd) = (s.time, s.parcels, s.horizons, s.d_in);
    (0..s.batch).flat_map(move |b| {
        (0..nt).flat_map(move |t| {
            (0..np).flat_map(move |p| (0..nh).flat_map(move |h| (0..nd).map(move |j| (b, t, p, h, j))))
        })
    })
}

/// The median of the finite values (NaN when there are none).
fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    crate::stats::quantile(&s, 0.5)
}

/// The coefficient of determination of one row (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RSquared {
    /// The row (`model` or a baseline).
    pub name: String,
    /// Per horizon, pooled over the parcels: `1 - sum SSE / sum SST`.
    pub per_horizon: Vec<f64>,
    /// Pooled over horizons and parcels.
    pub pooled: f64,
    /// The median over parcels of `per_parcel`, per horizon.
    pub parcel_median: Vec<f64>,
    /// Per horizon, per parcel (`[h][p]`; NaN, written `null`, for a constant target).
    pub per_parcel: Vec<Vec<f64>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use boldcast_core::ForecastShape;

    #[test]
    fn r_squared_by_hand() {
        // Two windows (subjects 0 and 1), one token, 2 parcels, 1 horizon, D = 1.
        let shape = ForecastShape::new(2, 1, 2, 1, 1);
        // Targets: parcel 0 is (1, 3), parcel 1 is (2, 2) (constant).
        let target = Forecasts::<f64>::new(shape, vec![1.0, 2.0, 3.0, 2.0]).unwrap();
        let pred = Forecasts::<f64>::new(shape, vec![1.5, 1.0, 2.0, 2.0]).unwrap();
        let mut s = ErrorSums::new(1, vec!["a".into(), "b".into()], 1, 2);
        s.add_targets(&target);
        s.add_errors(0, &pred, &target, &[0, 1]);
        let r = s.r_squared(0, "m");
        // Parcel 0: SSE 0.25 + 1 = 1.25, SST (1 - 2)^2 + (3 - 2)^2 = 2, R^2 = 0.375.
        assert!((r.per_parcel[0][0] - 0.375).abs() < 1e-12, "{r:?}");
        // Parcel 1: constant target, no R^2.
        assert!(r.per_parcel[0][1].is_nan());
        // Pooled: SSE 1.25 + 1 = 2.25 over SST 2: -0.125; 1 - MSE would be 1 - 2.25 / 4 = 0.4375.
        assert!((r.per_horizon[0] + 0.125).abs() < 1e-12 && (r.pooled + 0.125).abs() < 1e-12);
        assert_eq!(r.parcel_median, [0.375]);
        // Per subject: subject 0 has 0.25 + 1 (parcels 0 and 1), subject 1 has 1 + 0.
        assert_eq!(s.subject_sse(0, 0), [1.25, 1.0]);
    }
}
