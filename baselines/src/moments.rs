//! The sufficient statistics of a least-squares fit, accumulated streaming over the training
//! runs ([`Moments`]): `X'X`, `X'Y`, the targets' sums of squares and the sample count, for
//! a [`Design`] of lagged features and lead targets.
//!
//! A sample is a TR `n` of a run with `order` TRs of history and the farthest lead after it:
//! its features are `[x(n), x(n-1), ..., x(n-order+1)]` (lag-major: the `P` parcels of
//! `x(n)`, then those of `x(n-1)`, ...; one parcel only for a per-parcel design) and its
//! targets `x(n + L)` for every lead `L` (lead-major, then parcel). Because the lags come
//! first-newest, the leading `q P` rows and columns are the moments of the order-`q` fit on
//! the same samples: one accumulation serves every lower order. Moments add, so those of
//! each cross-validation fold are kept and the training part of a fold is `total - fold`.
//! The products go through nalgebra (`matrixmultiply`'s blocked kernels), a chunk of
//! [`CHUNK_ROWS`] samples at a time, so memory stays `O(features x CHUNK_ROWS)`.

use boldcast_data::Run;
use nalgebra::{DMatrix, DVector};

/// Samples per product: large enough for the blocked kernels, small enough to stay in cache.
pub const CHUNK_ROWS: usize = 256;

/// What is regressed on what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Design {
    /// Lags of history per sample, in TRs (1 = the last TR only).
    pub order: usize,
    /// The leads `L` in TRs (one target block per lead).
    pub leads: Vec<usize>,
    /// All parcels (`None`: a VAR) or one parcel (`Some(p)`: a per-parcel AR).
    pub parcel: Option<usize>,
    /// The dataset's parcels.
    pub parcels: usize,
}

impl Design {
    /// Parcels per lag and per lead (P for a VAR, 1 per parcel).
    pub fn width(&self) -> usize {
        if self.parcel.is_some() {
            1
        } else {
            self.parcels
        }
    }
    /// Features per sample.
    pub fn features(&self) -> usize {
        self.order * self.width()
    }
    /// Targets per sample.
    pub fn targets(&self) -> usize {
        self.leads.len() * self.width()
    }
    fn max_lead(&self) -> usize {
        self.leads.iter().copied().max().unwrap_or(0)
    }
    /// The parcels a block of the design holds.
    fn columns(&self) -> std::ops::Range<usize> {
        match self.parcel {
            Some(p) => p..p + 1,
            None => 0..self.parcels,
        }
    }
}

/// `X'X`, `X'Y`, the targets' sums of squares and the sample count of a design.
#[derive(Clone, Debug, PartialEq)]
pub struct Moments {
    /// `X'X` (features x features).
    pub xx: DMatrix<f64>,
    /// `X'Y` (features x targets).
    pub xy: DMatrix<f64>,
    /// `sum y^2` per target.
    pub yy: DVector<f64>,
    /// Samples.
    pub rows: usize,
}

impl Moments {
    /// Zero moments of `d`.
    pub fn zeros(d: &Design) -> Moments {
        let (f, t) = (d.features(), d.targets());
        Moments { xx: DMatrix::zeros(f, f), xy: DMatrix::zeros(f, t), yy: DVector::zeros(t), rows: 0 }
    }

    /// `self + o`.
    pub fn plus(&self, o: &Moments) -> Moments {
        Moments { xx: &self.xx + &o.xx, xy: &self.xy + &o.xy, yy: &self.yy + &o.yy, rows: self.rows + o.rows }
    }

    /// `self - o` (the training part of a fold: the total less the fold).
    pub fn minus(&self, o: &Moments) -> Moments {
        Moments { xx: &self.xx - &o.xx, xy: &self.xy - &o.xy, yy: &self.yy - &o.yy, rows: self.rows - o.rows }
    }

    /// Adds the samples of the columns of `xt` (features x samples) and `yt` (targets x
    /// samples).
    fn add_chunk(&mut self, xt: &DMatrix<f64>, yt: &DMatrix<f64>) {
        self.xx.gemm(1.0, xt, &xt.transpose(), 1.0);
        self.xy.gemm(1.0, xt, &yt.transpose(), 1.0);
        for (s, row) in self.yy.iter_mut().zip(yt.row_iter()) {
            *s += row.norm_squared();
        }
        self.rows += xt.ncols();
    }

    /// Adds every sample of `run` (read through [`Run::rows`], a chunk at a time).
    pub fn add_run(&mut self, d: &Design, run: &Run) -> Result<(), boldcast_data::DataError> {
        let (back, ahead) = (d.order.saturating_sub(1), d.max_lead());
        if d.order == 0 || run.n_tr < back + ahead + 1 {
            return Ok(());
        }
        let last = run.n_tr - 1 - ahead;
        let mut n0 = back;
        while n0 <= last {
            let n1 = (n0 + CHUNK_ROWS).min(last + 1);
            let rows = run.rows(n0 - back, n1 + ahead)?;
            let (xt, yt) = chunk(d, &rows, n1 - n0);
            self.add_chunk(&xt, &yt);
            n0 = n1;
        }
        Ok(())
    }
}

/// The features and targets of `count` consecutive samples, from `rows` (the run's rows from
/// `order - 1` TRs before the first sample to the farthest lead after the last).
fn chunk(d: &Design, rows: &[f64], count: usize) -> (DMatrix<f64>, DMatrix<f64>) {
    let (w, np, back) = (d.width(), d.parcels, d.order - 1);
    let mut xt = DMatrix::zeros(d.features(), count);
    let mut yt = DMatrix::zeros(d.targets(), count);
    for r in 0..count {
        let n = r + back;
        for (c, q) in d.columns().enumerate() {
            for k in 0..d.order {
                xt[(k * w + c, r)] = rows[(n - k) * np + q];
            }
            for (l, &lead) in d.leads.iter().enumerate() {
                yt[(l * w + c, r)] = rows[(n + lead) * np + q];
            }
        }
    }
    (xt, yt)
}

/// The moments of each fold: `runs_by_fold[f]` are the runs of fold `f`.
pub fn fold_moments(
    d: &Design,
    runs: &[Run],
    runs_by_fold: &[Vec<usize>],
) -> Result<Vec<Moments>, boldcast_data::DataError> {
    runs_by_fold
        .iter()
        .map(|fold| {
            let mut m = Moments::zeros(d);
            for &r in fold {
                m.add_run(d, &runs[r])?;
            }
            Ok(m)
        })
        .collect()
}

/// The sum of the folds' moments.
pub fn total(folds: &[Moments], d: &Design) -> Moments {
    folds.iter().fold(Moments::zeros(d), |a, m| a.plus(m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use boldcast_data::Dataset;
    use boldcast_fixtures::{Ar1Spec, Layout};

    fn dataset(trs: usize, parcels: usize) -> Dataset {
        let fx = Ar1Spec::new(Layout { subjects: 1, runs: 1, trs, parcels, seed: 1 }, 0.7);
        Dataset::from_synth(&fx.generate().unwrap(), None).unwrap()
    }

    #[test]
    fn moments_are_the_sums_over_samples_by_hand() {
        let ds = dataset(CHUNK_ROWS + 40, 3);
        let run = &ds.runs[0];
        let rows = run.rows(0, run.n_tr).unwrap();
        let x = |t: usize, p: usize| rows[t * 3 + p];
        let d = Design { order: 2, leads: vec![1, 3], parcel: None, parcels: 3 };
        let mut m = Moments::zeros(&d);
        m.add_run(&d, run).unwrap();
        // Samples n = 1 ..= n_tr - 4, over two chunks.
        let ns: Vec<usize> = (1..=run.n_tr - 4).collect();
        assert_eq!(m.rows, ns.len());
        // Feature k * 3 + p is x(n - k, p); target l * 3 + p is x(n + lead_l, p).
        let xx = |a: usize, b: usize| ns.iter().map(|&n| x(n - a / 3, a % 3) * x(n - b / 3, b % 3)).sum::<f64>();
        let xy =
            |a: usize, b: usize| ns.iter().map(|&n| x(n - a / 3, a % 3) * x(n + [1, 3][b / 3], b % 3)).sum::<f64>();
        for (a, b) in [(0, 0), (0, 4), (5, 2), (3, 3)] {
            assert!((m.xx[(a, b)] - xx(a, b)).abs() < 1e-9, "xx {a} {b}");
        }
        for (a, b) in [(0, 0), (4, 5), (2, 3)] {
            assert!((m.xy[(a, b)] - xy(a, b)).abs() < 1e-9, "xy {a} {b}");
        }
        let yy5: f64 = ns.iter().map(|&n| x(n + 3, 2).powi(2)).sum();
        assert!((m.yy[5] - yy5).abs() < 1e-9);
        // The per-parcel design of parcel 1 is the VAR's parcel-1 sub-block.
        let d1 = Design { parcel: Some(1), ..d.clone() };
        let mut m1 = Moments::zeros(&d1);
        m1.add_run(&d1, run).unwrap();
        assert!((m1.xx[(1, 0)] - m.xx[(4, 1)]).abs() < 1e-9);
        assert!((m1.xy[(0, 1)] - m.xy[(1, 4)]).abs() < 1e-9);
        // Totals less a fold give back the other folds.
        let folds = fold_moments(&d, &ds.runs, &[vec![0], vec![0]]).unwrap();
        let t = total(&folds, &d);
        assert_eq!(t.minus(&folds[0]), folds[1]);
    }

    #[test]
    fn a_run_too_short_for_the_design_adds_nothing() {
        let ds = dataset(4, 2);
        let d = Design { order: 3, leads: vec![2], parcel: None, parcels: 2 };
        let mut m = Moments::zeros(&d);
        m.add_run(&d, &ds.runs[0]).unwrap();
        assert_eq!(m.rows, 0);
        let d = Design { order: 2, leads: vec![2], parcel: None, parcels: 2 };
        m = Moments::zeros(&d);
        m.add_run(&d, &ds.runs[0]).unwrap();
        assert_eq!(m.rows, 1, "n = 1 only: x(0) before it, x(3) two ahead");
    }
}
