//! Writing checkpoints (see the [module documentation](super) for the order of operations),
//! pruning to [`KEEP`], and demoting a checkpoint that training cannot go on from.

use super::{
    model_metadata, step_dir_name, step_dirs, FileHashes, TrainState, CKPT_DIR, DEMOTED_SUFFIX, KEEP, LATEST,
    PRUNED_PREFIX,
};
use crate::data::DataIdentity;
use crate::error::TrainError;
use boldcast_core::model::NamedTensor;
use boldcast_core::optim::Moments;
use boldcast_core::{Adjacency, ParamSpec};
use boldcast_storage::fsutil::{sync_dir, write_atomic};
use boldcast_storage::io_err;
use boldcast_storage::tensorfile::{save_safetensors_hashed, SafetensorsFile};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

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
    /// The training data's parcel names and fingerprint.
    pub data: &'a DataIdentity,
    /// `state.json` (its [`TrainState::files`] is filled in by [`write_checkpoint`]).
    pub state: &'a TrainState,
}

/// The moments as `optimizer.safetensors` holds them: `m.<name>`, `v.<name>` for every
/// parameter that has them.
fn moment_tensors(data: &CheckpointData<'_>) -> Result<Vec<NamedTensor<f32>>, TrainError> {
    let mut opt = Vec::with_capacity(2 * data.moments.len());
    for (i, m) in data.moments.iter().enumerate() {
        let spec = data.specs.get(i).ok_or(TrainError::OptimizerState { index: i, params: data.specs.len() })?;
        if m.m.is_empty() {
            continue;
        }
        opt.push(NamedTensor { name: format!("m.{}", spec.name), shape: spec.shape.clone(), data: m.m.clone() });
        opt.push(NamedTensor { name: format!("v.{}", spec.name), shape: spec.shape.clone(), data: m.v.clone() });
    }
    Ok(opt)
}

/// The content hash of a file just written (read back, so the recorded hash is the file's).
fn hash_of(path: &Path) -> Result<String, TrainError> {
    Ok(SafetensorsFile::open(path)?.content_hash()?)
}

/// Writes the checkpoint of `data.state.step` under `out/checkpoints` (see the module
/// documentation for the order of operations), points `latest` at it and prunes to [`KEEP`].
/// `on_file` is given each file as it is written to the temporary directory. Returns the
/// checkpoint directory.
pub fn write_checkpoint(
    out: &Path,
    data: &CheckpointData<'_>,
    on_file: &mut dyn FnMut(&Path),
) -> Result<PathBuf, TrainError> {
    let ck = out.join(CKPT_DIR);
    std::fs::create_dir_all(&ck).map_err(io_err(&ck))?;
    let step = data.state.step;
    let name = step_dir_name(step);
    let tmp = ck.join(format!(".{name}.tmp"));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(io_err(&tmp))?;
    }
    std::fs::create_dir(&tmp).map_err(io_err(&tmp))?;
    let model = tmp.join("model.safetensors");
    let meta = model_metadata(step, &data.state.config, data.adjacency, data.data);
    save_safetensors_hashed(&model, &data.params, meta)?;
    on_file(&model);
    let optimizer = tmp.join("optimizer.safetensors");
    let opt_meta: HashMap<String, String> =
        [("t".to_string(), data.state.optimizer_t.to_string()), ("step".to_string(), step.to_string())].into();
    save_safetensors_hashed(&optimizer, &moment_tensors(data)?, opt_meta)?;
    on_file(&optimizer);
    let files = FileHashes { model: hash_of(&model)?, optimizer: hash_of(&optimizer)? };
    let state = TrainState { files: Some(files), data: Some(data.data.clone()), ..data.state.clone() };
    let state_path = tmp.join("state.json");
    let text = serde_json::to_string_pretty(&state).expect("state serializes") + "\n";
    write_atomic(&state_path, text.as_bytes()).map_err(io_err(&state_path))?;
    on_file(&state_path);
    sync_dir(&tmp);
    let dest = ck.join(&name);
    if dest.exists() {
        // A stale checkpoint of this step from a run killed before `latest` named it.
        remove_by_rename(&ck, &dest)?;
    }
    std::fs::rename(&tmp, &dest).map_err(io_err(&dest))?;
    sync_dir(&ck);
    point_latest(&ck, Some(&name))?;
    prune(&ck, step)?;
    Ok(dest)
}

/// Replaces `latest` by `name`, or removes it (`None`).
fn point_latest(ck: &Path, name: Option<&str>) -> Result<(), TrainError> {
    let latest = ck.join(LATEST);
    match name {
        Some(n) => write_atomic(&latest, format!("{n}\n").as_bytes()).map_err(io_err(&latest))?,
        None if latest.exists() => std::fs::remove_file(&latest).map_err(io_err(&latest))?,
        None => {}
    }
    sync_dir(ck);
    Ok(())
}

/// Deletes the directory `dir` under `ck` by renaming it to `.pruned-<name>` first, so a kill
/// during the deletion leaves nothing under a checkpoint's name.
fn remove_by_rename(ck: &Path, dir: &Path) -> Result<(), TrainError> {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let gone = ck.join(format!("{PRUNED_PREFIX}{name}"));
    if gone.exists() {
        std::fs::remove_dir_all(&gone).map_err(io_err(&gone))?;
    }
    std::fs::rename(dir, &gone).map_err(io_err(dir))?;
    sync_dir(ck);
    Ok(std::fs::remove_dir_all(&gone).map_err(io_err(&gone))?)
}

/// Keeps the [`KEEP`] newest checkpoints up to `latest`; removes older ones and stale ones
/// after it (left by a killed run).
fn prune(ck: &Path, latest: u64) -> Result<(), TrainError> {
    prune_to(ck, latest).map(drop)
}

/// Prunes the checkpoint directory `ck` to the newest [`KEEP`] checkpoints up to step
/// `latest` (a later one is stale: `latest` never named it) and returns those removed.
pub fn prune_to(ck: &Path, latest: u64) -> Result<Vec<PathBuf>, TrainError> {
    let dirs = step_dirs(ck)?;
    let kept: Vec<u64> = dirs.iter().filter(|(s, _)| *s <= latest).rev().take(KEEP).map(|(s, _)| *s).collect();
    let mut removed = Vec::new();
    for (s, p) in dirs {
        if !kept.contains(&s) {
            remove_by_rename(ck, &p)?;
            removed.push(p);
        }
    }
    Ok(removed)
}

/// Demotes the checkpoint of `step` under `out`: training cannot go on from it (the step that
/// starts from its weights failed). It is renamed to `step-NNNNNN.non-finite` (kept for a look,
/// ignored by every reader) and `latest` names the newest checkpoint before it, whose step and
/// directory are returned (`None`, and no `latest`, when there is none).
pub fn demote(out: &Path, step: u64) -> Result<Option<(u64, PathBuf)>, TrainError> {
    let ck = out.join(CKPT_DIR);
    let dir = ck.join(step_dir_name(step));
    if dir.is_dir() {
        let dest = ck.join(format!("{}{DEMOTED_SUFFIX}", step_dir_name(step)));
        if dest.exists() {
            std::fs::remove_dir_all(&dest).map_err(io_err(&dest))?;
        }
        std::fs::rename(&dir, &dest).map_err(io_err(&dir))?;
    }
    let before = step_dirs(&ck)?.into_iter().rev().find(|(s, p)| *s < step && p.join("state.json").is_file());
    let name = before.as_ref().map(|(s, _)| step_dir_name(*s));
    point_latest(&ck, name.as_deref())?;
    Ok(before)
}
