//! Reading checkpoints back: which one is the newest ([`find_checkpoint`], with a note for
//! every pointer or directory it had to pass over), its three files checked against each other
//! ([`load_checkpoint`]), and where a run directory continues from ([`resume_point`]).

use super::verify::{check_files, check_log, check_state};
use super::{adjacency_from_json, parse_step_dir, step_dirs, TrainState, CKPT_DIR, LATEST};
use crate::config::RunConfig;
use crate::error::TrainError;
use boldcast_core::model::NamedTensor;
use boldcast_core::optim::Moments;
use boldcast_core::{Adjacency, ParamSpec};
use boldcast_storage::io_err;
use boldcast_storage::tensorfile::SafetensorsFile;
use std::path::{Path, PathBuf};

/// The newest complete checkpoint of a run directory, and what was passed over to find it.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    /// The checkpoint directory.
    pub dir: PathBuf,
    /// One line per pointer or directory passed over (`note: ...`), for the user.
    pub notes: Vec<String>,
}

/// The newest complete checkpoint of the run directory `out`: the one `latest` names, else
/// the highest-numbered step directory with a `state.json`. Each pointer or directory passed
/// over gets a note. `None` when the run has no checkpoint at all; an error when it has
/// checkpoints but every one is incomplete.
pub fn find_checkpoint(out: &Path) -> Result<Option<Found>, TrainError> {
    let ck = out.join(CKPT_DIR);
    let pointer = ck.join(LATEST);
    let mut notes = Vec::new();
    let named = match std::fs::read_to_string(&pointer) {
        Ok(text) => Some(text.trim().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err(&pointer)(e).into()),
    };
    if let Some(name) = &named {
        let d = ck.join(name);
        match (parse_step_dir(name), d.is_dir(), d.join("state.json").is_file()) {
            (Some(_), true, true) => return Ok(Some(Found { dir: d, notes })),
            (None, _, _) => notes.push(format!("note: {} names `{name}`, not a checkpoint", pointer.display())),
            (Some(_), false, _) => {
                notes.push(format!("note: {} names {name}, which does not exist", pointer.display()))
            }
            (Some(_), true, false) => {}
        }
    }
    let dirs = step_dirs(&ck)?;
    let mut broken = Vec::new();
    for (_, d) in dirs.iter().rev() {
        if d.join("state.json").is_file() {
            if !broken.is_empty() || named.is_some() {
                notes.push(format!("note: using {}", d.display()));
            }
            return Ok(Some(Found { dir: d.clone(), notes }));
        }
        let line = format!("{} has no state.json (an incomplete checkpoint)", d.display());
        notes.push(format!("note: {line}: skipped"));
        broken.push(line);
    }
    if broken.is_empty() && named.is_none() {
        return Ok(None);
    }
    if broken.is_empty() {
        broken.push(notes.pop().unwrap_or_default().trim_start_matches("note: ").to_string());
    }
    Err(TrainError::BrokenCheckpoints { dir: ck, reasons: broken })
}

/// The newest complete checkpoint directory of a run directory ([`find_checkpoint`] without
/// its notes); `None` when there is none.
pub fn latest_checkpoint(out: &Path) -> Result<Option<PathBuf>, TrainError> {
    Ok(find_checkpoint(out)?.map(|f| f.dir))
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
    let text = std::fs::read_to_string(&sp).map_err(io_err(&sp))?;
    serde_json::from_str(&text)
        .map_err(|e| TrainError::Checkpoint { path: sp.clone(), reason: format!("not a training state: {e}") })
}

/// The configuration stored in a checkpoint's state, after its hash is checked
/// ([`super::verify::check_config_hash`]), validated; every error names `state.json`.
pub fn stored_config(dir: &Path, state: &TrainState) -> Result<RunConfig, TrainError> {
    let sp = dir.join("state.json");
    super::verify::check_config_hash(&sp, state)?;
    let bad = |e: String| TrainError::Checkpoint { path: sp.clone(), reason: format!("the stored configuration: {e}") };
    let cfg: RunConfig = toml::from_str(&state.config).map_err(|e| bad(e.to_string()))?;
    cfg.validate().map_err(|e| bad(e.to_string()))?;
    Ok(cfg)
}

/// Where a run directory continues from: its configuration, and its newest checkpoint when it
/// has one (a run stopped before its first checkpoint starts again from step 0 with its
/// `config.resolved.toml`).
#[derive(Clone, Debug)]
pub struct ResumePoint {
    /// The run's configuration: the checkpoint's stored one, else `config.resolved.toml`.
    pub cfg: RunConfig,
    /// The newest checkpoint, read back and checked; `None` for a run without one.
    pub checkpoint: Option<Loaded>,
    /// What the user should be told (checkpoints passed over), one line each.
    pub notes: Vec<String>,
}

/// The checkpoint `found` of the run directory `out` read back with [`load_checkpoint`] and
/// checked against its stored configuration ([`check_state`]) and the run's log
/// ([`check_log`]).
fn read_found(out: &Path, found: &Found) -> Result<(RunConfig, Loaded), TrainError> {
    let state = read_state(&found.dir)?;
    let cfg = stored_config(&found.dir, &state)?;
    let loaded = load_checkpoint(&found.dir, &cfg.model_config().param_specs())?;
    check_state(&loaded.dir.join("state.json"), &loaded.state, &cfg)?;
    check_log(&found.dir, &crate::run::log_path(out), &loaded.state)?;
    Ok((cfg, loaded))
}

/// The note for a checkpoint whose state has no `log_hash` (an earlier format).
fn unchecked_log_note(l: &Loaded) -> Option<String> {
    l.state.log_hash.is_none().then(|| {
        format!(
            "note: {} is of format {}, from before the log's hash: its log_bytes ({}) is used unchecked",
            l.dir.join("state.json").display(),
            l.state.format,
            l.state.log_bytes
        )
    })
}

/// The newest checkpoint of the run directory `out` ([`find_checkpoint`]), read back with
/// [`load_checkpoint`] and checked against the configuration stored in it ([`check_state`])
/// and the log ([`check_log`]),
/// with that configuration, so that a resume needs nothing but the directory. `None` when the
/// run has no checkpoint yet ([`continue_point`] says how such a run starts again). Only reads:
/// the run that continues takes the directory's lock ([`crate::run_dir`]).
pub fn resume_point(out: &Path) -> Result<Option<(RunConfig, Loaded)>, TrainError> {
    find_checkpoint(out)?.map(|f| read_found(out, &f)).transpose()
}

/// Where the run directory `out` continues from ([`ResumePoint`]): as [`resume_point`], with
/// the notes of what was passed over; a run directory without a checkpoint continues from
/// step 0 with its `config.resolved.toml` ([`crate::run_dir::read_resolved`]), and a directory
/// with neither is [`TrainError::NotARunDir`]; another command's run directory is
/// [`TrainError::OtherRunDir`] ([`crate::run_dir::check_continue`]).
pub fn continue_point(out: &Path) -> Result<ResumePoint, TrainError> {
    if out.is_dir() {
        crate::run_dir::check_continue(out, crate::run_dir::RunKind::Train)?;
    }
    match find_checkpoint(out)? {
        Some(found) => {
            let (cfg, loaded) = read_found(out, &found)?;
            let notes = found.notes.into_iter().chain(unchecked_log_note(&loaded)).collect();
            Ok(ResumePoint { cfg, checkpoint: Some(loaded), notes })
        }
        None => Ok(ResumePoint { cfg: crate::run_dir::read_resolved(out)?, checkpoint: None, notes: Vec::new() }),
    }
}

/// Reads the checkpoint directory `dir` for a model with parameters `specs`, checking that its
/// files are one checkpoint ([`check_files`]: format, configuration hash, steps, content
/// hashes, complete and finite moments and weights).
pub fn load_checkpoint(dir: &Path, specs: &[ParamSpec]) -> Result<Loaded, TrainError> {
    let state = read_state(dir)?;
    let (mp, op) = (dir.join("model.safetensors"), dir.join("optimizer.safetensors"));
    let (mf, of) = (SafetensorsFile::open(&mp)?, SafetensorsFile::open(&op)?);
    check_files(dir, &state, &mf, &of)?;
    let params = mf.all::<f32>()?;
    let adjacency = match mf.metadata().and_then(|m| m.get("adjacency").cloned()) {
        Some(t) => adjacency_from_json(&mp, &t)?,
        None => {
            return Err(TrainError::Checkpoint { path: mp.clone(), reason: "no `adjacency` in the metadata".into() })
        }
    };
    let moments = read_moments(&of, specs, state.step)?;
    let loaded = Loaded { dir: dir.to_path_buf(), state, params, moments, adjacency };
    super::verify::check_finite(&mp, &loaded.params)?;
    Ok(loaded)
}

/// The moments of `specs` from `optimizer.safetensors`: after the first step every parameter
/// has both, of its shape, finite.
fn read_moments(of: &SafetensorsFile, specs: &[ParamSpec], step: u64) -> Result<Vec<Moments<f32>>, TrainError> {
    let op = of.path();
    let bad = |reason: String| TrainError::Checkpoint { path: op.to_path_buf(), reason };
    let mut moments = Vec::with_capacity(specs.len());
    for s in specs {
        let (mn, vn) = (format!("m.{}", s.name), format!("v.{}", s.name));
        if !of.contains(&mn) && !of.contains(&vn) && step == 0 {
            moments.push(Moments::default());
            continue;
        }
        for n in [&mn, &vn] {
            if !of.contains(n) {
                return Err(bad(format!("no moment `{n}` after {step} steps: the file is incomplete")));
            }
        }
        let (m, v) = (of.tensor::<f32>(&mn)?, of.tensor::<f32>(&vn)?);
        for t in [&m, &v] {
            if t.shape != s.shape {
                return Err(bad(format!("tensor `{}` has shape {:?}, the model needs {:?}", t.name, t.shape, s.shape)));
            }
        }
        super::verify::check_finite(op, &[m.clone(), v.clone()])?;
        moments.push(Moments { m: m.data, v: v.data });
    }
    Ok(moments)
}
