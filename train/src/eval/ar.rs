//! The per-parcel AR(p) baseline (`ar_p`): each parcel forecast from its own last `p` TRs,
//! fitted directly for every lead `L` (a regression of `x(n + L)` on `x(n), ..., x(n-p+1)`,
//! not a one-step fit iterated), by least squares on the training runs.
//!
//! One order `p` serves every parcel and lead, chosen by cross-validation over the training
//! subjects ([`super::cv`]) among `1..=AR_P_MAX` (lags in TRs): the candidates are scored on
//! the loss, every parcel and lead alike. The rule keeps the lowest order whose
//! cross-validated MSE is within `max(one paired standard error, 0.1 %)` of the lowest, not
//! the order of the lowest MSE: p = 3 is chosen over a p = 4 whose MSE is lower by less than
//! that (the report gives both, [`ArChoice::p_lowest_cv`], and every order's MSE). All orders are fitted on the same samples (those
//! with `AR_P_MAX` TRs of history), each from the leading block of one set of moments. A
//! relative ridge of [`AR_RIDGE`] keeps a parcel that is all zeros (constant in every run)
//! solvable; it moves no coefficient measurably.

use super::cv::{choose, cv_mse, FoldError, Folds};
use super::linear::{Coupling, LinearFit};
use super::moments::{fold_moments, total, Design, Moments};
use super::ridge::{solve, sse};
use crate::error::TrainError;
use boldcast_data::Dataset;
use nalgebra::DMatrix;
use serde::Serialize;

/// The highest order `ar_p` considers, in TRs.
pub const AR_P_MAX: usize = 8;
/// The relative ridge of the AR fits ([`super::ridge`]).
pub const AR_RIDGE: f64 = 1e-8;

/// The order `ar_p` chose and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArChoice {
    /// The chosen order, in TRs.
    pub p: usize,
    /// The order of the lowest cross-validated MSE (the chosen one is the lowest order within
    /// the tolerance of [`super::cv`] of it; `p` without cross-validation).
    pub p_lowest_cv: usize,
    /// The highest order considered ([`AR_P_MAX`]).
    pub p_max: usize,
    /// The cross-validated MSE of each order `1..=p_max` (empty without cross-validation).
    pub cv_mse: Vec<f64>,
}

impl ArChoice {
    /// A warning when the lowest cross-validated MSE is at the largest order tried
    /// ([`AR_P_MAX`]): a longer AR may forecast better, so a model compared with `ar_p` may
    /// look better than the strongest per-parcel AR would let it. `None` otherwise.
    pub fn edge_warning(&self) -> Option<String> {
        (!self.cv_mse.is_empty() && self.p_max > 1 && self.p_lowest_cv == self.p_max).then(|| {
            format!(
                "warning: ar_p: the lowest cross-validated MSE is at the largest order tried (p = {0} TRs, orders \
                 1..{0}): a longer AR may forecast better, so the comparison with ar_p may flatter the model",
                self.p_max
            )
        })
    }
}

fn no_samples(what: &str) -> TrainError {
    TrainError::Baseline {
        name: "ar_p".into(),
        reason: format!("{what} give no sample with {AR_P_MAX} TRs of history and the farthest lead after it"),
    }
}

/// Fits `ar_p` on the training runs of `folds` for `leads` (see the module documentation).
pub fn fit_ar_p(ds: &Dataset, folds: &Folds, leads: &[usize]) -> Result<(LinearFit, ArChoice), TrainError> {
    let design = |p: usize| Design { order: AR_P_MAX, leads: leads.to_vec(), parcel: Some(p), parcels: ds.parcels };
    let per_parcel: Vec<Vec<Moments>> =
        (0..ds.parcels).map(|p| fold_moments(&design(p), &ds.runs, &folds.runs)).collect::<Result<_, _>>()?;
    let totals: Vec<Moments> = per_parcel.iter().zip(0..).map(|(f, p)| total(f, &design(p))).collect();
    if totals.first().is_none_or(|m| m.rows == 0) {
        return Err(no_samples("the training runs"));
    }
    let mut errors = vec![vec![FoldError::default(); folds.runs.len()]; AR_P_MAX];
    if folds.cross_validates() {
        for (parcel, fm) in per_parcel.iter().enumerate() {
            for (f, fold) in fm.iter().enumerate() {
                let train = totals[parcel].minus(fold);
                for (q, e) in (1..=AR_P_MAX).zip(errors.iter_mut()) {
                    let w = solve(&train, q, AR_RIDGE).ok_or_else(|| no_samples("the training folds"))?;
                    e[f].sse += sse(&w, fold);
                    e[f].count += fold.rows * leads.len();
                }
            }
        }
    }
    let p = choose(&errors, 0) + 1;
    let cv: Vec<f64> = if folds.cross_validates() { errors.iter().map(|e| cv_mse(e)).collect() } else { Vec::new() };
    let p_lowest_cv = (0..cv.len()).min_by(|&a, &b| cv[a].total_cmp(&cv[b])).map_or(p, |i| i + 1);
    let fit = LinearFit { coupling: Coupling::PerParcel, parcels: ds.parcels, coefs: orders(&totals, p, leads.len())? };
    Ok((fit, ArChoice { p, p_lowest_cv, p_max: AR_P_MAX, cv_mse: cv }))
}

/// The coefficients of every order `1..=p` from each parcel's total moments, in the layout
/// of [`LinearFit::coefs`].
fn orders(totals: &[Moments], p: usize, n_leads: usize) -> Result<Vec<DMatrix<f64>>, TrainError> {
    let np = totals.len();
    (1..=p)
        .map(|q| {
            let mut c = DMatrix::zeros(q, n_leads * np);
            for (parcel, m) in totals.iter().enumerate() {
                let w = solve(m, q, AR_RIDGE).ok_or_else(|| no_samples("the training runs"))?;
                for l in 0..n_leads {
                    c.view_mut((0, l * np + parcel), (q, 1)).copy_from(&w.column(l));
                }
            }
            Ok(c)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::ArChoice;

    fn choice(cv_mse: Vec<f64>) -> ArChoice {
        let p_lowest_cv = (0..cv_mse.len()).min_by(|&a, &b| cv_mse[a].total_cmp(&cv_mse[b])).map_or(1, |i| i + 1);
        ArChoice { p: 2, p_lowest_cv, p_max: cv_mse.len().max(1), cv_mse }
    }

    #[test]
    fn an_order_at_the_end_of_the_grid_is_warned_of() {
        // ds000140's ar_p: the MSE still falls steeply at p = 8.
        let w = choice(vec![0.61, 0.51, 0.48, 0.40, 0.36, 0.22, 0.15, 0.085]).edge_warning().unwrap();
        assert!(w.starts_with("warning: ar_p: the lowest cross-validated MSE is at the largest order tried (p = 8 TRs"));
        assert_eq!(choice(vec![0.5, 0.3, 0.31, 0.32]).edge_warning(), None, "the lowest MSE inside the grid");
        assert_eq!(choice(Vec::new()).edge_warning(), None, "no cross-validation");
    }
}
