//! An evaluation as `bc-cli eval` asks for it: a weights path, optional data, configuration
//! and test subjects ([`EvalRequest`]), resolved and run by [`evaluate_request`].
//!
//! `config` replaces the configuration stored in the weights (needed for a file without one,
//! written by PyTorch), and then the adjacency is rebuilt from the training runs; `data`
//! replaces `data.dir`, else the configuration's `data.dir` is used, else its synthetic
//! fixture.
//!
//! ```no_run
//! # fn main() -> Result<(), boldcast_analysis::AnalysisError> {
//! use boldcast_analysis::eval::request::{evaluate_request, EvalRequest};
//! let req = EvalRequest { checkpoint: "runs/train".into(), ..EvalRequest::default() };
//! let report = evaluate_request(&req, boldcast_cpu::CpuModel::<f32>::new, &mut |n| eprintln!("{n}"))?;
//! println!("{}", boldcast_analysis::text::eval_table(&report));
//! # Ok(()) }
//! ```

use super::{evaluate_weights, EvalData, EvalReport, Weights};
use crate::AnalysisError;
use boldcast_core::{Adjacency, Model, ModelConfig};
use boldcast_data::SubjectList;
use boldcast_train::config::RunConfig;
use boldcast_train::data::load_data;
use boldcast_train::presets::{resolve, Overrides, Purpose, DEFAULT_PRESET};
use std::path::PathBuf;

/// What to evaluate, and on which data (with the feature `clap`, `bc-cli eval`'s flags).
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct EvalRequest {
    /// A weights file (`.safetensors`), a checkpoint directory, or a run directory (its
    /// best.safetensors, else its newest checkpoint).
    #[cfg_attr(feature = "clap", arg(long))]
    pub checkpoint: PathBuf,
    /// Dataset directory (default: the configuration's, else its synthetic fixture).
    #[cfg_attr(feature = "clap", arg(long))]
    pub data: Option<PathBuf>,
    /// How the runs of --data are picked (default: the configuration's picks).
    #[cfg_attr(feature = "clap", command(flatten))]
    pub picks: boldcast_data::Selection,
    /// A run configuration, for weights without one in their metadata (e.g. from PyTorch).
    #[cfg_attr(feature = "clap", arg(long))]
    pub config: Option<PathBuf>,
    /// Score these subjects (`24,25` or `@FILE`) instead of the run's held-out ones, which
    /// chose its best step: a test set kept out of training and validation. The run must
    /// list its training subjects (--subjects-train); the baselines are fitted on those.
    #[cfg_attr(feature = "clap", arg(long, value_name = "LIST|@FILE"))]
    pub test_subjects: Option<SubjectList>,
    /// Keep related subjects (the same value in this column of participants.tsv, e.g.
    /// `family_id`) on one side of the split: a test or held-out subject whose relative was
    /// trained on is an error naming them (default: the run's data.group_column).
    #[cfg_attr(feature = "clap", arg(long, value_name = "COL"))]
    pub group_column: Option<String>,
    /// Evaluate on data other than the training data (other parcel names, or training runs
    /// that differ from those the weights recorded), with a warning, instead of refusing.
    #[cfg_attr(feature = "clap", arg(long))]
    pub allow_other_data: bool,
}

impl EvalRequest {
    /// The configuration of the evaluation: `config` (through the presets' layers), else the
    /// one stored in `weights`; `data`, the picks and the group column replace its own.
    pub fn config(&self, weights: &Weights) -> Result<RunConfig, AnalysisError> {
        let mut cfg = match &self.config {
            Some(c) => {
                resolve(&Overrides { config: Some(c.clone()), ..Overrides::default() }, DEFAULT_PRESET, Purpose::Train)?
            }
            None => weights.stored_config()?.ok_or_else(|| AnalysisError::Weights {
                path: weights.path().to_path_buf(),
                reason: "no configuration in the file's metadata: give a configuration (--config)".into(),
            })?,
        };
        if let Some(d) = &self.data {
            cfg.data.dir = Some(d.clone());
        }
        cfg.data.pick(&self.picks);
        if let Some(c) = &self.group_column {
            cfg.data.group_column = Some(c.clone());
        }
        cfg.validate()?;
        Ok(cfg)
    }
}

/// Opens the weights, resolves the configuration, loads the data (its notes go to `note`),
/// builds the model with `build` and evaluates it and the baselines on the held-out windows
/// ([`evaluate_weights`]); the report's warnings go to `note` as well.
pub fn evaluate_request<M, F>(
    req: &EvalRequest,
    build: F,
    note: &mut dyn FnMut(&str),
) -> Result<EvalReport, AnalysisError>
where
    M: Model<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast_core::Error>,
{
    let mut weights = Weights::open(&req.checkpoint)?;
    let cfg = req.config(&weights)?;
    if req.config.is_some() {
        weights = weights.rebuild_adjacency();
    }
    if req.allow_other_data {
        weights = weights.allow_other_data();
    }
    let loaded = load_data(&cfg)?;
    loaded.notes.iter().for_each(|n| note(n));
    let data = match &req.test_subjects {
        Some(t) => EvalData::with_test_subjects(loaded, &cfg, &t.0)?,
        None => EvalData::new(loaded, &cfg)?,
    };
    let report = evaluate_weights(&weights, &cfg, &data, build)?;
    report.warnings.iter().for_each(|w| note(w));
    Ok(report)
}
