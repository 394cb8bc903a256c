//! The per-parcel AR(p) baseline (`ar_p`): each parcel forecast from its own last `p` TRs,
//! fitted directly for every lead `L` (a regression of `x(n + L)` on `x(n), ..., x(n-p+1)`,
//! not a one-step fit iterated), by least squares on the training runs.
//!
//! One order `p` serves every parcel and lead, chosen by cross-validation over the training
//! subjects ([`super::cv`]) among every order `1..=p_max` (lags in TRs): the candidates are
//! scored on the loss, every parcel and lead alike. `p_max` is the least of [`AR_P_MAX`] (a
//! cost bound), the window's length and what the shortest training run allows
//! ([`super::linear::order_bound`]; on ds000140, 94 TRs: half the samples of a 191-TR run).
//! Every order up to it is tried, because the cost is one Cholesky factor and its inverse per
//! parcel and fold, whose leading blocks serve every order ([`RidgeFactor`]). The rule keeps
//! the lowest order whose cross-validated MSE is within `max(one paired standard error, 0.1
//! %)` of the lowest, not the order of the lowest MSE: p = 3 is chosen over a p = 4 whose MSE
//! is lower by less than that (the report gives both, [`ArChoice::p_lowest_cv`], and every
//! order's MSE). When the lowest is at `p_max` the report warns ([`ArChoice::edge_warning`]).
//! All orders are fitted on the same samples (those with `p_max` TRs of history), each from
//! the leading block of one set of moments. A relative ridge of [`AR_RIDGE`] keeps a parcel
//! that is all zeros (constant in every run) solvable; it moves no coefficient measurably.

use super::cv::{choose, cv_mse, FoldError, Folds};
use super::linear::{order_bound, Coupling, LinearFit, OrderLimit};
use super::moments::{fold_moments, total, Design, Moments};
use super::ridge::{sse, RidgeFactor};
use crate::BaselineError;
use boldcast_data::Dataset;
use nalgebra::DMatrix;
use serde::Serialize;

/// The highest order `ar_p` considers, in TRs, whatever the window and the runs allow: the
/// moments cost `parcels x AR_P_MAX^2` per sample.
pub const AR_P_MAX: usize = 128;
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
    /// The highest order considered (see the module documentation).
    pub p_max: usize,
    /// What set `p_max`.
    pub p_max_limit: OrderLimit,
    /// The cross-validated MSE of each order `1..=p_max` (empty without cross-validation).
    pub cv_mse: Vec<f64>,
}

impl ArChoice {
    /// A warning when the lowest cross-validated MSE is at the largest order tried: a longer
    /// AR may forecast better, so a model compared with `ar_p` may look better than the
    /// strongest per-parcel AR would let it. `None` otherwise.
    pub fn edge_warning(&self) -> Option<String> {
        (!self.cv_mse.is_empty() && self.p_max > 1 && self.p_lowest_cv == self.p_max).then(|| {
            format!(
                "warning: ar_p: the lowest cross-validated MSE is at the largest order tried (p = {}): a longer AR \
                 may forecast better, so the comparison with ar_p may flatter the model",
                self.p_max_limit.words(self.p_max)
            )
        })
    }
}

fn no_samples(what: &str, p_max: usize) -> BaselineError {
    BaselineError::Fit {
        name: "ar_p".into(),
        reason: format!("{what} give no sample with {p_max} TRs of history and the farthest lead after it"),
    }
}

/// Fits `ar_p` on the training runs of `folds` for `leads` and windows of `window` TRs (see
/// the module documentation).
pub fn fit_ar_p(
    ds: &Dataset,
    folds: &Folds,
    leads: &[usize],
    window: usize,
) -> Result<(LinearFit, ArChoice), BaselineError> {
    let train_runs: Vec<usize> = folds.runs.concat();
    let (p_max, p_max_limit) = order_bound(ds, &train_runs, window, leads, AR_P_MAX);
    let design = |p: usize| Design { order: p_max, leads: leads.to_vec(), parcel: Some(p), parcels: ds.parcels };
    let per_parcel: Vec<Vec<Moments>> =
        (0..ds.parcels).map(|p| fold_moments(&design(p), &ds.runs, &folds.runs)).collect::<Result<_, _>>()?;
    let totals: Vec<Moments> = per_parcel.iter().zip(0..).map(|(f, p)| total(f, &design(p))).collect();
    if totals.first().is_none_or(|m| m.rows == 0) {
        return Err(no_samples("the training runs", p_max));
    }
    let errors = if folds.cross_validates() { cv_errors(&per_parcel, &totals, p_max, leads.len())? } else { vec![] };
    let p = if errors.is_empty() { 1 } else { choose(&errors, 0) + 1 };
    let cv: Vec<f64> = errors.iter().map(|e| cv_mse(e)).collect();
    let p_lowest_cv = (0..cv.len()).min_by(|&a, &b| cv[a].total_cmp(&cv[b])).map_or(p, |i| i + 1);
    let coefs = orders(&totals, p, leads.len(), p_max)?;
    let fit = LinearFit { coupling: Coupling::PerParcel, parcels: ds.parcels, coefs };
    Ok((fit, ArChoice { p, p_lowest_cv, p_max, p_max_limit, cv_mse: cv }))
}

/// `errors[q - 1][f]`: every order `q <= p_max`, fitted without fold `f` and scored on it,
/// summed over the parcels. One factor per parcel and fold serves every order.
fn cv_errors(
    per_parcel: &[Vec<Moments>],
    totals: &[Moments],
    p_max: usize,
    n_leads: usize,
) -> Result<Vec<Vec<FoldError>>, BaselineError> {
    let mut errors = vec![vec![FoldError::default(); per_parcel.first().map_or(0, Vec::len)]; p_max];
    for (fm, all) in per_parcel.iter().zip(totals) {
        for (f, fold) in fm.iter().enumerate() {
            let train = all.minus(fold);
            let factor =
                RidgeFactor::new(&train, p_max, AR_RIDGE).ok_or_else(|| no_samples("the training folds", p_max))?;
            for (q, e) in (1..=p_max).zip(errors.iter_mut()) {
                e[f].sse += sse(&factor.solve(&train, q), fold);
                e[f].count += fold.rows * n_leads;
            }
        }
    }
    Ok(errors)
}

/// The coefficients of every order `1..=p` from each parcel's total moments (of order
/// `p_max`), in the layout of [`LinearFit::coefs`].
fn orders(totals: &[Moments], p: usize, n_leads: usize, p_max: usize) -> Result<Vec<DMatrix<f64>>, BaselineError> {
    let np = totals.len();
    let factors: Vec<RidgeFactor> = totals
        .iter()
        .map(|m| RidgeFactor::new(m, p, AR_RIDGE).ok_or_else(|| no_samples("the training runs", p_max)))
        .collect::<Result<_, _>>()?;
    Ok((1..=p)
        .map(|q| {
            let mut c = DMatrix::zeros(q, n_leads * np);
            for (parcel, (m, f)) in totals.iter().zip(&factors).enumerate() {
                let w = f.solve(m, q);
                for l in 0..n_leads {
                    c.view_mut((0, l * np + parcel), (q, 1)).copy_from(&w.column(l));
                }
            }
            c
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::ArChoice;
    use crate::linear::OrderLimit;

    fn choice(cv_mse: Vec<f64>) -> ArChoice {
        let p_lowest_cv = (0..cv_mse.len()).min_by(|&a, &b| cv_mse[a].total_cmp(&cv_mse[b])).map_or(1, |i| i + 1);
        ArChoice { p: 2, p_lowest_cv, p_max: cv_mse.len().max(1), p_max_limit: OrderLimit::ShortestRun, cv_mse }
    }

    #[test]
    fn an_order_at_the_end_of_the_grid_is_warned_of() {
        // ds000140's ar_p when it stopped at 8: the MSE still fell steeply there.
        let w = choice(vec![0.61, 0.51, 0.48, 0.40, 0.36, 0.22, 0.15, 0.085]).edge_warning().unwrap();
        assert_eq!(
            w,
            "warning: ar_p: the lowest cross-validated MSE is at the largest order tried (p = 8 TRs, the most the \
             shortest training run allows): a longer AR may forecast better, so the comparison with ar_p may flatter \
             the model"
        );
        assert_eq!(choice(vec![0.5, 0.3, 0.31, 0.32]).edge_warning(), None, "the lowest MSE inside the grid");
        assert_eq!(choice(Vec::new()).edge_warning(), None, "no cross-validation");
    }
}
