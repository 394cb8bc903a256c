//! An evaluation as `bc-cli eval` asks for it: a weights path, optional data, configuration
//! and test subjects ([`EvalRequest`]), resolved and run by [`evaluate_request`].
//!
//! `config` replaces the configuration stored in the weights (needed for a file without one,
//! written by PyTorch), and then the adjacency is rebuilt from the training runs; `data`
//! replaces `data.dir`, else the configuration's `data.dir` is used, else its synthetic
//! fixture.
//!
//! ```no_run
//! # fn main() -> Result<(), boldcast_train::TrainError> {
//! use boldcast_train::eval::request::{evaluate_request, EvalRequest};
//! let req = EvalRequest { checkpoint: "runs/train".into(), ..EvalRequest::default() };
//! let report = evaluate_request(&req, boldcast_cpu::CpuModel::<f32>::new, &mut |n| eprintln!("{n}"))?;
//! println!("{}", boldcast_train::text::eval_table(&report));
//! # Ok(()) }
//! ```

use super::{evaluate_weights, EvalData, EvalReport, Weights};
use crate::config::RunConfig;
use crate::data::load_data;
use crate::error::TrainError;
use crate::presets::{resolve, Overrides, Purpose, DEFAULT_PRESET};
use boldcast_core::{Adjacency, Model, ModelConfig};
use std::path::PathBuf;

/// What to evaluate, and on which data.
#[derive(Clone, Debug, Default)]
pub struct EvalRequest {
    /// A weights file, a checkpoint directory or a run directory ([`super::weights_path`]).
    pub checkpoint: PathBuf,
    /// Replaces `data.dir`.
    pub data: Option<PathBuf>,
    /// A configuration file, for weights without a stored configuration.
    pub config: Option<PathBuf>,
    /// Evaluate on data other than the training data, with a warning, instead of refusing.
    pub allow_other_data: bool,
    /// Which runs of the data are picked (task, space, seg, format, TR).
    pub picks: boldcast_data::Selection,
    /// Score these subjects instead of the configuration's held-out subjects.
    pub test_subjects: Option<Vec<String>>,
    /// Replaces `data.group_column`.
    pub group_column: Option<String>,
}

impl EvalRequest {
    /// The configuration of the evaluation: `config` (through the presets' layers), else the
    /// one stored in `weights`; `data`, the picks and the group column replace its own.
    pub fn config(&self, weights: &Weights) -> Result<RunConfig, TrainError> {
        let mut cfg = match &self.config {
            Some(c) => {
                resolve(&Overrides { config: Some(c.clone()), ..Overrides::default() }, DEFAULT_PRESET, Purpose::Train)?
            }
            None => weights.stored_config()?.ok_or_else(|| TrainError::Weights {
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
pub fn evaluate_request<M, F>(req: &EvalRequest, build: F, note: &mut dyn FnMut(&str)) -> Result<EvalReport, TrainError>
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
        Some(t) => EvalData::with_test_subjects(loaded, &cfg, t)?,
        None => EvalData::new(loaded, &cfg)?,
    };
    let report = evaluate_weights(&weights, &cfg, &data, build)?;
    report.warnings.iter().for_each(|w| note(w));
    Ok(report)
}
