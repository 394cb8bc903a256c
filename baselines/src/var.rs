//! The VAR baselines: each parcel forecast from every parcel's last `p` TRs, fitted directly
//! for every lead by ridge regression on the training runs (the full `P x P` matrix per lag
//! and lead, `(P p)^2` Gram entries solved by nalgebra's Cholesky).
//!
//! - `var1`: order 1, the penalty chosen by cross-validation over the training subjects;
//! - `var_p`: the order (in `1..=p_max`) and the penalty chosen together; `p_max` is the
//!   highest order up to [`VAR_P_MAX`] whose `P p` lag features number at most
//!   [`VAR_FEATURE_MAX`] (each fold and penalty costs a Cholesky factor and its inverse,
//!   `(P p)^3 / 3` flops each, and products of `(P p)^2 x P x leads`), whose moments fit in
//!   the machine's memory ([`var_memory`]) and which the window and the shortest training run
//!   allow ([`super::linear::order_bound`], as for `ar_p`); with `p_max < 2` it is skipped,
//!   and the reason is recorded (so is `var1`'s, were its own moments too large). The
//!   features, not the data, bound it on real parcellations (122 parcels: order 8);
//! - `var_pca` ([`super::pca`]): from the first principal components of the parcels, its
//!   rank, order and penalty chosen together, from the same moments.
//!
//! The penalties are relative ([`super::ridge`]): the grid [`RIDGE_GRID`] is log-spaced by
//! decades from 1e2 (the coefficients shrunk nearly to zero) to 1e-8 (least squares up to
//! rounding); a penalty the solver cannot factor scores an infinite error. A choice at either
//! end of the grid is reported ([`VarChoice::edge_warning`]: the best penalty may lie beyond
//! it). Candidates go simplest first to the rule of [`super::cv`]: lower
//! orders first, then larger penalties. Without cross-validation (one training run) the
//! defaults are order 1 and penalty [`DEFAULT_RIDGE`]. Both fits share one accumulation: the
//! moments of order `p_max`, whose leading `P x P` block is the order-1 moments; the lower
//! orders of `var_p` (used where the window is short) take its chosen penalty.

use super::cv::{choose, cv_mse, FoldError, Folds};
use super::linear::{order_bound, Coupling, LinearFit};
use super::moments::{fold_moments, total, Design, Moments, CHUNK_ROWS};
use super::ridge::{sse, RidgeFactor};
use crate::BaselineError;
use boldcast_core::memory::{Overflow, Size};
use boldcast_data::Dataset;
use boldcast_storage::memory::{check, machine_memory, MemoryNeed};
use serde::Serialize;

/// The highest VAR order considered, in TRs.
pub const VAR_P_MAX: usize = 8;
/// The most lag features (`P p`) a `var_p` candidate may have.
pub const VAR_FEATURE_MAX: usize = 1024;
/// The relative ridge penalties tried, largest (simplest) first.
pub const RIDGE_GRID: [f64; 11] = [1e2, 1e1, 1.0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8];
/// The penalty without cross-validation.
pub const DEFAULT_RIDGE: f64 = 1e-4;

/// One candidate's cross-validated MSE.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CvPoint {
    /// The order, in TRs.
    pub p: usize,
    /// The rank (`var_pca` only: the principal components used, [`super::pca`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<usize>,
    /// The relative penalty.
    pub lambda: f64,
    /// Its cross-validated MSE.
    pub mse: f64,
}

/// What a VAR baseline chose, or why it was skipped.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum VarChoice {
    /// Fitted.
    Fitted {
        /// The chosen order, in TRs.
        p: usize,
        /// The chosen rank (`var_pca` only).
        #[serde(skip_serializing_if = "Option::is_none")]
        rank: Option<usize>,
        /// The chosen relative ridge penalty.
        lambda: f64,
        /// The highest order considered.
        p_max: usize,
        /// Every candidate's cross-validated MSE (empty without cross-validation).
        cv: Vec<CvPoint>,
    },
    /// Not fitted.
    Skipped {
        /// Why, in words.
        reason: String,
    },
}

/// A VAR baseline: its fit (none when skipped) and its choice.
#[derive(Clone, Debug, PartialEq)]
pub struct VarBaseline {
    /// The coefficients.
    pub fit: Option<LinearFit>,
    /// The choice or the reason.
    pub choice: VarChoice,
}

impl VarChoice {
    /// A warning when cross-validation chose a penalty at an end of [`RIDGE_GRID`] (`name`:
    /// the baseline), else `None`.
    pub fn edge_warning(&self, name: &str) -> Option<String> {
        let VarChoice::Fitted { lambda, cv, .. } = self else { return None };
        let (first, last) = (RIDGE_GRID[0], RIDGE_GRID[RIDGE_GRID.len() - 1]);
        let end = if *lambda == first { "largest" } else { "smallest" };
        (!cv.is_empty() && (*lambda == first || *lambda == last)).then(|| {
            format!(
                "warning: {name}: cross-validation chose the {end} ridge penalty of the grid ({lambda:e}, grid \
                 {first:e}..{last:e}): the best penalty may lie beyond it"
            )
        })
    }
}

impl VarBaseline {
    /// A baseline skipped for `reason`.
    pub fn skipped(reason: String) -> VarBaseline {
        VarBaseline { fit: None, choice: VarChoice::Skipped { reason } }
    }
}

/// The memory the VAR fit of `order` needs, at most: the moments of every fold, their total,
/// a fold's training part, the Cholesky factor, its inverse, the coefficients and their
/// products (`folds + 5` matrices the size of `X'X` and as many the size of `X'Y`), and a
/// chunk of samples.
pub fn var_memory(parcels: usize, order: usize, n_leads: usize, folds: usize) -> Result<MemoryNeed, Overflow> {
    let f = Size::of("parcels", parcels).checked_mul(Size::lit(order))?;
    let t = Size::of("parcels", parcels).checked_mul(Size::lit(n_leads))?;
    let sets = Size::lit(folds + 5);
    let gram = f.checked_mul(f)?.checked_mul(sets)?.times(8)?;
    let cross = f.checked_mul(t)?.checked_mul(sets)?.times(8)?;
    let chunk = f.checked_add(t)?.times(CHUNK_ROWS)?.times(8)?;
    Ok(MemoryNeed {
        what: format!("the VAR({order}) baseline"),
        parts: vec![("Gram matrices", gram.value()), ("cross moments", cross.value()), ("samples", chunk.value())],
        cause: None,
    })
}

/// Why the VAR of order `q` cannot be fitted here (too many features for `q >= 2`, or more
/// memory than `memory` bytes), if it cannot.
pub fn too_big(parcels: usize, q: usize, n_leads: usize, folds: usize, memory: Option<u64>) -> Option<String> {
    if q > 1 && parcels.saturating_mul(q) > VAR_FEATURE_MAX {
        return Some(format!(
            "VAR({q}) of {parcels} parcels has {} lag features, over the {VAR_FEATURE_MAX} a fit may have",
            parcels.saturating_mul(q)
        ));
    }
    match var_memory(parcels, q, n_leads, folds) {
        Err(o) => Some(o.error(&format!("the VAR({q}) baseline")).to_string()),
        Ok(need) => check(need, memory).err().map(|e| e.to_string()),
    }
}

/// The VAR baselines: `var1`, `var_p` and the PCA-reduced `var_pca` ([`super::pca`]).
#[derive(Clone, Debug, PartialEq)]
pub struct VarFits {
    /// Order 1.
    pub var1: VarBaseline,
    /// Order and penalty by cross-validation.
    pub var_p: VarBaseline,
    /// Rank, order and penalty by cross-validation.
    pub var_pca: VarBaseline,
}

/// Fits `var1`, `var_p` and `var_pca` on the training runs of `folds` for `leads` and windows
/// of `window` TRs (see the module documentation); `memory` is the machine's
/// ([`machine_memory`] in [`fit_var`]).
pub fn fit_var_with(
    ds: &Dataset,
    folds: &Folds,
    leads: &[usize],
    window: usize,
    memory: Option<u64>,
) -> Result<VarFits, BaselineError> {
    let (np, nl, k) = (ds.parcels, leads.len(), folds.runs.len());
    if let Some(why) = too_big(np, 1, nl, k, memory) {
        let skipped = || VarBaseline::skipped(why.clone());
        return Ok(VarFits { var1: skipped(), var_p: skipped(), var_pca: skipped() });
    }
    let (by_data, limit) = order_bound(ds, &folds.runs.concat(), window, leads, VAR_P_MAX);
    let p_max = var_p_max(np, nl, k, memory).min(by_data);
    let design = Design { order: p_max, leads: leads.to_vec(), parcel: None, parcels: np };
    let fm = fold_moments(&design, &ds.runs, &folds.runs)?;
    let all = total(&fm, &design);
    if all.rows == 0 {
        return Err(BaselineError::Fit {
            name: "var1".into(),
            reason: format!(
                "the training runs give no sample with {p_max} TRs of history and the farthest lead after it"
            ),
        });
    }
    let cands: Vec<(usize, f64)> = (1..=p_max).flat_map(|q| RIDGE_GRID.map(|a| (q, a))).collect();
    let errors = cv_errors(&fm, &all, (p_max, np, nl))?;
    let var1 = chosen(&all, &cands, &errors, 1, np)?;
    let var_p = if p_max >= 2 {
        chosen(&all, &cands, &errors, p_max, np)?
    } else {
        let data = || format!("the highest order is {}", limit.words(by_data));
        VarBaseline::skipped(too_big(np, 2, nl, k, memory).unwrap_or_else(data))
    };
    let var_pca = super::pca::fit_var_pca(&fm, &all, (p_max, np, nl))?;
    Ok(VarFits { var1, var_p, var_pca })
}

/// The highest order up to [`VAR_P_MAX`] that [`too_big`] allows (at least 1).
pub fn var_p_max(parcels: usize, n_leads: usize, folds: usize, memory: Option<u64>) -> usize {
    (1..=VAR_P_MAX).take_while(|&q| too_big(parcels, q, n_leads, folds, memory).is_none()).last().unwrap_or(1)
}

/// [`fit_var_with`] against this machine's memory.
pub fn fit_var(ds: &Dataset, folds: &Folds, leads: &[usize], window: usize) -> Result<VarFits, BaselineError> {
    fit_var_with(ds, folds, leads, window, machine_memory())
}

fn singular(q: usize, lambda: f64) -> BaselineError {
    BaselineError::Fit {
        name: "var".into(),
        reason: format!("the ridge system of VAR({q}) with penalty {lambda:e} is not positive definite"),
    }
}

/// `errors[c][f]`: candidate `c` fitted without fold `f`, scored on it (zero counts without
/// cross-validation; an infinite error where the penalty cannot be factored). One factor per
/// fold and penalty serves every order.
fn cv_errors(
    fm: &[Moments],
    all: &Moments,
    (p_max, np, n_leads): (usize, usize, usize),
) -> Result<Vec<Vec<FoldError>>, BaselineError> {
    let mut errors = vec![vec![FoldError::default(); fm.len()]; p_max * RIDGE_GRID.len()];
    if fm.len() < 2 {
        return Ok(errors);
    }
    for (f, fold) in fm.iter().enumerate() {
        let train = all.minus(fold);
        for (a, &alpha) in RIDGE_GRID.iter().enumerate() {
            let factor = RidgeFactor::new(&train, p_max * np, alpha);
            for q in 1..=p_max {
                let err = factor.as_ref().map_or(f64::INFINITY, |f| sse(&f.solve(&train, q * np), fold));
                errors[(q - 1) * RIDGE_GRID.len() + a][f] = FoldError { sse: err, count: fold.rows * n_leads * np };
            }
        }
    }
    Ok(errors)
}

/// The baseline of the candidates of order at most `p_max`: its choice by [`choose`] and its
/// fit of every order up to the chosen one, at the chosen penalty.
fn chosen(
    all: &Moments,
    cands: &[(usize, f64)],
    errors: &[Vec<FoldError>],
    p_max: usize,
    np: usize,
) -> Result<VarBaseline, BaselineError> {
    let n = cands.iter().take_while(|c| c.0 <= p_max).count();
    let default = RIDGE_GRID.iter().position(|&a| a == DEFAULT_RIDGE).unwrap_or(0);
    let (p, lambda) = cands[choose(&errors[..n], default)];
    let cross = errors.first().is_some_and(|e| e.len() >= 2);
    let cv = if cross {
        cands[..n]
            .iter()
            .zip(errors)
            .map(|(&(p, lambda), e)| CvPoint { p, rank: None, lambda, mse: cv_mse(e) })
            .collect()
    } else {
        Vec::new()
    };
    let factor = RidgeFactor::new(all, p * np, lambda).ok_or_else(|| singular(p, lambda))?;
    let coefs = (1..=p).map(|q| factor.solve(all, q * np)).collect();
    Ok(VarBaseline {
        fit: Some(LinearFit { coupling: Coupling::Full, parcels: np, coefs }),
        choice: VarChoice::Fitted { p, rank: None, lambda, p_max, cv },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_order_is_capped_by_the_features_and_the_memory() {
        // 150 parcels: VAR(6) has 900 features, VAR(7) 1,050.
        assert_eq!(var_p_max(150, 2, 5, None), 6);
        let why = too_big(150, 7, 2, 5, None).unwrap();
        assert_eq!(why, "VAR(7) of 150 parcels has 1050 lag features, over the 1024 a fit may have");
        // 1,024 parcels: VAR(1) only (its 1,024 features are not capped, VAR(2) is).
        assert_eq!(var_p_max(1024, 2, 5, None), 1);
        assert!(too_big(4096, 1, 2, 5, None).is_none(), "VAR(1) is capped by memory only");
        // Memory: 10 sets (5 folds + 5) of (4 q)^2 and 4 q x 8 entries, and a chunk.
        let need = |q: usize| var_memory(4, q, 2, 5).unwrap().total() as u64;
        assert_eq!(need(1), 10 * 8 * (16 + 4 * 8) + 8 * 256 * (4 + 8));
        assert_eq!(var_p_max(4, 2, 5, Some(need(3))), 3);
        assert!(too_big(4, 4, 2, 5, Some(need(3))).unwrap().contains("the VAR(4) baseline would need about"));
        assert!(too_big(1 << 40, 1, 2, 5, None).unwrap().contains("parcels"), "an overflow names the field");
    }

    #[test]
    fn a_penalty_at_an_end_of_the_grid_is_warned_of() {
        use crate::cv::folds;
        use boldcast_fixtures::{Ar1Spec, Layout};
        // White noise: the coefficients are zero, so the largest penalty predicts best.
        let fx = Ar1Spec::new(Layout { subjects: 4, runs: 1, trs: 400, parcels: 3, seed: 3 }, 0.0);
        let ds = Dataset::from_synth(&fx.generate().unwrap(), None).unwrap();
        let v = fit_var_with(&ds, &folds(&ds, &[0, 1, 2, 3]), &[1], 32, None).unwrap();
        let VarChoice::Fitted { lambda, .. } = v.var1.choice else { panic!("{:?}", v.var1.choice) };
        assert_eq!(lambda, RIDGE_GRID[0]);
        let w = v.var1.choice.edge_warning("var1").unwrap();
        assert_eq!(
            w,
            "warning: var1: cross-validation chose the largest ridge penalty of the grid (1e2, grid 1e2..1e-8): \
             the best penalty may lie beyond it"
        );
        // Strongly autocorrelated data: a penalty inside the grid, no warning.
        let fx = Ar1Spec::new(Layout { subjects: 4, runs: 1, trs: 2000, parcels: 3, seed: 3 }, 0.9);
        let ds = Dataset::from_synth(&fx.generate().unwrap(), None).unwrap();
        let v = fit_var_with(&ds, &folds(&ds, &[0, 1, 2, 3]), &[1], 32, None).unwrap();
        assert_eq!(v.var1.choice.edge_warning("var1"), None, "{:?}", v.var1.choice);
        // A skipped fit, or one without cross-validation, warns of nothing.
        assert_eq!(VarBaseline::skipped("x".into()).choice.edge_warning("var_p"), None);
    }
}
