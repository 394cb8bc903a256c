//! What a run trained on ([`Provenance`]): the data root, the parcel names in column order,
//! the TR, the subjects of each split and, per run file, its size, modification time and a
//! hash of its statistics. `summary.json` holds it under `provenance`, and so does every
//! checkpoint (`state.json`'s `data`, and the `provenance` metadata of each weights file), so
//! that a result can be traced to the files it came from.

use crate::data::Split;
use boldcast_data::{Dataset, FileStamp};
use serde::Serialize;
use std::path::PathBuf;

/// One run file of a training run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunRecord {
    /// The run's entities (`sub-01_ses-1_task-rest_run-1`).
    pub id: String,
    /// The file (or the generated run's label).
    pub path: PathBuf,
    /// `train`, `heldout`, or `unused` (a run of neither split).
    pub split: &'static str,
    /// TRs.
    pub n_tr: usize,
    /// The TR in seconds, when known.
    pub tr_seconds: Option<f64>,
    /// The file's size and modification time when read (absent for generated runs).
    pub file: Option<FileStamp>,
    /// [`boldcast_data::Run::stats_hash`].
    pub stats_hash: String,
}

/// What a run trained on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Provenance {
    /// `data.dir`, or `None` for the synthetic fixture.
    pub root: Option<PathBuf>,
    /// Where the data came from, in words.
    pub source: String,
    /// The parcel names, in the runs' column order.
    pub parcels: Vec<String>,
    /// Parcels dropped from every run for missing values (`data.missing = "drop-parcel"`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dropped_parcels: Vec<boldcast_data::missing::DroppedParcel>,
    /// The TR every run shares, in seconds, when known.
    pub tr_seconds: Option<f64>,
    /// The training subjects.
    pub train_subjects: Vec<String>,
    /// The held-out subjects.
    pub heldout_subjects: Vec<String>,
    /// Every run, in the dataset's order.
    pub runs: Vec<RunRecord>,
}

impl Provenance {
    /// The provenance of `ds` split by `split`, read from `root` (described as `source`).
    pub fn of(ds: &Dataset, split: &Split, root: Option<PathBuf>, source: &str) -> Provenance {
        let runs = ds
            .runs
            .iter()
            .enumerate()
            .map(|(i, r)| RunRecord {
                id: r.id.to_string(),
                path: r.path.clone(),
                split: if split.train_runs.contains(&i) {
                    "train"
                } else if split.heldout_runs.contains(&i) {
                    "heldout"
                } else {
                    "unused"
                },
                n_tr: r.n_tr,
                tr_seconds: r.tr.as_ref().map(|t| t.seconds),
                file: r.file,
                stats_hash: r.stats_hash(),
            })
            .collect();
        Provenance {
            root,
            source: source.to_string(),
            parcels: ds.parcel_names.clone(),
            dropped_parcels: ds.dropped_parcels.clone(),
            tr_seconds: ds.tr,
            train_subjects: split.train_subjects.clone(),
            heldout_subjects: split.heldout_subjects.clone(),
            runs,
        }
    }

    /// As JSON.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a provenance serializes")
    }
}
