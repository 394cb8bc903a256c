//! Training checkpoints: one directory per checkpoint, made visible only when complete, and
//! their consistency checks when read back.
//!
//! ```text
//! <out>/checkpoints/step-000200/model.safetensors      the MODEL.md names only (PyTorch-loadable)
//!                              /optimizer.safetensors  m.<name>, v.<name>: AdamW's moments
//!                              /state.json             TrainState: step, optimizer t, epoch,
//!                                                      position, RNG, validation tracking,
//!                                                      log length, resolved config and its hash
//! <out>/checkpoints/latest                             "step-000200": the newest complete one
//! ```
//!
//! A checkpoint is written into `checkpoints/.step-000200.tmp`, every file synced, the
//! directory synced, then renamed to `step-000200`; only then is `latest` replaced (temporary
//! file, sync, rename). A process killed at any moment therefore leaves `latest` pointing at a
//! complete checkpoint: the previous one, or the new one. The last [`KEEP`] checkpoints are
//! kept; leftovers of a killed write are removed by the next write.
//!
//! `model.safetensors` carries `__metadata__` that PyTorch ignores: `format`, `step`, the
//! resolved `config` (TOML) and the `adjacency` (JSON `{"parcels","k","indices"}` or `null`),
//! so `bc-cli eval` can rebuild the model from the file alone.
//!
//! **Test hook**: with the environment variable [`PAUSE_HOOK_ENV`] set to a step number, the
//! write of that step's checkpoint prints `test hook: paused in the checkpoint write of step N`
//! on standard error after `model.safetensors` is in the temporary directory, and sleeps for
//! ten minutes, so a test can SIGKILL the process in the middle of a checkpoint write. It has
//! no other effect and is meant for tests only.

use crate::error::TrainError;
use boldcast_core::model::NamedTensor;
use boldcast_core::optim::Moments;
use boldcast_core::{Adjacency, ParamSpec};
use boldcast_data::fsutil::{sync_dir, write_atomic};
use boldcast_data::tensorfile::{save_safetensors, SafetensorsFile};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The checkpoints' directory under the output directory.
pub const CKPT_DIR: &str = "checkpoints";
/// The pointer file naming the newest complete checkpoint.
pub const LATEST: &str = "latest";
/// Checkpoints kept.
pub const KEEP: usize = 2;
/// The test hook's environment variable (see the module documentation).
pub const PAUSE_HOOK_ENV: &str = "BOLDCAST_TEST_PAUSE_IN_CKPT_WRITE";
/// `state.json`'s `format`.
pub const STATE_FORMAT: &str = "boldcast-train-state-v1";

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
    /// Why the run ended, when this is its final checkpoint (`max_steps`, `early_stopping`).
    pub finished: Option<String>,
    /// FNV-1a 64 of `config`, hex.
    pub config_hash: String,
    /// The resolved configuration, TOML.
    pub config: String,
}

/// FNV-1a 64-bit hash of `text`, as 16 hex digits (stable across Rust versions).
pub fn config_hash(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
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
pub fn model_metadata(step: u64, config: &str, adjacency: Option<&Adjacency>) -> HashMap<String, String> {
    [
        ("format".to_string(), "boldcast".to_string()),
        ("step".to_string(), step.to_string()),
        ("config".to_string(), config.to_string()),
        ("adjacency".to_string(), adjacency_json(adjacency)),
    ]
    .into()
}

/// The name of a step's checkpoint directory.
pub fn step_dir_name(step: u64) -> String {
    format!("step-{step:06}")
}

fn parse_step_dir(name: &str) -> Option<u64> {
    name.strip_prefix("step-").and_then(|s| s.parse().ok())
}

/// Everything a checkpoint holds, ready to write.
pub struct CheckpointData<'a> {
    /// The parameters in state-dict order.
    pub params: Vec<NamedTensor<f32>>,
    /// The optimizer's moments, by parameter index.
    pub moments: &'a [Moments<f32>],
    /// The parameter specs (names by index).
    pub specs: &'a [ParamSpec],
    /// The adjacency the model was built with.
    pub adjacency: Option<&'a Adjacency>,
    /// `state.json`.
    pub state: &'a TrainState,
}

/// Writes the checkpoint of `data.state.step` under `out/checkpoints` (see the module
/// documentation for the order of operations), points `latest` at it and prunes to [`KEEP`].
/// Returns the checkpoint directory.
pub fn write_checkpoint(out: &Path, data: &CheckpointData<'_>) -> Result<PathBuf, TrainError> {
    let ck = out.join(CKPT_DIR);
    std::fs::create_dir_all(&ck).map_err(TrainError::io(&ck))?;
    remove_leftovers(&ck)?;
    let step = data.state.step;
    let name = step_dir_name(step);
    let tmp = ck.join(format!(".{name}.tmp"));
    std::fs::create_dir(&tmp).map_err(TrainError::io(&tmp))?;
    let meta = model_metadata(step, &data.state.config, data.adjacency);
    save_safetensors(tmp.join("model.safetensors"), &data.params, Some(meta))?;
    if std::env::var(PAUSE_HOOK_ENV).ok().and_then(|v| v.trim().parse::<u64>().ok()) == Some(step) {
        eprintln!("test hook: paused in the checkpoint write of step {step}");
        std::thread::sleep(std::time::Duration::from_secs(600));
    }
    let mut opt = Vec::with_capacity(2 * data.moments.len());
    for (i, m) in data.moments.iter().enumerate() {
        let spec = data.specs.get(i).ok_or(TrainError::OptimizerState { index: i, params: data.specs.len() })?;
        if m.m.is_empty() {
            continue;
        }
        opt.push(NamedTensor { name: format!("m.{}", spec.name), shape: spec.shape.clone(), data: m.m.clone() });
        opt.push(NamedTensor { name: format!("v.{}", spec.name), shape: spec.shape.clone(), data: m.v.clone() });
    }
    let opt_meta: HashMap<String, String> = [("t".to_string(), data.state.optimizer_t.to_string())].into();
    save_safetensors(tmp.join("optimizer.safetensors"), &opt, Some(opt_meta))?;
    let state_path = tmp.join("state.json");
    let text = serde_json::to_string_pretty(data.state).expect("state serializes") + "\n";
    write_atomic(&state_path, text.as_bytes()).map_err(TrainError::io(&state_path))?;
    sync_dir(&tmp);
    let dest = ck.join(&name);
    if dest.exists() {
        // A stale checkpoint of this step from a run killed before `latest` named it.
        std::fs::remove_dir_all(&dest).map_err(TrainError::io(&dest))?;
    }
    std::fs::rename(&tmp, &dest).map_err(TrainError::io(&dest))?;
    sync_dir(&ck);
    let latest = ck.join(LATEST);
    write_atomic(&latest, format!("{name}\n").as_bytes()).map_err(TrainError::io(&latest))?;
    sync_dir(&ck);
    prune(&ck, step)?;
    Ok(dest)
}

fn remove_leftovers(ck: &Path) -> Result<(), TrainError> {
    for e in std::fs::read_dir(ck).map_err(TrainError::io(ck))? {
        let e = e.map_err(TrainError::io(ck))?;
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with(".step-") && n.contains(".tmp") {
            let p = e.path();
            std::fs::remove_dir_all(&p).map_err(TrainError::io(&p))?;
        }
    }
    Ok(())
}

/// Checkpoint directories `(step, path)` under `ck`, by step.
fn step_dirs(ck: &Path) -> Result<Vec<(u64, PathBuf)>, TrainError> {
    let mut v = Vec::new();
    if !ck.is_dir() {
        return Ok(v);
    }
    for e in std::fs::read_dir(ck).map_err(TrainError::io(ck))? {
        let e = e.map_err(TrainError::io(ck))?;
        if let Some(s) = parse_step_dir(&e.file_name().to_string_lossy()) {
            if e.path().is_dir() {
                v.push((s, e.path()));
            }
        }
    }
    v.sort();
    Ok(v)
}

/// Keeps the [`KEEP`] newest checkpoints up to `latest`; removes older ones and stale ones
/// after it (left by a killed run).
fn prune(ck: &Path, latest: u64) -> Result<(), TrainError> {
    let dirs = step_dirs(ck)?;
    let kept: Vec<u64> = dirs.iter().filter(|(s, _)| *s <= latest).rev().take(KEEP).map(|(s, _)| *s).collect();
    for (s, p) in dirs {
        if !kept.contains(&s) {
            std::fs::remove_dir_all(&p).map_err(TrainError::io(&p))?;
        }
    }
    Ok(())
}

/// The newest complete checkpoint of a run directory: the one `latest` names, else (no or a
/// dangling pointer) the highest-numbered step directory; `None` when there is none.
pub fn latest_checkpoint(out: &Path) -> Result<Option<PathBuf>, TrainError> {
    let ck = out.join(CKPT_DIR);
    let pointer = ck.join(LATEST);
    if let Ok(text) = std::fs::read_to_string(&pointer) {
        let d = ck.join(text.trim());
        if parse_step_dir(text.trim()).is_some() && d.join("state.json").is_file() {
            return Ok(Some(d));
        }
    }
    Ok(step_dirs(&ck)?.into_iter().rev().map(|(_, p)| p).find(|p| p.join("state.json").is_file()))
}

/// A checkpoint read back.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// Its directory.
    pub dir: PathBuf,
    /// `state.json`.
    pub state: TrainState,
    /// The parameters (file order; `load_state` matches by name).
    pub params: Vec<NamedTensor<f32>>,
    /// The moments by parameter index (empty where the file has none).
    pub moments: Vec<Moments<f32>>,
    /// The adjacency recorded in `model.safetensors`.
    pub adjacency: Option<Adjacency>,
}

/// Reads `state.json` of the checkpoint directory `dir` (any format: see [`load_checkpoint`]
/// for the checks).
pub fn read_state(dir: &Path) -> Result<TrainState, TrainError> {
    let sp = dir.join("state.json");
    let text = std::fs::read_to_string(&sp).map_err(TrainError::io(&sp))?;
    serde_json::from_str(&text)
        .map_err(|e| TrainError::Checkpoint { path: sp.clone(), reason: format!("not a training state: {e}") })
}

/// The configuration stored in a checkpoint's state, validated.
pub fn stored_config(dir: &Path, state: &TrainState) -> Result<crate::config::RunConfig, TrainError> {
    let cfg: crate::config::RunConfig = toml::from_str(&state.config).map_err(|e| TrainError::Checkpoint {
        path: dir.join("state.json"),
        reason: format!("the stored configuration: {e}"),
    })?;
    cfg.validate()?;
    Ok(cfg)
}

/// Where the run directory `out` continues from: its newest complete checkpoint
/// ([`latest_checkpoint`]), read back with [`load_checkpoint`], and the configuration stored in
/// it ([`stored_config`]), so that a resume needs nothing but the directory. `None` when the run
/// has no checkpoint yet (it was stopped before its first one: start it again).
pub fn resume_point(out: &Path) -> Result<Option<(crate::config::RunConfig, Loaded)>, TrainError> {
    let Some(dir) = latest_checkpoint(out)? else { return Ok(None) };
    let cfg = stored_config(&dir, &read_state(&dir)?)?;
    let loaded = load_checkpoint(&dir, &cfg.model_config().param_specs())?;
    Ok(Some((cfg, loaded)))
}

/// Reads the checkpoint directory `dir` for a model with parameters `specs`, checking the
/// state's format and configuration hash.
pub fn load_checkpoint(dir: &Path, specs: &[ParamSpec]) -> Result<Loaded, TrainError> {
    let sp = dir.join("state.json");
    let state = read_state(dir)?;
    let bad = |reason: String| TrainError::Checkpoint { path: sp.clone(), reason };
    if state.format != STATE_FORMAT {
        return Err(bad(format!("format `{}`, expected `{STATE_FORMAT}`", state.format)));
    }
    if config_hash(&state.config) != state.config_hash {
        return Err(bad(format!(
            "config_hash {} does not match its config ({}): the file was altered",
            state.config_hash,
            config_hash(&state.config)
        )));
    }
    let mp = dir.join("model.safetensors");
    let mf = SafetensorsFile::open(&mp)?;
    let params = mf.all::<f32>()?;
    let adjacency = match mf.metadata().and_then(|m| m.get("adjacency").cloned()) {
        Some(t) => adjacency_from_json(&mp, &t)?,
        None => {
            return Err(TrainError::Checkpoint { path: mp.clone(), reason: "no `adjacency` in the metadata".into() })
        }
    };
    let op = dir.join("optimizer.safetensors");
    let of = SafetensorsFile::open(&op)?;
    let mut moments = Vec::with_capacity(specs.len());
    for s in specs {
        let (mn, vn) = (format!("m.{}", s.name), format!("v.{}", s.name));
        if !of.contains(&mn) {
            moments.push(Moments::default());
            continue;
        }
        let (m, v) = (of.tensor::<f32>(&mn)?, of.tensor::<f32>(&vn)?);
        for t in [&m, &v] {
            if t.shape != s.shape {
                return Err(TrainError::Checkpoint {
                    path: op.clone(),
                    reason: format!("tensor `{}` has shape {:?}, the model needs {:?}", t.name, t.shape, s.shape),
                });
            }
        }
        moments.push(Moments { m: m.data, v: v.data });
    }
    Ok(Loaded { dir: dir.to_path_buf(), state, params, moments, adjacency })
}
