//! `bc-cli overfit`: the flags of the overfit check, its lines on stdout, its figure
//! (`<out>/figures/overfit_curve.png`, [`boldcast_plot::overfit_curve`]) and its exit status,
//! around the library's check ([`boldcast_train::overfit`], which documents the batch, the
//! loop, the verdict, `loss_log.jsonl` and `summary.json`).
//!
//! The model is any [`Model<f32>`]: [`overfit_command`] builds one with the closure it is
//! passed, so the backend is chosen in one place (`main`).

use crate::args::OverfitArgs;
use crate::error::CliError;
use crate::progress::Progress;
use boldcast::core::{Adjacency, Model, ModelConfig, StepRecord};
use boldcast_train::config::RunConfig;
use boldcast_train::overfit::{overfit_data, run_overfit, OverfitData, OverfitOptions};
use boldcast_train::presets::{Purpose, DEFAULT_PRESET};
use boldcast_train::run_dir::RunKind;
use boldcast_train::Observer;
use serde_json::json;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

pub use boldcast_train::overfit::OverfitReport;

/// The `step` lines (the first step and every `log_every`) and the progress bar of a loop.
pub struct StepLines {
    bar: Progress,
    log_every: u64,
}

impl StepLines {
    /// Lines every `log_every` steps; a bar of `max_steps` when `progress`.
    pub fn new(progress: bool, max_steps: u64, log_every: u64) -> Self {
        Self { bar: Progress::new(progress, max_steps), log_every }
    }

    /// Removes the bar (the loop ended).
    pub fn finish(&self) {
        self.bar.finish();
    }
}

impl Observer for StepLines {
    fn on_step(&mut self, rec: &StepRecord) {
        self.bar.step(rec, self.log_every);
    }
}

/// The two lines before the first step.
fn print_preamble<M: Model<f32>>(cfg: &RunConfig, preset: &str, model: &M, data: &OverfitData, out: &Path) {
    let s = data.batch.shape();
    crate::outln!(
        "overfit: preset {preset}, {} parameters, batch (B {}, T {}, P {}, D {}) from {}",
        model.config().n_params(),
        s.batch,
        s.time,
        s.parcels,
        s.d_in,
        data.source
    );
    crate::outln!(
        "overfit: {} steps, constant lr {}, weight decay 0 (no tensor decays), clip {}, log {}",
        cfg.overfit.max_steps,
        cfg.overfit.lr,
        cfg.max_norm().map_or("off".to_string(), |m| m.to_string()),
        out.join("loss_log.jsonl").display()
    );
}

/// The final loss beside the floor, and the verdict line.
fn print_outcome(rep: &OverfitReport) {
    let (final_loss, v) = (rep.final_loss(), &rep.verdict);
    match &rep.floor {
        Some(f) => crate::outln!("final loss {final_loss:.6}   {} {:.6}", f.kind, f.value),
        None => crate::outln!("final loss {final_loss:.6}"),
    }
    crate::outln!(
        "verdict: {}  mean(last 50) = {:.6} {} 0.7 * mean(first 50) = 0.7 * {:.6} = {:.6}",
        if v.passed { "PASS" } else { "FAIL" },
        v.last,
        if v.passed { "<=" } else { ">" },
        v.first,
        rep.threshold()
    );
}

/// Runs the library's whole check ([`run_overfit`]: the loop with the step lines, then
/// `summary.json` with the figure's name, the preset and the data source), draws the figure
/// and prints the outcome.
fn overfit_run<M: Model<f32>>(
    model: M,
    cfg: &RunConfig,
    data: &OverfitData,
    preset: &str,
    out: PathBuf,
) -> Result<OverfitReport, CliError> {
    let mut opts = OverfitOptions::from_config(cfg, out, Some(data.floor.clone()));
    opts.extra.insert("figure".into(), json!("figures/overfit_curve.png"));
    opts.extra.insert("figure_svg".into(), json!("figures/overfit_curve.svg"));
    opts.extra.insert("preset".into(), json!(preset));
    opts.extra.insert("data".into(), json!(data.source));
    let mut lines = StepLines::new(std::io::stdout().is_terminal(), opts.max_steps, cfg.train.log_every);
    let rep = run_overfit(model, &data.batch, &opts, &mut [&mut lines])?;
    lines.finish();
    let (v, floor) = (&rep.verdict, rep.floor.as_ref().map(|f| f.value));
    let window = boldcast::core::accept::OVERFIT_WINDOW;
    let figure = rep.out.join("figures/overfit_curve.png");
    boldcast_plot::overfit_curve(&figure, (&rep.losses, &rep.lrs), (v.first, v.last, window), floor)?;
    print_outcome(&rep);
    Ok(rep)
}

/// `bc-cli overfit`: resolves the configuration (default preset `laptop`), builds the batch
/// ([`overfit_data`]), builds the model with `build(model config, adjacency, seed)`, takes
/// the output directory ([`boldcast_train::run_dir::start`]: new, empty or an earlier overfit
/// run's, locked, with `config.resolved.toml`) and runs the check. Nothing is written before
/// the data and the model are ready. `backend` names what `build` constructs; a configuration asking for another
/// backend is an error.
pub fn overfit_command<M, F>(args: &OverfitArgs, backend: &str, build: F) -> Result<OverfitReport, CliError>
where
    M: Model<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast::core::Error>,
{
    let cfg = boldcast_train::presets::resolve(&args.run.overrides(), DEFAULT_PRESET, Purpose::Overfit)?;
    if cfg.train.backend != backend {
        return Err(CliError::Msg(format!(
            "train.backend = {}, but the model would be built on the {backend} backend",
            cfg.train.backend
        )));
    }
    let preset = cfg.preset.clone().unwrap_or_default();
    let out = cfg.train.out.clone().unwrap_or_else(|| PathBuf::from(format!("runs/overfit-{preset}")));
    boldcast_train::run_dir::check_start(&out, RunKind::Overfit)?;
    let data = overfit_data(&cfg)?;
    for n in &data.notes {
        crate::errln!("{n}");
    }
    let model = build(cfg.model_config(), data.adjacency.clone(), cfg.train.seed)?;
    let _lock = boldcast_train::run_dir::start(&out, RunKind::Overfit, &cfg)?;
    print_preamble(&cfg, &preset, &model, &data, &out);
    overfit_run(model, &cfg, &data, &preset, out)
}
