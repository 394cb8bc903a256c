//! What a run shows on the terminal: the progress bar (indicatif, on a terminal only) and the
//! lines printed through it, so that they do not tear the bar.

use boldcast::core::StepRecord;
use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar when asked for, and the lines printed past it.
#[derive(Clone, Default)]
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar of `len` steps when `show`, else printing only.
    pub fn new(show: bool, len: u64) -> Self {
        Self::counting(show, len, "steps")
    }

    /// A bar of `len` `unit` (runs, files) when `show`, else printing only.
    pub fn counting(show: bool, len: u64, unit: &str) -> Self {
        let bar = show.then(|| {
            let pb = ProgressBar::new(len);
            let template = format!("{{bar:40}} {{pos}}/{{len}} {unit}  {{elapsed}} (eta {{eta}})");
            if let Ok(style) = ProgressStyle::with_template(&template) {
                pb.set_style(style);
            }
            pb
        });
        Self { bar }
    }

    /// The bar one further.
    pub fn inc(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    /// Prints a line, through the bar when there is one.
    pub fn println(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.println(msg),
            None => crate::outln!("{msg}"),
        }
    }

    /// Moves the bar to `pos` (a resumed run).
    pub fn set_position(&self, pos: u64) {
        if let Some(b) = &self.bar {
            b.set_position(pos);
        }
    }

    /// One step: the line `step N  loss ...` at the first step and every `log_every`, and the
    /// bar one further.
    pub fn step(&self, rec: &StepRecord, log_every: u64) {
        if rec.step == 0 || (rec.step + 1).is_multiple_of(log_every.max(1)) {
            self.println(&boldcast_train::text::step_line(rec));
        }
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    /// Removes the bar (the run ended).
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
