//! The lines around [`Run`](boldcast_train::Run) that the example binary and the tests share:
//! [`quick_config`] and [`Printer`] (an observer). The data is `TrainData::load`, the resume
//! point `boldcast_train::checkpoint::resume_point`: the library's own calls.

use boldcast_train::config::RunConfig;
use boldcast_train::{Observer, RedFlag, RunStart, StepRecord, TrainError, TrainReport, ValRecord};
use std::path::Path;

/// The preset `quick` (`configs/presets/quick.toml`: synthetic AR(1) data of 4 subjects, one
/// held out, a one-layer Mamba of width 8) with `max_steps` steps, a validation every
/// `val_every` steps and a checkpoint every `ckpt_every`.
pub fn quick_config(max_steps: u64, val_every: u64, ckpt_every: u64) -> Result<RunConfig, TrainError> {
    let mut cfg = boldcast_train::presets::preset("quick")?;
    cfg.train.max_steps = max_steps;
    cfg.train.val_every = val_every;
    cfg.train.ckpt_every = ckpt_every;
    cfg.train.warmup_steps = cfg.train.warmup_steps.min(max_steps / 4);
    cfg.validate()?;
    Ok(cfg)
}

/// An observer that prints the run's events to stdout: every `every`-th step, every
/// validation, checkpoint and red flag, and the end.
pub struct Printer {
    /// Prints the steps whose 1-based number is a multiple of this (0: none).
    pub every: u64,
}

impl Observer for Printer {
    fn on_start(&mut self, s: &RunStart) {
        let how = if s.resumed { "resuming" } else { "starting" };
        println!("{how} at step {} of {} in {}", s.step, s.max_steps, s.out.display());
    }
    fn on_step(&mut self, r: &StepRecord) {
        if self.every > 0 && (r.step + 1).is_multiple_of(self.every) {
            println!("  step {:>4}  loss {:.5}  lr {:.2e}  grad norm {:.4}", r.step + 1, r.loss, r.lr, r.grad_norm);
        }
    }
    fn on_validation(&mut self, v: &ValRecord) {
        let ratio = v.val_over_train.map_or("-".to_string(), |r| format!("{r:.3}"));
        println!("  val  {:>4}  loss {:.5}  floor {:.5}  val/train {ratio}", v.step, v.val_loss, v.floor);
    }
    fn on_checkpoint(&mut self, step: u64, dir: &Path) {
        println!("  checkpoint of step {step}: {}", dir.display());
    }
    fn on_flag(&mut self, f: &RedFlag) {
        println!("  red flag at step {}: {}", f.step, f.message);
    }
    fn on_end(&mut self, r: &TrainReport) {
        let best = r.best.map_or("-".to_string(), |(s, v)| format!("{v:.5} at step {s}"));
        println!("ended at step {} ({}); best validation loss {best}", r.steps, r.reason.as_str());
    }
}
