//! A small search over named configuration keys, on a validation split of the training
//! subjects: [`Search`] says which keys take which values (a full grid, or `n` distinct random
//! draws of it), [`candidates`] makes every trial's configuration before anything runs, and
//! [`run_search`] trains each one as a [`Run`] into `OUT/trial-NNN/` and writes the results
//! table `OUT/results.tsv`, `OUT/results.json` and the winning configuration `OUT/best.toml`.
//!
//! - A key is a dotted TOML key of the configuration (`model.d_model`, `train.lr`,
//!   `model.linear_path`, `window.window`); it is applied to the configuration's TOML table and
//!   the result parsed back with [`RunConfig::from_toml_str`], so an unknown key or a bad value
//!   is an error naming it before any trial runs.
//! - The validation subjects are the configuration's `data.subjects_heldout`: a configuration
//!   without any is refused, so the held-out (test) subjects of a study are never chosen by the
//!   tuner itself. The caller gives a split drawn from the training subjects.
//! - The winner has the lowest best validation loss (the mean over horizons, in variance units
//!   of the standardized data); on a tie, the lower trial index.
//! - A trial that fails is recorded with its error and the search goes on. A search run again
//!   into the same `OUT` skips every trial whose directory holds a finished run (its newest
//!   checkpoint says so and `summary.json` exists, as `bc-cli train --resume` tells), continues
//!   an unfinished one from its newest checkpoint, and refuses a directory holding another
//!   configuration.

use crate::checkpoint::{find_checkpoint, read_state};
use crate::config::{ConfigError, RunConfig};
use crate::data::TrainData;
use crate::error::TrainError;
use crate::observer::ValRecord;
use crate::run::Run;
use boldcast_core::{Adjacency, DataParallel, ModelConfig};
use boldcast_storage::io_err;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The results table, one row per trial.
pub const RESULTS_TSV: &str = "results.tsv";
/// The results as JSON ([`TuneReport`]).
pub const RESULTS_JSON: &str = "results.json";
/// The winning configuration.
pub const BEST_TOML: &str = "best.toml";

/// What can go wrong setting up or recording a search (a failing trial is not an error: it is
/// recorded in its [`TrialResult`]).
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// A key or value specification cannot be read, or a key does not apply.
    #[error("tune key `{key}`: {reason}")]
    Key {
        /// The dotted key (or the specification as given).
        key: String,
        /// Why.
        reason: String,
    },
    /// A value of a key gives an invalid configuration.
    #[error("tune key `{key}` = {value}: {source}")]
    Value {
        /// The dotted key.
        key: String,
        /// The value, as TOML.
        value: String,
        /// What the configuration says about it (boxed: the error stays small).
        #[source]
        source: Box<ConfigError>,
    },
    /// The search itself is malformed (no keys, no draws).
    #[error("tune: {0}")]
    Search(String),
    /// A trial's configuration has no validation subjects.
    #[error(
        "tune: trial {trial} has no validation subjects (data.subjects_heldout is empty): name them with \
         --subjects-heldout, drawn from your training subjects, and keep your test subjects out of both lists"
    )]
    NoValidation {
        /// The trial index.
        trial: usize,
    },
    /// A trial's configuration names another backend than the model builder's.
    #[error("tune: trial {trial} has train.backend = {backend}, but the models are built on the {builder} backend")]
    Backend {
        /// The trial index.
        trial: usize,
        /// `train.backend` of the trial.
        backend: String,
        /// The builder's backend.
        builder: String,
    },
    /// A trial directory of the output holds a run of another configuration.
    #[error(
        "{}: holds a run of another configuration than trial {trial} of this search: give a new --out (or the \
         same keys and values as the search that wrote it)",
        dir.display()
    )]
    OtherSearch {
        /// The trial directory.
        dir: PathBuf,
        /// The trial index.
        trial: usize,
    },
    /// A run directory could not be read.
    #[error(transparent)]
    Train(#[from] TrainError),
    /// A results file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// One key of a search and its candidate values.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// The dotted TOML key, e.g. `model.d_model`.
    pub key: String,
    /// The values, as TOML values.
    pub values: Vec<toml::Value>,
}

impl Axis {
    /// Reads `KEY=V1,V2,...`: each value is TOML (`8`, `3e-4`, `true`, `[1, 5]`, `"auto"`), or
    /// else taken as a string (`auto`); commas inside brackets belong to an array.
    pub fn parse(spec: &str) -> Result<Axis, TuneError> {
        let bad = |reason: &str| TuneError::Key { key: spec.into(), reason: reason.into() };
        let (key, list) = spec.split_once('=').ok_or_else(|| bad("expected KEY=V1,V2,..."))?;
        let key = key.trim();
        if key.split('.').count() < 2 || key.split('.').any(|p| p.trim().is_empty()) {
            return Err(bad("the key must be dotted, SECTION.KEY (e.g. train.lr)"));
        }
        let values: Vec<toml::Value> = split_top_level(list).iter().map(|v| parse_value(v)).collect();
        if values.iter().any(|v| matches!(v, toml::Value::String(s) if s.is_empty())) {
            return Err(TuneError::Key { key: key.into(), reason: format!("an empty value in `{list}`") });
        }
        Ok(Axis { key: key.into(), values })
    }
}

/// `list` split at the commas outside brackets and quotes.
fn split_top_level(list: &str) -> Vec<String> {
    let (mut parts, mut cur, mut depth, mut quoted) = (Vec::new(), String::new(), 0i32, false);
    for c in list.chars() {
        match c {
            '"' => quoted = !quoted,
            '[' | '{' if !quoted => depth += 1,
            ']' | '}' if !quoted => depth -= 1,
            ',' if depth == 0 && !quoted => {
                parts.push(std::mem::take(&mut cur).trim().to_string());
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    parts.push(cur.trim().to_string());
    parts
}

/// `text` as a TOML value, or else as a bare string.
fn parse_value(text: &str) -> toml::Value {
    format!("v = {text}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(text.to_string()))
}

/// How the candidates are drawn from the grid of the axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every combination, the first axis varying slowest.
    Grid,
    /// `n` distinct combinations drawn with `seed` (all of them, in grid order, when the grid
    /// has no more than `n`).
    Random {
        /// Draws.
        n: usize,
        /// The seed of the draws.
        seed: u64,
    },
}

/// A search: the base configuration, the axes, the mode and the output directory.
#[derive(Clone, Debug)]
pub struct Search {
    /// The configuration every trial starts from.
    pub base: RunConfig,
    /// The keys and their values.
    pub axes: Vec<Axis>,
    /// Grid or random draws.
    pub mode: Mode,
    /// The output directory (`trial-NNN/`, the results, `best.toml`).
    pub out: PathBuf,
}

/// One trial's configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The trial index (its directory is `trial-NNN`).
    pub index: usize,
    /// The value of each axis, in axis order.
    pub values: Vec<toml::Value>,
    /// The configuration (`train.out` is the trial directory).
    pub cfg: RunConfig,
}

/// The directory name of trial `index`.
pub fn trial_dir_name(index: usize) -> String {
    format!("trial-{index:03}")
}

/// `cfg` with the dotted `key` set to `value`, through the configuration's TOML table and
/// [`RunConfig::from_toml_str`] (an integer where the configuration has a number is taken as
/// that number).
pub fn apply(cfg: &RunConfig, key: &str, value: &toml::Value) -> Result<RunConfig, TuneError> {
    let bad = |reason: String| TuneError::Key { key: key.into(), reason };
    let mut table: toml::Table =
        cfg.to_config_file().parse().map_err(|e| bad(format!("the configuration's TOML does not parse: {e}")))?;
    let (path, last) = key.rsplit_once('.').ok_or_else(|| bad("the key must be dotted, SECTION.KEY".into()))?;
    let mut section = &mut table;
    for part in path.split('.') {
        section = match section.get_mut(part) {
            Some(toml::Value::Table(t)) => t,
            _ => return Err(bad(format!("the configuration has no section [{path}]"))),
        };
    }
    let value = match (section.get(last), value) {
        (Some(toml::Value::Float(_)), toml::Value::Integer(i)) => toml::Value::Float(*i as f64),
        _ => value.clone(),
    };
    section.insert(last.into(), value.clone());
    let text = toml::to_string(&table).map_err(|e| bad(e.to_string()))?;
    RunConfig::from_toml_str(&format!("tune key {key}"), &text).map_err(|source| TuneError::Value {
        key: key.into(),
        value: value.to_string(),
        source: Box::new(source),
    })
}

/// The combinations of value indices the mode asks for, in trial order.
fn combinations(sizes: &[usize], mode: Mode) -> Vec<Vec<usize>> {
    let total: usize = sizes.iter().product();
    let decode = |mut i: usize| -> Vec<usize> {
        let mut idx = vec![0; sizes.len()];
        for (k, &n) in sizes.iter().enumerate().rev() {
            idx[k] = i % n;
            i /= n;
        }
        idx
    };
    let picks: Vec<usize> = match mode {
        Mode::Grid => (0..total).collect(),
        Mode::Random { n, .. } if n >= total => (0..total).collect(),
        Mode::Random { n, seed } => {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut picks = Vec::with_capacity(n);
            while picks.len() < n {
                let i = (rng.next_u64() % total as u64) as usize;
                if !picks.contains(&i) {
                    picks.push(i);
                }
            }
            picks
        }
    };
    picks.into_iter().map(decode).collect()
}

/// Every trial's configuration, each checked (its keys applied, validated, validation subjects
/// named) before anything runs.
pub fn candidates(search: &Search) -> Result<Vec<Candidate>, TuneError> {
    if search.axes.is_empty() {
        return Err(TuneError::Search("no key to search over: give at least one KEY=V1,V2,...".into()));
    }
    for (i, a) in search.axes.iter().enumerate() {
        if a.values.is_empty() {
            return Err(TuneError::Key { key: a.key.clone(), reason: "no values".into() });
        }
        if search.axes[..i].iter().any(|b| b.key == a.key) {
            return Err(TuneError::Key { key: a.key.clone(), reason: "given twice".into() });
        }
    }
    if let Mode::Random { n: 0, .. } = search.mode {
        return Err(TuneError::Search("random search with 0 draws: give at least 1".into()));
    }
    let sizes: Vec<usize> = search.axes.iter().map(|a| a.values.len()).collect();
    let mut out = Vec::new();
    for (index, combo) in combinations(&sizes, search.mode).into_iter().enumerate() {
        let mut cfg = search.base.clone();
        let mut values = Vec::new();
        for (axis, &j) in search.axes.iter().zip(&combo) {
            cfg = apply(&cfg, &axis.key, &axis.values[j])?;
            values.push(axis.values[j].clone());
        }
        if cfg.data.subjects_heldout.is_empty() {
            return Err(TuneError::NoValidation { trial: index });
        }
        cfg.train.out = Some(search.out.join(trial_dir_name(index)));
        out.push(Candidate { index, values, cfg });
    }
    Ok(out)
}

/// What one trial gave.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrialResult {
    /// The trial index.
    pub trial: usize,
    /// Its directory, relative to the output directory.
    pub dir: String,
    /// The value of each key, as TOML, in key order.
    pub values: Vec<String>,
    /// `finished`, or `failed`.
    pub status: String,
    /// The best validation loss (mean over horizons; variance units of the standardized data).
    pub best_val_loss: Option<f64>,
    /// Its value per horizon.
    pub best_val_per_horizon: Option<Vec<f64>>,
    /// The horizons of the trial's model.
    pub horizons: Vec<usize>,
    /// The step of the best validation.
    pub best_step: Option<u64>,
    /// Steps run.
    pub steps: Option<u64>,
    /// Why the run ended (`max_steps`, `early_stopping`).
    pub stop_reason: Option<String>,
    /// Seconds this search spent on the trial (`None` for a trial finished by an earlier one).
    pub wall_s: Option<f64>,
    /// Whether the trial was finished before this search started and not rerun.
    pub reused: bool,
    /// The error of a failed trial.
    pub error: Option<String>,
}

/// The results of a search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneReport {
    /// The keys searched over.
    pub keys: Vec<String>,
    /// `grid`, or `random N (seed S)`.
    pub mode: String,
    /// The validation subjects of the base configuration.
    pub validation_subjects: Vec<String>,
    /// One per trial, in trial order.
    pub trials: Vec<TrialResult>,
    /// The index of the winning trial.
    pub best: Option<usize>,
    /// The winning configuration's file, relative to the output directory.
    pub best_config: Option<String>,
}

/// The winning trial: the lowest finite best validation loss; on a tie the lower index.
pub fn best_trial(trials: &[TrialResult]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for t in trials {
        let Some(l) = t.best_val_loss.filter(|l| l.is_finite()) else { continue };
        if best.is_none_or(|(_, b)| l < b) {
            best = Some((t.trial, l));
        }
    }
    best.map(|(i, _)| i)
}

/// Whether the run directory `dir` holds a finished run: its newest checkpoint is final and
/// its `summary.json` exists (the test of `bc-cli train --resume`).
pub fn is_finished(dir: &Path) -> Result<bool, TrainError> {
    let Some(found) = find_checkpoint(dir)? else { return Ok(false) };
    Ok(read_state(&found.dir)?.finished.is_some() && dir.join("summary.json").is_file())
}

/// The outcome of the finished run in `dir`, from its `summary.json` and the validation line
/// of its best step in `loss_log.jsonl`.
fn read_outcome(dir: &Path, r: &mut TrialResult) -> Result<(), TrainError> {
    let sp = dir.join("summary.json");
    let text = std::fs::read_to_string(&sp).map_err(io_err(&sp))?;
    let s: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| TrainError::Checkpoint { path: sp.clone(), reason: format!("not JSON: {e}") })?;
    r.steps = s["steps"].as_u64();
    r.stop_reason = s["stop_reason"].as_str().map(String::from);
    r.best_step = s["best"]["step"].as_u64();
    r.best_val_loss = s["best"]["val_loss"].as_f64();
    let log = crate::run::log_path(dir);
    let text = std::fs::read_to_string(&log).map_err(io_err(&log))?;
    let val = text
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<ValRecord>(l).ok())
        .find(|v| Some(v.step) == r.best_step);
    r.best_val_per_horizon = val.map(|v| v.val_per_horizon);
    r.status = "finished".into();
    Ok(())
}

/// Whether two configurations are the same run, wherever their directories are.
fn same_run(a: &RunConfig, b: &RunConfig) -> bool {
    let (mut a, mut b) = (a.clone(), b.clone());
    a.train.out = None;
    b.train.out = None;
    a == b
}

/// Refuses an output directory whose trial directories hold runs of other configurations.
fn check_existing(cands: &[Candidate]) -> Result<(), TuneError> {
    for c in cands {
        let dir = c.cfg.train.out.clone().unwrap_or_default();
        if dir.join(crate::run_dir::RESOLVED).is_file() {
            let stored = crate::run_dir::read_resolved(&dir)?;
            if !same_run(&stored, &c.cfg) {
                return Err(TuneError::OtherSearch { dir, trial: c.index });
            }
        }
    }
    Ok(())
}

/// Trains candidate `c` (or continues its unfinished run) into its directory.
fn train_trial<M, B>(c: &Candidate, build: &B, dir: &Path) -> Result<(), TrainError>
where
    M: DataParallel<f32>,
    B: Fn(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast_core::Error>,
{
    let data = TrainData::load(&c.cfg)?;
    let model = build(c.cfg.model_config(), data.adjacency.clone(), c.cfg.train.seed)?;
    let mut run = Run::new(&c.cfg, &data, dir);
    if dir.join(crate::run_dir::RESOLVED).is_file() {
        run = run.resume(crate::checkpoint::continue_point(dir)?.checkpoint);
    }
    run.run(model, &mut [])?;
    Ok(())
}

/// Runs (or reuses) trial `c` and records what it gave.
fn trial<M, B>(search: &Search, c: &Candidate, build: &B) -> TrialResult
where
    M: DataParallel<f32>,
    B: Fn(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast_core::Error>,
{
    let name = trial_dir_name(c.index);
    let dir = search.out.join(&name);
    let mut r = TrialResult {
        trial: c.index,
        dir: name,
        values: c.values.iter().map(|v| v.to_string()).collect(),
        status: "failed".into(),
        horizons: c.cfg.model.horizons.clone(),
        ..TrialResult::default()
    };
    let t0 = Instant::now();
    let res = is_finished(&dir).and_then(|done| {
        r.reused = done;
        if !done {
            train_trial(c, build, &dir)?;
        }
        read_outcome(&dir, &mut r)
    });
    if !r.reused {
        r.wall_s = Some(t0.elapsed().as_secs_f64());
    }
    if let Err(e) = res {
        r.status = "failed".into();
        r.error = Some(e.to_string());
    }
    r
}

/// What a search reports while it runs.
pub trait TuneObserver {
    /// Trial `c` of `n` starts (or is looked at, when it finished before).
    fn on_trial_start(&mut self, c: &Candidate, n: usize) {
        let _ = (c, n);
    }
    /// Trial `r` ended; its row is in the results files.
    fn on_trial_end(&mut self, r: &TrialResult) {
        let _ = r;
    }
}

/// An observer that reports nothing.
impl TuneObserver for () {}

/// Runs the search: the candidates ([`candidates`]; each must name `backend`, the backend of
/// `build`), then each trial in order, the results files rewritten after each. `build(model
/// config, adjacency, seed)` makes a trial's model.
pub fn run_search<M, B>(
    search: &Search,
    backend: &str,
    build: B,
    obs: &mut dyn TuneObserver,
) -> Result<TuneReport, TuneError>
where
    M: DataParallel<f32>,
    B: Fn(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast_core::Error>,
{
    let cands = candidates(search)?;
    if let Some(c) = cands.iter().find(|c| c.cfg.train.backend != backend) {
        let (backend, builder) = (c.cfg.train.backend.clone(), backend.to_string());
        return Err(TuneError::Backend { trial: c.index, backend, builder });
    }
    check_existing(&cands)?;
    let mode = match search.mode {
        Mode::Grid => "grid".to_string(),
        Mode::Random { n, seed } => format!("random {n} (seed {seed})"),
    };
    let mut report = TuneReport {
        keys: search.axes.iter().map(|a| a.key.clone()).collect(),
        mode,
        validation_subjects: search.base.data.subjects_heldout.clone(),
        trials: Vec::new(),
        best: None,
        best_config: None,
    };
    for c in &cands {
        obs.on_trial_start(c, cands.len());
        report.trials.push(trial(search, c, &build));
        report.best = best_trial(&report.trials);
        write_results(&search.out, &mut report, &cands)?;
        obs.on_trial_end(report.trials.last().expect("a trial was just pushed"));
    }
    Ok(report)
}

/// The results table: one row per trial, tab-separated, the units in the header.
pub fn results_tsv(report: &TuneReport) -> String {
    let mut head = vec!["trial".to_string()];
    head.extend(report.keys.iter().cloned());
    head.extend(
        ["status", "val_mse (variance units)", "val_mse per horizon (variance units)", "best_step", "steps"]
            .map(String::from),
    );
    head.extend(["wall_s", "dir", "error"].map(String::from));
    let mut text = head.join("\t") + "\n";
    let opt = |x: Option<String>| x.unwrap_or_else(|| "-".into());
    for t in &report.trials {
        let hz = t
            .best_val_per_horizon
            .as_ref()
            .map(|v| t.horizons.iter().zip(v).map(|(h, l)| format!("h{h}={l:.6}")).collect::<Vec<_>>().join(","));
        let mut row = vec![t.trial.to_string()];
        row.extend(t.values.iter().cloned());
        row.push(t.status.clone());
        row.push(opt(t.best_val_loss.map(|l| format!("{l:.6}"))));
        row.push(opt(hz));
        row.push(opt(t.best_step.map(|s| s.to_string())));
        row.push(opt(t.steps.map(|s| s.to_string())));
        row.push(opt(t.wall_s.map(|s| format!("{s:.1}"))));
        row.push(t.dir.clone());
        row.push(opt(t.error.as_ref().map(|e| e.replace(['\t', '\n'], " "))));
        text += &(row.join("\t") + "\n");
    }
    text
}

/// Writes `results.tsv`, `results.json` and (once a trial has won) `best.toml` into `out`,
/// each atomically; `report.best_config` is set when `best.toml` is written.
fn write_results(out: &Path, report: &mut TuneReport, cands: &[Candidate]) -> Result<(), TuneError> {
    let write = |name: &str, text: &str| {
        let path = out.join(name);
        boldcast_storage::fsutil::write_atomic(&path, text.as_bytes())
            .map_err(|source| TuneError::Write { path, source })
    };
    if let Some(c) = report.best.and_then(|i| cands.iter().find(|c| c.index == i)) {
        let mut cfg = c.cfg.clone();
        cfg.train.out = None;
        let t = &report.trials[c.index];
        let head = format!(
            "# bc-cli tune: the winner of {} trial(s), {} ({}): best val_mse {} (variance units) at step {} on the \
             validation subjects {:?}.\n",
            report.trials.len(),
            t.dir,
            report.keys.iter().zip(&t.values).map(|(k, v)| format!("{k} = {v}")).collect::<Vec<_>>().join(", "),
            t.best_val_loss.map_or("-".into(), |l| format!("{l:.6}")),
            t.best_step.map_or("-".into(), |s| s.to_string()),
            report.validation_subjects,
        );
        write(BEST_TOML, &(head + &cfg.to_config_file()))?;
        report.best_config = Some(BEST_TOML.into());
    }
    write(RESULTS_TSV, &results_tsv(report))?;
    let stamped = boldcast_storage::made_by::stamp(report);
    write(RESULTS_JSON, &(serde_json::to_string_pretty(&stamped).expect("JSON serializes") + "\n"))
}

#[cfg(test)]
mod tests;
