//! `bc-cli train`: the flags and presets of a run, what it prints, its figure and its exit
//! status, around the training library ([`boldcast_train::Run`], which documents the run
//! itself: order, steps, validation, early stopping, best weights, checkpoints, resume,
//! data-parallel sharding, the non-finite stop, red flags).
//!
//! - Data: `data.dir`, or the synthetic AR(1) fixture of `[data.synthetic]`, split by subject
//!   ([`boldcast_train::data::TrainData::load`]).
//! - `--stop-after N` stops cleanly after N steps of this invocation; `--resume DIR` continues
//!   from the newest checkpoint with the configuration stored there, or starts a run stopped
//!   before its first checkpoint again from step 0 with its `config.resolved.toml`. The run
//!   (the library's `run_dir`) locks the directory and writes `config.resolved.toml`.
//! - Observers: [`Printer`] (the progress bar on a terminal and the `step`, `val`, `red flag`,
//!   `stopped`, `finished` and `verdict` lines on stdout) and [`Figure`]
//!   (`figures/loss_curves.png` of a finished run); only rank 0 prints and writes.
//! - At the end of a finished run the library has written `summary.json` (with the figure's
//!   name and legend added here); the held-out rule `mean(last 3 val) <= 0.7 * mean(first 3
//!   val)` decides the exit status (1 when it fails).

use crate::error::CliError;
use crate::presets::{Purpose, DEFAULT_PRESET};
use crate::progress::Progress;
use boldcast::core::{Adjacency, DataParallel, Model, ModelConfig};
use boldcast_train::checkpoint::{self as ck, Loaded};
use boldcast_train::config::RunConfig;
use boldcast_train::data::TrainData;
use boldcast_train::{Dist, Observer, RedFlag, Run, RunStart, StepRecord, StopReason, ValRecord};
use serde_json::json;
use std::path::{Path, PathBuf};

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

/// `figures/loss_curves.png` of a finished run, drawn from `loss_log.jsonl`; an error is kept
/// for [`Figure::result`].
#[derive(Default)]
pub struct Figure {
    error: Option<CliError>,
}

impl Figure {
    /// The file, relative to the output directory.
    pub const FILE: &'static str = "figures/loss_curves.png";
    /// Its SVG twin.
    pub const SVG: &'static str = "figures/loss_curves.svg";

    fn draw(out: &Path, floor: f64) -> Result<(), CliError> {
        let log = boldcast_train::run::log_path(out);
        let (train, val) = boldcast_train::log::read_curves(&log)?;
        let lr = boldcast_train::log::read_step_field(&log, "lr")?;
        let curves = crate::plot::RunCurves { train: &train, val: &val, lr: &lr, floor: Some(floor) };
        crate::plot::loss_curves(&out.join(Self::FILE), &curves).map(|_| ())
    }

    /// The error of the drawing, if any.
    pub fn result(&mut self) -> Result<(), CliError> {
        self.error.take().map_or(Ok(()), Err)
    }
}

impl Observer for Figure {
    fn on_start(&mut self, s: &RunStart) {
        let dir = s.out.join("figures");
        if let Err(e) = std::fs::create_dir_all(&dir) {
            self.error = Some(CliError::Io { path: dir, source: e });
        }
    }
    fn on_end(&mut self, r: &TrainReport) {
        if r.reason != StopReason::StopAfter && self.error.is_none() {
            self.error = Self::draw(&r.out, r.floor.overall).err();
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

/// A train run whose configuration, output directory and checkpoint (with `--resume`) are
/// settled, before the model is built: [`PreparedTrain::backend`] says which backend builds it.
pub struct PreparedTrain {
    cfg: RunConfig,
    out: PathBuf,
    loaded: Option<Loaded>,
    resume: bool,
}

impl PreparedTrain {
    /// `train.backend` of the run (for `--resume`, the one stored in the checkpoint).
    pub fn backend(&self) -> &str {
        &self.cfg.train.backend
    }

    /// `train.precision` of the run's configuration.
    pub fn precision(&self) -> &str {
        &self.cfg.train.precision
    }
}

/// `bc-cli train`: a fresh run from a resolved configuration in a new or empty output
/// directory (the library writes its `config.resolved.toml`), or `--resume DIR` from its newest
/// checkpoint with the configuration stored there (from step 0 when it has none). `build(model config, adjacency, seed)` makes the model on the
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

/// `--resume DIR`: the newest checkpoint of `dir` and its stored configuration, or for a run
/// stopped before its first checkpoint its `config.resolved.toml` (it starts again from step 0).
fn prepare_resume(dir: &Path, req: &TrainRequest) -> Result<PreparedTrain, CliError> {
    if req.dist.is_root() {
        // An early answer when another process works there; the run itself takes the lock.
        boldcast_train::run_dir::ensure_free(dir)?;
    }
    let point = ck::continue_point(dir).map_err(|e| match e {
        e @ boldcast_train::TrainError::NotARunDir { .. } => CliError::Msg(format!("--resume {e}")),
        e => e.into(),
    })?;
    for n in point.notes.iter().filter(|_| req.dist.is_root()) {
        crate::errln!("{n}");
    }
    let cfg = point.cfg;
    let Some(loaded) = point.checkpoint else {
        if req.dist.is_root() {
            crate::outln!(
                "resuming {}: no checkpoint yet, so the run starts again from step 0 with its {}",
                dir.display(),
                boldcast_train::run_dir::RESOLVED
            );
        }
        return Ok(PreparedTrain { cfg, out: dir.to_path_buf(), loaded: None, resume: true });
    };
    let state = &loaded.state;
    if let (Some(r), true) = (&state.finished, dir.join("summary.json").is_file()) {
        return Err(CliError::Msg(format!(
            "--resume {}: the run already finished ({r}) at step {}",
            dir.display(),
            state.step
        )));
    }
    if req.dist.is_root() {
        crate::outln!("resuming from {} (step {} of {})", loaded.dir.display(), state.step, state.max_steps);
    }
    Ok(PreparedTrain { cfg, out: dir.to_path_buf(), loaded: Some(loaded), resume: true })
}

/// The first half of [`train_command`]: reads the checkpoint of `--resume` (and its stored
/// configuration), or checks that a fresh run's output directory is new or empty.
pub fn prepare_train(cfg: Option<RunConfig>, req: &TrainRequest) -> Result<PreparedTrain, CliError> {
    if let Some(dir) = &req.resume {
        return prepare_resume(dir, req);
    }
    let cfg = cfg.ok_or_else(|| CliError::Msg("train: no configuration".into()))?;
    let preset = cfg.preset.clone().unwrap_or_else(|| DEFAULT_PRESET.into());
    let out = cfg.train.out.clone().unwrap_or_else(|| PathBuf::from(format!("runs/train-{preset}")));
    // Rank 0 alone checks and writes the output directory (the others would see its files).
    if req.dist.is_root() {
        boldcast_train::run_dir::check_fresh(&out).map_err(|e| match e {
            boldcast_train::TrainError::Data(boldcast::data::DataError::OutputNotEmpty { .. }) => {
                CliError::Msg(format!(
                    "output directory {} already exists and is not empty: choose another --out, or continue it with \
                 --resume {}",
                    out.display(),
                    out.display()
                ))
            }
            e => e.into(),
        })?;
    }
    Ok(PreparedTrain { cfg, out, loaded: None, resume: false })
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

fn print_preamble<M: Model<f32>>(cfg: &RunConfig, data: &TrainData, model: &M, req: &TrainRequest) {
    let root = req.dist.is_root();
    let t = &cfg.train;
    let println = |msg: String| {
        if root {
            crate::outln!("{msg}");
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
    let PreparedTrain { cfg, out, loaded, resume } = prep;
    if cfg.train.backend != backend {
        return Err(CliError::Msg(format!(
            "train.backend = {}, but the model would be built on the {backend} backend",
            cfg.train.backend
        )));
    }
    // An indivisible global batch is refused before anything is written.
    boldcast::core::collective::shard_range(cfg.train.batch_size, req.dist.rank(), req.dist.size())?;
    let data = TrainData::load(&cfg)?;
    let root = req.dist.is_root();
    for n in data.notes.iter().filter(|_| root) {
        crate::errln!("{n}");
    }
    let model = build(cfg.model_config(), data.adjacency.clone(), cfg.train.seed)?;
    print_preamble(&cfg, &data, &model, req);
    let progress = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let mut printer = Printer::new(&cfg, &data, progress);
    let mut figure = Figure::default();
    let mut run = Run::new(&cfg, &data, out).stop_after(req.stop_after).dist(req.dist.clone());
    if resume {
        run = run.resume(loaded);
    }
    let report = run
        .summary_extra("figure", json!(Figure::FILE))
        .summary_extra("figure_svg", json!(Figure::SVG))
        .run(model, &mut [&mut printer, &mut figure])?;
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
    let mut cfg = crate::presets::resolve(&a.run.overrides(), DEFAULT_PRESET, Purpose::Train)?;
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
