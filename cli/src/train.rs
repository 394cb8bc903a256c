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
use boldcast::core::{Adjacency, DataParallel, Model, ModelConfig};
use boldcast_train::config::RunConfig;
use boldcast_train::data::TrainData;
use boldcast_train::launch::{Launch, Start};
use boldcast_train::presets::{Purpose, DEFAULT_PRESET};
use boldcast_train::{Dist, Observer, RedFlag, RunStart, StepRecord, StopReason, ValRecord};
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

    fn val_line(&self, v: &ValRecord) -> String {
        let hz: Vec<String> = (self.horizons.iter().zip(&v.val_per_horizon).zip(&v.floor_per_horizon))
            .map(|((h, l), f)| format!("h{h} {l:.4}/{f:.4}"))
            .collect();
        let patience = if v.bad_validations > 0 && self.patience > 0 {
            format!("  (no improvement {}/{})", v.bad_validations, self.patience)
        } else {
            String::new()
        };
        // Only the synthetic fixture has a floor; on other data it is the single-lag AR reference.
        let label = if self.floor_kind.starts_with("exact") { "floor" } else { "single-lag AR ref" };
        format!(
            "val    {:>6}  val_loss {:.6}  {label} {:.6}  [{}]  val/train {}  best {:.6} @ {}{patience}",
            v.step,
            v.val_loss,
            v.floor,
            hz.join(", "),
            v.val_over_train.map_or("-".to_string(), |r| format!("{r:.3}")),
            v.best_val_loss,
            v.best_step,
        )
    }

    fn end_lines(&self, r: &TrainReport) -> Vec<String> {
        if r.reason == StopReason::StopAfter {
            return vec![format!(
                "stopped after {} step(s) of this invocation at step {} of {} (--stop-after); continue with \
                 `bc-cli train --resume {}`",
                r.steps - r.start_step,
                r.steps,
                r.max_steps,
                r.out.display()
            )];
        }
        let mut lines = Vec::new();
        if let Some((l, _)) = &r.last_val {
            lines.push(format!(
                "finished ({}) at step {}: val_loss {l:.6}, {} {:.6} (ratio {:.4}); best {}",
                r.reason.as_str(),
                r.steps,
                self.floor_kind,
                r.floor.overall,
                l / r.floor.overall,
                r.best.map_or("-".into(), |(s, b)| format!("{b:.6} at step {s} (best.safetensors)"))
            ));
        }
        if let (Some(v), Some(j), true) = (r.verdict, &r.judgement, r.against_baseline) {
            lines.push(format!(
                "verdict: {}  {} (the run starts at the linear fit, so it is judged against the best baseline)",
                if v.passed { "PASS" } else { "FAIL" },
                boldcast_train::summary::BASELINE_RULE
                    .replace("final val_loss", &format!("val_loss {:.6}", j.val_loss))
            ));
        } else if let Some(v) = r.verdict {
            let fell = v.last <= v.ratio * v.first;
            let zero = r.judgement.as_ref().map_or(String::new(), |j| {
                format!("; val_loss {} predicting zero", if j.beats_zero { "<" } else { ">=" })
            });
            lines.push(format!(
                "verdict: {}  mean(last 3 val) = {:.6} {} 0.7 * mean(first 3 val) = 0.7 * {:.6} = {:.6}{zero}",
                if v.passed { "PASS" } else { "FAIL" },
                v.last,
                if fell { "<=" } else { ">" },
                v.first,
                v.ratio * v.first
            ));
        }
        if let Some(j) = &r.judgement {
            lines.push(format!("held-out: {}", j.words));
        }
        lines
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
        self.bar.println(&self.val_line(v));
    }
    fn on_flag(&mut self, f: &RedFlag) {
        self.bar.println(&format!("red flag: {}", f.message));
    }
    fn on_end(&mut self, r: &TrainReport) {
        self.bar.finish();
        for l in self.end_lines(r) {
            crate::outln!("{l}");
        }
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
        let dir = launch.out.display();
        match &launch.start {
            Start::Restart => crate::outln!(
                "resuming {dir}: no checkpoint yet, so the run starts again from step 0 with its {}",
                boldcast_train::run_dir::RESOLVED
            ),
            Start::Checkpoint(l) => {
                crate::outln!("resuming from {} (step {} of {})", l.dir.display(), l.state.step, l.state.max_steps)
            }
            Start::Fresh | Start::Finished { .. } => {}
        }
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

/// The lines printed before the first step.
/// Subject labels for a line of text: all of them, `["01", "02"]`, up to [`LISTED_SUBJECTS`];
/// beyond, the count with the first three and the last, `1000 subjects ["0001", "0002",
/// "0003", ..., "1000"]` (`summary.json` has every one).
pub fn subject_list(subjects: &[String]) -> String {
    if subjects.len() <= LISTED_SUBJECTS {
        return format!("{subjects:?}");
    }
    let q = |s: &String| format!("{s:?}");
    let head: Vec<String> = subjects[..3].iter().map(q).collect();
    format!("{} subjects [{}, ..., {}]", subjects.len(), head.join(", "), q(&subjects[subjects.len() - 1]))
}

/// The most subjects [`subject_list`] names one by one.
pub const LISTED_SUBJECTS: usize = 12;

fn print_preamble<M: Model<f32>>(cfg: &RunConfig, data: &TrainData, model: &M, dist: &Dist) {
    let root = dist.is_root();
    let t = &cfg.train;
    let println = |msg: String| {
        if root {
            crate::outln!("{msg}");
        }
    };
    if dist.size() > 1 {
        println(format!(
            "train: data-parallel over {} ranks ({}): global batch {}, {} windows per rank",
            dist.size(),
            dist.0.name(),
            t.batch_size,
            t.batch_size / dist.size()
        ));
    }
    println(format!(
        "train: preset {}, {} parameters, data {}",
        cfg.preset.as_deref().unwrap_or("?"),
        model.config().n_params(),
        data.source
    ));
    println(format!(
        "train: split by {}: train {} ({} windows), held out {} ({} windows); window {} stride {}",
        data.split.how,
        subject_list(&data.split.train_subjects),
        data.train_windows.len(),
        subject_list(&data.split.heldout_subjects),
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
}

/// Builds the model of a launched run with `build` on `backend` (which must be the run's
/// `train.backend`), loads the data and trains, with the stdout lines, the progress bar and
/// the figure ([`boldcast_plot::RunFigure`]).
pub fn train_launched<M, F>(launch: Launch, backend: &str, build: F) -> Result<TrainReport, CliError>
where
    M: DataParallel<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast::core::Error>,
{
    let cfg = &launch.cfg;
    if cfg.train.backend != backend {
        return Err(CliError::Msg(format!(
            "train.backend = {}, but the model would be built on the {backend} backend",
            cfg.train.backend
        )));
    }
    let data = launch.load_data()?;
    let root = launch.dist.is_root();
    for n in data.notes.iter().filter(|_| root) {
        crate::errln!("{n}");
    }
    let model = build(cfg.model_config(), data.adjacency.clone(), cfg.train.seed)?;
    print_preamble(cfg, &data, &model, &launch.dist);
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
    let mut cfg = boldcast_train::presets::resolve(&a.run.overrides(), DEFAULT_PRESET, Purpose::Train)?;
    if let Some(s) = &a.subjects_train {
        cfg.data.subjects_train = boldcast::data::parse_subject_list(s)?;
    }
    if let Some(s) = &a.subjects_heldout {
        cfg.data.subjects_heldout = boldcast::data::parse_subject_list(s)?;
    }
    if let Some(f) = a.heldout_fraction {
        cfg.data.heldout_fraction = f;
    }
    if let Some(c) = &a.group_column {
        cfg.data.group_column = Some(c.clone());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_subject_lists_are_shortened_to_a_count_and_the_ends() {
        let labels = |n: usize| (1..=n).map(|i| format!("{i:04}")).collect::<Vec<_>>();
        assert_eq!(subject_list(&labels(2)), r#"["0001", "0002"]"#);
        assert_eq!(subject_list(&labels(12)).matches('"').count(), 24, "twelve are all listed");
        assert_eq!(subject_list(&labels(3299)), r#"3299 subjects ["0001", "0002", "0003", ..., "3299"]"#);
        assert_eq!(subject_list(&[]), "[]");
    }
}
