//! `bc-cli eval`: the flags of an evaluation, the table it prints and the exit status, around
//! the library's evaluation ([`boldcast_train::eval`], which documents the weights, the
//! held-out windows, the baselines and the floors; `--json` prints its [`EvalReport`]).
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
use boldcast_train::eval::{evaluate_weights, EvalData, Weights};
use boldcast_train::TrainError;
use std::path::PathBuf;

pub use boldcast_train::eval::{EvalReport, Row};

/// The table printed on stdout.
pub fn table(r: &EvalReport) -> String {
    let mut s = format!(
        "eval: {} on {}\nheld-out subjects {:?}, {} windows\n{:<18}",
        r.weights.display(),
        r.data,
        r.heldout_subjects,
        r.windows,
        "MSE"
    );
    for h in &r.horizons {
        s += &format!("{:>12}", format!("h{h}"));
    }
    s += &format!("{:>12}\n", "mean");
    for row in r.rows.iter().chain(&r.floors) {
        s += &format!("{:<18}", row.name);
        for v in &row.per_horizon {
            s += &format!("{v:>12.6}");
        }
        s += &format!("{:>12.6}\n", row.mean);
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
    pub picks: crate::presets::DataPicks,
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
    req.picks.apply_to(&mut cfg.data);
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
    let data = EvalData::new(loaded, &cfg)?;
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
