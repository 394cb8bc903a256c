//! `bc-cli eval`: the flags of an evaluation, the table it prints and the exit status, around
//! the library's evaluation ([`boldcast_train::eval`], which documents the weights, the
//! held-out windows, the baselines and the floors; `--json` prints its [`EvalReport`]).
//!
//! The table prints numbers of the JSON only: the rows, `single_lag_ar_reference` (the
//! JSON's `floor_empirical` is the same numbers, so it is not printed again), `floor_exact`,
//! `r_squared` (per horizon, pooled, and the median over parcels; each parcel's only in the
//! JSON), `improvement` (its `words`), `bootstrap`'s sentence, `baselines` (but each
//! candidate's cross-validated MSE, which only the JSON holds); `warnings` go to stderr; `--figure` draws
//! them ([`boldcast_plot::eval`]).
//!
//! `--checkpoint` names the weights; `--config` replaces the configuration stored in them
//! (needed for a file without one, written by PyTorch) and then the adjacency is rebuilt from
//! the training runs; `--data` replaces `data.dir`, else the configuration's `data.dir`, else
//! its synthetic fixture.

use crate::error::CliError;
use boldcast::core::{Adjacency, Model, ModelConfig};
use boldcast_train::config::RunConfig;
use boldcast_train::data::load_data;
use boldcast_train::eval::cv::FoldUnit;
use boldcast_train::eval::var::VarChoice;
use boldcast_train::eval::{evaluate_weights, BaselineChoices, EvalData, Weights};
use boldcast_train::presets::{Overrides, Purpose, DEFAULT_PRESET};
use boldcast_train::TrainError;
use std::path::PathBuf;

pub use boldcast_train::eval::{EvalReport, Row};

/// The width of a number column of the table (the longest baseline name and a space).
const COL: usize = 14;
/// The width of the name column (the longest row label, `single-lag AR reference`, and a space).
const NAME: usize = 24;

/// The table printed on stdout: the MSE of every row per horizon and their mean beside the
/// single-lag AR reference, `R^2`, the model against the best baseline per horizon (in words,
/// with the paired bootstrap's sentence) and what the fitted baselines chose (the report's
/// warnings, e.g. a penalty at an end of the ridge grid, go to stderr: [`eval_command`]).
pub fn table(r: &EvalReport) -> String {
    let mut s = format!(
        "eval: {} on {}\nheld-out subjects {}, {} windows\n",
        r.weights.display(),
        r.data,
        crate::train::subject_list(&r.heldout_subjects),
        r.windows
    );
    s += "MSE of standardized BOLD (variance units), per horizon h (tokens ahead)\n";
    if let (Some(tr), Some(secs)) = (r.tr_seconds, &r.horizon_seconds) {
        let text: Vec<String> = r
            .horizons
            .iter()
            .zip(secs)
            .map(|(h, &span)| format!("h{h} {}", boldcast::data::seconds_span_text(span)))
            .collect();
        s += &format!("horizons in seconds (TR {tr} s): {}\n", text.join(", "));
    }
    s += &header(&r.horizons, "mean");
    let reference = ("single-lag AR reference", &r.single_lag_ar_reference);
    let exact = r.floors.iter().filter(|f| f.name == "floor_exact").map(|f| (f.name.as_str(), f));
    let labelled = r.rows.iter().map(|row| (row.name.as_str(), row)).chain([reference]).chain(exact);
    for (label, row) in labelled {
        s += &numbers(label, &row.per_horizon, Some(row.mean), 6);
    }
    s += "  (single-lag AR reference: 1 - acf(L)^2 of the held-out runs, a per-parcel forecast from the last TR \
          alone; not a floor)\n";
    s + &r_squared(r) + &improvement(r) + &choices(&r.baselines)
}

/// A line of the table: `label`, then `values` (and `last`) with `digits` decimals.
fn numbers(label: &str, values: &[f64], last: Option<f64>, digits: usize) -> String {
    let mut s = format!("{label:<NAME$}");
    for v in values.iter().chain(&last) {
        s += &format!("{v:>COL$.digits$}");
    }
    s + "\n"
}

/// The header line of the per-horizon columns, and a last column `last` (or none when empty).
fn header(horizons: &[usize], last: &str) -> String {
    let mut s = format!("{:<NAME$}", "");
    for h in horizons {
        s += &format!("{:>COL$}", format!("h{h}"));
    }
    if !last.is_empty() {
        s += &format!("{last:>COL$}");
    }
    s + "\n"
}

/// `R^2` per horizon pooled over parcels (and over everything), and its median over parcels.
fn r_squared(r: &EvalReport) -> String {
    let mut s =
        "R^2 = 1 - SSE / SST (SST about the held-out targets' mean), per horizon, pooled over parcels\n".to_string();
    s += &header(&r.horizons, "pooled");
    for q in &r.r_squared {
        s += &numbers(&q.name, &q.per_horizon, Some(q.pooled), 4);
    }
    s += "R^2 per parcel: median over parcels, per horizon (every parcel's in the JSON)\n";
    s += &header(&r.horizons, "");
    for q in &r.r_squared {
        s += &numbers(&q.name, &q.parcel_median, None, 4);
    }
    s
}

/// The model against the best baseline at each horizon: the baseline, its MSE, the relative
/// difference in words, and the paired bootstrap's sentence.
fn improvement(r: &EvalReport) -> String {
    let i = &r.improvement;
    let mut s = "model vs the best baseline (lowest held-out MSE at each horizon)\n".to_string();
    s += &header(&r.horizons, "");
    s += &format!("{:<NAME$}", "best baseline");
    for b in &i.best_baseline {
        s += &format!("{b:>COL$}");
    }
    s += "\n";
    s += &numbers("best MSE", &i.best_mse, None, 6);
    for (h, w) in r.horizons.iter().zip(&i.words) {
        s += &format!("model at h{h}: {w} (of the best baseline's MSE)\n");
    }
    s + &format!("paired bootstrap: {}\n", r.bootstrap.sentence)
}

/// What the fitted baselines chose (orders in TRs, penalties relative to the unit variance).
fn choices(c: &BaselineChoices) -> String {
    let cv = match c.cv_unit {
        FoldUnit::None => "no cross-validation (one training run): defaults".to_string(),
        FoldUnit::Subject => format!("{}-fold cross-validation over training subjects", c.cv_folds),
        FoldUnit::Run => format!("{}-fold cross-validation over the training subject's runs", c.cv_folds),
    };
    let mut s = format!("chosen by {cv} (orders p in TRs; ridge lambda per sample, variance units):\n");
    s += &format!("  ar_p: p = {} (of 1..={})", c.ar_p.p, c.ar_p.p_max);
    if c.ar_p.p_lowest_cv != c.ar_p.p {
        s += &format!(
            "; lowest CV MSE at p = {}, within one paired standard error or 0.1 % of which the lower order is kept",
            c.ar_p.p_lowest_cv
        );
    }
    s += "\n";
    for (name, v) in [("var1", &c.var1), ("var_p", &c.var_p), ("var_pca", &c.var_pca)] {
        s += &match v {
            VarChoice::Fitted { p, rank, lambda, p_max, .. } => {
                let edge = if v.edge_warning(name).is_some() { " (an end of the grid)" } else { "" };
                let rank = rank.map_or(String::new(), |r| format!(", rank {r} principal components"));
                format!("  {name}: p = {p} (of 1..={p_max}){rank}, lambda = {lambda:e}{edge}\n")
            }
            VarChoice::Skipped { reason } => format!("  {name}: skipped: {reason}\n"),
        };
    }
    s
}

/// Flags of `bc-cli eval` as the library takes them.
#[derive(Clone, Debug, Default)]
pub struct EvalRequest {
    /// `--checkpoint`.
    pub checkpoint: PathBuf,
    /// `--data`.
    pub data: Option<PathBuf>,
    /// `--config` (for weights without a stored configuration).
    pub config: Option<PathBuf>,
    /// `--allow-other-data`.
    pub allow_other_data: bool,
    /// `--task --space --seg --format --tr --allow-mixed-tr`.
    pub picks: boldcast::data::Selection,
    /// `--test-subjects`: score these instead of the configuration's held-out subjects.
    pub test_subjects: Option<Vec<String>>,
    /// `--group-column`: replaces `data.group_column`.
    pub group_column: Option<String>,
}

/// The weights of `--checkpoint`; a missing path is named by its flag.
fn open_weights(req: &EvalRequest) -> Result<Weights, CliError> {
    Weights::open(&req.checkpoint).map_err(|e| match e {
        e @ TrainError::Weights { .. } => CliError::Msg(format!("--checkpoint {e}")),
        e => e.into(),
    })
}

/// The configuration of the evaluation: `--config` (through the presets' layers), else the
/// one stored in the weights; `--data` replaces `data.dir`.
fn eval_config(req: &EvalRequest, weights: &Weights) -> Result<RunConfig, CliError> {
    let mut cfg = match &req.config {
        Some(c) => boldcast_train::presets::resolve(
            &Overrides { config: Some(c.clone()), ..Overrides::default() },
            DEFAULT_PRESET,
            Purpose::Train,
        )?,
        None => weights.stored_config()?.ok_or_else(|| {
            CliError::Msg(format!(
                "{}: no configuration in the file's metadata: give --config",
                weights.path().display()
            ))
        })?,
    };
    if let Some(d) = &req.data {
        cfg.data.dir = Some(d.clone());
    }
    cfg.data.pick(&req.picks);
    if let Some(c) = &req.group_column {
        cfg.data.group_column = Some(c.clone());
    }
    cfg.validate()?;
    Ok(cfg)
}

/// `bc-cli eval`: opens the weights, resolves the configuration, loads the data (its notes
/// on stderr), builds the model with `build` and evaluates it and the baselines on the
/// held-out windows ([`evaluate_weights`]).
pub fn eval_command<M, F>(req: &EvalRequest, build: F) -> Result<EvalReport, CliError>
where
    M: Model<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast::core::Error>,
{
    let mut weights = open_weights(req)?;
    let cfg = eval_config(req, &weights)?;
    if req.config.is_some() {
        weights = weights.rebuild_adjacency();
    }
    if req.allow_other_data {
        weights = weights.allow_other_data();
    }
    let loaded = load_data(&cfg)?;
    for n in &loaded.notes {
        crate::errln!("{n}");
    }
    let data = match &req.test_subjects {
        Some(t) => EvalData::with_test_subjects(loaded, &cfg, t)?,
        None => EvalData::new(loaded, &cfg)?,
    };
    let report = evaluate_weights(&weights, &cfg, &data, build).map_err(|e| match e {
        e @ TrainError::OtherData { .. } => {
            CliError::Msg(format!("{e}; give --allow-other-data to evaluate on these data anyway"))
        }
        e => e.into(),
    })?;
    for w in &report.warnings {
        crate::errln!("{w}");
    }
    Ok(report)
}
