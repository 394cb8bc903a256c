//! What an evaluation reports: [`Row`] (an MSE per horizon and their mean, the baselines'
//! crate's), [`Improvement`]
//! (the model against the best baseline at each horizon) and [`EvalReport`], whose JSON is
//! `bc-cli eval --json`'s output (fields in this order).

use super::bootstrap::PairedBootstrap;
use super::example::ForecastExample;
pub use boldcast_baselines::Row;
use boldcast_baselines::{BaselineChoices, RSquared};
use serde::Serialize;
use std::path::PathBuf;

/// The model against the best baseline at each horizon.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Improvement {
    /// The baseline with the lowest MSE at each horizon.
    pub best_baseline: Vec<String>,
    /// Its MSE.
    pub best_mse: Vec<f64>,
    /// The model's relative improvement over it, `1 - model / best` (a fraction of the best
    /// baseline's MSE; positive when the model is better).
    pub relative: Vec<f64>,
    /// The same in words: "better than var_p by 4.1 %" or "worse than var_p by 1.5 %" (of the
    /// best baseline's MSE).
    pub words: Vec<String>,
}

impl Improvement {
    /// The improvement of the row `model` of `rows` over the others (every baseline); empty
    /// without a model row or a baseline.
    pub fn of(rows: &[Row]) -> Improvement {
        let mut imp =
            Improvement { best_baseline: Vec::new(), best_mse: Vec::new(), relative: Vec::new(), words: Vec::new() };
        let Some(model) = rows.iter().find(|r| r.name == "model") else { return imp };
        let base: Vec<&Row> = rows.iter().filter(|r| r.name != "model").collect();
        for (i, m) in model.per_horizon.iter().enumerate() {
            let Some(best) = base.iter().min_by(|a, b| a.per_horizon[i].total_cmp(&b.per_horizon[i])) else { break };
            imp.best_baseline.push(best.name.clone());
            imp.best_mse.push(best.per_horizon[i]);
            let rel = 1.0 - m / best.per_horizon[i];
            let word = if rel >= 0.0 { "better" } else { "worse" };
            imp.words.push(format!("{word} than {} by {:.1} %", best.name, 100.0 * rel.abs()));
            imp.relative.push(rel);
        }
        imp
    }
}

/// What an evaluation reports (`bc-cli eval --json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvalReport {
    /// The weights file.
    pub weights: PathBuf,
    /// Where the data came from.
    pub data: String,
    /// The horizons, in tokens.
    pub horizons: Vec<usize>,
    /// The data's TR in seconds, when known (files, sidecars or `data.tr`).
    pub tr_seconds: Option<f64>,
    /// Each horizon's first and last lag in seconds, when the TR is known
    /// ([`boldcast_data::horizon_seconds`]).
    pub horizon_seconds: Option<Vec<[f64; 2]>>,
    /// Held-out subjects.
    pub heldout_subjects: Vec<String>,
    /// Held-out windows evaluated.
    pub windows: usize,
    /// The model and the baselines.
    pub rows: Vec<Row>,
    /// `floor_empirical`: the same numbers as `single_lag_ar_reference` (kept under its old
    /// name for older consumers; no floor on real data); and for the synthetic AR(1) fixture
    /// `floor_exact`, its exact floor `1 - rho^(2L)`.
    pub floors: Vec<Row>,
    /// The fitted AR(1) coefficient per parcel (of `ar1_iterated`).
    pub ar1_phi: Vec<f64>,
    /// What the fitted baselines chose: the cross-validation folds, `ar_p`'s order, the
    /// VARs' orders and ridge penalties (or why one was skipped).
    pub baselines: BaselineChoices,
    /// The model against the best baseline at each horizon.
    pub improvement: Improvement,
    /// The single-lag AR reference `1 - acf(L)^2` on the held-out runs: what a per-parcel
    /// forecast from the last TR alone would reach with the held-out autocorrelation; a
    /// reference, not a floor (models with more lags or parcels beat it on real data).
    pub single_lag_ar_reference: Row,
    /// `R^2` of the model and every baseline ([`boldcast_baselines::rsquared`]), in the order of `rows`.
    pub r_squared: Vec<RSquared>,
    /// The model against the best baseline at each horizon, with a paired bootstrap over the
    /// held-out subjects ([`super::bootstrap`]).
    pub bootstrap: PairedBootstrap,
    /// One parcel of the first held-out window and the model's forecasts of it.
    pub forecast_example: Option<ForecastExample>,
    /// What the user should be warned of (data other than the training data, when allowed).
    pub warnings: Vec<String>,
    /// The head motion of each held-out run that has a motion table beside it (fMRIPrep's
    /// confounds or XCP-D's `*_motion.tsv`): mean and largest framewise displacement, mm.
    pub motion: Vec<boldcast_data::motion::RunMotion>,
    /// The filtered-input check of the data ([`boldcast_data::spectrum`]).
    #[serde(default)]
    pub input_spectrum: boldcast_data::spectrum::InputSpectrum,
}

impl EvalReport {
    /// The row called `name` (model, baselines, the single-lag AR reference or floors).
    pub fn row(&self, name: &str) -> Option<&Row> {
        self.rows.iter().chain([&self.single_lag_ar_reference]).chain(&self.floors).find(|r| r.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_improvement_is_over_the_best_baseline_at_each_horizon() {
        let rows = [Row::new("model", vec![0.5, 0.9]), Row::new("a", vec![0.4, 1.0]), Row::new("b", vec![0.8, 0.95])];
        let imp = Improvement::of(&rows);
        assert_eq!(imp.best_baseline, ["a", "b"]);
        assert_eq!(imp.best_mse, [0.4, 0.95]);
        assert_eq!(imp.relative, [1.0 - 0.5 / 0.4, 1.0 - 0.9 / 0.95]);
        assert_eq!(imp.words, ["worse than a by 25.0 %", "better than b by 5.3 %"]);
        assert!(Improvement::of(&rows[1..]).relative.is_empty());
    }
}
