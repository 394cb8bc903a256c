//! The dataset sections of a run configuration, `[data]` (with `[data.synthetic]`) and
//! `[window]`. The whole run configuration (`RunConfig`, `[model]`, `[train]`, `[overfit]`,
//! validation, its TOML text) is `boldcast-train`'s `config` module, which uses these.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[data]`: where the runs come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataConfig {
    /// Directory of runs (see [`crate::data`]); absent: the synthetic AR(1) fixture below.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// Subjects held out for validation by `train` (the last ones in sorted order), used when
    /// neither `subjects_train`/`subjects_heldout` nor `heldout_fraction` is set.
    pub val_subjects: usize,
    /// Subject labels to train on (`"01"` or `"sub-01"`); empty: every subject not held out.
    #[serde(default)]
    pub subjects_train: Vec<String>,
    /// Subject labels held out for validation; empty: decided by `subjects_train`,
    /// `heldout_fraction` or `val_subjects`, in that order. A subject in both lists is an error.
    #[serde(default)]
    pub subjects_heldout: Vec<String>,
    /// Without explicit lists: hold out this fraction of the subjects (rounded, at least one,
    /// at least one left for training), drawn with `train.seed`; 0 falls back to `val_subjects`.
    #[serde(default)]
    pub heldout_fraction: f64,
    /// The synthetic dataset used without `dir`.
    pub synthetic: SyntheticConfig,
}

/// `[data.synthetic]`: the AR(1) fixture used when `data.dir` is absent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyntheticConfig {
    /// Subjects.
    pub subjects: usize,
    /// Runs per subject.
    pub runs: usize,
    /// TRs per run.
    pub trs: usize,
    /// Parcels.
    pub parcels: usize,
    /// AR(1) coefficient of every parcel.
    pub rho: f64,
    /// Seed of the generator.
    pub seed: u64,
}

/// `[window]`: windows of the runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowConfig {
    /// TRs per window (a multiple of `model.d_in`).
    pub window: usize,
    /// TRs between window starts.
    pub stride: usize,
}
