//! The checks that make a checkpoint trustworthy: its three files are one checkpoint
//! ([`check_files`]), its state agrees with its configuration ([`check_state`]), and its
//! tensors are finite ([`check_finite`]). Every failure names the file and the field.

use super::{config_hash, TrainState, STATE_FORMAT, STATE_FORMAT_V1, STATE_FORMAT_V2};
use crate::config::RunConfig;
use crate::error::TrainError;
use crate::order::epoch_order;
use boldcast_core::model::NamedTensor;
use boldcast_core::Schedule;
use boldcast_storage::io_err;
use boldcast_storage::tensorfile::{CheckpointError, SafetensorsFile};
use std::path::Path;

fn checkpoint_error(path: &Path) -> impl Fn(String) -> TrainError + '_ {
    move |reason| TrainError::Checkpoint { path: path.to_path_buf(), reason }
}

/// A metadata field of a safetensors file as a number.
fn meta_u64(f: &SafetensorsFile, key: &str) -> Result<u64, TrainError> {
    let bad = checkpoint_error(f.path());
    let meta = f.metadata().unwrap_or_default();
    let v = meta.get(key).ok_or_else(|| bad(format!("no `{key}` in the metadata")))?;
    v.parse().map_err(|_| bad(format!("metadata `{key}` = {v:?} is not a count")))
}

/// The three files of the checkpoint `dir` are one checkpoint: the state's format and
/// configuration hash; `model.safetensors` and `optimizer.safetensors` written at the state's
/// step; the optimizer's `t` equal to the state's `optimizer_t` and to the step; and (format 2)
/// each file's tensors hashing to what the state recorded.
pub fn check_files(
    dir: &Path,
    state: &TrainState,
    model: &SafetensorsFile,
    optimizer: &SafetensorsFile,
) -> Result<(), TrainError> {
    let sp = dir.join("state.json");
    let bad = checkpoint_error(&sp);
    if ![STATE_FORMAT, STATE_FORMAT_V2, STATE_FORMAT_V1].contains(&state.format.as_str()) {
        return Err(bad(format!("format `{}`, expected `{STATE_FORMAT}`", state.format)));
    }
    check_config_hash(&sp, state)?;
    let model_step = meta_u64(model, "step")?;
    if model_step != state.step {
        return Err(checkpoint_error(model.path())(format!(
            "written at step {model_step}, but state.json says step {}: the file is from another checkpoint",
            state.step
        )));
    }
    if state.optimizer_t != state.step {
        return Err(bad(format!(
            "optimizer_t = {}, but step = {}: they are equal in a checkpoint",
            state.optimizer_t, state.step
        )));
    }
    if model.metadata().unwrap_or_default().get("config") != Some(&state.config) {
        return Err(checkpoint_error(model.path())(
            "the metadata `config` is not the configuration state.json holds: the file is from another run".into(),
        ));
    }
    let t = meta_u64(optimizer, "t")?;
    if t != state.optimizer_t {
        return Err(checkpoint_error(optimizer.path())(format!(
            "written with t = {t}, but state.json says optimizer_t = {}: the file is from another checkpoint",
            state.optimizer_t
        )));
    }
    if state.format == STATE_FORMAT_V1 {
        return Ok(());
    }
    if meta_u64(optimizer, "step")? != state.step {
        return Err(checkpoint_error(optimizer.path())(format!(
            "written at step {}, but state.json says step {}: the file is from another checkpoint",
            meta_u64(optimizer, "step")?,
            state.step
        )));
    }
    let files = state.files.as_ref().ok_or_else(|| bad("no `files` (the tensor files' hashes)".into()))?;
    for (f, want) in [(model, &files.model), (optimizer, &files.optimizer)] {
        check_tensors(f, Some(want))?;
    }
    if state.data.is_none() {
        return Err(bad("no `data` (the training data's identity)".into()));
    }
    Ok(())
}

/// The tensors of `f` are those that were written: they hash to the
/// [`TENSORS_HASH_KEY`](boldcast_storage::tensorfile::TENSORS_HASH_KEY) the file records (every
/// file written since it) and to `recorded`, the hash a checkpoint's `state.json` holds for
/// it. The one check of tensor data that every reader of weights runs: resume
/// ([`check_files`]), and eval, forecast, embed and fingerprint ([`check_weights_file`]).
pub fn check_tensors(f: &SafetensorsFile, recorded: Option<&str>) -> Result<(), TrainError> {
    f.check_recorded_hash()?;
    if let Some(want) = recorded {
        let got = f.content_hash()?;
        if got != want {
            let path = f.path().to_path_buf();
            return Err(CheckpointError::Altered { path, got, want: want.to_string(), key: "state.json" }.into());
        }
    }
    Ok(())
}

/// [`check_tensors`] for a weights file opened on its own: a checkpoint's `model.safetensors`
/// (a `state.json` beside it) is checked against the hash that state recorded too.
pub fn check_weights_file(f: &SafetensorsFile) -> Result<(), TrainError> {
    let dir = f.path().parent().filter(|d| d.join("state.json").is_file());
    let in_checkpoint = f.path().file_name().is_some_and(|n| n == "model.safetensors");
    let recorded = match dir.filter(|_| in_checkpoint) {
        Some(dir) => super::read_state(dir)?.files.map(|h| h.model),
        None => None,
    };
    check_tensors(f, recorded.as_deref())
}

/// The run's log `log` is the one the checkpoint `dir` was written with: its first
/// `log_bytes` bytes hash to the state's `log_hash`, so an edited `log_bytes` (or log) is
/// refused before a resume truncates the log to it. A state of an earlier format has no hash
/// and passes (the caller notes it); one of [`STATE_FORMAT`] without it does not.
pub fn check_log(dir: &Path, log: &Path, state: &TrainState) -> Result<(), TrainError> {
    let sp = dir.join("state.json");
    let bad = checkpoint_error(&sp);
    let Some(want) = &state.log_hash else {
        if state.format == STATE_FORMAT {
            return Err(bad("no `log_hash` (the hash of the log's first log_bytes bytes)".into()));
        }
        return Ok(());
    };
    let mut prefix = Vec::new();
    let f = std::fs::File::open(log).map_err(io_err(log))?;
    std::io::Read::read_to_end(&mut std::io::Read::take(f, state.log_bytes), &mut prefix).map_err(io_err(log))?;
    let got = boldcast_storage::hash::fnv1a_hex(&prefix);
    if prefix.len() as u64 != state.log_bytes || &got != want {
        return Err(bad(format!(
            "log_bytes = {}, but the first {} bytes of {} hash to {got}, not the recorded log_hash {want}: \
             log_bytes or the log was altered",
            state.log_bytes,
            prefix.len(),
            log.display()
        )));
    }
    Ok(())
}

/// The state `path` holds the configuration its `config_hash` names.
pub fn check_config_hash(path: &Path, state: &TrainState) -> Result<(), TrainError> {
    if config_hash(&state.config) != state.config_hash {
        return Err(checkpoint_error(path)(format!(
            "config_hash {} does not match its config ({}): the file was altered",
            state.config_hash,
            config_hash(&state.config)
        )));
    }
    Ok(())
}

/// Every value of `tensors` (read from `path`) is finite.
pub fn check_finite(path: &Path, tensors: &[NamedTensor<f32>]) -> Result<(), TrainError> {
    for t in tensors {
        if let Some(i) = t.data.iter().position(|x| !x.is_finite()) {
            return Err(TrainError::NonFiniteWeights {
                path: path.to_path_buf(),
                tensor: t.name.clone(),
                index: i,
                value: f64::from(t.data[i]),
            });
        }
    }
    Ok(())
}

/// Every value of `values`, outputs of the weights `path`, is finite: finite weights can still
/// overflow in the forward (a norm weight of 3e38 gives NaN everywhere), and such outputs are
/// refused, never written or scored. The one check of outputs that eval, forecast and embed run;
/// `what` names the outputs (`the forecasts of sub-01_run-1`).
pub fn check_outputs<T: Copy + Into<f64>>(path: &Path, what: &str, values: &[T]) -> Result<(), TrainError> {
    match values.iter().position(|&x| !x.into().is_finite()) {
        None => Ok(()),
        Some(index) => Err(TrainError::NonFiniteOutputs {
            path: path.to_path_buf(),
            what: what.to_string(),
            index,
            value: values[index].into(),
        }),
    }
}

/// The state `path` of a checkpoint agrees with its configuration `cfg` and with itself: the
/// schedule's length, the position in the data order and the generator, the learning rate, the
/// end of the run, and the validation tracking.
pub fn check_state(path: &Path, s: &TrainState, cfg: &RunConfig) -> Result<(), TrainError> {
    let bad = checkpoint_error(path);
    let t = &cfg.train;
    if s.max_steps != t.max_steps {
        return Err(bad(format!("max_steps = {}, but its configuration says {}", s.max_steps, t.max_steps)));
    }
    if s.step > s.max_steps {
        return Err(bad(format!("step {} is past max_steps = {}", s.step, s.max_steps)));
    }
    check_position(&bad, s, cfg)?;
    let lr = cfg.schedule_config().lr(s.step);
    if !(s.next_lr - lr).abs().le(&(1e-12 * lr.abs().max(1e-30))) {
        return Err(bad(format!("next_lr = {}, but the schedule gives {lr} at step {}", s.next_lr, s.step)));
    }
    check_finished(&bad, s, cfg)?;
    check_validation(&bad, s)
}

/// `epoch`, `position_in_epoch` and `rng` are those of step `step`.
fn check_position(bad: &impl Fn(String) -> TrainError, s: &TrainState, cfg: &RunConfig) -> Result<(), TrainError> {
    let bpe = s.batches_per_epoch;
    if bpe == 0 || s.train_windows / (cfg.train.batch_size as u64) != bpe {
        return Err(bad(format!(
            "batches_per_epoch = {bpe}, but {} training windows in batches of {} give {}",
            s.train_windows,
            cfg.train.batch_size,
            s.train_windows / cfg.train.batch_size as u64
        )));
    }
    if (s.epoch, s.position_in_epoch) != (s.step / bpe, s.step % bpe) {
        return Err(bad(format!(
            "epoch {} position_in_epoch {}, but step {} of {bpe} batches per epoch is epoch {} position {}",
            s.epoch,
            s.position_in_epoch,
            s.step,
            s.step / bpe,
            s.step % bpe
        )));
    }
    let n = usize::try_from(s.train_windows).map_err(|_| bad(format!("train_windows = {}", s.train_windows)))?;
    let rng = epoch_order(n, cfg.train.seed, s.epoch, cfg.train.shuffle).1;
    if rng != s.rng {
        return Err(bad(format!("rng {:?} is not the data order's generator at epoch {}: {rng:?}", s.rng, s.epoch)));
    }
    Ok(())
}

/// `finished` names a way the run ends, and the state is at such an end.
fn check_finished(bad: &impl Fn(String) -> TrainError, s: &TrainState, cfg: &RunConfig) -> Result<(), TrainError> {
    let patience = cfg.train.patience;
    match s.finished.as_deref() {
        None => Ok(()),
        Some("max_steps") if s.step == s.max_steps => Ok(()),
        Some("early_stopping") if patience > 0 && s.val.bad_validations >= patience => Ok(()),
        Some(r) => Err(bad(format!(
            "finished = {r:?} at step {} of {} ({} validations without improvement, patience {patience}): the run \
             did not end so there",
            s.step, s.max_steps, s.val.bad_validations
        ))),
    }
}

/// The validation history is ordered, finite and no later than the step; `val.best` is its
/// first minimum; the losses since the last validation are one per step since it.
fn check_validation(bad: &impl Fn(String) -> TrainError, s: &TrainState) -> Result<(), TrainError> {
    let v = &s.val;
    let ordered = v.history.windows(2).all(|w| w[0].0 < w[1].0);
    if !ordered || v.history.iter().any(|(k, l)| *k > s.step || !l.is_finite()) {
        return Err(bad(format!("val.history is not an ordered list of finite losses up to step {}", s.step)));
    }
    let first_min = v.history.iter().fold(None::<(u64, f64)>, |b, &(k, l)| match b {
        Some((_, bl)) if bl <= l => b,
        _ => Some((k, l)),
    });
    if v.best != first_min {
        return Err(bad(format!("val.best = {:?}, but val.history's best is {first_min:?}", v.best)));
    }
    if v.bad_validations > v.history.len() as u64 {
        return Err(bad(format!(
            "val.bad_validations = {} exceeds the {} validations",
            v.bad_validations,
            v.history.len()
        )));
    }
    let since = s.step - v.history.last().map_or(0, |(k, _)| *k);
    if v.train_losses_since_val.len() as u64 != since {
        return Err(bad(format!(
            "val.train_losses_since_val holds {} losses, but {since} steps were taken since the last validation",
            v.train_losses_since_val.len()
        )));
    }
    Ok(())
}
