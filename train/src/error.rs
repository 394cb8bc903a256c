//! [`TrainError`]: what a run can fail with. Every variant names the file, field or step at
//! fault; the texts are those `bc-cli train` has always printed after `error: `.

use std::path::PathBuf;

fn or_none(p: &Option<PathBuf>, none: &str) -> String {
    p.as_ref().map_or(none.to_string(), |p| p.display().to_string())
}

/// What a training run can fail with.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The dataset could not be loaded or windowed.
    #[error(transparent)]
    Data(#[from] boldcast_data::DataError),
    /// A fixture parameter is invalid.
    #[error(transparent)]
    Fixture(#[from] boldcast_fixtures::FixtureError),
    /// The model, optimizer, trainer or collective failed.
    #[error(transparent)]
    Model(#[from] boldcast_core::Error),
    /// A file could not be read or written, an output could not be written where it was
    /// asked for, or a safetensors file could not be written or read.
    #[error(transparent)]
    Storage(#[from] boldcast_storage::StorageError),
    /// A checkpoint file is not what this run wrote (format, hash, shapes, metadata).
    #[error("{}: {reason}", path.display())]
    Checkpoint {
        /// The file.
        path: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// A checkpoint does not belong to this run (configuration, data, adjacency).
    #[error("{}: {reason}", dir.display())]
    Resume {
        /// The checkpoint directory.
        dir: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// `loss_log.jsonl` is not the log of this run.
    #[error("{}: {reason}", path.display())]
    Log {
        /// The log.
        path: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// A non-finite loss or gradient norm stopped the run.
    #[error(
        "non-finite {what} ({value}) at step {step}: training stopped; the last good checkpoint is {}",
        or_none(last_good, "none (no checkpoint was written yet)")
    )]
    NonFinite {
        /// The step, counted from 1 as stdout and the log count.
        step: u64,
        /// `loss` or `gradient norm`.
        what: String,
        /// The value.
        value: f64,
        /// The newest checkpoint, which stays `latest`.
        last_good: Option<PathBuf>,
    },
    /// A non-finite validation loss stopped the run.
    #[error("non-finite validation loss ({value}) after step {step}")]
    NonFiniteValidation {
        /// Steps done.
        step: u64,
        /// The value.
        value: f64,
    },
    /// A parameter became non-finite; no checkpoint is written with it.
    #[error(
        "non-finite parameter `{tensor}` after step {step}: training stopped; the last good checkpoint is {}",
        or_none(last_good, "none")
    )]
    NonFiniteParameter {
        /// Steps done.
        step: u64,
        /// The first tensor holding a non-finite value.
        tensor: String,
        /// The newest checkpoint, which stays `latest`.
        last_good: Option<PathBuf>,
    },
    /// `train.batch_size` exceeds the training windows.
    #[error("train.batch_size = {batch}: the training subjects give only {windows} windows of {window} TRs at stride {stride}")]
    BatchTooLarge {
        /// `train.batch_size`.
        batch: usize,
        /// Training windows.
        windows: usize,
        /// `window.window`.
        window: usize,
        /// `window.stride`.
        stride: usize,
    },
    /// The held-out subjects give no validation window.
    #[error("the held-out subjects give no validation window")]
    NoValidationWindows,
    /// A global batch past the end of the epoch's order.
    #[error("global batch {pos} of {batch} windows is past the {windows} windows of the epoch")]
    BatchOutOfEpoch {
        /// The batch within the epoch.
        pos: usize,
        /// The global batch size.
        batch: usize,
        /// Windows in the epoch's order.
        windows: usize,
    },
    /// Optimizer moments for more tensors than the model has.
    #[error("optimizer state for parameter {index}, but the model has {params}")]
    OptimizerState {
        /// The moment's tensor index.
        index: usize,
        /// The model's tensors.
        params: usize,
    },
    /// The run in this directory already finished.
    #[error("the run in {} already finished ({reason}) at step {step}", out.display())]
    AlreadyFinished {
        /// The output directory.
        out: PathBuf,
        /// Why it stopped (`max_steps`, `early_stopping`, ...).
        reason: String,
        /// Its last step.
        step: u64,
    },
    /// The final checkpoint names a reason this version does not know.
    #[error("the final checkpoint's reason `{reason}` is unknown")]
    UnknownFinish {
        /// The reason.
        reason: String,
    },
    /// The data of the overfit check does not give exactly its 4 windows.
    #[error(
        "overfit needs exactly {} windows (4 subjects x 1 run x 1 window of {window} TRs), but {data} gives {windows} \
         (one per run): use a directory with exactly 4 runs",
        crate::overfit::OVERFIT_WINDOWS
    )]
    OverfitWindows {
        /// `window.window`.
        window: usize,
        /// Where the data came from, in words.
        data: String,
        /// The windows it gives.
        windows: usize,
    },
    /// The overfit check ran no step (`overfit.max_steps = 0`), so it has no verdict.
    #[error("overfit ran no step")]
    OverfitNoStep,
    /// The subjects could not be split.
    #[error(transparent)]
    Split(#[from] boldcast_data::SplitError),
    /// Another process works in the run directory (it holds its lock).
    #[error(
        "{}: in use by {} (it holds {}/.lock): wait for it to end or stop it; two processes in one run directory \
         would corrupt it",
        dir.display(),
        pid.map_or("another process".to_string(), |p| format!("process {p}")),
        dir.display()
    )]
    Busy {
        /// The run directory.
        dir: PathBuf,
        /// The holder's process id, as it wrote it in the lock file.
        pid: Option<u32>,
    },
    /// The lock file of a run directory is not one this process can lock: a symbolic link
    /// (never followed), not a regular file, or one it cannot open.
    #[error("{}: {reason}", path.display())]
    LockFile {
        /// The lock file.
        path: PathBuf,
        /// What is wrong, with the process it names when it can be read.
        reason: String,
    },
    /// A command was pointed at the run directory of another command.
    #[error(
        "{} is {} {} run directory: bc-cli {} does not write into another command's run directory; choose another \
         directory",
        dir.display(),
        owner.article(),
        owner.name(),
        command.name()
    )]
    OtherRunDir {
        /// The run directory.
        dir: PathBuf,
        /// The command it belongs to.
        owner: crate::run_dir::RunKind,
        /// The command that was refused.
        command: crate::run_dir::RunKind,
    },
    /// A directory to continue holds neither a checkpoint nor `config.resolved.toml`.
    #[error("{}: not a run directory (no checkpoint and no config.resolved.toml)", dir.display())]
    NotARunDir {
        /// The directory.
        dir: PathBuf,
    },
    /// A run directory has checkpoints, but none is complete.
    #[error("every checkpoint under {} is broken: {}", dir.display(), reasons.join("; "))]
    BrokenCheckpoints {
        /// The `checkpoints` directory.
        dir: PathBuf,
        /// What is wrong with each, newest first.
        reasons: Vec<String>,
    },
    /// Weights or moments hold a non-finite value.
    #[error("{}: tensor `{tensor}` holds a non-finite value ({value}) at index {index}", path.display())]
    NonFiniteWeights {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// The first non-finite element's index.
        index: usize,
        /// Its value.
        value: f64,
    },
    /// Finite weights whose outputs are not finite (they overflow in the forward).
    #[error(
        "{}: {what} holds a non-finite value ({value}) at index {index}: the forward overflows with these weights",
        path.display()
    )]
    NonFiniteOutputs {
        /// The weights file.
        path: PathBuf,
        /// Which outputs, in words (`the forecasts of sub-01_run-1`).
        what: String,
        /// The first non-finite element's index.
        index: usize,
        /// Its value.
        value: f64,
    },
    /// A linear baseline cannot be fitted or scored.
    #[error(transparent)]
    Baselines(#[from] boldcast_baselines::BaselineError),
}

/// A tensor file's error reaches `?` through [`boldcast_storage::StorageError`].
impl From<boldcast_storage::tensorfile::CheckpointError> for TrainError {
    fn from(e: boldcast_storage::tensorfile::CheckpointError) -> Self {
        TrainError::Storage(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_texts_name_the_step_and_the_checkpoint() {
        let e = TrainError::NonFinite { step: 7, what: "loss".into(), value: f64::NAN, last_good: None };
        assert_eq!(
            e.to_string(),
            "non-finite loss (NaN) at step 7: training stopped; the last good checkpoint is none (no checkpoint was \
             written yet)"
        );
        let e = TrainError::NonFiniteParameter { step: 3, tensor: "head.weight".into(), last_good: None };
        assert_eq!(
            e.to_string(),
            "non-finite parameter `head.weight` after step 3: training stopped; the last good checkpoint is none"
        );
    }
}
