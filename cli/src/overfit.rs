//! The overfit check: one fixed batch of 4 windows, trained until the loss drops.
//!
//! Exactly as the training-loop decisions ask: 4 subjects x 1 run x 1 window (windows at
//! stride `window + 10000`, so one per run), batch 4, no shuffle, the same batch every step;
//! the training optimizer with `weight_decay = 0`, a constant learning rate (`overfit.lr`),
//! clipping at `train.grad_clip_norm`; `overfit.max_steps` steps. Every step appends
//! `{"step","loss","lr","grad_norm"}` to `<out>/loss_log.jsonl`, flushed per line. At the end:
//! `<out>/figures/overfit_curve.png`, `<out>/summary.json` and the verdict
//! `mean(last 50) <= 0.7 * mean(first 50)` ([`boldcast::core::accept::overfit_verdict`]).
//!
//! The model is any [`Model<f32>`]: [`run_overfit`] trains a model it is given, and
//! [`overfit_command`] builds one with the closure it is passed, so the backend is chosen in
//! one place (`main`).

use crate::args::OverfitArgs;
use crate::error::CliError;
use crate::presets::{Purpose, DEFAULT_PRESET};
use boldcast::core::accept::{overfit_verdict, Verdict};
use boldcast::core::{Adam, Adjacency, Model, ModelConfig, OptimConfig, ScheduleConfig, Tokens, Trainer};
use boldcast::data::{Dataset, WindowSpec};
use boldcast::fixtures::{circle_centroids, Ar1Spec, Layout};
use boldcast_train::config::RunConfig;
use boldcast_train::fsutil::write_atomic;
use boldcast_train::log::RunLog;
use serde_json::json;
use std::io::IsTerminal;
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
    /// Notes for standard error (ignored files, zero-variance parcels).
    pub notes: Vec<String>,
}

/// The overfit batch of a configuration: the 4 runs of `data.dir`, or without it the synthetic
/// AR(1) fixture (4 subjects, 1 run of `window` TRs, `data.synthetic.parcels`, `rho` and
/// `seed`), whose parcels lie on a circle so the adjacency is the ring.
pub fn overfit_data(cfg: &RunConfig) -> Result<OverfitData, CliError> {
    let spec = WindowSpec { window: cfg.window.window, stride: cfg.window.window + STRIDE_GAP, d_in: cfg.model.d_in };
    let h = &cfg.model.horizons;
    let (ds, floor, source) = match &cfg.data.dir {
        Some(dir) => {
            let ds = Dataset::load(dir)?;
            let per = ds.empirical_floor_per_parcel(h, spec.d_in)?;
            let f = per.iter().sum::<f64>() / per.len() as f64;
            let source = format!("{} ({} runs, {} parcels)", dir.display(), ds.runs.len(), ds.parcels);
            (ds, FloorRef { value: f, kind: "empirical single-lag floor".into() }, source)
        }
        None => {
            let s = &cfg.data.synthetic;
            let layout =
                Layout { subjects: OVERFIT_WINDOWS, runs: 1, trs: spec.window, parcels: s.parcels, seed: s.seed };
            let fx = Ar1Spec::new(layout, s.rho);
            let runs = fx.generate()?;
            let f = fx.floor(h, spec.d_in)?.overall;
            let ds = Dataset::from_synth(&runs, Some(circle_centroids(s.parcels)))?;
            let source = format!("synthetic AR(1), rho {}, {} parcels, seed {}", s.rho, s.parcels, s.seed);
            (ds, FloorRef { value: f, kind: "exact AR(1) floor".into() }, source)
        }
    };
    let windows = ds.windows(&spec)?;
    if windows.len() != OVERFIT_WINDOWS {
        return Err(CliError::Msg(format!(
            "overfit needs exactly {OVERFIT_WINDOWS} windows (4 subjects x 1 run x 1 window of {} TRs), but {} gives {} \
             (one per run): use a directory with exactly 4 runs",
            spec.window,
            source,
            windows.len()
        )));
    }
    let batch = ds.tokens::<f32>(&windows, &spec)?;
    cfg.model.check_tokens(&batch.shape())?;
    let all: Vec<usize> = (0..ds.runs.len()).collect();
    let adjacency = ds.adjacency(cfg.model.k_neighbors, &all)?;
    let mut notes: Vec<String> = ds.warnings.iter().map(|w| format!("warning: {w}")).collect();
    if !ds.ignored.is_empty() {
        let names: Vec<String> = ds.ignored.iter().map(|p| p.display().to_string()).collect();
        notes.push(format!("note: ignored {} file(s) not named like runs: {}", names.len(), names.join(", ")));
    }
    Ok(OverfitData { batch, adjacency, floor, source, notes })
}

/// How to run the overfit loop.
#[derive(Clone, Debug)]
pub struct OverfitOptions {
    /// Output directory (created).
    pub out: PathBuf,
    /// Steps.
    pub max_steps: u64,
    /// Print a line every this many steps.
    pub log_every: u64,
    /// The optimizer (weight decay 0 for the overfit check).
    pub optim: OptimConfig,
    /// The schedule (constant for the overfit check).
    pub schedule: ScheduleConfig,
    /// Global-norm clipping.
    pub max_norm: Option<f64>,
    /// The floor to print beside the final loss and draw.
    pub floor: Option<FloorRef>,
    /// Show a progress bar (only when standard output is a terminal).
    pub progress: bool,
    /// Extra fields for `summary.json` (preset, data source).
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl OverfitOptions {
    /// The overfit options of a resolved configuration.
    pub fn from_config(cfg: &RunConfig, out: PathBuf, floor: Option<FloorRef>) -> Self {
        Self {
            out,
            max_steps: cfg.overfit.max_steps,
            log_every: cfg.train.log_every,
            optim: cfg.overfit_optim_config(),
            schedule: cfg.overfit_schedule_config(),
            max_norm: cfg.max_norm(),
            floor,
            progress: std::io::stdout().is_terminal(),
            extra: serde_json::Map::new(),
        }
    }
}

/// The outcome of an overfit run.
#[derive(Clone, Debug)]
pub struct OverfitReport {
    /// Loss per step.
    pub losses: Vec<f64>,
    /// The windowed-mean verdict.
    pub verdict: Verdict,
    /// The floor printed beside the final loss.
    pub floor: Option<FloorRef>,
    /// The output directory.
    pub out: PathBuf,
}

/// Trains `model` on `batch` for `opts.max_steps` steps and writes the log, figure and summary
/// into `opts.out`; prints the final loss beside the floor and the verdict line.
pub fn run_overfit<M: Model<f32>>(
    model: M,
    batch: &Tokens<f32>,
    opts: &OverfitOptions,
) -> Result<OverfitReport, CliError> {
    std::fs::create_dir_all(opts.out.join("figures")).map_err(CliError::io(&opts.out))?;
    let bar = crate::progress::Progress::new(opts.progress, opts.max_steps);
    let logger = RunLog::create(&opts.out.join("loss_log.jsonl"))?;
    let mut trainer =
        Trainer::new(model, Adam::<f32>::new(opts.optim.clone())?, opts.schedule.clone(), logger, opts.max_norm);
    for _ in 0..opts.max_steps {
        bar.step(&trainer.step(batch)?, opts.log_every);
    }
    bar.finish();
    let losses = std::mem::take(&mut trainer.logger.losses);
    let verdict = overfit_verdict(&losses).ok_or_else(|| CliError::Msg("overfit ran no step".into()))?;
    let figure = opts.out.join("figures").join("overfit_curve.png");
    crate::plot::overfit_curve(&figure, &losses, verdict.first, verdict.last, opts.floor.as_ref().map(|f| f.value))?;
    let final_loss = *losses.last().expect("at least one step");
    let threshold = verdict.ratio * verdict.first;
    let mut summary = json!({
        "command": "overfit",
        "steps": losses.len(),
        "rule": "mean(loss[-50:]) <= 0.7 * mean(loss[:50])",
        "mean_first_50": verdict.first,
        "mean_last_50": verdict.last,
        "ratio": verdict.ratio,
        "threshold": threshold,
        "passed": verdict.passed,
        "final_loss": final_loss,
        "floor": opts.floor.as_ref().map(|f| json!({"value": f.value, "kind": f.kind})),
        "loss_log": "loss_log.jsonl",
        "figure": "figures/overfit_curve.png",
        "figure_legend": crate::plot::LEGEND,
    });
    for (k, v) in &opts.extra {
        summary[k] = v.clone();
    }
    let sp = opts.out.join("summary.json");
    let text = serde_json::to_string_pretty(&summary).expect("JSON serializes") + "\n";
    write_atomic(&sp, text.as_bytes()).map_err(CliError::io(&sp))?;
    match &opts.floor {
        Some(f) => println!("final loss {final_loss:.6}   {} {:.6}", f.kind, f.value),
        None => println!("final loss {final_loss:.6}"),
    }
    println!(
        "verdict: {}  mean(last 50) = {:.6} {} 0.7 * mean(first 50) = 0.7 * {:.6} = {:.6}",
        if verdict.passed { "PASS" } else { "FAIL" },
        verdict.last,
        if verdict.passed { "<=" } else { ">" },
        verdict.first,
        threshold
    );
    Ok(OverfitReport { losses, verdict, floor: opts.floor.clone(), out: opts.out.clone() })
}

/// `bc-cli overfit`: resolves the configuration (default preset `laptop`), builds the batch,
/// builds the model with `build(model config, adjacency, seed)`, writes
/// `config.resolved.toml` and runs [`run_overfit`]. Nothing is written before the data and the
/// model are ready. `backend` names what `build` constructs; a configuration asking for another
/// backend is an error.
pub fn overfit_command<M, F>(args: &OverfitArgs, backend: &str, build: F) -> Result<OverfitReport, CliError>
where
    M: Model<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast::core::Error>,
{
    let cfg = crate::presets::resolve(&args.run.overrides(), DEFAULT_PRESET, Purpose::Overfit)?;
    if cfg.train.backend != backend {
        return Err(CliError::Msg(format!(
            "train.backend = {}, but the model would be built on the {backend} backend",
            cfg.train.backend
        )));
    }
    let preset = cfg.preset.clone().unwrap_or_default();
    let data = overfit_data(&cfg)?;
    for n in &data.notes {
        eprintln!("{n}");
    }
    let model = build(cfg.model_config(), data.adjacency.clone(), cfg.train.seed)?;
    let out = cfg.train.out.clone().unwrap_or_else(|| PathBuf::from(format!("runs/overfit-{preset}")));
    cfg.write_resolved(&out)?;
    let s = data.batch.shape();
    println!(
        "overfit: preset {preset}, {} parameters, batch (B {}, T {}, P {}, D {}) from {}",
        model.config().n_params(),
        s.batch,
        s.time,
        s.parcels,
        s.d_in,
        data.source
    );
    println!(
        "overfit: {} steps, constant lr {}, weight decay 0 (no tensor decays), clip {}, log {}",
        cfg.overfit.max_steps,
        cfg.overfit.lr,
        cfg.max_norm().map_or("off".to_string(), |m| m.to_string()),
        out.join("loss_log.jsonl").display()
    );
    let mut opts = OverfitOptions::from_config(&cfg, out, Some(data.floor.clone()));
    opts.extra.insert("preset".into(), json!(preset));
    opts.extra.insert("data".into(), json!(data.source));
    run_overfit(model, &data.batch, &opts)
}
