//! `bc-cli eval`: the flags of an evaluation, the table it prints and the exit status, around
//! the library's evaluation ([`boldcast_train::eval`], which documents the weights, the
//! held-out windows, the baselines and the floors; `--json` prints its [`EvalReport`]).
//!
//! The table prints every number of the JSON's rows, `improvement` and `baselines` (but each
//! candidate's cross-validated MSE, which only the JSON holds); `--figure` draws them
//! ([`crate::plot_eval`]).
//!
//! `--checkpoint` names the weights; `--config` replaces the configuration stored in them
//! (needed for a file without one, written by PyTorch) and then the adjacency is rebuilt from
//! the training runs; `--data` replaces `data.dir`, else the configuration's `data.dir`, else
//! its synthetic fixture.

use crate::error::CliError;
use crate::presets::{Overrides, Purpose, DEFAULT_PRESET};
use boldcast::core::{Adjacency, Model, ModelConfig};
use boldcast_train::config::RunConfig;
use boldcast_train::data::load_data;
use boldcast_train::eval::cv::FoldUnit;
use boldcast_train::eval::var::VarChoice;
use boldcast_train::eval::{evaluate_weights, BaselineChoices, EvalData, Weights};
use boldcast_train::TrainError;
use std::path::PathBuf;

pub use boldcast_train::eval::{EvalReport, Row};

/// The width of a number column of the table (the longest baseline name and a space).
const COL: usize = 14;

/// The table printed on stdout: the MSE of every row per horizon and their mean, the model's
/// improvement over the best baseline per horizon, and what the fitted baselines chose.
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
    s += &header(&r.horizons, true);
    for row in r.rows.iter().chain(&r.floors) {
        s += &format!("{:<18}", row.name);
        for v in &row.per_horizon {
            s += &format!("{v:>COL$.6}");
        }
        s += &format!("{:>COL$.6}\n", row.mean);
    }
    s + &improvement(r) + &choices(&r.baselines)
}

/// The header line of the per-horizon columns.
fn header(horizons: &[usize], mean: bool) -> String {
    let mut s = format!("{:<18}", "");
    for h in horizons {
        s += &format!("{:>COL$}", format!("h{h}"));
    }
    if mean {
        s += &format!("{:>COL$}", "mean");
    }
    s + "\n"
}

/// The model against the best baseline at each horizon.
fn improvement(r: &EvalReport) -> String {
    let i = &r.improvement;
    let mut s =
        "model vs the best baseline: relative improvement 1 - model / best (fraction of the best's MSE)\n".to_string();
    s += &header(&r.horizons, false);
    s += &format!("{:<18}", "best baseline");
    for b in &i.best_baseline {
        s += &format!("{b:>COL$}");
    }
    s += &format!("\n{:<18}", "best MSE");
    for v in &i.best_mse {
        s += &format!("{v:>COL$.6}");
    }
    s += &format!("\n{:<18}", "improvement");
    for v in &i.relative {
        s += &format!("{v:>+COL$.4}");
    }
    s + "\n"
}

/// What the fitted baselines chose (orders in TRs, penalties relative to the unit variance).
fn choices(c: &BaselineChoices) -> String {
    let cv = match c.cv_unit {
        FoldUnit::None => "no cross-validation (one training run): defaults".to_string(),
        FoldUnit::Subject => format!("{}-fold cross-validation over training subjects", c.cv_folds),
        FoldUnit::Run => format!("{}-fold cross-validation over the training subject's runs", c.cv_folds),
    };
    let mut s = format!("chosen by {cv} (orders p in TRs; ridge lambda per sample, variance units):\n");
    s += &format!("  ar_p: p = {} (of 1..={})\n", c.ar_p.p, c.ar_p.p_max);
    for (name, v) in [("var1", &c.var1), ("var_p", &c.var_p)] {
        s += &match v {
            VarChoice::Fitted { p, lambda, p_max, .. } => {
                format!("  {name}: p = {p} (of 1..={p_max}), lambda = {lambda:e}\n")
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
        Some(c) => crate::presets::resolve(
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
