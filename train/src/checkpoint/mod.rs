//! Training checkpoints: one directory per checkpoint, made visible only when complete
//! ([`write`](mod@write)), read back only when its three files agree with each other and with the run
//! ([`read`], [`verify`]).
//!
//! ```text
//! <out>/checkpoints/step-000200/model.safetensors      the MODEL.md names only (PyTorch-loadable)
//!                              /optimizer.safetensors  m.<name>, v.<name>: AdamW's moments
//!                              /state.json             TrainState: step, optimizer t, epoch,
//!                                                      position, RNG, validation tracking,
//!                                                      log length, resolved config and its hash,
//!                                                      the identity of the two tensor files and
//!                                                      of the training data
//! <out>/checkpoints/latest                             "step-000200": the newest good one
//! ```
//!
//! **Writing.** A checkpoint is written into `checkpoints/.step-000200.tmp`, every file synced,
//! the directory synced, then renamed to `step-000200`; only then is `latest` replaced
//! (temporary file, sync, rename). A process killed at any moment therefore leaves `latest`
//! pointing at a complete checkpoint: the previous one, or the new one. The last [`KEEP`]
//! checkpoints are kept; an older one is first renamed out of the way
//! (`.pruned-step-000100`) and then deleted, so a kill during the deletion never leaves a
//! half-deleted directory under a checkpoint's name. Leftovers of a killed process are removed
//! when the next process starts in the directory ([`crate::run_dir`]).
//!
//! **Identity.** The three files carry one identity: `model.safetensors`'s metadata has `step`,
//! `optimizer.safetensors`'s has `step` and `t`, and `state.json` records the step, the
//! optimizer's `t` (equal to the step) and the content hash of each file's tensors
//! ([`FileHashes`], [`boldcast_storage::tensorfile::SafetensorsFile::content_hash`]). A file from
//! another step, an edited state, removed moments or a flipped bit in tensor data is an error
//! naming the file. The state also records the parcel names and the fingerprint of the
//! training runs ([`DataIdentity`]); a resume on other data is refused. It records the log's
//! length `log_bytes` with the hash of those bytes of `loss_log.jsonl` (`log_hash`), so an
//! edited length or log is refused on resume ([`verify::check_log`]) instead of truncating the
//! log elsewhere. States of the earlier formats are still read, with every check that does not
//! need what they lack: [`STATE_FORMAT_V1`] (no file hashes, no data identity) and
//! [`STATE_FORMAT_V2`] (no `log_hash`: its `log_bytes` is used unchecked, with a note).
//!
//! **Good checkpoints.** A checkpoint is good when training can go on from it: its weights are
//! finite, and the step that starts from them does not give a non-finite loss or gradient.
//! When that step fails, the run demotes the checkpoint ([`write::demote`]: renamed to
//! `step-000200.non-finite`, `latest` back to the newest one before it) and names that one as
//! the last good checkpoint.
//!
//! `model.safetensors` carries `__metadata__` that PyTorch ignores: `format`, `step`, the
//! resolved `config` (TOML), the `adjacency` (JSON `{"parcels","k","indices"}` or `null`), the
//! `parcels` (JSON list of names) and the `data_fingerprint`, so `bc-cli eval` can rebuild the
//! model from the file alone and tell whether it is given the data it was trained on.
//!
//! The observers hear of each file as it lands in the temporary directory
//! ([`crate::Observer::on_checkpoint_file`]), before the checkpoint is complete.

pub mod read;
pub mod verify;
pub mod write;

pub use read::{
    continue_point, find_checkpoint, latest_checkpoint, load_checkpoint, read_state, resume_point, stored_config,
    Found, Loaded, ResumePoint,
};
pub use write::{write_checkpoint, CheckpointData};

use crate::data::DataIdentity;
use crate::error::TrainError;
use boldcast_core::Adjacency;
use boldcast_storage::io_err;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The checkpoints' directory under the output directory.
pub const CKPT_DIR: &str = "checkpoints";
/// The pointer file naming the newest complete checkpoint.
pub const LATEST: &str = "latest";
/// Checkpoints kept.
pub const KEEP: usize = 2;
/// `state.json`'s `format`.
pub const STATE_FORMAT: &str = "boldcast-train-state-v3";
/// The second format, before [`TrainState::log_hash`]: still read, its `log_bytes` unchecked
/// (with a note).
pub const STATE_FORMAT_V2: &str = "boldcast-train-state-v2";
/// The first format, before [`TrainState::files`] and [`TrainState::data`]: still read.
pub const STATE_FORMAT_V1: &str = "boldcast-train-state-v1";
/// The suffix of a demoted checkpoint directory (see the module documentation).
pub const DEMOTED_SUFFIX: &str = ".non-finite";
/// The prefix a pruned checkpoint directory is renamed to before it is deleted.
pub const PRUNED_PREFIX: &str = ".pruned-";

/// The content hashes ([`boldcast_storage::tensorfile::SafetensorsFile::content_hash`]) of a
/// checkpoint's two tensor files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileHashes {
    /// `model.safetensors`.
    pub model: String,
    /// `optimizer.safetensors`.
    pub optimizer: String,
}

/// The position of the data-order generator (ChaCha8, see [`crate::order::epoch_order`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RngState {
    /// `"ChaCha8Rng"`.
    pub algorithm: String,
    /// `seed_from_u64` seed (`train.seed`).
    pub seed: u64,
    /// The stream: [`crate::order::ORDER_STREAM_BASE`] + epoch.
    pub stream: u64,
    /// `get_word_pos()` after the epoch's order was drawn (decimal; a 68-bit number).
    pub word_pos: String,
}

/// What validation has seen so far: enough to continue early stopping, the best weights and
/// the overfitting ratio exactly where an uninterrupted run would be.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ValState {
    /// `(step, val_loss)` of every validation.
    pub history: Vec<(u64, f64)>,
    /// The best validation loss and its step (what `best.safetensors` holds).
    pub best: Option<(u64, f64)>,
    /// The loss that the next validation must beat by `min_delta` to count as an improvement.
    pub patience_ref: Option<f64>,
    /// Validations in a row without such an improvement.
    pub bad_validations: u64,
    /// Training losses since the last validation (the denominator of `val_over_train`).
    pub train_losses_since_val: Vec<f64>,
}

/// `state.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainState {
    /// [`STATE_FORMAT`].
    pub format: String,
    /// Optimizer steps done; the next step to run.
    pub step: u64,
    /// `train.max_steps` (the schedule's length).
    pub max_steps: u64,
    /// The optimizer's `t` (bias-correction step count).
    pub optimizer_t: u64,
    /// The learning rate of the next step (the schedule's position is `step`).
    pub next_lr: f64,
    /// The epoch of the next step.
    pub epoch: u64,
    /// The batch of the next step within its epoch.
    pub position_in_epoch: u64,
    /// Batches per epoch (`floor(train windows / batch_size)`).
    pub batches_per_epoch: u64,
    /// Training windows.
    pub train_windows: u64,
    /// The data-order generator.
    pub rng: RngState,
    /// Validation tracking.
    pub val: ValState,
    /// Bytes of `loss_log.jsonl` when the checkpoint was written (a resume truncates to it).
    pub log_bytes: u64,
    /// FNV-1a 64 of those `log_bytes` bytes of the log, hex (absent before
    /// [`STATE_FORMAT`]): an edited `log_bytes` or log is refused on resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_hash: Option<String>,
    /// Why the run ended, when this is its final checkpoint (`max_steps`, `early_stopping`).
    pub finished: Option<String>,
    /// FNV-1a 64 of `config`, hex.
    pub config_hash: String,
    /// The resolved configuration, TOML.
    pub config: String,
    /// The tensor files' hashes ([`write_checkpoint`] fills them in; absent in
    /// [`STATE_FORMAT_V1`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<FileHashes>,
    /// The training data: parcel names and fingerprint (absent in [`STATE_FORMAT_V1`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataIdentity>,
}

/// The hash of a configuration's text: FNV-1a 64 ([`boldcast_storage::hash`]) as 16 hex digits.
pub fn config_hash(text: &str) -> String {
    boldcast_storage::hash::fnv1a_hex(text.as_bytes())
}

/// The adjacency as the JSON of the metadata.
pub fn adjacency_json(a: Option<&Adjacency>) -> String {
    match a {
        Some(a) => serde_json::json!({"parcels": a.parcels(), "k": a.k(), "indices": a.indices()}).to_string(),
        None => "null".into(),
    }
}

/// The adjacency from the metadata's JSON.
pub fn adjacency_from_json(origin: &Path, text: &str) -> Result<Option<Adjacency>, TrainError> {
    let bad = |why: String| TrainError::Checkpoint {
        path: origin.to_path_buf(),
        reason: format!("metadata `adjacency`: {why}"),
    };
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
    if v.is_null() {
        return Ok(None);
    }
    let p = v["parcels"].as_u64().ok_or_else(|| bad("no `parcels`".into()))? as usize;
    let k = v["k"].as_u64().ok_or_else(|| bad("no `k`".into()))? as usize;
    let idx: Vec<usize> = v["indices"]
        .as_array()
        .ok_or_else(|| bad("no `indices`".into()))?
        .iter()
        .map(|x| x.as_u64().map(|u| u as usize).ok_or_else(|| bad(format!("index {x} is not a count"))))
        .collect::<Result<_, _>>()?;
    Adjacency::new(p, k, idx).map(Some).map_err(|e| bad(e.to_string()))
}

/// The metadata of a `model.safetensors` (or `best.safetensors`).
pub fn model_metadata(
    step: u64,
    config: &str,
    adjacency: Option<&Adjacency>,
    data: &DataIdentity,
) -> HashMap<String, String> {
    [
        ("format".to_string(), "boldcast".to_string()),
        ("step".to_string(), step.to_string()),
        ("config".to_string(), config.to_string()),
        ("adjacency".to_string(), adjacency_json(adjacency)),
        ("parcels".to_string(), serde_json::to_string(&data.parcels).expect("names serialize")),
        ("data_fingerprint".to_string(), data.fingerprint.clone()),
    ]
    .into_iter()
    .chain(data.provenance.as_ref().map(|p| ("provenance".to_string(), p.to_string())))
    .collect()
}

/// The name of a step's checkpoint directory.
pub fn step_dir_name(step: u64) -> String {
    format!("step-{step:06}")
}

/// The step of a checkpoint directory's name (`step-000200`), `None` for any other name.
pub fn parse_step_dir(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("step-")?;
    digits.bytes().all(|b| b.is_ascii_digit()).then(|| digits.parse().ok()).flatten()
}

/// Checkpoint directories `(step, path)` under `ck` (the `checkpoints` directory), by step.
pub fn step_dirs(ck: &Path) -> Result<Vec<(u64, PathBuf)>, TrainError> {
    let mut v = Vec::new();
    if !ck.is_dir() {
        return Ok(v);
    }
    for e in std::fs::read_dir(ck).map_err(io_err(ck))? {
        let e = e.map_err(io_err(ck))?;
        if let Some(s) = parse_step_dir(&e.file_name().to_string_lossy()) {
            if e.path().is_dir() {
                v.push((s, e.path()));
            }
        }
    }
    v.sort();
    Ok(v)
}
