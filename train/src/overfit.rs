//! The overfit check: one fixed batch of 4 windows, trained until the loss drops; the batch
//! ([`overfit_data`]), the loop ([`train_overfit`]), the verdict and the files it writes
//! (`loss_log.jsonl`, `summary.json`), for any [`Model<f32>`].
//!
//! Exactly as the training-loop decisions ask: 4 subjects x 1 run x 1 window (windows at
//! stride `window + 10000`, so one per run), batch 4, no shuffle, the same batch every step;
//! the training optimizer with `weight_decay = 0`, a constant learning rate (`overfit.lr`),
//! clipping at `train.grad_clip_norm`; `overfit.max_steps` steps. Every step appends
//! `{"step","loss","lr","grad_norm"}` to `<out>/loss_log.jsonl`, flushed per line, and goes to
//! the observers' [`Observer::on_step`]. At the end: the verdict
//! `mean(last 50) <= 0.7 * mean(first 50)` ([`boldcast_core::accept::overfit_verdict`]) and
//! `<out>/summary.json` ([`OverfitReport::write_summary`], with the caller's extra fields: the
//! CLI adds its figure's name and legend). [`run_overfit`] does both.

use crate::config::RunConfig;
use crate::error::TrainError;
use crate::log::RunLog;
use crate::observer::{Observer, RunStart};
use boldcast_core::accept::{overfit_verdict, Verdict};
use boldcast_core::{Adam, Adjacency, Model, OptimConfig, ScheduleConfig, Tokens, Trainer};
use boldcast_data::{Dataset, WindowSpec};
use boldcast_fixtures::{circle_centroids, Ar1Spec, Layout};
use boldcast_storage::fsutil::write_atomic;
use boldcast_storage::io_err;
use serde_json::json;
use std::path::PathBuf;

/// Windows in the overfit batch.
pub const OVERFIT_WINDOWS: usize = 4;
/// Added to the window to get the stride, so each run gives one window.
pub const STRIDE_GAP: usize = 10_000;

/// A loss floor to print beside the final loss.
#[derive(Clone, Debug, PartialEq)]
pub struct FloorRef {
    /// The floor.
    pub value: f64,
    /// `"exact AR(1) floor"` or `"empirical single-lag floor"`.
    pub kind: String,
}

/// The batch to overfit and what goes with it.
#[derive(Clone, Debug)]
pub struct OverfitData {
    /// Tokens `(4, T, P, D)`.
    pub batch: Tokens<f32>,
    /// The adjacency for `model.k_neighbors` (None for k = 0).
    pub adjacency: Option<Adjacency>,
    /// The floor of the data.
    pub floor: FloorRef,
    /// Where the batch came from, in words.
    pub source: String,
    /// Notes for the user (ignored files, zero-variance parcels).
    pub notes: Vec<String>,
}

/// The dataset of the overfit check, its floor and its source in words.
fn overfit_dataset(cfg: &RunConfig, spec: &WindowSpec) -> Result<(Dataset, FloorRef, String), TrainError> {
    let h = &cfg.model.horizons;
    if let Some(dir) = &cfg.data.dir {
        let ds = Dataset::load(dir)?;
        let per = ds.empirical_floor_per_parcel(h, spec.d_in)?;
        let f = per.iter().sum::<f64>() / per.len() as f64;
        let source = format!("{} ({} runs, {} parcels)", dir.display(), ds.runs.len(), ds.parcels);
        return Ok((ds, FloorRef { value: f, kind: "empirical single-lag floor".into() }, source));
    }
    let s = &cfg.data.synthetic;
    let layout = Layout { subjects: OVERFIT_WINDOWS, runs: 1, trs: spec.window, parcels: s.parcels, seed: s.seed };
    let fx = Ar1Spec::new(layout, s.rho);
    let runs = fx.generate()?;
    let f = fx.floor(h, spec.d_in)?.overall;
    let ds = Dataset::from_synth(&runs, Some(circle_centroids(s.parcels)))?;
    let source = format!("synthetic AR(1), rho {}, {} parcels, seed {}", s.rho, s.parcels, s.seed);
    Ok((ds, FloorRef { value: f, kind: "exact AR(1) floor".into() }, source))
}

/// The overfit batch of a configuration: the 4 runs of `data.dir`, or without it the synthetic
/// AR(1) fixture (4 subjects, 1 run of `window` TRs, `data.synthetic.parcels`, `rho` and
/// `seed`), whose parcels lie on a circle so the adjacency is the ring.
///
/// First, [`RunConfig::check_memory`] of the check's own sizes (4 subjects x 1 run of one
/// window, one batch of 4): a model or batch that would not fit in the machine's memory is
/// refused before anything is generated or read (for `data.dir`, again once it is read).
pub fn overfit_data(cfg: &RunConfig) -> Result<OverfitData, TrainError> {
    let mut sizes = cfg.clone();
    sizes.data.synthetic.subjects = OVERFIT_WINDOWS;
    sizes.data.synthetic.runs = 1;
    sizes.data.synthetic.trs = cfg.window.window;
    sizes.train.batch_size = OVERFIT_WINDOWS;
    sizes.check_memory()?;
    let spec = WindowSpec { window: cfg.window.window, stride: cfg.window.window + STRIDE_GAP, d_in: cfg.model.d_in };
    let (ds, floor, source) = overfit_dataset(cfg, &spec)?;
    if cfg.data.dir.is_some() {
        sizes.check_memory_of(&ds, None)?;
    }
    let windows = ds.windows(&spec)?;
    if windows.len() != OVERFIT_WINDOWS {
        return Err(TrainError::OverfitWindows { window: spec.window, data: source, windows: windows.len() });
    }
    let batch = ds.tokens::<f32>(&windows, &spec)?;
    cfg.model.check_tokens(&batch.shape())?;
    let all: Vec<usize> = (0..ds.runs.len()).collect();
    let adjacency = ds.adjacency(cfg.model.k_neighbors, &all)?;
    let notes = ds.notes();
    Ok(OverfitData { batch, adjacency, floor, source, notes })
}

/// How to run the overfit loop.
#[derive(Clone, Debug)]
pub struct OverfitOptions {
    /// Output directory (created).
    pub out: PathBuf,
    /// Steps.
    pub max_steps: u64,
    /// The optimizer (weight decay 0 for the overfit check).
    pub optim: OptimConfig,
    /// The schedule (constant for the overfit check).
    pub schedule: ScheduleConfig,
    /// Global-norm clipping.
    pub max_norm: Option<f64>,
    /// The floor of the data, for the report and `summary.json`.
    pub floor: Option<FloorRef>,
    /// Extra fields for `summary.json` from [`run_overfit`] (preset, data source), in order.
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl OverfitOptions {
    /// The overfit options of a resolved configuration.
    pub fn from_config(cfg: &RunConfig, out: PathBuf, floor: Option<FloorRef>) -> Self {
        Self {
            out,
            max_steps: cfg.overfit.max_steps,
            optim: cfg.overfit_optim_config(),
            schedule: cfg.overfit_schedule_config(),
            max_norm: cfg.max_norm(),
            floor,
            extra: serde_json::Map::new(),
        }
    }
}

/// The outcome of an overfit run.
#[derive(Clone, Debug)]
pub struct OverfitReport {
    /// Loss per step (at least one).
    pub losses: Vec<f64>,
    /// Learning rate per step (the schedule's, as each step used it).
    pub lrs: Vec<f64>,
    /// The windowed-mean verdict.
    pub verdict: Verdict,
    /// The floor of the data.
    pub floor: Option<FloorRef>,
    /// The output directory.
    pub out: PathBuf,
}

impl OverfitReport {
    /// The loss of the last step.
    pub fn final_loss(&self) -> f64 {
        self.losses.last().copied().unwrap_or(f64::NAN)
    }

    /// The verdict's threshold, `0.7 * mean(first 50)`.
    pub fn threshold(&self) -> f64 {
        self.verdict.ratio * self.verdict.first
    }

    /// The content of `summary.json`: the verdict's numbers, then `extra` in its order.
    pub fn summary_json(&self, extra: &serde_json::Map<String, serde_json::Value>) -> serde_json::Value {
        let v = &self.verdict;
        let mut summary = json!({
            "command": "overfit",
            "steps": self.losses.len(),
            "rule": "mean(loss[-50:]) <= 0.7 * mean(loss[:50])",
            "mean_first_50": v.first,
            "mean_last_50": v.last,
            "ratio": v.ratio,
            "threshold": self.threshold(),
            "passed": v.passed,
            "final_loss": self.final_loss(),
            "floor": self.floor.as_ref().map(|f| json!({"value": f.value, "kind": f.kind})),
            "loss_log": "loss_log.jsonl",
        });
        for (k, v) in extra {
            summary[k] = v.clone();
        }
        summary
    }

    /// Writes [`OverfitReport::summary_json`] to `<out>/summary.json` (pretty, atomically).
    pub fn write_summary(&self, extra: &serde_json::Map<String, serde_json::Value>) -> Result<(), TrainError> {
        let sp = self.out.join("summary.json");
        let summary = boldcast_storage::made_by::stamp(&self.summary_json(extra));
        let text = serde_json::to_string_pretty(&summary).expect("JSON serializes") + "\n";
        Ok(write_atomic(&sp, text.as_bytes()).map_err(io_err(&sp))?)
    }
}

/// Trains `model` on `batch` for `opts.max_steps` steps, writing `<out>/loss_log.jsonl` and
/// reporting each step to `observers` (after [`Observer::on_start`]); returns the losses and
/// the verdict. Writes no summary: see [`run_overfit`]. The caller takes the directory first
/// ([`crate::run_dir::start`] with [`crate::run_dir::RunKind::Overfit`]: locked, and only a
/// new, empty or earlier overfit run's one).
pub fn train_overfit<M: Model<f32>>(
    model: M,
    batch: &Tokens<f32>,
    opts: &OverfitOptions,
    observers: &mut [&mut dyn Observer],
) -> Result<OverfitReport, TrainError> {
    std::fs::create_dir_all(&opts.out).map_err(io_err(&opts.out))?;
    let logger = RunLog::create(&opts.out.join("loss_log.jsonl"))?;
    let mut trainer =
        Trainer::new(model, Adam::<f32>::new(opts.optim.clone())?, opts.schedule.clone(), logger, opts.max_norm);
    let start = RunStart { step: 0, max_steps: opts.max_steps, out: opts.out.clone(), resumed: false };
    observers.iter_mut().for_each(|o| o.on_start(&start));
    let mut lrs = Vec::new();
    for _ in 0..opts.max_steps {
        let rec = trainer.step(batch)?;
        lrs.push(rec.lr);
        observers.iter_mut().for_each(|o| o.on_step(&rec));
    }
    let losses = std::mem::take(&mut trainer.logger.losses);
    let verdict = overfit_verdict(&losses).ok_or(TrainError::OverfitNoStep)?;
    Ok(OverfitReport { losses, lrs, verdict, floor: opts.floor.clone(), out: opts.out.clone() })
}

/// The whole overfit check: [`train_overfit`], then `summary.json` with `opts.extra`.
pub fn run_overfit<M: Model<f32>>(
    model: M,
    batch: &Tokens<f32>,
    opts: &OverfitOptions,
    observers: &mut [&mut dyn Observer],
) -> Result<OverfitReport, TrainError> {
    let report = train_overfit(model, batch, opts, observers)?;
    report.write_summary(&opts.extra)?;
    Ok(report)
}

/// An overfit check ready to run, settled from a resolved configuration before anything is
/// written: the output directory (`train.out`, else `runs/overfit-<preset>`; new, empty or an
/// earlier overfit run's, [`crate::run_dir::check_start`]), the batch ([`overfit_data`]) and
/// the options, whose `extra` a caller may extend before [`OverfitPlan::run`].
pub struct OverfitPlan {
    /// The configuration.
    pub cfg: RunConfig,
    /// The preset's name (empty without one).
    pub preset: String,
    /// The batch, its floor and adjacency.
    pub data: OverfitData,
    /// How the loop runs and what `summary.json` gets (preset and data source already).
    pub opts: OverfitOptions,
}

impl OverfitPlan {
    /// Plans the check of `cfg`.
    pub fn new(cfg: RunConfig) -> Result<Self, TrainError> {
        let preset = cfg.preset.clone().unwrap_or_default();
        let out = cfg.train.out.clone().unwrap_or_else(|| PathBuf::from(format!("runs/overfit-{preset}")));
        crate::run_dir::check_start(&out, crate::run_dir::RunKind::Overfit)?;
        let data = overfit_data(&cfg)?;
        let mut opts = OverfitOptions::from_config(&cfg, out, Some(data.floor.clone()));
        opts.extra.insert("preset".into(), json!(preset));
        opts.extra.insert("data".into(), json!(data.source));
        Ok(Self { cfg, preset, data, opts })
    }

    /// The two lines before the first step: the model and the batch, the loop.
    pub fn preamble_lines(&self, model: &boldcast_core::ModelConfig) -> [String; 2] {
        let s = self.data.batch.shape();
        let (cfg, o) = (&self.cfg, &self.opts);
        [
            format!(
                "overfit: preset {}, {} parameters, batch (B {}, T {}, P {}, D {}) from {}",
                self.preset,
                model.n_params(),
                s.batch,
                s.time,
                s.parcels,
                s.d_in,
                self.data.source
            ),
            format!(
                "overfit: {} steps, constant lr {}, weight decay 0 (no tensor decays), clip {}, log {}",
                cfg.overfit.max_steps,
                cfg.overfit.lr,
                cfg.max_norm().map_or("off".to_string(), |m| m.to_string()),
                o.out.join("loss_log.jsonl").display()
            ),
        ]
    }

    /// Takes the output directory (locked while the check runs, with `config.resolved.toml`,
    /// [`crate::run_dir::start`]) and runs the whole check ([`run_overfit`]).
    pub fn run<M: Model<f32>>(
        self,
        model: M,
        observers: &mut [&mut dyn Observer],
    ) -> Result<OverfitReport, TrainError> {
        let _lock = crate::run_dir::start(&self.opts.out, crate::run_dir::RunKind::Overfit, &self.cfg)?;
        run_overfit(model, &self.data.batch, &self.opts, observers)
    }
}

impl OverfitReport {
    /// The final loss beside the floor, and the verdict line.
    pub fn outcome_lines(&self) -> [String; 2] {
        let (final_loss, v) = (self.final_loss(), &self.verdict);
        let floor = self.floor.as_ref().map_or(String::new(), |f| format!("   {} {:.6}", f.kind, f.value));
        [
            format!("final loss {final_loss:.6}{floor}"),
            format!(
                "verdict: {}  mean(last 50) = {:.6} {} 0.7 * mean(first 50) = 0.7 * {:.6} = {:.6}",
                if v.passed { "PASS" } else { "FAIL" },
                v.last,
                if v.passed { "<=" } else { ">" },
                v.first,
                self.threshold()
            ),
        ]
    }
}
