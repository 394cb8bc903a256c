//! `boldcast-analysis`: what a trained model says about data, generic over the model. A
//! checkpoint's per-horizon MSE and `R^2` beside the linear baselines of
//! [`boldcast_baselines`], with a paired bootstrap over held-out subjects ([`eval`]); its
//! forecasts and embeddings of whole runs ([`infer`], `bc-cli forecast` and `embed`); the
//! identification of subjects from per-run features against the functional-connectivity
//! fingerprint ([`fingerprint`]); the floor that the signal's own autocorrelation allows
//! ([`floor`]); and the plain text of each report ([`text`]). Every report is also JSON
//! (`serde::Serialize`), and `boldcast-plot` draws its figures.
//!
//! ```no_run
//! # fn main() -> Result<(), boldcast_analysis::AnalysisError> {
//! let report = boldcast_analysis::eval::eval_checkpoint(
//!     "runs/train".as_ref(),
//!     None,
//!     |cfg, adj, seed| boldcast_cpu::CpuModel::<f32>::new(cfg, adj, seed),
//! )?;
//! print!("{}", boldcast_analysis::text::eval_table(&report));
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

pub mod eval;
pub mod fingerprint;
pub mod floor;
pub mod infer;
pub mod text;

use std::path::PathBuf;

/// What an analysis can fail with. Every variant names the file, field or sample at fault.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    /// No weights at the path given (the requests' `checkpoint`, bc-cli's `--checkpoint`).
    #[error("--checkpoint {}: {reason}", path.display())]
    Weights {
        /// The path given.
        path: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// Weights are given data other than the data they were trained on (the requests'
    /// `allow_other_data`, bc-cli's `--allow-other-data`, lets them).
    #[error("{}: {reason}; give --allow-other-data to use these data anyway", path.display())]
    OtherData {
        /// The weights file.
        path: PathBuf,
        /// What differs, in words.
        reason: String,
    },
    /// A weights file is not what a run wrote (metadata, shapes, adjacency).
    #[error("{}: {reason}", path.display())]
    Checkpoint {
        /// The file.
        path: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// Subject fingerprinting cannot run on these features or runs.
    #[error("fingerprint: {reason}")]
    Fingerprint {
        /// Why, in words (naming the sample or run at fault).
        reason: String,
    },
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] boldcast_train::config::ConfigError),
    /// The data could not be loaded or windowed.
    #[error(transparent)]
    Data(#[from] boldcast_data::DataError),
    /// The subjects could not be split or selected.
    #[error(transparent)]
    Split(#[from] boldcast_data::SplitError),
    /// An output could not be written where it was asked for, or a safetensors file could
    /// not be read.
    #[error(transparent)]
    Storage(#[from] boldcast_storage::StorageError),
    /// A fixture parameter is invalid.
    #[error(transparent)]
    Fixture(#[from] boldcast_fixtures::FixtureError),
    /// A baseline could not be fitted or scored.
    #[error(transparent)]
    Baselines(#[from] boldcast_baselines::BaselineError),
    /// The model failed.
    #[error(transparent)]
    Model(#[from] boldcast_core::Error),
    /// The run directory, a checkpoint or the data's setup failed (the training library's
    /// error).
    #[error(transparent)]
    Train(#[from] boldcast_train::TrainError),
}

/// A tensor file's error reaches `?` through [`boldcast_storage::StorageError`].
impl From<boldcast_storage::tensorfile::CheckpointError> for AnalysisError {
    fn from(e: boldcast_storage::tensorfile::CheckpointError) -> Self {
        AnalysisError::Storage(e.into())
    }
}
