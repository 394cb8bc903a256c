//! What a run shows of its progress: on a terminal, the progress bar (indicatif) and the lines
//! printed through it, so that they do not tear the bar; redirected (a Slurm or nohup log), a
//! line on stderr every [`TICK_ENV`] seconds (default [`DEFAULT_TICK_SECONDS`]) with the
//! count, the elapsed time, the rate and the time left.

use boldcast::core::StepRecord;
use boldcast_train::text::Ticker;
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The environment variable that sets the seconds between progress lines of a redirected run.
pub const TICK_ENV: &str = "BOLDCAST_PROGRESS_SECONDS";
/// The seconds between progress lines of a redirected run.
pub const DEFAULT_TICK_SECONDS: f64 = 30.0;

/// A progress bar on a terminal, progress lines when redirected, and the lines printed past
/// either.
#[derive(Clone, Default)]
pub struct Progress {
    bar: Option<ProgressBar>,
    ticker: Option<Arc<Mutex<Ticker>>>,
}

/// The seconds between progress lines: [`TICK_ENV`], else [`DEFAULT_TICK_SECONDS`].
fn tick_every() -> Duration {
    let secs = std::env::var(TICK_ENV).ok().and_then(|v| v.parse::<f64>().ok()).filter(|s| *s >= 0.0);
    Duration::from_secs_f64(secs.unwrap_or(DEFAULT_TICK_SECONDS).min(1e6))
}

/// Prints the line a ticker has due.
fn tick(t: &Mutex<Ticker>, f: impl FnOnce(&mut Ticker) -> Option<String>) {
    if let Some(line) = f(&mut t.lock().unwrap_or_else(|e| e.into_inner())) {
        crate::errln!("{line}");
    }
}

impl Progress {
    /// A bar of `len` steps on a terminal (`terminal`), else progress lines.
    pub fn new(terminal: bool, len: u64) -> Self {
        Self::counting(terminal, len, "steps")
    }

    /// A bar of `len` `unit` (tokens, runs) on a terminal, else progress lines.
    pub fn counting(terminal: bool, len: u64, unit: &str) -> Self {
        let bar = terminal.then(|| {
            let pb = ProgressBar::new(len);
            let template = format!("{{bar:40}} {{pos}}/{{len}} {unit}  {{elapsed}} (eta {{eta}})");
            if let Ok(style) = ProgressStyle::with_template(&template) {
                pb.set_style(style);
            }
            pb
        });
        let ticker = (!terminal).then(|| Arc::new(Mutex::new(Ticker::new(len, unit, tick_every()))));
        Self { bar, ticker }
    }

    /// One further.
    pub fn inc(&self) {
        self.inc_by(1);
    }

    /// `n` further.
    pub fn inc_by(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
        if let Some(t) = &self.ticker {
            tick(t, |t| t.advance(n));
        }
    }

    /// Prints a line, through the bar when there is one.
    pub fn println(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.println(msg),
            None => crate::outln!("{msg}"),
        }
    }

    /// Sets the total (known only once the work starts).
    pub fn set_len(&self, len: u64) {
        if let Some(b) = &self.bar {
            b.set_length(len);
        }
        if let Some(t) = &self.ticker {
            t.lock().unwrap_or_else(|e| e.into_inner()).set_len(len);
        }
    }

    /// Moves on to `pos` done in this invocation.
    pub fn advance_to(&self, pos: u64) {
        if let Some(b) = &self.bar {
            b.set_position(pos);
        }
        if let Some(t) = &self.ticker {
            tick(t, |t| t.advance_to(pos));
        }
    }

    /// Moves the bar to `pos` (a resumed run).
    pub fn set_position(&self, pos: u64) {
        if let Some(b) = &self.bar {
            b.set_position(pos);
        }
        if let Some(t) = &self.ticker {
            t.lock().unwrap_or_else(|e| e.into_inner()).start_at(pos);
        }
    }

    /// One step: the line `step N  loss ...` at the first step and every `log_every`, and the
    /// bar one further.
    pub fn step(&self, rec: &StepRecord, log_every: u64) {
        if rec.step == 0 || (rec.step + 1).is_multiple_of(log_every.max(1)) {
            self.println(&boldcast_train::text::step_line(rec));
        }
        self.inc();
    }

    /// Removes the bar (the run ended).
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
