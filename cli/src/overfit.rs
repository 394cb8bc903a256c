//! `bc-cli overfit`: the library's check ([`boldcast_train::overfit::OverfitPlan`]) with its
//! lines on stdout, the progress bar, and the figure (`<out>/figures/overfit_curve.png`,
//! [`boldcast_plot::overfit_curve`]). `main` sets the exit status from the verdict.

use crate::args::OverfitArgs;
use crate::error::CliError;
use crate::progress::Progress;
use boldcast::core::{Adjacency, Model, ModelConfig, StepRecord};
use boldcast_train::overfit::OverfitPlan;
use boldcast_train::presets::{Purpose, DEFAULT_PRESET};
use boldcast_train::Observer;
use serde_json::json;
use std::io::IsTerminal;

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
}

impl Observer for StepLines {
    fn on_step(&mut self, rec: &StepRecord) {
        self.bar.step(rec, self.log_every);
    }
}

/// `bc-cli overfit`: resolves the configuration (default preset `laptop`), plans the check
/// (nothing is written before the data and the model are ready), builds the model with
/// `build`, runs the check and draws the figure. `backend` names what `build` constructs; a
/// configuration asking for another backend is an error.
pub fn overfit_command<M, F>(args: &OverfitArgs, backend: &str, build: F) -> Result<OverfitReport, CliError>
where
    M: Model<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast::core::Error>,
{
    let cfg = boldcast_train::presets::resolve(&args.run, DEFAULT_PRESET, Purpose::Overfit)?;
    if cfg.train.backend != backend {
        let b = &cfg.train.backend;
        return Err(CliError::Msg(format!(
            "train.backend = {b}, but the model would be built on the {backend} backend"
        )));
    }
    let mut plan = OverfitPlan::new(cfg)?;
    plan.data.notes.iter().for_each(|n| crate::errln!("{n}"));
    let model = build(plan.cfg.model_config(), plan.data.adjacency.clone(), plan.cfg.train.seed)?;
    plan.opts.extra.insert("figure".into(), json!("figures/overfit_curve.png"));
    plan.opts.extra.insert("figure_svg".into(), json!("figures/overfit_curve.svg"));
    plan.preamble_lines(model.config()).iter().for_each(|l| crate::outln!("{l}"));
    let mut lines = StepLines::new(std::io::stdout().is_terminal(), plan.opts.max_steps, plan.cfg.train.log_every);
    let rep = plan.run(model, &mut [&mut lines])?;
    lines.bar.finish();
    let (v, floor) = (&rep.verdict, rep.floor.as_ref().map(|f| f.value));
    let window = boldcast::core::accept::OVERFIT_WINDOW;
    let figure = rep.out.join("figures/overfit_curve.png");
    boldcast_plot::overfit_curve(&figure, (&rep.losses, &rep.lrs), (v.first, v.last, window), floor)?;
    rep.outcome_lines().iter().for_each(|l| crate::outln!("{l}"));
    Ok(rep)
}
