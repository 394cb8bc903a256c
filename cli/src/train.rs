//! `bc-cli train`: the flags of a run, what it prints and its exit status, around the
//! training library ([`boldcast_train::launch::Launch`], which settles a fresh or resumed
//! run, and [`boldcast_train::Run`], which documents the run itself: order, steps,
//! validation, early stopping, best weights, checkpoints, resume, data-parallel sharding, the
//! non-finite stop, red flags).
//!
//! - Data: `data.dir`, or the synthetic AR(1) fixture of `[data.synthetic]`, split by subject
//!   ([`boldcast_train::data::TrainData::load`]).
//! - `--stop-after N` stops cleanly after N steps of this invocation; `--resume DIR` continues
//!   from the newest checkpoint with the configuration stored there, or starts a run stopped
//!   before its first checkpoint again from step 0 with its `config.resolved.toml`. The run
//!   (the library's `run_dir`) locks the directory and writes `config.resolved.toml`.
//! - Observers: [`Printer`] (the progress bar on a terminal and the `step`, `val`, `red flag`,
//!   `stopped`, `finished` and `verdict` lines on stdout) and [`boldcast_plot::RunFigure`]
//!   (`figures/loss_curves.png` of a finished run); only rank 0 prints and writes.
//! - At the end of a finished run the library has written `summary.json` (with the figure's
//!   name and legend added here); the held-out rule `mean(last 3 val) <= 0.7 * mean(first 3
//!   val)` decides the exit status (1 when it fails).

use crate::error::CliError;
use crate::progress::Progress;
use boldcast::core::{Adjacency, DataParallel, ModelConfig};
use boldcast_train::config::RunConfig;
use boldcast_train::data::TrainData;
use boldcast_train::launch::{Launch, Start};
use boldcast_train::presets::DEFAULT_PRESET;
use boldcast_train::{Dist, Observer, RedFlag, RunStart, StepRecord, ValRecord};
use serde_json::json;
use std::path::PathBuf;

pub use boldcast_train::TrainReport;

/// The stdout of a run: the progress bar and the lines printed through it.
pub struct Printer {
    bar: Progress,
    log_every: u64,
    patience: u64,
    horizons: Vec<usize>,
    floor_kind: String,
}

impl Printer {
    /// The printer of a run of `cfg`; a progress bar when `progress`.
    pub fn new(cfg: &RunConfig, data: &TrainData, progress: bool) -> Self {
        let t = &cfg.train;
        let bar = Progress::new(progress, t.max_steps);
        let floor_kind = data.floor.kind.clone();
        Self { bar, log_every: t.log_every, patience: t.patience, horizons: cfg.model.horizons.clone(), floor_kind }
    }
}

impl Observer for Printer {
    fn on_start(&mut self, s: &RunStart) {
        self.bar.set_position(s.step);
    }
    fn on_step(&mut self, rec: &StepRecord) {
        self.bar.step(rec, self.log_every);
    }
    fn on_validation(&mut self, v: &ValRecord) {
        self.bar.println(&boldcast_train::text::val_line(v, &self.horizons, self.patience, &self.floor_kind));
    }
    fn on_flag(&mut self, f: &RedFlag) {
        self.bar.println(&format!("red flag: {}", f.message));
    }
    #[cfg(debug_assertions)]
    fn on_checkpoint_file(&mut self, step: u64, path: &std::path::Path) {
        pause_for_tests(step, path);
    }
    fn on_end(&mut self, r: &TrainReport) {
        self.bar.finish();
        for l in boldcast_train::text::end_lines(r, &self.floor_kind) {
            crate::outln!("{l}");
        }
    }
}

/// The test hook's environment variable, read by debug builds only: set to a step number,
/// the checkpoint write of that step stops after `model.safetensors`, prints `test hook:
/// paused in the checkpoint write of step N` on stderr and sleeps ten minutes, so a test can
/// kill the process in the middle of a checkpoint write.
pub const PAUSE_HOOK_ENV: &str = "BOLDCAST_TEST_PAUSE_IN_CKPT_WRITE";

/// The pause of [`PAUSE_HOOK_ENV`].
#[cfg(debug_assertions)]
fn pause_for_tests(step: u64, path: &std::path::Path) {
    let at = std::env::var(PAUSE_HOOK_ENV).ok().and_then(|v| v.trim().parse::<u64>().ok());
    if at == Some(step) && path.file_name().is_some_and(|n| n == "model.safetensors") {
        eprintln!("test hook: paused in the checkpoint write of step {step}");
        std::thread::sleep(std::time::Duration::from_secs(600));
    }
}

/// How `train` was asked to run, beyond the configuration layers.
#[derive(Clone, Debug, Default)]
pub struct TrainRequest {
    /// `--resume DIR`.
    pub resume: Option<PathBuf>,
    /// `--stop-after N`.
    pub stop_after: Option<u64>,
    /// The ranks of a data-parallel run (one by default).
    pub dist: Dist,
}

/// `bc-cli train`'s launch ([`Launch::fresh`] of `cfg`, or [`Launch::resume`] of `--resume
/// DIR`), with the notes and the line that says where the run starts (rank 0 prints).
pub fn launch(cfg: Option<RunConfig>, req: &TrainRequest) -> Result<Launch, CliError> {
    let launch = match (&req.resume, cfg) {
        (Some(dir), _) => Launch::resume(dir, req.dist.clone())?,
        (None, Some(cfg)) => Launch::fresh(cfg, req.dist.clone())?,
        (None, None) => return Err(CliError::Msg("train: no configuration".into())),
    };
    if req.dist.is_root() {
        launch.notes.iter().for_each(|n| crate::errln!("{n}"));
        launch.start_line().iter().for_each(|l| crate::outln!("{l}"));
    }
    Ok(launch.stop_after(req.stop_after))
}

/// For a finished run ([`Start::Finished`]): what it lacked and was given, the loss-curve
/// figure included ([`boldcast_plot::complete_run_figure`]), in words; the error
/// [`boldcast_train::TrainError::AlreadyFinished`] when it lacked nothing. `None` for a run
/// that trains.
pub fn completed(launch: &Launch) -> Result<Option<String>, CliError> {
    let Start::Finished { reason, step, done, .. } = &launch.start else { return Ok(None) };
    let mut done = done.clone();
    done.extend(boldcast_plot::complete_run_figure(&launch.out)?);
    if done.is_empty() {
        let (out, reason, step) = (launch.out.clone(), reason.clone(), *step);
        return Err(boldcast_train::TrainError::AlreadyFinished { out, reason, step }.into());
    }
    let mut text = format!("{}: the run had finished ({reason}) at step {step}; completed it:", launch.out.display());
    done.iter().for_each(|l| text += &format!("\n  {l}"));
    Ok(Some(text))
}

/// Builds the model of a launched run with `build` (the run's `train.backend`'s, which
/// `main` dispatches on), loads the data and trains, with the stdout lines, the progress bar and
/// the figure ([`boldcast_plot::RunFigure`]).
pub fn train_launched<M, F>(launch: Launch, build: F) -> Result<TrainReport, CliError>
where
    M: DataParallel<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast::core::Error>,
{
    let cfg = &launch.cfg;
    let data = launch.load_data()?;
    let root = launch.dist.is_root();
    for n in data.notes.iter().filter(|_| root) {
        crate::errln!("{n}");
    }
    let model = build(cfg.model_config(), data.adjacency.clone(), cfg.train.seed)?;
    if root {
        boldcast_train::text::preamble_lines(cfg, &data, model.config(), &launch.dist)
            .iter()
            .for_each(|l| crate::outln!("{l}"));
    }
    let progress = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let mut printer = Printer::new(cfg, &data, progress);
    let mut figure = boldcast_plot::RunFigure::default();
    let report = launch
        .summary_extra("figure", json!(boldcast_plot::RUN_FIGURE))
        .summary_extra("figure_svg", json!(boldcast_plot::RUN_FIGURE_SVG))
        .run(&data, model, &mut [&mut printer, &mut figure])?;
    figure.result()?;
    Ok(report)
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
    let cfg = boldcast_train::presets::resolve_train(&a.run, &a.split, DEFAULT_PRESET)?;
    Ok((Some(cfg), req))
}
