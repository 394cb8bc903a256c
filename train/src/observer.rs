//! What a run reports, and to whom: the [`Observer`] trait. Observers see every step, every
//! validation, every checkpoint, every red flag and the end of the run, in that order of
//! events; `bc-cli`'s progress bar, its stdout lines and its figure are observers, and a
//! library user can add their own. Only rank 0 of a data-parallel run reports.
//!
//! The JSON-lines log is not an observer: it is part of the run's state (a checkpoint records
//! its length), so the run writes it itself ([`crate::log`]).

use crate::flags::RedFlag;
use crate::summary::TrainReport;
pub use boldcast_core::StepRecord;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A validation line of `loss_log.jsonl` (fields in this order).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValRecord {
    /// Optimizer steps done before this validation.
    pub step: u64,
    /// Mean loss over the held-out windows (the mean of the per-horizon losses).
    pub val_loss: f64,
    /// Loss per horizon.
    pub val_per_horizon: Vec<f64>,
    /// The floor (exact for the fixture, else empirical on the held-out runs).
    pub floor: f64,
    /// The floor per horizon.
    pub floor_per_horizon: Vec<f64>,
    /// `val_loss / train_loss`, the overfitting signal (`null` at step 0).
    pub val_over_train: Option<f64>,
    /// Mean training loss since the previous validation (`null` at step 0).
    pub train_loss: Option<f64>,
    /// The best validation loss so far (this one included).
    pub best_val_loss: f64,
    /// Its step.
    pub best_step: u64,
    /// Validations in a row without an improvement of `min_delta`.
    pub bad_validations: u64,
}

/// The start of a run (or of a resumed part of it).
#[derive(Clone, Debug, PartialEq)]
pub struct RunStart {
    /// Steps already done (0 for a fresh run).
    pub step: u64,
    /// `train.max_steps`.
    pub max_steps: u64,
    /// The output directory.
    pub out: PathBuf,
    /// Whether the run continues from a checkpoint.
    pub resumed: bool,
}

/// Receives what a run reports. Every method has an empty default.
pub trait Observer {
    /// The run starts (before the validation of step 0).
    fn on_start(&mut self, start: &RunStart) {
        let _ = start;
    }
    /// A step finished (its line is in the log).
    fn on_step(&mut self, rec: &StepRecord) {
        let _ = rec;
    }
    /// A validation finished (its line is in the log).
    fn on_validation(&mut self, rec: &ValRecord) {
        let _ = rec;
    }
    /// A file of the checkpoint of `step` was written to its temporary directory (the
    /// checkpoint is complete only at [`Observer::on_checkpoint`]).
    fn on_checkpoint_file(&mut self, step: u64, path: &Path) {
        let _ = (step, path);
    }
    /// The checkpoint of `step` is complete in `dir`.
    fn on_checkpoint(&mut self, step: u64, dir: &Path) {
        let _ = (step, dir);
    }
    /// A red flag was raised.
    fn on_flag(&mut self, flag: &RedFlag) {
        let _ = flag;
    }
    /// The run ended without an error (after `summary.json` when it finished).
    fn on_end(&mut self, report: &TrainReport) {
        let _ = report;
    }
}

/// An observer that keeps every event, for tests and for callers that look afterwards.
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    /// Steps.
    pub steps: Vec<StepRecord>,
    /// Validations.
    pub validations: Vec<ValRecord>,
    /// `(step, directory)` of the checkpoints.
    pub checkpoints: Vec<(u64, PathBuf)>,
    /// Red flags.
    pub flags: Vec<RedFlag>,
    /// Whether the run ended.
    pub ended: bool,
}

impl Observer for Recorder {
    fn on_step(&mut self, rec: &StepRecord) {
        self.steps.push(*rec);
    }
    fn on_validation(&mut self, rec: &ValRecord) {
        self.validations.push(rec.clone());
    }
    fn on_checkpoint(&mut self, step: u64, dir: &Path) {
        self.checkpoints.push((step, dir.to_path_buf()));
    }
    fn on_flag(&mut self, flag: &RedFlag) {
        self.flags.push(flag.clone());
    }
    fn on_end(&mut self, _: &TrainReport) {
        self.ended = true;
    }
}
