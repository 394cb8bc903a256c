//! The training loop: [`Run`] says what to train on and where to write; [`Run::run`] trains a
//! model, writing `loss_log.jsonl`, `best.safetensors`, the checkpoints and `summary.json`
//! into the output directory, and reporting to the observers.
//!
//! - Steps: [`Trainer`] (MODEL.md "one step") with the configuration's Adam, schedule and
//!   clipping; step `s` trains on batch `s % bpe` of epoch `s / bpe` of [`epoch_order`], rank
//!   `r` on its shard ([`rank_batch`]).
//! - Validation after `k` steps when `k = 0`, `k % val_every = 0` or `k = max_steps`
//!   ([`crate::validate`]): the log line [`ValRecord`], the best weights in
//!   `best.safetensors`, [`EarlyStopping::observe`], the overfitting flag.
//! - Checkpoints ([`crate::checkpoint`]) after `k` steps when `k % ckpt_every = 0` and
//!   whenever the run stops; never with non-finite weights.
//! - A non-finite loss or gradient norm stops the run with [`TrainError::NonFinite`] after the
//!   log line `{"event":"stopped","reason":"non_finite",...}`; the last checkpoint stays.
//! - The end: `{"event":"finished"|"stopped","reason","step"}`, the red flags
//!   ([`crate::flags`]), and for a finished run the held-out verdict (the validation loss
//!   fell, and it beats predicting zero: [`crate::judge`]) and `summary.json`.

use crate::checkpoint::{self as ck, CheckpointData, Loaded, RngState, TrainState, ValState};
use crate::config::RunConfig;
use crate::data::TrainData;
use crate::dist::Dist;
use crate::early_stopping::EarlyStopping;
use crate::error::TrainError;
use crate::flags::{self, OverfitJudge, RedFlag};
use crate::linear_path::LinearPathModel;
use crate::log::{LineKind, RunLog};
use crate::observer::{Observer, RunStart, ValRecord};
use crate::order::{epoch_order, rank_batch};
use crate::summary::{summary_json, StopReason, TrainReport};
use crate::tracking::{Kept, Tracker};
use boldcast_core::accept::heldout_verdict;
use boldcast_core::{Adam, DataParallel, Model, Optimizer, ParamSpec, Schedule, ScheduleConfig, Trainer};
use boldcast_data::WindowRef;
use boldcast_storage::io_err;
use serde_json::json;
use std::path::{Path, PathBuf};

/// A training run to do: the configuration, the data, the output directory and how to run.
pub struct Run<'a> {
    cfg: &'a RunConfig,
    data: &'a TrainData,
    out: PathBuf,
    stop_after: Option<u64>,
    stop_when: Option<StopFlag>,
    dist: Dist,
    resume: Option<Option<Loaded>>,
    summary_extra: serde_json::Map<String, serde_json::Value>,
}

/// A flag another thread sets to stop a run cleanly ([`Run::stop_when`]): a Ctrl-C handler,
/// a notebook's interrupt.
pub type StopFlag = std::sync::Arc<std::sync::atomic::AtomicBool>;

impl<'a> Run<'a> {
    /// A fresh run of `cfg` on `data` writing into `out`, on one rank.
    pub fn new(cfg: &'a RunConfig, data: &'a TrainData, out: impl Into<PathBuf>) -> Self {
        let (out, summary_extra) = (out.into(), serde_json::Map::new());
        Self { cfg, data, out, stop_after: None, stop_when: None, dist: Dist::default(), resume: None, summary_extra }
    }

    /// Stops cleanly after `steps` steps of this invocation (the schedule still follows
    /// `max_steps`); the run can be resumed.
    pub fn stop_after(mut self, steps: Option<u64>) -> Self {
        self.stop_after = steps;
        self
    }

    /// Stops cleanly, as [`Run::stop_after`] does, after the step during which `flag` was set
    /// (checked once per step, on every rank: a data-parallel run must set it on all of them).
    pub fn stop_when(mut self, flag: Option<StopFlag>) -> Self {
        self.stop_when = flag;
        self
    }

    /// Trains data-parallel over the ranks of `dist`.
    pub fn dist(mut self, dist: Dist) -> Self {
        self.dist = dist;
        self
    }

    /// Continues the run in `out` (see [`ck::resume_point`]): from `checkpoint`, or, for a run
    /// stopped before its first checkpoint (`None`), from step 0 in place, the directory's
    /// `config.resolved.toml` being this run's. Without this call the run is a fresh one, and
    /// `out` must not exist or be empty.
    pub fn resume(mut self, checkpoint: Option<Loaded>) -> Self {
        self.resume = Some(checkpoint);
        self
    }

    /// Adds a top-level key to `summary.json` (the caller's figure, for instance).
    pub fn summary_extra(mut self, key: &str, value: serde_json::Value) -> Self {
        self.summary_extra.insert(key.into(), value);
        self
    }

    /// Trains `model` (freshly built: a resumed run loads the checkpoint's weights into it),
    /// reporting to `observers`. See the module documentation.
    pub fn run<M: DataParallel<f32>>(
        mut self,
        model: M,
        observers: &mut [&mut dyn Observer],
    ) -> Result<TrainReport, TrainError> {
        let model = self.with_linear_path(model)?;
        let mut lp = Loop::new(&self, model, observers)?;
        lp.notify(|o, s| o.on_start(&s.start_info()));
        lp.run()
    }
}

impl Run<'_> {
    /// `model` with the configuration's linear path ([`crate::linear_path`]): fitted on the
    /// training runs and the head zeroed for a run that starts at step 0; left to the
    /// checkpoint's tensors for a resumed one. The choice goes into `summary.json`.
    fn with_linear_path<M: DataParallel<f32>>(&mut self, model: M) -> Result<LinearPathModel<M>, TrainError> {
        let kind = self.cfg.model.linear_path;
        let from_checkpoint = matches!(self.resume, Some(Some(_)));
        if !kind.is_on() || from_checkpoint {
            return Ok(LinearPathModel::unfitted(model, kind));
        }
        let d = self.data;
        let (fit, choice) = crate::linear_path::fit_path(kind, &d.ds, &d.split.train_runs, &self.cfg.model, &d.spec)?;
        let mut m = LinearPathModel::with_fit(model, kind, fit);
        m.zero_head()?;
        self.summary_extra.insert("linear_path".into(), serde_json::to_value(&choice).unwrap_or_default());
        Ok(m)
    }
}

type Tr<M> = Trainer<f32, M, Adam<f32>, ScheduleConfig, RunLog>;

/// The state of a run in progress.
struct Loop<'r, 'o, 'i, M: DataParallel<f32>> {
    run: &'r Run<'r>,
    trainer: Tr<M>,
    observers: &'o mut [&'i mut dyn Observer],
    val: ValState,
    early: EarlyStopping,
    judge: OverfitJudge,
    flags: Vec<RedFlag>,
    order: Option<(u64, Vec<usize>, RngState)>,
    last_val: Option<(f64, Vec<f64>)>,
    last_ckpt: Option<(u64, PathBuf)>,
    _lock: Option<crate::run_dir::RunDirLock>,
    config_text: String,
    hash: String,
    specs: Vec<ParamSpec>,
    finished: Option<String>,
    start: u64,
    bpe: u64,
    decayed: Option<u64>,
    /// The tokens of the next step's batch, made while the current step ran.
    prefetched: Option<(u64, boldcast_core::Tokens<f32>)>,
    /// The time steps waited for their data.
    timing: DataTiming,
    /// `metrics.csv` and the TensorBoard files (rank 0).
    tracker: Option<Tracker>,
}

/// The file of a finished run's step and data-wait times ([`DataTiming`]).
pub const TIMING: &str = "timing.json";

/// How long the training steps of this invocation took and waited for their tokens.
#[derive(Clone, Debug, Default)]
pub struct DataTiming {
    /// Waiting for data: making a batch's tokens that were not ready, and joining the
    /// preparation of the next one.
    pub wait: std::time::Duration,
    /// The whole steps, waits included.
    pub steps: std::time::Duration,
    /// Each step's time, waits included, in order (4 bytes a step).
    pub per_step: Vec<f32>,
}

impl DataTiming {
    fn add(&mut self, wait: std::time::Duration, step: std::time::Duration) {
        self.wait += wait;
        self.steps += step;
        self.per_step.push(step.as_secs_f32());
    }

    /// The median step time in seconds (`None` before any step): on a shared machine the
    /// figure to compare, where a mean takes every stall of another process.
    pub fn median_step(&self) -> Option<f64> {
        let mut v: Vec<f64> = self.per_step.iter().map(|&s| f64::from(s)).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(v[n / 2]),
            _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
        }
    }

    /// The fraction of step time spent waiting for data (`None` before any step).
    pub fn wait_fraction(&self) -> Option<f64> {
        (!self.steps.is_zero()).then(|| self.wait.as_secs_f64() / self.steps.as_secs_f64())
    }
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// The configuration as a checkpoint stores it: without `train.out`, so a run directory can
/// move, and two runs differing only in where they write hold byte-identical checkpoints.
pub fn stored_config_text(cfg: &RunConfig) -> String {
    let cfg = cfg.with_absolute_paths();
    let train = crate::config::TrainConfig { out: None, ..cfg.train.clone() };
    RunConfig { train, ..cfg }.to_toml()
}

/// The configuration text of `run`'s checkpoints ([`stored_config_text`]); a resumed run whose
/// checkpoint holds the same configuration with relative data paths (written before they were
/// stored absolute) keeps that text, so its hash still matches.
fn resumed_config_text(run: &Run<'_>) -> String {
    let text = stored_config_text(run.cfg);
    match run.resume.as_ref().and_then(Option::as_ref) {
        Some(l) if toml::from_str::<RunConfig>(&l.state.config).is_ok_and(|c| stored_config_text(&c) == text) => {
            l.state.config.clone()
        }
        _ => text,
    }
}

/// Batches per epoch, or the error of a batch larger than the training windows.
fn batches_per_epoch(cfg: &RunConfig, data: &TrainData) -> Result<u64, TrainError> {
    let (b, n) = (cfg.train.batch_size, data.train_windows.len());
    if n / b == 0 {
        let (window, stride) = (data.spec.window, data.spec.stride);
        return Err(TrainError::BatchTooLarge { batch: b, windows: n, window, stride });
    }
    if data.val_windows.is_empty() {
        return Err(TrainError::NoValidationWindows);
    }
    Ok((n / b) as u64)
}

impl<'r, 'o, 'i, M: DataParallel<f32>> Loop<'r, 'o, 'i, M> {
    fn new(run: &'r Run<'r>, mut model: M, observers: &'o mut [&'i mut dyn Observer]) -> Result<Self, TrainError> {
        let (cfg, data, dist) = (run.cfg, run.data, &run.dist);
        boldcast_core::collective::shard_range(cfg.train.batch_size, dist.rank(), dist.size())?;
        let bpe = batches_per_epoch(cfg, data)?;
        let config_text = resumed_config_text(run);
        let hash = ck::config_hash(&config_text);
        let lock = if dist.is_root() { Some(open_dir(run, &config_text)?) } else { None };
        let mut adam = Adam::<f32>::new(cfg.optim_config())?;
        let log_path = run.out.join("loss_log.jsonl");
        let (log, val, start, finished) = match run.resume.as_ref().and_then(Option::as_ref) {
            Some(l) => {
                check_resume(l, &hash, data, bpe)?;
                restore(&mut model, &mut adam, l)?;
                let log = if dist.is_root() {
                    RunLog::open_at(&log_path, l.state.log_bytes)?
                } else {
                    RunLog::silent(&log_path)
                };
                (log, l.state.val.clone(), l.state.step, l.state.finished.clone())
            }
            None if dist.is_root() => (RunLog::create(&log_path)?, ValState::default(), 0, None),
            None => (RunLog::silent(&log_path), ValState::default(), 0, None),
        };
        dist.check_same_params(&model, "the parameters at the start")?;
        let tracker = match run.resume.as_ref().and_then(Option::as_ref) {
            _ if !dist.is_root() => None,
            Some(l) => {
                let kept = Kept::from_log(&log_path, l.state.step)?;
                Some(Tracker::open(&run.out, &cfg.model.horizons, cfg.train.tensorboard, Some(&kept))?)
            }
            None => Some(Tracker::open(&run.out, &cfg.model.horizons, cfg.train.tensorboard, None)?),
        };
        let t = &cfg.train;
        let mut trainer =
            Trainer::new(model, adam, cfg.schedule_config(), log, cfg.max_norm()).with_collective(dist.0.clone());
        trainer.set_step_index(start);
        let early = EarlyStopping::resumed(t.patience, t.min_delta, val.patience_ref, val.bad_validations);
        let specs = trainer.model.config().param_specs();
        let mut lp = Loop {
            run,
            trainer,
            observers,
            val,
            early,
            judge: OverfitJudge::new(t.overfit_ratio),
            flags: Vec::new(),
            order: None,
            last_val: None,
            last_ckpt: run.resume.as_ref().and_then(Option::as_ref).map(|l| (l.state.step, l.dir.clone())),
            _lock: lock,
            config_text,
            hash,
            specs,
            finished,
            start,
            bpe,
            decayed: Some(0),
            prefetched: None,
            timing: DataTiming::default(),
            tracker,
        };
        lp.replay_ratios()?;
        Ok(lp)
    }

    fn start_info(&self) -> RunStart {
        let (step, max_steps) = (self.start, self.run.cfg.train.max_steps);
        let resumed = self.run.resume.as_ref().is_some_and(Option::is_some);
        RunStart { step, max_steps, out: self.run.out.clone(), resumed }
    }

    /// Calls `f` on every observer (rank 0 only).
    fn notify(&mut self, f: impl Fn(&mut dyn Observer, &Self)) {
        if !self.run.dist.is_root() {
            return;
        }
        let observers = std::mem::take(&mut self.observers);
        for o in observers.iter_mut() {
            f(&mut **o, self);
        }
        self.observers = observers;
    }

    fn raise(&mut self, flag: Option<RedFlag>) {
        if let Some(flag) = flag {
            self.notify(|o, _| o.on_flag(&flag));
            self.flags.push(flag);
        }
    }

    /// A resumed run's overfitting judge sees the ratios of the log's validations first, so
    /// it raises its flag where an uninterrupted run would (flags already raised stay in the
    /// report without being announced again).
    fn replay_ratios(&mut self) -> Result<(), TrainError> {
        if self.start == 0 || !self.run.dist.is_root() {
            return Ok(());
        }
        let text = std::fs::read_to_string(self.trainer.logger.path()).map_err(io_err(self.trainer.logger.path()))?;
        for line in text.lines() {
            if let Ok(v) = serde_json::from_str::<ValRecord>(line) {
                self.flags.extend(self.judge.observe(v.step, v.val_over_train));
            }
        }
        Ok(())
    }

    fn run(mut self) -> Result<TrainReport, TrainError> {
        if self.start == 0 {
            self.validation(0)?;
        }
        let reason = match self.finished.clone() {
            // Killed after its final checkpoint but before the summary: only the end is redone.
            Some(r) => StopReason::from_finished(&r).ok_or(TrainError::UnknownFinish { reason: r })?,
            None if self.start >= self.run.cfg.train.max_steps => {
                return Err(TrainError::AlreadyFinished {
                    out: self.run.out.clone(),
                    reason: "max_steps".into(),
                    step: self.start,
                })
            }
            None => self.train_until_stop()?,
        };
        self.end(reason)
    }

    fn train_until_stop(&mut self) -> Result<StopReason, TrainError> {
        let t = &self.run.cfg.train;
        loop {
            self.train_step()?;
            let k = self.trainer.step_index();
            let fin = k >= t.max_steps;
            let early = (k.is_multiple_of(t.val_every) || fin) && self.validation(k)?;
            let reason = if fin {
                Some(StopReason::MaxSteps)
            } else if early {
                Some(StopReason::EarlyStopping)
            } else if self.run.stop_after.is_some_and(|s| k - self.start >= s)
                || self.run.stop_when.as_ref().is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
            {
                Some(StopReason::StopAfter)
            } else {
                None
            };
            if k.is_multiple_of(t.ckpt_every) || reason.is_some() {
                self.checkpoint(k, reason)?;
            }
            if let Some(r) = reason {
                return Ok(r);
            }
        }
    }

    /// The order of `epoch`, drawn once per epoch.
    fn epoch_order(&mut self, epoch: u64) -> &(u64, Vec<usize>, RngState) {
        let t = &self.run.cfg.train;
        if self.order.as_ref().is_none_or(|(e, _, _)| *e != epoch) {
            let (o, st) = epoch_order(self.run.data.train_windows.len(), t.seed, epoch, t.shuffle);
            self.order = Some((epoch, o, st));
        }
        self.order.as_ref().expect("set above")
    }

    /// The windows of this rank's batch of step `k`. The order of the current epoch is kept
    /// (`self.order`, which checkpoints record); another epoch's, for the batch prepared ahead
    /// across an epoch's end, is drawn without replacing it.
    fn batch_of(&mut self, k: u64) -> Result<Vec<WindowRef>, TrainError> {
        let (data, b) = (self.run.data, self.run.cfg.train.batch_size);
        let (epoch, pos) = (k / self.bpe, k % self.bpe);
        let dist = self.run.dist.clone();
        let t = &self.run.cfg.train;
        let other;
        let order = match &self.order {
            Some((e, o, _)) if *e == epoch => o,
            Some(_) if k > self.trainer.step_index() => {
                other = epoch_order(data.train_windows.len(), t.seed, epoch, t.shuffle).0;
                &other
            }
            _ => &self.epoch_order(epoch).1,
        };
        Ok(rank_batch(order, pos as usize, b, &dist)?.iter().map(|&i| data.train_windows[i]).collect())
    }

    /// One training step. The tokens of the next step's batch are made on another thread
    /// while this step runs (a queue of one), and the time the step waited for its own
    /// tokens is counted ([`DataTiming`]).
    fn train_step(&mut self) -> Result<(), TrainError> {
        let data = self.run.data;
        let k = self.trainer.step_index();
        let started = std::time::Instant::now();
        let tokens = match self.prefetched.take() {
            Some((s, t)) if s == k => t,
            _ => data.ds.tokens::<f32>(&self.batch_of(k)?, &data.spec)?,
        };
        let mut waited = started.elapsed();
        let next = if k + 1 < self.run.cfg.train.max_steps { Some(self.batch_of(k + 1)?) } else { None };
        let trainer = &mut self.trainer;
        let (result, ahead) = std::thread::scope(|scope| {
            let prepare = next.as_ref().map(|b| scope.spawn(move || data.ds.tokens::<f32>(b, &data.spec)));
            let result = trainer.step(&tokens);
            let joined = std::time::Instant::now();
            // A failed or panicked preparation is made again, and its error reported, by the
            // next step itself.
            let ahead = prepare.and_then(|h| h.join().ok()).and_then(Result::ok);
            (result, (ahead, joined.elapsed()))
        });
        waited += ahead.1;
        self.prefetched = ahead.0.map(|t| (k + 1, t));
        self.timing.add(waited, started.elapsed());
        match result {
            Ok(rec) => {
                if let Some(t) = &mut self.tracker {
                    t.step(&rec, started.elapsed().as_secs_f64())?;
                }
                self.val.train_losses_since_val.push(rec.loss);
                self.count_decayed();
                self.notify(|o, _| o.on_step(&rec));
                Ok(())
            }
            Err(boldcast_core::Error::NonFinite { step, what, value }) => Err(self.non_finite(step, what, value)),
            Err(e) => Err(e.into()),
        }
    }

    /// Adds the elements the optimizer decayed in the last step (see [`crate::flags`]).
    fn count_decayed(&mut self) {
        let m = &self.trainer.model;
        let d = if m.optimizer_state().is_some() {
            m.decayed_elements()
        } else {
            Some(self.trainer.optimizer.decayed_last_step())
        };
        self.decayed = self.decayed.zip(d).map(|(a, b)| a + b);
    }

    fn last_ckpt_text(&self) -> Option<String> {
        self.last_ckpt.as_ref().map(|(_, p)| p.display().to_string())
    }

    /// The last good checkpoint once the weights after `failed` steps turned out not to train
    /// (a non-finite loss, gradient or update from them): a checkpoint of exactly those
    /// weights is demoted ([`ck::write::demote`]); every earlier one trained on.
    fn last_good(&mut self, failed: u64) -> Result<Option<PathBuf>, TrainError> {
        if self.run.dist.is_root() && self.last_ckpt.as_ref().is_some_and(|(s, _)| *s == failed) {
            self.last_ckpt = ck::write::demote(&self.run.out, failed)?;
        }
        Ok(self.last_ckpt.as_ref().map(|(_, p)| p.clone()))
    }

    /// The stop of the step of index `index` (0-based): reported as step `index + 1`, the
    /// count stdout and the log use, while its weights are those after `index` steps.
    fn non_finite(&mut self, index: u64, what: &str, value: f64) -> TrainError {
        let last_good = match self.last_good(index) {
            Ok(g) => g,
            Err(e) => return e,
        };
        let step = index + 1;
        let line = json!({
            "event": "stopped", "reason": "non_finite", "step": step, "what": what,
            "value": value.to_string(), "last_checkpoint": self.last_ckpt_text(),
        });
        match self.trainer.logger.write_value(LineKind::Event, &line) {
            Ok(()) => TrainError::NonFinite { step, what: what.into(), value, last_good },
            Err(e) => e,
        }
    }

    /// One validation after `k` steps: log, best weights, patience, overfitting. True to stop
    /// early.
    fn validation(&mut self, k: u64) -> Result<bool, TrainError> {
        let (data, b) = (self.run.data, self.run.cfg.train.batch_size);
        let (loss, per) = crate::validate::validate(&self.trainer.model, data, &data.val_windows, b, &self.run.dist)?;
        if !loss.is_finite() {
            self.last_good(k)?;
            let line = json!({
                "event": "stopped", "reason": "non_finite", "step": k, "what": "validation loss",
                "value": loss.to_string(),
            });
            self.trainer.logger.write_value(LineKind::Event, &line)?;
            return Err(TrainError::NonFiniteValidation { step: k, value: loss });
        }
        let train_loss = mean(&self.val.train_losses_since_val);
        let ratio = train_loss.map(|m| loss / m);
        self.val.train_losses_since_val.clear();
        self.val.history.push((k, loss));
        if self.val.best.is_none_or(|(_, bv)| loss < bv) {
            self.val.best = Some((k, loss));
            self.save_best(k, loss)?;
        }
        let stop = self.early.observe(loss);
        (self.val.patience_ref, self.val.bad_validations) = (self.early.patience_ref, self.early.bad_validations);
        let (best_step, best_val_loss) = self.val.best.expect("set above");
        let rec = ValRecord {
            step: k,
            val_loss: loss,
            val_per_horizon: per.clone(),
            floor: data.floor.overall,
            floor_per_horizon: data.floor.per_horizon.clone(),
            val_over_train: ratio,
            train_loss,
            best_val_loss,
            best_step,
            bad_validations: self.val.bad_validations,
        };
        self.trainer.logger.write_value(LineKind::Validation, &rec)?;
        if let Some(t) = &mut self.tracker {
            t.validation(&rec)?;
        }
        self.notify(|o, _| o.on_validation(&rec));
        let flag = self.judge.observe(k, ratio);
        self.raise(flag);
        self.last_val = Some((loss, per));
        Ok(stop)
    }

    fn save_best(&self, k: u64, loss: f64) -> Result<(), TrainError> {
        if !self.run.dist.is_root() {
            return Ok(());
        }
        let data = self.run.data;
        let mut meta = ck::model_metadata(k, &self.config_text, data.adjacency.as_ref(), &data.identity);
        meta.insert("val_loss".into(), loss.to_string());
        let path = self.run.out.join("best.safetensors");
        boldcast_storage::tensorfile::save_safetensors_hashed(&path, &self.trainer.model.state(), meta)?;
        Ok(())
    }

    /// The checkpoint after `k` steps (`reason`: the run stops here).
    fn checkpoint(&mut self, k: u64, reason: Option<StopReason>) -> Result<(), TrainError> {
        let params = self.trainer.model.state();
        // A checkpoint never holds non-finite weights: the last good one stays `latest`.
        if let Some(bad) = params.iter().find(|p| p.data.iter().any(|x| !x.is_finite())) {
            // The step from the weights after k - 1 steps made them non-finite.
            let last_good = self.last_good(k.saturating_sub(1))?;
            let line = json!({
                "event": "stopped", "reason": "non_finite", "step": k, "what": "parameters",
                "tensor": bad.name, "last_checkpoint": self.last_ckpt_text(),
            });
            self.trainer.logger.write_value(LineKind::Event, &line)?;
            return Err(TrainError::NonFiniteParameter { step: k, tensor: bad.name.clone(), last_good });
        }
        self.trainer.logger.sync()?;
        let state = self.state_at(k, reason);
        let held = self.trainer.model.optimizer_state();
        let data_ck = CheckpointData {
            params,
            moments: held.as_ref().map_or(self.trainer.optimizer.moments(), |(_, m)| m.as_slice()),
            specs: &self.specs,
            adjacency: self.run.data.adjacency.as_ref(),
            data: &self.run.data.identity,
            state: &state,
        };
        // The ranks must still hold the same weights (they took the same steps).
        self.run.dist.check_same_params(&self.trainer.model, &format!("the parameters after step {k}"))?;
        if self.run.dist.is_root() {
            let observers = &mut *self.observers;
            let on_file = &mut |path: &Path| observers.iter_mut().for_each(|o| o.on_checkpoint_file(k, path));
            let dir = ck::write_checkpoint(&self.run.out, &data_ck, on_file)?;
            self.notify(|o, _| o.on_checkpoint(k, &dir));
            self.last_ckpt = Some((k, dir));
        }
        Ok(())
    }

    /// `state.json` after `k` steps.
    fn state_at(&self, k: u64, reason: Option<StopReason>) -> TrainState {
        let t = &self.run.cfg.train;
        let (epoch, position_in_epoch) = (k / self.bpe, k % self.bpe);
        let n = self.run.data.train_windows.len();
        let rng = match &self.order {
            Some((e, _, st)) if *e == epoch => st.clone(),
            _ => epoch_order(n, t.seed, epoch, t.shuffle).1,
        };
        TrainState {
            format: ck::STATE_FORMAT.into(),
            step: k,
            max_steps: t.max_steps,
            optimizer_t: self.trainer.optimizer.steps(),
            next_lr: self.trainer.schedule.lr(k),
            epoch,
            position_in_epoch,
            batches_per_epoch: self.bpe,
            train_windows: n as u64,
            rng,
            val: self.val.clone(),
            log_bytes: self.trainer.logger.bytes(),
            log_hash: Some(self.trainer.logger.hash()),
            finished: reason.filter(|r| *r != StopReason::StopAfter).map(|r| r.as_str().to_string()),
            config_hash: self.hash.clone(),
            config: self.config_text.clone(),
            files: None,
            data: Some(self.run.data.identity.clone()),
        }
    }

    /// The end of the run: the event line, the red flags, and for a finished run the verdict
    /// and `summary.json`.
    fn end(mut self, reason: StopReason) -> Result<TrainReport, TrainError> {
        let steps = self.trainer.step_index();
        let event = if reason == StopReason::StopAfter { "stopped" } else { "finished" };
        self.trainer
            .logger
            .write_value(LineKind::Event, &json!({"event": event, "reason": reason.as_str(), "step": steps}))?;
        self.end_flags(reason, steps)?;
        let finished = reason != StopReason::StopAfter;
        if finished && self.last_val.is_none() {
            let (data, b) = (self.run.data, self.run.cfg.train.batch_size);
            self.last_val =
                Some(crate::validate::validate(&self.trainer.model, data, &data.val_windows, b, &self.run.dist)?);
        }
        let vals: Vec<f64> = self.val.history.iter().map(|(_, v)| *v).collect();
        let judgement = match (&self.last_val, finished) {
            (Some((loss, _)), true) => Some(crate::judge::judge(*loss, self.run.data, self.run.cfg)?),
            _ => None,
        };
        let beats_zero = judgement.as_ref().is_none_or(|j| j.beats_zero);
        // A run with the linear path starts at the fit: its own start is no yardstick.
        let best = judgement.as_ref().and_then(|j| j.best_mse.map(|b| j.val_loss <= b));
        let against_baseline = self.run.cfg.model.linear_path.is_on() && best.is_some();
        let passed = |v: boldcast_core::accept::Verdict| match best {
            Some(b) if against_baseline => b && beats_zero,
            _ => v.passed && beats_zero,
        };
        let verdict = heldout_verdict(&vals).map(|v| boldcast_core::accept::Verdict { passed: passed(v), ..v });
        let report = TrainReport {
            steps,
            start_step: self.start,
            max_steps: self.run.cfg.train.max_steps,
            reason,
            val_history: self.val.history.clone(),
            best: self.val.best,
            verdict: if finished { verdict } else { None },
            against_baseline,
            judgement,
            last_val: self.last_val.clone(),
            floor: self.run.data.floor.clone(),
            red_flags: self.flags.clone(),
            out: self.run.out.clone(),
            data_timing: self.timing.clone(),
        };
        if finished && self.run.dist.is_root() {
            self.write_summary(&report)?;
        }
        self.notify(|o, _| o.on_end(&report));
        Ok(report)
    }

    fn end_flags(&mut self, reason: StopReason, steps: u64) -> Result<(), TrainError> {
        if !self.run.dist.is_root() {
            return Ok(());
        }
        if reason != StopReason::StopAfter {
            let flag = flags::best_at_start(self.val.best, self.val.history.len(), steps);
            self.raise(flag);
        }
        let norms = crate::log::read_grad_norms(self.trainer.logger.path())?;
        self.raise(flags::gradient_growth(&norms));
        let wd = self.run.cfg.train.weight_decay;
        let flag = flags::weight_decay_unused(wd, steps - self.start, self.decayed, steps);
        self.raise(flag);
        Ok(())
    }

    fn write_summary(&self, report: &TrainReport) -> Result<(), TrainError> {
        let summary = summary_json(report, self.run.cfg, self.run.data, &self.run.summary_extra);
        let sp = self.run.out.join("summary.json");
        let summary = boldcast_storage::made_by::stamp(&summary);
        let text = serde_json::to_string_pretty(&summary).expect("JSON serializes") + "\n";
        boldcast_storage::fsutil::write_atomic(&sp, text.as_bytes()).map_err(io_err(&sp))?;
        // Times differ from run to run, so they have a file of their own: summary.json stays
        // the same bits, but for its `made_by`, whether a run was interrupted or not.
        let t = &report.data_timing;
        let timing = json!({
            "steps": report.steps - report.start_step,
            "step_s": t.steps.as_secs_f64(),
            "data_wait_s": t.wait.as_secs_f64(),
            "data_wait_fraction": t.wait_fraction(),
            "median_step_s": t.median_step(),
            "note": "this invocation's training steps; the tokens of each next batch are made while a step runs",
        });
        let tp = self.run.out.join(TIMING);
        let text =
            serde_json::to_string_pretty(&boldcast_storage::made_by::stamp(&timing)).expect("JSON serializes") + "\n";
        Ok(boldcast_storage::fsutil::write_atomic(&tp, text.as_bytes()).map_err(io_err(&tp))?)
    }
}

/// A checkpoint belongs to this run: the same configuration, data and adjacency.
fn check_resume(l: &Loaded, hash: &str, data: &TrainData, bpe: u64) -> Result<(), TrainError> {
    let bad = |reason: String| TrainError::Resume { dir: l.dir.clone(), reason };
    if l.state.config_hash != hash {
        return Err(bad(format!(
            "the checkpoint's configuration (hash {}) differs from this run's ({hash})",
            l.state.config_hash
        )));
    }
    let n = data.train_windows.len();
    if l.state.train_windows != n as u64 || l.state.batches_per_epoch != bpe {
        return Err(bad(format!(
            "the checkpoint saw {} training windows ({} batches per epoch), the data now gives {n} ({bpe})",
            l.state.train_windows, l.state.batches_per_epoch
        )));
    }
    if l.adjacency != data.adjacency {
        return Err(bad("the adjacency of the checkpoint differs from the one of the data".into()));
    }
    match &l.state.data {
        Some(id) => id.differs_from(&data.identity).map_or(Ok(()), |why| Err(bad(why))),
        None => Ok(()),
    }
}

/// Opens the output directory of `run` on rank 0, locked: created for a fresh run
/// ([`crate::run_dir::create_fresh`]), else opened with its leftovers removed; a run continued
/// without a checkpoint must be the one of the directory's `config.resolved.toml`.
fn open_dir(run: &Run<'_>, config_text: &str) -> Result<crate::run_dir::RunDirLock, TrainError> {
    match &run.resume {
        None => crate::run_dir::create_fresh(&run.out, run.cfg),
        Some(checkpoint) => {
            let lock = crate::run_dir::open_existing(&run.out)?;
            if checkpoint.is_none() && stored_config_text(&crate::run_dir::read_resolved(&run.out)?) != config_text {
                return Err(TrainError::Resume {
                    dir: run.out.clone(),
                    reason: format!("its {} is not this run's configuration", crate::run_dir::RESOLVED),
                });
            }
            Ok(lock)
        }
    }
}

/// Loads a checkpoint's weights and moments. The moments go where the backend keeps them: on
/// its device when it holds its own optimizer state (the host Adam then only counts steps),
/// else in the host Adam.
fn restore<M: Model<f32>>(model: &mut M, adam: &mut Adam<f32>, l: &Loaded) -> Result<(), TrainError> {
    model.load_state(&l.params)?;
    if model.optimizer_state().is_some() {
        model.restore_optimizer_state(l.state.optimizer_t, &l.moments)?;
        adam.restore(l.state.optimizer_t, Vec::new());
    } else {
        adam.restore(l.state.optimizer_t, l.moments.clone());
    }
    Ok(())
}

/// The path of a run's log.
pub fn log_path(out: &Path) -> PathBuf {
    out.join("loss_log.jsonl")
}

#[cfg(test)]
mod tests {
    use super::DataTiming;
    use std::time::Duration;

    #[test]
    fn the_median_step_is_the_middle_time_and_ignores_one_stall() {
        let mut t = DataTiming::default();
        assert_eq!(t.median_step(), None);
        for ms in [30, 10, 5000, 20] {
            t.add(Duration::from_millis(1), Duration::from_millis(ms));
        }
        assert!((t.median_step().unwrap() - 0.025).abs() < 1e-6, "{:?}", t.median_step());
        t.add(Duration::ZERO, Duration::from_millis(15));
        assert!((t.median_step().unwrap() - 0.020).abs() < 1e-6);
        assert_eq!((t.steps, t.wait, t.per_step.len()), (Duration::from_millis(5075), Duration::from_millis(4), 5));
    }
}
