//! What a run shows of its progress: on a terminal, the progress bar (indicatif) and the lines
//! printed through it, so that they do not tear the bar; redirected (a Slurm or nohup log), a
//! line on stderr every [`TICK_ENV`] seconds (default [`DEFAULT_TICK_SECONDS`]) with the
//! count, the elapsed time, the rate and the time left.

use boldcast::core::StepRecord;
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// The progress lines of a redirected run.
struct Ticker {
    unit: String,
    len: u64,
    pos: u64,
    /// Where this invocation started (a resumed run's first step), for the rate.
    first: u64,
    started: Instant,
    last: Instant,
    every: Duration,
}

impl Ticker {
    fn new(len: u64, unit: &str) -> Self {
        let secs = std::env::var(TICK_ENV).ok().and_then(|v| v.parse::<f64>().ok()).filter(|s| *s >= 0.0);
        let every = Duration::from_secs_f64(secs.unwrap_or(DEFAULT_TICK_SECONDS).min(1e6));
        let now = Instant::now();
        Self { unit: unit.into(), len, pos: 0, first: 0, started: now, last: now, every }
    }

    fn advance(&mut self, by: u64) {
        self.pos = (self.pos + by).min(self.len);
        if self.last.elapsed() >= self.every {
            self.last = Instant::now();
            crate::errln!("{}", self.line());
        }
    }

    /// `progress: 120/400 steps (30 %)  elapsed 1m05s  1.85 steps/s  eta 2m31s`.
    fn line(&self) -> String {
        let elapsed = self.started.elapsed().as_secs_f64();
        let done = self.pos.saturating_sub(self.first);
        let rate = if elapsed > 0.0 { done as f64 / elapsed } else { 0.0 };
        let eta = if rate > 0.0 { clock((self.len - self.pos) as f64 / rate) } else { "unknown".into() };
        let pct = if self.len > 0 { 100.0 * self.pos as f64 / self.len as f64 } else { 100.0 };
        format!(
            "progress: {}/{} {} ({pct:.0} %)  elapsed {}  {rate:.3} {}/s  eta {eta}",
            self.pos,
            self.len,
            self.unit,
            clock(elapsed),
            self.unit
        )
    }
}

/// Seconds as `1h02m03s`, `2m31s` or `12s`.
pub fn clock(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, s) => format!("{h}h{m:02}m{s:02}s"),
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
        let ticker = (!terminal).then(|| Arc::new(Mutex::new(Ticker::new(len, unit))));
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
            t.lock().unwrap_or_else(|e| e.into_inner()).advance(n);
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
        if let Some(t) = &self.ticker {
            let mut t = t.lock().unwrap_or_else(|e| e.into_inner());
            (t.pos, t.first) = (pos.min(t.len), pos.min(t.len));
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
