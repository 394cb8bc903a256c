//! The baselines of an evaluation: the simple ones ([`baseline_forecasts`]: zero, last
//! token, window mean, the iterated AR(1) of [`fit_ar1`]) and the fitted linear ones
//! ([`Baselines`], fitted by [`fit_baselines`] on the training runs: `ar_p`, `var1`,
//! `var_p`, `var_pca`), with the forecasts of all of them ([`Baselines::forecasts`]) in the order of
//! [`Baselines::names`].

use super::ar::{fit_ar_p, ArChoice};
use super::cv::{folds, FoldUnit, Folds};
use super::linear::{leads, LinearFit};
use super::var::{fit_var, VarBaseline, VarChoice};
use crate::BaselineError;
use boldcast_core::{ForecastShape, Forecasts, Tokens};
use boldcast_data::{Dataset, WindowSpec};
use serde::Serialize;

/// Per-parcel AR(1) coefficients by least squares over `runs`: `sum x_t x_(t+1) / sum x_t^2`.
pub fn fit_ar1(ds: &Dataset, runs: &[usize]) -> Result<Vec<f64>, BaselineError> {
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

/// The simple baselines' forecasts `(B, T, P, H, D)` of `tokens`: zero, last token, window
/// mean, iterated AR(1) (`phi^L x_last`, `phi`: one coefficient per parcel).
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

/// The names of the simple baselines, in the order of [`baseline_forecasts`].
pub const SIMPLE: [&str; 4] = ["zero", "last_token", "window_mean", "ar1_iterated"];

/// What the fitted baselines chose (`baselines` of `bc-cli eval --json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BaselineChoices {
    /// What a cross-validation fold holds (`subject`, `run`, or `none`).
    pub cv_unit: FoldUnit,
    /// Cross-validation folds.
    pub cv_folds: usize,
    /// `ar_p`'s order.
    pub ar_p: ArChoice,
    /// `var1`'s penalty.
    pub var1: VarChoice,
    /// `var_p`'s order and penalty, or why it was skipped.
    pub var_p: VarChoice,
    /// `var_pca`'s rank, order and penalty, or why it was skipped.
    pub var_pca: VarChoice,
}

impl BaselineChoices {
    /// What the user should be warned of: `ar_p`'s best order at the largest tried, a ridge
    /// penalty chosen at an end of the grid.
    pub fn warnings(&self) -> Vec<String> {
        let fits = [("var1", &self.var1), ("var_p", &self.var_p), ("var_pca", &self.var_pca)];
        self.ar_p.edge_warning().into_iter().chain(fits.iter().filter_map(|(n, c)| c.edge_warning(n))).collect()
    }
}

/// Every baseline of an evaluation, fitted on the training runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Baselines {
    /// The horizons, in tokens.
    pub horizons: Vec<usize>,
    /// The iterated AR(1)'s coefficient per parcel ([`fit_ar1`]).
    pub ar1_phi: Vec<f64>,
    /// The cross-validation folds.
    pub folds: Folds,
    /// The per-parcel AR(p).
    pub ar_p: LinearFit,
    /// Its choice.
    pub ar_choice: ArChoice,
    /// The VAR(1).
    pub var1: VarBaseline,
    /// The VAR(p).
    pub var_p: VarBaseline,
    /// The PCA-reduced VAR.
    pub var_pca: VarBaseline,
}

/// Fits every baseline on `train_runs` of `ds` for `horizons` and the windows of `spec` (their
/// length bounds the orders, [`super::linear::order_bound`]; the stride is not used).
pub fn fit_baselines(
    ds: &Dataset,
    train_runs: &[usize],
    horizons: &[usize],
    spec: &WindowSpec,
) -> Result<Baselines, BaselineError> {
    let folds = folds(ds, train_runs);
    let leads = leads(horizons, spec.d_in);
    let (ar_p, ar_choice) = fit_ar_p(ds, &folds, &leads, spec.window)?;
    let vars = fit_var(ds, &folds, &leads, spec.window)?;
    Ok(Baselines {
        horizons: horizons.to_vec(),
        ar1_phi: fit_ar1(ds, train_runs)?,
        folds,
        ar_p,
        ar_choice,
        var1: vars.var1,
        var_p: vars.var_p,
        var_pca: vars.var_pca,
    })
}

impl Baselines {
    /// The fitted linear baselines with their names (a skipped one is left out).
    fn linear(&self) -> Vec<(&'static str, &LinearFit)> {
        let mut v = vec![("ar_p", &self.ar_p)];
        v.extend(self.var1.fit.as_ref().map(|f| ("var1", f)));
        v.extend(self.var_p.fit.as_ref().map(|f| ("var_p", f)));
        v.extend(self.var_pca.fit.as_ref().map(|f| ("var_pca", f)));
        v
    }

    /// The rows' names: [`SIMPLE`], then `ar_p`, `var1`, `var_p`, `var_pca` (those fitted).
    pub fn names(&self) -> Vec<&'static str> {
        SIMPLE.iter().copied().chain(self.linear().into_iter().map(|(n, _)| n)).collect()
    }

    /// Every baseline's forecasts of `tokens`, in the order of [`Baselines::names`].
    pub fn forecasts(&self, tokens: &Tokens<f64>) -> Vec<Forecasts<f64>> {
        let mut v: Vec<Forecasts<f64>> = baseline_forecasts(tokens, &self.horizons, &self.ar1_phi).into();
        v.extend(self.linear().into_iter().map(|(_, f)| f.forecasts(tokens, &self.horizons)));
        v
    }

    /// What the fitted baselines chose.
    pub fn choices(&self) -> BaselineChoices {
        BaselineChoices {
            cv_unit: self.folds.unit,
            cv_folds: if self.folds.cross_validates() { self.folds.runs.len() } else { 0 },
            ar_p: self.ar_choice.clone(),
            var1: self.var1.choice.clone(),
            var_p: self.var_p.choice.clone(),
            var_pca: self.var_pca.choice.clone(),
        }
    }
}
