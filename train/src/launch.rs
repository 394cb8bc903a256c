//! Settling a training run before its data or model exist: [`Launch::fresh`] (a resolved
//! configuration, a new or empty directory) or [`Launch::resume`] (a run directory's newest
//! checkpoint, or its `config.resolved.toml`). Every check that needs neither the data nor
//! the model is made here, once: the output directory, the lock, the shards of the global
//! batch, a finished run. `bc-cli train` and a library user launch a run the same way.
//!
//! ```no_run
//! # fn main() -> Result<(), boldcast_train::TrainError> {
//! use boldcast_train::{launch::Launch, presets, Dist, Recorder};
//! let launch = Launch::fresh(presets::preset("quick")?, Dist::default())?;
//! let data = launch.load_data()?;
//! let model = boldcast_cpu::CpuModel::<f32>::new(launch.cfg.model_config(), data.adjacency.clone(), launch.cfg.train.seed)?;
//! let mut rec = Recorder::default();
//! let report = launch.run(&data, model, &mut [&mut rec])?;
//! # Ok(()) }
//! ```

use crate::checkpoint::{self as ck, Loaded};
use crate::config::RunConfig;
use crate::data::TrainData;
use crate::run_dir::{Completed, RunDirLock};
use crate::{Dist, Observer, Run, TrainError, TrainReport};
use boldcast_core::DataParallel;
use std::path::{Path, PathBuf};

/// Where a launched run starts.
pub enum Start {
    /// A fresh run in a new or empty directory.
    Fresh,
    /// A run stopped before its first checkpoint: again from step 0 with its
    /// `config.resolved.toml`.
    Restart,
    /// The newest checkpoint.
    Checkpoint(Box<Loaded>),
    /// A finished run: nothing to train. What it lacked after a kill at its very end was
    /// given to it (`done`, one line each; empty when it lacked nothing), under its lock,
    /// which is held until this value is dropped (the caller may draw a missing figure).
    Finished {
        /// Why it finished (`max_steps`, `early_stopping`, ...).
        reason: String,
        /// Its last step.
        step: u64,
        /// What was done.
        done: Vec<String>,
        /// The run directory's lock.
        lock: RunDirLock,
    },
}

/// A training run whose configuration, directory and starting point are settled.
pub struct Launch {
    /// The configuration (with `--resume`, the one stored in the run).
    pub cfg: RunConfig,
    /// The output directory.
    pub out: PathBuf,
    /// Where it starts.
    pub start: Start,
    /// What the user should be told (checkpoints passed over), one line each.
    pub notes: Vec<String>,
    /// The ranks.
    pub dist: Dist,
    stop_after: Option<u64>,
    stop_when: Option<crate::run::StopFlag>,
    extra: serde_json::Map<String, serde_json::Value>,
}

/// The output directory of a configuration: `train.out`, else `runs/<command>-<preset>`.
pub fn default_out(cfg: &RunConfig, command: &str) -> PathBuf {
    let preset = cfg.preset.as_deref().unwrap_or(crate::presets::DEFAULT_PRESET);
    cfg.train.out.clone().unwrap_or_else(|| Path::new("runs").join(format!("{command}-{preset}")))
}

impl Launch {
    fn new(cfg: RunConfig, out: PathBuf, start: Start, notes: Vec<String>, dist: Dist) -> Self {
        Self { cfg, out, start, notes, dist, stop_after: None, stop_when: None, extra: serde_json::Map::new() }
    }

    /// A fresh run of `cfg` into [`default_out`]: the global batch must divide over the
    /// ranks, and the directory must be new or empty (checked on rank 0, which alone writes).
    pub fn fresh(cfg: RunConfig, dist: Dist) -> Result<Self, TrainError> {
        boldcast_core::collective::shard_range(cfg.train.batch_size, dist.rank(), dist.size())?;
        let out = default_out(&cfg, "train");
        if dist.is_root() {
            crate::run_dir::check_fresh(&out)?;
        }
        Ok(Self::new(cfg, out, Start::Fresh, Vec::new(), dist))
    }

    /// The run in `dir`, continued: from its newest checkpoint with the configuration stored
    /// there, or from step 0 with its `config.resolved.toml` when it has no checkpoint. A
    /// finished run is completed ([`Start::Finished`]) when it lacks something after a kill,
    /// and is [`TrainError::AlreadyFinished`] otherwise.
    pub fn resume(dir: &Path, dist: Dist) -> Result<Self, TrainError> {
        if dist.is_root() {
            // An early answer when another process works there; the run itself takes the lock.
            crate::run_dir::ensure_free(dir)?;
        }
        let point = ck::continue_point(dir)?;
        let out = dir.to_path_buf();
        let Some(loaded) = point.checkpoint else {
            return Ok(Self::new(point.cfg, out, Start::Restart, point.notes, dist));
        };
        let state = &loaded.state;
        let start = match (&state.finished, dir.join("summary.json").is_file()) {
            (Some(r), true) => {
                let (reason, step) = (r.clone(), state.step);
                if !dist.is_root() {
                    return Err(TrainError::AlreadyFinished { out, reason, step });
                }
                let Completed { lock, done } = crate::run_dir::complete_finished(dir, step)?;
                Start::Finished { reason, step, done, lock }
            }
            _ => {
                boldcast_core::collective::shard_range(point.cfg.train.batch_size, dist.rank(), dist.size())?;
                Start::Checkpoint(Box::new(loaded))
            }
        };
        Ok(Self::new(point.cfg, out, start, point.notes, dist))
    }

    /// The line that says where a resumed run starts (`None` for a fresh or finished one).
    pub fn start_line(&self) -> Option<String> {
        let dir = self.out.display();
        match &self.start {
            Start::Restart => Some(format!(
                "resuming {dir}: no checkpoint yet, so the run starts again from step 0 with its {}",
                crate::run_dir::RESOLVED
            )),
            Start::Checkpoint(l) => {
                Some(format!("resuming from {} (step {} of {})", l.dir.display(), l.state.step, l.state.max_steps))
            }
            Start::Fresh | Start::Finished { .. } => None,
        }
    }

    /// Stops cleanly after `steps` steps of this invocation (the run can be resumed).
    pub fn stop_after(mut self, steps: Option<u64>) -> Self {
        self.stop_after = steps;
        self
    }

    /// Stops cleanly after the step during which `flag` is set ([`Run::stop_when`]).
    pub fn stop_when(mut self, flag: Option<crate::run::StopFlag>) -> Self {
        self.stop_when = flag;
        self
    }

    /// Adds a top-level key to `summary.json` (a caller's figure, for instance).
    pub fn summary_extra(mut self, key: &str, value: serde_json::Value) -> Self {
        self.extra.insert(key.into(), value);
        self
    }

    /// The run's data, split and windowed ([`TrainData::load`]).
    pub fn load_data(&self) -> Result<TrainData, TrainError> {
        TrainData::load(&self.cfg)
    }

    /// Trains `model` (freshly built from `self.cfg` and `data`'s adjacency) on `data`,
    /// reporting to `observers`. A finished run is [`TrainError::AlreadyFinished`].
    pub fn run<M: DataParallel<f32>>(
        self,
        data: &TrainData,
        model: M,
        observers: &mut [&mut dyn Observer],
    ) -> Result<TrainReport, TrainError> {
        let mut run = Run::new(&self.cfg, data, self.out.clone())
            .stop_after(self.stop_after)
            .stop_when(self.stop_when)
            .dist(self.dist.clone());
        run = match self.start {
            Start::Fresh => run,
            Start::Restart => run.resume(None),
            Start::Checkpoint(loaded) => run.resume(Some(*loaded)),
            Start::Finished { reason, step, .. } => {
                return Err(TrainError::AlreadyFinished { out: self.out, reason, step })
            }
        };
        for (k, v) in self.extra {
            run = run.summary_extra(&k, v);
        }
        run.run(model, observers)
    }
}
