//! The plain text of a training run's records and of a search, as `bc-cli` prints them: the
//! same numbers as the JSON, laid out for a terminal. A library user prints them too (the
//! analyses' tables are `boldcast_analysis::text`'s).
//!
//! ```
//! use boldcast_train::text::subject_list;
//! assert_eq!(subject_list(&["01".to_string(), "02".to_string()]), r#"["01", "02"]"#);
//! ```

use crate::config::RunConfig;
use crate::data::TrainData;
use crate::tune::{self, Search, TuneReport};
use crate::{Dist, StopReason, TrainReport, ValRecord};
use boldcast_core::ModelConfig;

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

/// The results table of a search: `results.tsv`, and the winner.
pub fn tune_table(report: &TuneReport, search: &Search) -> String {
    let mut text = tune::results_tsv(report);
    if let (Some(i), Some(f)) = (report.best, &report.best_config) {
        text += &format!("best: {}, configuration in {}\n", tune::trial_dir_name(i), search.out.join(f).display());
    }
    text
}

/// Where a long job stands: `pos` of `len` `unit`, of which this invocation started at
/// `first` (a resumed run), for the rate.
pub struct Count<'a> {
    /// Done.
    pub pos: u64,
    /// In all.
    pub len: u64,
    /// Done before this invocation.
    pub first: u64,
    /// `steps`, `tokens`.
    pub unit: &'a str,
}

/// `progress: 120/400 steps (30 %)  elapsed 1m05s  1.846 steps/s  eta 2m31s`, `elapsed`
/// seconds into the invocation (a redirected run's progress line).
pub fn progress_line(c: &Count, elapsed: f64) -> String {
    let rate = if elapsed > 0.0 { c.pos.saturating_sub(c.first) as f64 / elapsed } else { 0.0 };
    let eta = if rate > 0.0 { clock(c.len.saturating_sub(c.pos) as f64 / rate) } else { "unknown".into() };
    let pct = if c.len > 0 { 100.0 * c.pos as f64 / c.len as f64 } else { 100.0 };
    let (pos, len, unit) = (c.pos, c.len, c.unit);
    format!("progress: {pos}/{len} {unit} ({pct:.0} %)  elapsed {}  {rate:.3} {unit}/s  eta {eta}", clock(elapsed))
}

/// The progress lines of a long job whose output is not a terminal: [`Ticker::advance`] gives
/// a [`progress_line`] at most once every `every`.
pub struct Ticker {
    unit: String,
    len: u64,
    pos: u64,
    /// Where this invocation started (a resumed run's first step), for the rate.
    first: u64,
    started: std::time::Instant,
    last: std::time::Instant,
    every: std::time::Duration,
}

impl Ticker {
    /// `len` `unit` to do, a line at most every `every`.
    pub fn new(len: u64, unit: &str, every: std::time::Duration) -> Self {
        let now = std::time::Instant::now();
        Self { unit: unit.into(), len, pos: 0, first: 0, started: now, last: now, every }
    }

    /// Sets the total (known only once the work starts).
    pub fn set_len(&mut self, len: u64) {
        self.len = len;
    }

    /// A resumed job: `pos` were done before this invocation.
    pub fn start_at(&mut self, pos: u64) {
        (self.pos, self.first) = (pos.min(self.len), pos.min(self.len));
    }

    /// `by` more done; the line when one is due.
    pub fn advance(&mut self, by: u64) -> Option<String> {
        self.advance_to(self.pos.saturating_add(by))
    }

    /// `pos` done; the line when one is due.
    pub fn advance_to(&mut self, pos: u64) -> Option<String> {
        self.pos = pos.max(self.pos).min(self.len);
        (self.last.elapsed() >= self.every).then(|| {
            self.last = std::time::Instant::now();
            let count = Count { pos: self.pos, len: self.len, first: self.first, unit: &self.unit };
            progress_line(&count, self.started.elapsed().as_secs_f64())
        })
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

/// The line of a training step (1-based): its loss, learning rate and gradient norm.
pub fn step_line(rec: &crate::StepRecord) -> String {
    format!("step {:>6}  loss {:.6}  lr {:.3e}  grad_norm {:.4}", rec.step + 1, rec.loss, rec.lr, rec.grad_norm)
}

/// The line of a validation: its loss beside the floor (on the synthetic fixture) or the
/// single-lag AR reference (on other data; `floor_kind` says which), per horizon, the
/// val/train ratio, the best so far and the patience used.
pub fn val_line(v: &ValRecord, horizons: &[usize], patience: u64, floor_kind: &str) -> String {
    let hz: Vec<String> = (horizons.iter().zip(&v.val_per_horizon).zip(&v.floor_per_horizon))
        .map(|((h, l), f)| format!("h{h} {l:.4}/{f:.4}"))
        .collect();
    let patience = if v.bad_validations > 0 && patience > 0 {
        format!("  (no improvement {}/{patience})", v.bad_validations)
    } else {
        String::new()
    };
    let label = if floor_kind.starts_with("exact") { "floor" } else { "single-lag AR ref" };
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

/// The lines at the end of a run: how it stopped, the verdict and the held-out judgement.
pub fn end_lines(r: &TrainReport, floor_kind: &str) -> Vec<String> {
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
            "finished ({}) at step {}: val_loss {l:.6}, {floor_kind} {:.6} (ratio {:.4}); best {}",
            r.reason.as_str(),
            r.steps,
            r.floor.overall,
            l / r.floor.overall,
            r.best.map_or("-".into(), |(s, b)| format!("{b:.6} at step {s} (best.safetensors)"))
        ));
    }
    lines.extend(verdict_line(r));
    if let Some(j) = &r.judgement {
        lines.push(format!("held-out: {}", j.words));
    }
    lines
}

/// The verdict line of a finished run: against the best baseline when the run starts at the
/// linear fit, else the held-out rule.
fn verdict_line(r: &TrainReport) -> Option<String> {
    let v = r.verdict?;
    let word = if v.passed { "PASS" } else { "FAIL" };
    if let (Some(j), true) = (&r.judgement, r.against_baseline) {
        let rule = crate::summary::BASELINE_RULE.replace("final val_loss", &format!("val_loss {:.6}", j.val_loss));
        return Some(format!(
            "verdict: {word}  {rule} (the run starts at the linear fit, so it is judged against the best baseline)"
        ));
    }
    let fell = v.last <= v.ratio * v.first;
    let zero = r
        .judgement
        .as_ref()
        .map_or(String::new(), |j| format!("; val_loss {} predicting zero", if j.beats_zero { "<" } else { ">=" }));
    Some(format!(
        "verdict: {word}  mean(last 3 val) = {:.6} {} 0.7 * mean(first 3 val) = 0.7 * {:.6} = {:.6}{zero}",
        v.last,
        if fell { "<=" } else { ">" },
        v.first,
        v.ratio * v.first
    ))
}

/// The lines before a run's first step: the ranks, the model and data, the split, and the
/// optimizer with the tensors it decays.
pub fn preamble_lines(cfg: &RunConfig, data: &TrainData, model: &ModelConfig, dist: &Dist) -> Vec<String> {
    let t = &cfg.train;
    let mut lines = Vec::new();
    if dist.size() > 1 {
        lines.push(format!(
            "train: data-parallel over {} ranks ({}): global batch {}, {} windows per rank",
            dist.size(),
            dist.0.name(),
            t.batch_size,
            t.batch_size / dist.size()
        ));
    }
    lines.push(format!(
        "train: preset {}, {} parameters, data {}",
        cfg.preset.as_deref().unwrap_or("?"),
        model.n_params(),
        data.source
    ));
    lines.push(format!(
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
        .param_specs()
        .iter()
        .filter(|s| boldcast_core::optim::decays(&s.name, &s.shape))
        .map(|s| s.name.clone())
        .collect();
    lines.push(format!(
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
    lines
}

/// A trial's line of `tune`: its directory and values, then its best validation loss (or its
/// error) and its time; `n` trials in all.
pub fn trial_line(keys: &[String], n: usize, r: &tune::TrialResult) -> String {
    let values: Vec<String> = keys.iter().zip(&r.values).map(|(k, v)| format!("{k}={v}")).collect();
    let what = match (&r.error, r.best_val_loss) {
        (Some(e), _) => format!("failed: {e}"),
        (None, l) => format!(
            "best val_mse {} at step {}, {} steps{}",
            l.map_or("-".into(), |l| format!("{l:.6}")),
            r.best_step.map_or("-".into(), |s| s.to_string()),
            r.steps.map_or("-".into(), |s| s.to_string()),
            if r.reused { " (finished before: kept)" } else { "" }
        ),
    };
    let wall = r.wall_s.map_or(String::new(), |s| format!(" ({s:.1} s)"));
    format!("trial {}/{n} {} {}: {what}{wall}", r.trial + 1, r.dir, values.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines_give_the_rate_of_this_invocation_and_the_time_left() {
        assert_eq!((clock(7.4), clock(151.0), clock(3723.0)), ("7s".into(), "2m31s".into(), "1h02m03s".into()));
        let c = Count { pos: 120, len: 400, first: 20, unit: "steps" };
        // 100 steps in 50 s: 2 steps/s, 280 left.
        assert_eq!(progress_line(&c, 50.0), "progress: 120/400 steps (30 %)  elapsed 50s  2.000 steps/s  eta 2m20s");
        let mut t = Ticker::new(10, "runs", std::time::Duration::ZERO);
        t.start_at(4);
        assert!(t.advance(3).unwrap().starts_with("progress: 7/10 runs (70 %)"));
        assert!(t.advance_to(99).unwrap().starts_with("progress: 10/10 runs"), "never past the total");
        let idle = Count { pos: 0, len: 0, first: 0, unit: "tokens" };
        assert_eq!(progress_line(&idle, 0.0), "progress: 0/0 tokens (100 %)  elapsed 0s  0.000 tokens/s  eta unknown");
    }

    #[test]
    fn long_subject_lists_are_shortened_to_a_count_and_the_ends() {
        let labels = |n: usize| (1..=n).map(|i| format!("{i:04}")).collect::<Vec<_>>();
        assert_eq!(subject_list(&labels(2)), r#"["0001", "0002"]"#);
        assert_eq!(subject_list(&labels(12)).matches('"').count(), 24, "twelve are all listed");
        assert_eq!(subject_list(&labels(3299)), r#"3299 subjects ["0001", "0002", "0003", ..., "3299"]"#);
        assert_eq!(subject_list(&[]), "[]");
    }
}
