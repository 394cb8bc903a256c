//! `bc-cli train`: a training run on subject-level train / held-out splits, with validation,
//! early stopping, best weights, checkpoints and resume (generic over [`Model<f32>`]).
//!
//! # The run
//!
//! - Data: `data.dir`, or without it the synthetic AR(1) fixture of `[data.synthetic]`
//!   generated in memory. The subjects are split by [`boldcast::data::split()`]; training windows come
//!   from the training runs, validation windows from the held-out runs, both at
//!   `window.stride`.
//! - Order: epoch `e` visits the training windows in the order [`epoch_order`]`(n, seed, e)`,
//!   a pure function of `(train.seed, e)`, in `floor(n / batch_size)` batches (the remainder
//!   is left out of that epoch). Step `s` is batch `s % bpe` of epoch `s / bpe`, so a resume
//!   needs only the step.
//! - Steps: [`Trainer`] (MODEL.md "one step") with AdamW, warm-up + cosine over
//!   `train.max_steps`, clipping at `grad_clip_norm`; every step appends
//!   `{"step","loss","lr","grad_norm"}` (0-based `step`) to `loss_log.jsonl`.
//! - Validation after `k` steps when `k = 0`, `k % val_every = 0` or `k = max_steps`: the mean
//!   loss and per-horizon loss over every held-out window, with the floor and
//!   `val_over_train = val_loss / mean(training losses since the previous validation)`, as
//!   `{"step": k, "val_loss", "val_per_horizon", "floor", "floor_per_horizon",
//!   "val_over_train", "best_val_loss", "bad_validations"}` and a line on stdout.
//! - Best weights: `best.safetensors` is rewritten whenever the validation loss is the lowest
//!   so far. Early stopping: after `patience` validations in a row that do not beat the last
//!   improvement by `min_delta` (0 disables).
//! - Checkpoints ([`crate::checkpointing`]) after `k` steps when `k % ckpt_every = 0` and
//!   whenever the run stops. `--stop-after N` stops cleanly after N steps of this invocation
//!   (the schedule still follows `max_steps`); `--resume DIR` continues from the newest
//!   checkpoint and truncates `loss_log.jsonl` to its length, so the resumed run's weights and
//!   log equal an uninterrupted run's bit for bit on the CPU backend (same thread count).
//! - Data-parallel (under `mpirun` / `srun`, [`crate::distributed`]): `train.batch_size` is the
//!   global batch; rank `r` trains on its `batch_size / size` windows of each global batch,
//!   the loss and gradients are averaged over the ranks before clipping, validation is shared,
//!   and only rank 0 prints and writes. The log, checkpoints and resume are those of one
//!   process (the same loss series up to f32 reduction order).
//! - A non-finite loss or gradient norm stops the run with an error naming the step, after
//!   the line `{"event":"stopped","reason":"non_finite",...}`; the last checkpoint is untouched.
//! - At the end: `{"event":"finished","reason":"max_steps"|"early_stopping","step"}`, the
//!   held-out rule `mean(last 3 val) <= 0.7 * mean(first 3 val)`,
//!   `figures/loss_curves.png` and `summary.json`.

use crate::checkpointing::{self as ck, CheckpointData, Loaded, RngState, TrainState, ValState};
use crate::error::CliError;
use crate::runlog::JsonlLogger;
use boldcast::config::{RunConfig, DEFAULT_PRESET};
use boldcast::core::accept::{heldout_verdict, Verdict};
use boldcast::core::forecast::{build_forecast_targets, per_horizon_losses};
use boldcast::core::{Adam, Adjacency, DataParallel, Model, ModelConfig, Optimizer, Schedule, Trainer};
use boldcast::data::split::{shuffle_indices, Split};
use boldcast::data::{Dataset, WindowRef, WindowSpec};
use boldcast::fixtures::{circle_centroids, Ar1Spec, Layout};
use indicatif::{ProgressBar, ProgressStyle};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use std::path::{Path, PathBuf};

/// The data-order streams start here (stream `ORDER_STREAM_BASE + epoch`), away from stream
/// 0, which model initializations seeded with the same seed may use.
pub const ORDER_STREAM_BASE: u64 = 1 << 32;

/// The order of the `n` training windows in `epoch`: a Fisher-Yates shuffle
/// ([`shuffle_indices`]) drawn from `ChaCha8Rng::seed_from_u64(seed)` on stream
/// `ORDER_STREAM_BASE + epoch`; the identity when `shuffle` is false. It is the global order of
/// the epoch: a data-parallel run shards it.
pub fn epoch_order(n: usize, seed: u64, epoch: u64, shuffle: bool) -> (Vec<usize>, RngState) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(ORDER_STREAM_BASE + epoch);
    let order = if shuffle { shuffle_indices(n, &mut rng) } else { (0..n).collect() };
    let st = RngState {
        algorithm: "ChaCha8Rng".into(),
        seed,
        stream: ORDER_STREAM_BASE + epoch,
        word_pos: rng.get_word_pos().to_string(),
    };
    (order, st)
}

/// A loss floor, overall and per horizon.
#[derive(Clone, Debug, PartialEq)]
pub struct FloorInfo {
    /// Mean over horizons.
    pub overall: f64,
    /// Per horizon.
    pub per_horizon: Vec<f64>,
    /// `"exact AR(1) floor"` or `"empirical single-lag floor (held-out runs)"`.
    pub kind: String,
}

/// A dataset of a configuration: `data.dir` or the synthetic fixture.
pub struct LoadedData {
    /// The runs.
    pub ds: Dataset,
    /// The fixture, when synthetic.
    pub fixture: Option<Ar1Spec>,
    /// Where the data came from, in words.
    pub source: String,
    /// Notes for standard error.
    pub notes: Vec<String>,
}

/// Loads `data.dir`, or generates the synthetic AR(1) fixture of `[data.synthetic]` (parcels
/// on a circle, so the adjacency is the ring).
pub fn load_data(cfg: &RunConfig) -> Result<LoadedData, CliError> {
    match &cfg.data.dir {
        Some(dir) => {
            let ds = Dataset::load(dir)?;
            let mut notes: Vec<String> = ds.warnings.iter().map(|w| format!("warning: {w}")).collect();
            if !ds.ignored.is_empty() {
                let names: Vec<String> = ds.ignored.iter().map(|p| p.display().to_string()).collect();
                notes.push(format!("note: ignored {} file(s) not named like runs: {}", names.len(), names.join(", ")));
            }
            let source = format!("{} ({} runs, {} parcels)", dir.display(), ds.runs.len(), ds.parcels);
            Ok(LoadedData { ds, fixture: None, source, notes })
        }
        None => {
            let s = &cfg.data.synthetic;
            let layout = Layout { subjects: s.subjects, runs: s.runs, trs: s.trs, parcels: s.parcels, seed: s.seed };
            let fx = Ar1Spec::new(layout, s.rho);
            let runs = fx.generate()?;
            let ds = Dataset::from_synth(&runs, Some(circle_centroids(s.parcels)))?;
            let source = format!(
                "synthetic AR(1), rho {}, {} subjects x {} runs x {} TRs, {} parcels, seed {}",
                s.rho, s.subjects, s.runs, s.trs, s.parcels, s.seed
            );
            Ok(LoadedData { ds, fixture: Some(fx), source, notes: Vec::new() })
        }
    }
}

/// The empirical single-lag floor of the runs `runs`, per horizon.
pub fn empirical_floor(ds: &Dataset, runs: &[usize], horizons: &[usize], d_in: usize) -> Result<FloorInfo, CliError> {
    let all = ds.series();
    let series: Vec<Vec<Vec<f64>>> = runs.iter().map(|&r| all[r].clone()).collect();
    let mut per = Vec::with_capacity(horizons.len());
    for &h in horizons {
        let pp = boldcast::core::floor::empirical_floor_per_parcel(&series, &[h], d_in)?;
        per.push(pp.iter().sum::<f64>() / pp.len() as f64);
    }
    let overall = per.iter().sum::<f64>() / per.len() as f64;
    Ok(FloorInfo { overall, per_horizon: per, kind: "empirical single-lag floor (held-out runs)".into() })
}

/// Everything a training run needs from the data.
pub struct TrainData {
    /// The dataset.
    pub ds: Dataset,
    /// Windows.
    pub spec: WindowSpec,
    /// The subject split.
    pub split: Split,
    /// Training windows (the runs of the training subjects).
    pub train_windows: Vec<WindowRef>,
    /// Validation windows (the held-out runs).
    pub val_windows: Vec<WindowRef>,
    /// The adjacency for `model.k_neighbors` (from the training runs).
    pub adjacency: Option<Adjacency>,
    /// The floor beside the validation loss: exact for the fixture, else empirical on the
    /// held-out runs.
    pub floor: FloorInfo,
    /// Where the data came from.
    pub source: String,
    /// Notes for standard error.
    pub notes: Vec<String>,
}

/// Loads and splits the data of a configuration.
pub fn train_data(cfg: &RunConfig) -> Result<TrainData, CliError> {
    let LoadedData { ds, fixture, source, notes } = load_data(cfg)?;
    let spec = WindowSpec { window: cfg.window.window, stride: cfg.window.stride, d_in: cfg.model.d_in };
    let split = boldcast::data::split(&ds, &cfg.data, cfg.train.seed)?;
    let train_windows = ds.windows_of(&spec, &split.train_runs)?;
    let val_windows = ds.windows_of(&spec, &split.heldout_runs)?;
    let h = &cfg.model.horizons;
    let floor = match &fixture {
        Some(fx) => {
            let f = fx.floor(h, spec.d_in)?;
            FloorInfo { overall: f.overall, per_horizon: f.per_horizon, kind: "exact AR(1) floor".into() }
        }
        None => empirical_floor(&ds, &split.heldout_runs, h, spec.d_in)?,
    };
    let adjacency = ds.adjacency(cfg.model.k_neighbors, &split.train_runs)?;
    Ok(TrainData { ds, spec, split, train_windows, val_windows, adjacency, floor, source, notes })
}

/// Mean loss and per-horizon loss of `model` over `windows`, in batches of `batch`.
pub fn validate<M: Model<f32>>(
    model: &M,
    data: &TrainData,
    windows: &[WindowRef],
    batch: usize,
) -> Result<(f64, Vec<f64>), CliError> {
    let horizons = model.config().horizons.clone();
    let mut sums = vec![0.0f64; horizons.len()];
    for chunk in windows.chunks(batch.max(1)) {
        let tokens = data.ds.tokens::<f32>(chunk, &data.spec)?;
        let pred = model.forward(&tokens)?;
        let target = build_forecast_targets(&tokens, &horizons)?;
        let per = per_horizon_losses(&pred, &target)?;
        for (s, p) in sums.iter_mut().zip(per) {
            *s += p * chunk.len() as f64;
        }
    }
    let n = windows.len().max(1) as f64;
    let per: Vec<f64> = sums.into_iter().map(|s| s / n).collect();
    let mean = per.iter().sum::<f64>() / per.len() as f64;
    Ok((mean, per))
}

/// A validation line of `loss_log.jsonl` (fields in this order).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ValRecord {
    /// Optimizer steps done before this validation.
    pub step: u64,
    /// Mean loss over the held-out windows (the mean of the per-horizon losses).
    pub val_loss: f64,
    /// Loss per horizon.
    pub val_per_horizon: Vec<f64>,
    /// The floor (exact for the fixture, else empirical on the held-out runs).
    pub floor: f64,
    /// The floor per horizon.
    pub floor_per_horizon: Vec<f64>,
    /// `val_loss / train_loss`, the overfitting signal (`null` at step 0).
    pub val_over_train: Option<f64>,
    /// Mean training loss since the previous validation (`null` at step 0).
    pub train_loss: Option<f64>,
    /// The best validation loss so far (this one included).
    pub best_val_loss: f64,
    /// Its step.
    pub best_step: u64,
    /// Validations in a row without an improvement of `min_delta`.
    pub bad_validations: u64,
}

/// Why a run ended without an error.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// `train.max_steps` reached.
    MaxSteps,
    /// Early stopping (`patience` validations without improvement).
    EarlyStopping,
    /// `--stop-after` reached: the run can be resumed.
    StopAfter,
}

impl StopReason {
    /// The word in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::MaxSteps => "max_steps",
            StopReason::EarlyStopping => "early_stopping",
            StopReason::StopAfter => "stop_after",
        }
    }
}

/// The outcome of [`run_training`].
#[derive(Clone, Debug)]
pub struct TrainReport {
    /// Steps done (in total, across resumes).
    pub steps: u64,
    /// Why it ended.
    pub reason: StopReason,
    /// `(step, val_loss)` of every validation.
    pub val_history: Vec<(u64, f64)>,
    /// The best validation `(step, loss)`.
    pub best: Option<(u64, f64)>,
    /// The held-out verdict (when the run finished).
    pub verdict: Option<Verdict>,
    /// The last validation `(loss, per horizon)`.
    pub last_val: Option<(f64, Vec<f64>)>,
    /// The floor.
    pub floor: FloorInfo,
    /// The output directory.
    pub out: PathBuf,
}

/// How to run: the output directory, the checkpoint to resume from, and `--stop-after`.
#[derive(Debug, Default)]
pub struct RunControl {
    /// Output directory.
    pub out: PathBuf,
    /// Stop cleanly after this many steps of this invocation.
    pub stop_after: Option<u64>,
    /// Show a progress bar.
    pub progress: bool,
    /// The ranks of a data-parallel run (one by default).
    pub dist: crate::distributed::Dist,
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Trains `model` (already holding the checkpoint's weights when `resume` is given) on `data`
/// as `cfg` says, writing into `ctl.out`. See the module documentation.
pub fn run_training<M: DataParallel<f32>>(
    mut model: M,
    data: &TrainData,
    cfg: &RunConfig,
    ctl: &RunControl,
    resume: Option<Loaded>,
) -> Result<TrainReport, CliError> {
    let t = &cfg.train;
    let out = &ctl.out;
    let b = t.batch_size;
    let dist = &ctl.dist;
    boldcast::core::collective::shard_range(b, dist.rank(), dist.size())?;
    let n = data.train_windows.len();
    let bpe = (n / b) as u64;
    if bpe == 0 {
        return Err(CliError::Msg(format!(
            "train.batch_size = {b}: the training subjects give only {n} windows of {} TRs at stride {}",
            data.spec.window, data.spec.stride
        )));
    }
    if data.val_windows.is_empty() {
        return Err(CliError::Msg("the held-out subjects give no validation window".into()));
    }
    // Stored without `train.out`: a run directory can move, and two runs differing only in
    // where they write hold byte-identical checkpoints.
    let config_text =
        RunConfig { train: boldcast::config::TrainConfig { out: None, ..cfg.train.clone() }, ..cfg.clone() }.to_toml();
    let hash = ck::config_hash(&config_text);
    let specs = model.config().param_specs();
    let log_path = out.join("loss_log.jsonl");
    if dist.is_root() {
        std::fs::create_dir_all(out.join("figures")).map_err(CliError::io(out))?;
    }
    let bar = (ctl.progress && dist.is_root()).then(|| {
        let pb = ProgressBar::new(t.max_steps);
        if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} steps  {elapsed} (eta {eta})") {
            pb.set_style(style);
        }
        pb
    });
    let mut adam = Adam::<f32>::new(cfg.optim_config())?;
    let finished = resume.as_ref().and_then(|l| l.state.finished.clone());
    let (logger, mut val, start) = match resume {
        Some(l) => {
            if l.state.config_hash != hash {
                return Err(CliError::Msg(format!(
                    "{}: the checkpoint's configuration (hash {}) differs from this run's ({hash})",
                    l.dir.display(),
                    l.state.config_hash
                )));
            }
            if l.state.train_windows != n as u64 || l.state.batches_per_epoch != bpe {
                return Err(CliError::Msg(format!(
                    "{}: the checkpoint saw {} training windows ({} batches per epoch), the data now gives {n} ({bpe})",
                    l.dir.display(),
                    l.state.train_windows,
                    l.state.batches_per_epoch
                )));
            }
            if l.adjacency != data.adjacency {
                return Err(CliError::Msg(format!(
                    "{}: the adjacency of the checkpoint differs from the one of the data",
                    l.dir.display()
                )));
            }
            model.load_state(&l.params)?;
            // The moments go where the backend keeps them: on its device when it holds its own
            // optimizer state (the host Adam then only counts steps), else in the host Adam.
            if model.optimizer_state().is_some() {
                model.restore_optimizer_state(l.state.optimizer_t, &l.moments)?;
                adam.restore(l.state.optimizer_t, Vec::new());
            } else {
                adam.restore(l.state.optimizer_t, l.moments);
            }
            if let Some(pb) = &bar {
                pb.set_position(l.state.step);
            }
            let logger = if dist.is_root() {
                JsonlLogger::open_at(&log_path, l.state.log_bytes, t.log_every, bar.clone())?
            } else {
                JsonlLogger::silent(&log_path)
            };
            (logger, l.state.val, l.state.step)
        }
        None if dist.is_root() => (JsonlLogger::create(&log_path, t.log_every, bar.clone())?, ValState::default(), 0),
        None => (JsonlLogger::silent(&log_path), ValState::default(), 0),
    };
    dist.check_same_params(&model, "the parameters at the start")?;
    let mut trainer =
        Trainer::new(model, adam, cfg.schedule_config(), logger, cfg.max_norm()).with_collective(dist.0.clone());
    trainer.set_step_index(start);
    let best_path = out.join("best.safetensors");
    let mut last_val: Option<(f64, Vec<f64>)> = None;
    let mut last_ckpt: Option<PathBuf> = ck::latest_checkpoint(out)?;

    // One validation after `k` steps: log, best weights, patience. Returns true to stop early.
    let validation = |trainer: &mut Trainer<f32, M, Adam<f32>, _, JsonlLogger>,
                      val: &mut ValState,
                      k: u64|
     -> Result<(bool, (f64, Vec<f64>)), CliError> {
        let (loss, per) = crate::distributed::validate(&trainer.model, data, &data.val_windows, b, dist)?;
        if !loss.is_finite() {
            trainer.logger.write_value(&json!({
                "event": "stopped", "reason": "non_finite", "step": k, "what": "validation loss",
                "value": loss.to_string(),
            }))?;
            return Err(CliError::Msg(format!("non-finite validation loss ({loss}) after step {k}")));
        }
        let train_mean = mean(&val.train_losses_since_val);
        let ratio = train_mean.map(|m| loss / m);
        val.train_losses_since_val.clear();
        val.history.push((k, loss));
        if val.best.is_none_or(|(_, bv)| loss < bv) {
            val.best = Some((k, loss));
        }
        if val.best == Some((k, loss)) && dist.is_root() {
            let meta = ck::model_metadata(k, &config_text, data.adjacency.as_ref());
            let mut meta = meta;
            meta.insert("val_loss".into(), loss.to_string());
            boldcast::checkpoint::save_safetensors(&best_path, &trainer.model.state(), Some(meta))
                .map_err(|e| CliError::Msg(e.to_string()))?;
        }
        match val.patience_ref {
            Some(r) if loss > r - t.min_delta => val.bad_validations += 1,
            _ => {
                val.patience_ref = Some(loss);
                val.bad_validations = 0;
            }
        }
        let (bs, bv) = val.best.expect("set above");
        let rec = ValRecord {
            step: k,
            val_loss: loss,
            val_per_horizon: per.clone(),
            floor: data.floor.overall,
            floor_per_horizon: data.floor.per_horizon.clone(),
            val_over_train: ratio,
            train_loss: train_mean,
            best_val_loss: bv,
            best_step: bs,
            bad_validations: val.bad_validations,
        };
        trainer.logger.write_value(&rec)?;
        let hz: Vec<String> = cfg
            .model
            .horizons
            .iter()
            .zip(&per)
            .zip(&data.floor.per_horizon)
            .map(|((h, v), f)| format!("h{h} {v:.4}/{f:.4}"))
            .collect();
        trainer.logger.println(&format!(
            "val    {k:>6}  val_loss {loss:.6}  floor {:.6}  [{}]  val/train {}  best {bv:.6} @ {bs}{}",
            data.floor.overall,
            hz.join(", "),
            ratio.map_or("-".to_string(), |r| format!("{r:.3}")),
            if val.bad_validations > 0 && t.patience > 0 {
                format!("  (no improvement {}/{})", val.bad_validations, t.patience)
            } else {
                String::new()
            }
        ));
        Ok((t.patience > 0 && val.bad_validations >= t.patience, (loss, per)))
    };

    if start == 0 {
        let (_, lv) = validation(&mut trainer, &mut val, 0)?;
        last_val = Some(lv);
    }
    let mut order: Option<(u64, Vec<usize>, RngState)> = None;
    let reason = if let Some(r) = finished {
        // Killed after its final checkpoint but before the summary: only the end is redone.
        match r.as_str() {
            "max_steps" => StopReason::MaxSteps,
            "early_stopping" => StopReason::EarlyStopping,
            other => return Err(CliError::Msg(format!("the final checkpoint's reason `{other}` is unknown"))),
        }
    } else if start >= t.max_steps {
        return Err(CliError::Msg(format!("the run in {} already finished at step {start}", out.display())));
    } else {
        loop {
            let k = trainer.step_index();
            let (epoch, pos) = (k / bpe, k % bpe);
            if order.as_ref().is_none_or(|(e, _, _)| *e != epoch) {
                let (o, st) = epoch_order(n, t.seed, epoch, t.shuffle);
                order = Some((epoch, o, st));
            }
            let o = &order.as_ref().expect("set above").1;
            let mine = crate::distributed::rank_batch(o, pos as usize, b, dist)?;
            let batch: Vec<WindowRef> = mine.iter().map(|&i| data.train_windows[i]).collect();
            let tokens = data.ds.tokens::<f32>(&batch, &data.spec)?;
            match trainer.step(&tokens) {
                Ok(rec) => val.train_losses_since_val.push(rec.loss),
                Err(boldcast::core::Error::NonFinite { step, what, value }) => {
                    trainer.logger.write_value(&json!({
                        "event": "stopped", "reason": "non_finite", "step": step, "what": what,
                        "value": value.to_string(),
                        "last_checkpoint": last_ckpt.as_ref().map(|p| p.display().to_string()),
                    }))?;
                    if let Some(pb) = &bar {
                        pb.abandon();
                    }
                    return Err(CliError::Msg(format!(
                        "non-finite {what} ({value}) at step {step}: training stopped; the last good checkpoint is {}",
                        last_ckpt
                            .as_ref()
                            .map_or("none (no checkpoint was written yet)".to_string(), |p| p.display().to_string())
                    )));
                }
                Err(e) => return Err(e.into()),
            }
            let k = k + 1;
            let fin = k >= t.max_steps;
            let mut early = false;
            if k % t.val_every == 0 || fin {
                let (stop, lv) = validation(&mut trainer, &mut val, k)?;
                early = stop;
                last_val = Some(lv);
            }
            let reason = if fin {
                Some(StopReason::MaxSteps)
            } else if early {
                Some(StopReason::EarlyStopping)
            } else if ctl.stop_after.is_some_and(|s| k - start >= s) {
                Some(StopReason::StopAfter)
            } else {
                None
            };
            if k % t.ckpt_every == 0 || reason.is_some() {
                let params = trainer.model.state();
                // A checkpoint never holds non-finite weights: the last good one stays `latest`.
                if let Some(bad) = params.iter().find(|p| p.data.iter().any(|x| !x.is_finite())) {
                    trainer.logger.write_value(&json!({
                        "event": "stopped", "reason": "non_finite", "step": k, "what": "parameters",
                        "tensor": bad.name,
                        "last_checkpoint": last_ckpt.as_ref().map(|p| p.display().to_string()),
                    }))?;
                    return Err(CliError::Msg(format!(
                        "non-finite parameter `{}` after step {k}: training stopped; the last good checkpoint is {}",
                        bad.name,
                        last_ckpt.as_ref().map_or("none".to_string(), |p| p.display().to_string())
                    )));
                }
                trainer.logger.sync()?;
                let (ne, np) = (k / bpe, k % bpe);
                let rng = if order.as_ref().is_some_and(|(e, _, _)| *e == ne) {
                    order.as_ref().expect("checked").2.clone()
                } else {
                    epoch_order(n, t.seed, ne, t.shuffle).1
                };
                let state = TrainState {
                    format: ck::STATE_FORMAT.into(),
                    step: k,
                    max_steps: t.max_steps,
                    optimizer_t: trainer.optimizer.steps(),
                    next_lr: trainer.schedule.lr(k),
                    epoch: ne,
                    position_in_epoch: np,
                    batches_per_epoch: bpe,
                    train_windows: n as u64,
                    rng,
                    val: val.clone(),
                    log_bytes: trainer.logger.bytes(),
                    finished: reason.filter(|r| *r != StopReason::StopAfter).map(|r| r.as_str().to_string()),
                    config_hash: hash.clone(),
                    config: config_text.clone(),
                };
                let held = trainer.model.optimizer_state();
                let data_ck = CheckpointData {
                    params,
                    moments: held.as_ref().map_or(trainer.optimizer.moments(), |(_, m)| m.as_slice()),
                    specs: &specs,
                    adjacency: data.adjacency.as_ref(),
                    state: &state,
                };
                // The ranks must still hold the same weights (they took the same steps).
                dist.check_same_params(&trainer.model, &format!("the parameters after step {k}"))?;
                if dist.is_root() {
                    last_ckpt = Some(ck::write_checkpoint(out, &data_ck)?);
                }
            }
            if let Some(r) = reason {
                break r;
            }
        }
    };
    if let Some(pb) = &bar {
        pb.finish_and_clear();
    }
    let steps = trainer.step_index();
    let event = if reason == StopReason::StopAfter { "stopped" } else { "finished" };
    trainer.logger.write_value(&json!({"event": event, "reason": reason.as_str(), "step": steps}))?;
    let vals: Vec<f64> = val.history.iter().map(|(_, v)| *v).collect();
    let verdict = if reason == StopReason::StopAfter { None } else { heldout_verdict(&vals) };
    let report = TrainReport {
        steps,
        reason,
        val_history: val.history.clone(),
        best: val.best,
        verdict,
        last_val,
        floor: data.floor.clone(),
        out: out.clone(),
    };
    if reason == StopReason::StopAfter {
        if !dist.is_root() {
            return Ok(report);
        }
        println!(
            "stopped after {} step(s) of this invocation at step {steps} of {} (--stop-after); continue with \
             `bc-cli train --resume {}`",
            steps - start,
            t.max_steps,
            out.display()
        );
        return Ok(report);
    }
    let mut report = report;
    if report.last_val.is_none() {
        report.last_val = Some(crate::distributed::validate(&trainer.model, data, &data.val_windows, b, dist)?);
    }
    if dist.is_root() {
        finish(&report, cfg, data, &log_path)?;
    }
    Ok(report)
}

/// The end of a finished run: figure, summary and the printed verdict.
fn finish(r: &TrainReport, cfg: &RunConfig, data: &TrainData, log_path: &Path) -> Result<(), CliError> {
    let (train_curve, val_curve) = crate::runlog::read_curves(log_path)?;
    let fig = r.out.join("figures").join("loss_curves.png");
    crate::plot::loss_curves(&fig, &train_curve, &val_curve, Some(r.floor.overall))?;
    let v = r.verdict;
    let last = r.last_val.clone();
    let summary = json!({
        "command": "train",
        "preset": cfg.preset,
        "data": data.source,
        "split": {
            "how": data.split.how,
            "train_subjects": data.split.train_subjects,
            "heldout_subjects": data.split.heldout_subjects,
            "train_windows": data.train_windows.len(),
            "val_windows": data.val_windows.len(),
        },
        "parameters": cfg.model_config().n_params(),
        "decaying_tensors": cfg
            .model_config()
            .param_specs()
            .iter()
            .filter(|s| boldcast::core::optim::decays(&s.name, &s.shape))
            .map(|s| s.name.clone())
            .collect::<Vec<_>>(),
        "steps": r.steps,
        "max_steps": cfg.train.max_steps,
        "stop_reason": r.reason.as_str(),
        "final_val_loss": last.as_ref().map(|l| l.0),
        "final_val_per_horizon": last.as_ref().map(|l| l.1.clone()),
        "horizons": cfg.model.horizons,
        "floor": {"value": r.floor.overall, "per_horizon": r.floor.per_horizon, "kind": r.floor.kind},
        "final_over_floor": last.as_ref().map(|l| l.0 / r.floor.overall),
        "best": r.best.map(|(s, l)| json!({"step": s, "val_loss": l, "file": "best.safetensors"})),
        "validations": r.val_history.iter().map(|(s, l)| json!({"step": s, "val_loss": l})).collect::<Vec<_>>(),
        "rule": "mean(val[-3:]) <= 0.7 * mean(val[:3])",
        "mean_first_3": v.map(|v| v.first),
        "mean_last_3": v.map(|v| v.last),
        "threshold": v.map(|v| v.ratio * v.first),
        "passed": v.map(|v| v.passed),
        "loss_log": "loss_log.jsonl",
        "figure": "figures/loss_curves.png",
        "figure_legend": crate::plot::CURVES_LEGEND,
        "checkpoints": ck::CKPT_DIR,
    });
    let sp = r.out.join("summary.json");
    let text = serde_json::to_string_pretty(&summary).expect("JSON serializes") + "\n";
    crate::fsutil::write_atomic(&sp, text.as_bytes()).map_err(CliError::io(&sp))?;
    if let Some((l, _)) = &last {
        println!(
            "finished ({}) at step {}: val_loss {l:.6}, {} {:.6} (ratio {:.4}); best {}",
            r.reason.as_str(),
            r.steps,
            r.floor.kind,
            r.floor.overall,
            l / r.floor.overall,
            r.best.map_or("-".into(), |(s, b)| format!("{b:.6} at step {s} (best.safetensors)"))
        );
    }
    if let Some(v) = v {
        println!(
            "verdict: {}  mean(last 3 val) = {:.6} {} 0.7 * mean(first 3 val) = 0.7 * {:.6} = {:.6}",
            if v.passed { "PASS" } else { "FAIL" },
            v.last,
            if v.passed { "<=" } else { ">" },
            v.first,
            v.ratio * v.first
        );
    }
    Ok(())
}

/// How `train` was asked to run, beyond the configuration layers.
#[derive(Clone, Debug, Default)]
pub struct TrainRequest {
    /// `--resume DIR`.
    pub resume: Option<PathBuf>,
    /// `--stop-after N`.
    pub stop_after: Option<u64>,
    /// The ranks of a data-parallel run (one by default).
    pub dist: crate::distributed::Dist,
}

/// A train run whose configuration, output directory and checkpoint (with `--resume`) are
/// settled, before the model is built: [`PreparedTrain::backend`] says which backend builds it.
pub struct PreparedTrain {
    cfg: RunConfig,
    out: PathBuf,
    loaded: Option<Loaded>,
}

impl PreparedTrain {
    /// `train.backend` of the run (for `--resume`, the one stored in the checkpoint).
    pub fn backend(&self) -> &str {
        &self.cfg.train.backend
    }
}

/// `bc-cli train`: a fresh run from a resolved configuration (writes `config.resolved.toml`
/// into a new or empty output directory), or `--resume DIR` from its newest checkpoint with the
/// configuration stored there. `build(model config, adjacency, seed)` makes the model on the
/// backend `backend`, which must be the run's `train.backend`.
pub fn train_command<M, F>(
    cfg: Option<RunConfig>,
    req: &TrainRequest,
    backend: &str,
    build: F,
) -> Result<TrainReport, CliError>
where
    M: DataParallel<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast::core::Error>,
{
    train_prepared(prepare_train(cfg, req)?, req, backend, build)
}

/// The first half of [`train_command`]: reads the checkpoint of `--resume` (and its stored
/// configuration), or checks that a fresh run's output directory is new or empty.
pub fn prepare_train(cfg: Option<RunConfig>, req: &TrainRequest) -> Result<PreparedTrain, CliError> {
    let (cfg, out, loaded) = match &req.resume {
        Some(dir) => {
            let ckdir = ck::latest_checkpoint(dir)?.ok_or_else(|| {
                CliError::Msg(format!(
                    "--resume {}: no checkpoint in {}/{} (a run killed before its first checkpoint starts again in \
                     an empty directory)",
                    dir.display(),
                    dir.display(),
                    ck::CKPT_DIR
                ))
            })?;
            let sp = ckdir.join("state.json");
            let text = std::fs::read_to_string(&sp).map_err(CliError::io(&sp))?;
            let state: TrainState = serde_json::from_str(&text)
                .map_err(|e| CliError::Msg(format!("{}: not a training state: {e}", sp.display())))?;
            let cfg: RunConfig = toml::from_str(&state.config)
                .map_err(|e| CliError::Msg(format!("{}: the stored configuration: {e}", sp.display())))?;
            cfg.validate()?;
            if let (Some(r), true) = (&state.finished, dir.join("summary.json").is_file()) {
                return Err(CliError::Msg(format!(
                    "--resume {}: the run already finished ({r}) at step {}",
                    dir.display(),
                    state.step
                )));
            }
            let loaded = ck::load_checkpoint(&ckdir, &cfg.model_config().param_specs())?;
            if req.dist.is_root() {
                println!("resuming from {} (step {} of {})", ckdir.display(), state.step, state.max_steps);
            }
            (cfg, dir.clone(), Some(loaded))
        }
        None => {
            let cfg = cfg.ok_or_else(|| CliError::Msg("train: no configuration".into()))?;
            let preset = cfg.preset.clone().unwrap_or_else(|| DEFAULT_PRESET.into());
            let out = cfg.train.out.clone().unwrap_or_else(|| PathBuf::from(format!("runs/train-{preset}")));
            // Rank 0 alone checks and writes the output directory (the others would see its files).
            if req.dist.is_root()
                && out.exists()
                && std::fs::read_dir(&out).map_err(CliError::io(&out))?.next().is_some()
            {
                return Err(CliError::Msg(format!(
                    "output directory {} already exists and is not empty: choose another --out, or continue it \
                     with --resume {}",
                    out.display(),
                    out.display()
                )));
            }
            (cfg, out, None)
        }
    };
    Ok(PreparedTrain { cfg, out, loaded })
}

/// The second half of [`train_command`]: builds the model with `build` on `backend` and runs.
pub fn train_prepared<M, F>(
    prep: PreparedTrain,
    req: &TrainRequest,
    backend: &str,
    build: F,
) -> Result<TrainReport, CliError>
where
    M: DataParallel<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast::core::Error>,
{
    let PreparedTrain { cfg, out, loaded } = prep;
    if cfg.train.backend != backend {
        return Err(CliError::Msg(format!(
            "train.backend = {}, but the model would be built on the {backend} backend",
            cfg.train.backend
        )));
    }
    // An indivisible global batch is refused before anything is written.
    boldcast::core::collective::shard_range(cfg.train.batch_size, req.dist.rank(), req.dist.size())?;
    let data = train_data(&cfg)?;
    let root = req.dist.is_root();
    for n in data.notes.iter().filter(|_| root) {
        eprintln!("{n}");
    }
    let model = build(cfg.model_config(), data.adjacency.clone(), cfg.train.seed)?;
    if loaded.is_none() && root {
        cfg.write_resolved(&out)?;
    }
    let t = &cfg.train;
    let println = |msg: String| {
        if root {
            println!("{msg}");
        }
    };
    if req.dist.size() > 1 {
        println(format!(
            "train: data-parallel over {} ranks ({}): global batch {}, {} windows per rank",
            req.dist.size(),
            req.dist.0.name(),
            t.batch_size,
            t.batch_size / req.dist.size()
        ));
    }
    println(format!(
        "train: preset {}, {} parameters, data {}",
        cfg.preset.as_deref().unwrap_or("?"),
        model.config().n_params(),
        data.source
    ));
    println(format!(
        "train: split by {}: train {:?} ({} windows), held out {:?} ({} windows); window {} stride {}",
        data.split.how,
        data.split.train_subjects,
        data.train_windows.len(),
        data.split.heldout_subjects,
        data.val_windows.len(),
        data.spec.window,
        data.spec.stride
    ));
    let decays: Vec<String> = model
        .config()
        .param_specs()
        .iter()
        .filter(|s| boldcast::core::optim::decays(&s.name, &s.shape))
        .map(|s| s.name.clone())
        .collect();
    println(format!(
        "train: {:?} lr {} wd {} betas {:?}, {:?} schedule (warm-up {}, {} steps), clip {}, batch {}, val every {}, \
         patience {} (min_delta {}), checkpoint every {}; decaying tensors: {}",
        t.optimizer,
        t.lr,
        t.weight_decay,
        t.betas,
        t.schedule,
        t.warmup_steps,
        t.max_steps,
        cfg.max_norm().map_or("off".to_string(), |m| m.to_string()),
        t.batch_size,
        t.val_every,
        t.patience,
        t.min_delta,
        t.ckpt_every,
        decays.join(", ")
    ));
    let ctl = RunControl {
        out,
        stop_after: req.stop_after,
        progress: std::io::IsTerminal::is_terminal(&std::io::stdout()),
        dist: req.dist.clone(),
    };
    run_training(model, &data, &cfg, &ctl, loaded)
}

/// The configuration and request of `bc-cli train`'s flags: the preset / `--config` / flag
/// layers plus the split and loop flags, validated; `None` with `--resume` (the checkpoint's
/// configuration is used, and a configuration flag beside it is an error).
pub fn resolve_train_args(a: &crate::args::TrainArgs) -> Result<(Option<RunConfig>, TrainRequest), CliError> {
    let req = TrainRequest { resume: a.resume.clone(), stop_after: a.stop_after, ..TrainRequest::default() };
    if a.stop_after == Some(0) {
        return Err(CliError::Msg("--stop-after 0: must be at least 1".into()));
    }
    if a.resume.is_some() {
        if a.changes_config() {
            return Err(CliError::Msg(
                "--resume continues with the configuration stored in the checkpoint: give no other configuration \
                 flag (only --stop-after)"
                    .into(),
            ));
        }
        return Ok((None, req));
    }
    let mut cfg = RunConfig::resolve(&a.run.overrides(), DEFAULT_PRESET, boldcast::config::Purpose::Train)?;
    if let Some(s) = &a.subjects_train {
        cfg.data.subjects_train = boldcast::data::parse_subject_list(s)?;
    }
    if let Some(s) = &a.subjects_heldout {
        cfg.data.subjects_heldout = boldcast::data::parse_subject_list(s)?;
    }
    if let Some(f) = a.heldout_fraction {
        cfg.data.heldout_fraction = f;
    }
    if let Some(v) = a.val_every {
        cfg.train.val_every = v;
    }
    if let Some(v) = a.ckpt_every {
        cfg.train.ckpt_every = v;
    }
    if let Some(v) = a.patience {
        cfg.train.patience = v;
    }
    if let Some(v) = a.min_delta {
        cfg.train.min_delta = v;
    }
    if let Some(v) = a.batch_size {
        cfg.train.batch_size = v;
    }
    cfg.validate()?;
    Ok((Some(cfg), req))
}
