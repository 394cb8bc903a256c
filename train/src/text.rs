//! The plain text of reports and records, as `bc-cli` prints them: the same numbers as the
//! JSON, laid out for a terminal. A library user prints them too.
//!
//! ```
//! use boldcast_train::text::subject_list;
//! assert_eq!(subject_list(&["01".to_string(), "02".to_string()]), r#"["01", "02"]"#);
//! ```

use crate::config::RunConfig;
use crate::data::TrainData;
use crate::eval::cv::FoldUnit;
use crate::eval::var::VarChoice;
use crate::eval::{BaselineChoices, EvalReport};
use crate::fingerprint::{Accuracy, FingerprintReport, Interval};
use crate::infer::embed::EmbedEntry;
use crate::infer::forecast::{ForecastReport, RunEntry, Total};
use crate::infer::Side;
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

/// The width of a number column of the table (the longest baseline name and a space).
const COL: usize = 14;
/// The width of the name column (the longest row label, `single-lag AR reference`, and a space).
const NAME: usize = 24;

/// The table printed on stdout: the MSE of every row per horizon and their mean beside the
/// single-lag AR reference, `R^2`, the model against the best baseline per horizon (in words,
/// with the paired bootstrap's sentence) and what the fitted baselines chose (the report's
/// warnings, e.g. a penalty at an end of the ridge grid, go to stderr: `bc-cli eval`).
pub fn eval_table(r: &EvalReport) -> String {
    let mut s = format!(
        "eval: {} on {}\nheld-out subjects {}, {} windows\n",
        r.weights.display(),
        r.data,
        subject_list(&r.heldout_subjects),
        r.windows
    );
    s += "MSE of standardized BOLD (variance units), per horizon h (tokens ahead)\n";
    if let (Some(tr), Some(secs)) = (r.tr_seconds, &r.horizon_seconds) {
        let text: Vec<String> = r
            .horizons
            .iter()
            .zip(secs)
            .map(|(h, &span)| format!("h{h} {}", boldcast_data::seconds_span_text(span)))
            .collect();
        s += &format!("horizons in seconds (TR {tr} s): {}\n", text.join(", "));
    }
    s += &header(&r.horizons, "mean");
    let reference = ("single-lag AR reference", &r.single_lag_ar_reference);
    let exact = r.floors.iter().filter(|f| f.name == "floor_exact").map(|f| (f.name.as_str(), f));
    let labelled = r.rows.iter().map(|row| (row.name.as_str(), row)).chain([reference]).chain(exact);
    for (label, row) in labelled {
        s += &numbers(label, &row.per_horizon, Some(row.mean), 6);
    }
    s += "  (single-lag AR reference: 1 - acf(L)^2 of the held-out runs, a per-parcel forecast from the last TR \
          alone; not a floor)\n";
    s + &r_squared(r) + &improvement(r) + &choices(&r.baselines)
}

/// A line of the table: `label`, then `values` (and `last`) with `digits` decimals.
fn numbers(label: &str, values: &[f64], last: Option<f64>, digits: usize) -> String {
    let mut s = format!("{label:<NAME$}");
    for v in values.iter().chain(&last) {
        s += &format!("{v:>COL$.digits$}");
    }
    s + "\n"
}

/// The header line of the per-horizon columns, and a last column `last` (or none when empty).
fn header(horizons: &[usize], last: &str) -> String {
    let mut s = format!("{:<NAME$}", "");
    for h in horizons {
        s += &format!("{:>COL$}", format!("h{h}"));
    }
    if !last.is_empty() {
        s += &format!("{last:>COL$}");
    }
    s + "\n"
}

/// `R^2` per horizon pooled over parcels (and over everything), and its median over parcels.
fn r_squared(r: &EvalReport) -> String {
    let mut s =
        "R^2 = 1 - SSE / SST (SST about the held-out targets' mean), per horizon, pooled over parcels\n".to_string();
    s += &header(&r.horizons, "pooled");
    for q in &r.r_squared {
        s += &numbers(&q.name, &q.per_horizon, Some(q.pooled), 4);
    }
    s += "R^2 per parcel: median over parcels, per horizon (every parcel's in the JSON)\n";
    s += &header(&r.horizons, "");
    for q in &r.r_squared {
        s += &numbers(&q.name, &q.parcel_median, None, 4);
    }
    s
}

/// The model against the best baseline at each horizon: the baseline, its MSE, the relative
/// difference in words, and the paired bootstrap's sentence.
fn improvement(r: &EvalReport) -> String {
    let i = &r.improvement;
    let mut s = "model vs the best baseline (lowest held-out MSE at each horizon)\n".to_string();
    s += &header(&r.horizons, "");
    s += &format!("{:<NAME$}", "best baseline");
    for b in &i.best_baseline {
        s += &format!("{b:>COL$}");
    }
    s += "\n";
    s += &numbers("best MSE", &i.best_mse, None, 6);
    for (h, w) in r.horizons.iter().zip(&i.words) {
        s += &format!("model at h{h}: {w} (of the best baseline's MSE)\n");
    }
    s + &format!("paired bootstrap: {}\n", r.bootstrap.sentence)
}

/// What the fitted baselines chose (orders in TRs, penalties relative to the unit variance).
fn choices(c: &BaselineChoices) -> String {
    let cv = match c.cv_unit {
        FoldUnit::None => "no cross-validation (one training run): defaults".to_string(),
        FoldUnit::Subject => format!("{}-fold cross-validation over training subjects", c.cv_folds),
        FoldUnit::Run => format!("{}-fold cross-validation over the training subject's runs", c.cv_folds),
    };
    let mut s = format!("chosen by {cv} (orders p in TRs; ridge lambda per sample, variance units):\n");
    s += &format!("  ar_p: p = {} (of 1..={})", c.ar_p.p, c.ar_p.p_max);
    if c.ar_p.p_lowest_cv != c.ar_p.p {
        s += &format!(
            "; lowest CV MSE at p = {}, within one paired standard error or 0.1 % of which the lower order is kept",
            c.ar_p.p_lowest_cv
        );
    }
    s += "\n";
    for (name, v) in [("var1", &c.var1), ("var_p", &c.var_p), ("var_pca", &c.var_pca)] {
        s += &match v {
            VarChoice::Fitted { p, rank, lambda, p_max, .. } => {
                let edge = if v.edge_warning(name).is_some() { " (an end of the grid)" } else { "" };
                let rank = rank.map_or(String::new(), |r| format!(", rank {r} principal components"));
                format!("  {name}: p = {p} (of 1..={p_max}){rank}, lambda = {lambda:e}{edge}\n")
            }
            VarChoice::Skipped { reason } => format!("  {name}: skipped: {reason}\n"),
        };
    }
    s
}

/// `0.900 [0.555, 0.997]`.
fn acc(a: &Accuracy) -> String {
    format!("{:.3} [{:.3}, {:.3}]", a.value, a.clopper_pearson.lo, a.clopper_pearson.hi)
}

/// `[lo, hi]` with `digits` decimals.
fn interval(i: &Interval, digits: usize) -> String {
    format!("[{:.digits$}, {:.digits$}]", i.lo, i.hi)
}

/// The rows of differential identifiability and the same-vs-other margins, one per method.
fn separation_rows(r: &FingerprintReport) -> String {
    let level = (r.level * 100.0).round();
    let mut s = format!(
        "{:<11}{:<26}{:<18}{:<28}{}\n",
        "method",
        format!("Idiff [{level}% bootstrap]"),
        "I_self / I_others",
        "margin mean [bootstrap]",
        "margin > 0 [bootstrap]"
    );
    for m in &r.methods {
        let x = &m.separation;
        s += &format!(
            "{:<11}{:<26}{:<18}{:<28}{:.3} {}\n",
            m.name,
            format!("{:.2} {}", x.idiff, interval(&x.idiff_bootstrap, 2)),
            format!("{:.3} / {:.3}", x.same_mean, x.other_mean),
            format!("{:.4} {}", x.margin_mean, interval(&x.margin_bootstrap, 4)),
            x.margin_positive,
            interval(&x.margin_positive_bootstrap, 3),
        );
    }
    if let Some(d) = &r.separation_difference {
        s += &format!(
            "paired ({} - {}): Idiff {:.2} {}, margin {:.4} {}\n",
            d.methods[0],
            d.methods[1],
            d.idiff,
            interval(&d.idiff_bootstrap, 2),
            d.margin,
            interval(&d.margin_bootstrap, 4)
        );
    }
    s + "Idiff: 100 (mean same-subject - mean other-subject similarity) over pairs of different samples (Amico & \
         Goni 2018); margin: a query's mean similarity to its subject's other samples minus its best other-subject \
         one\n"
}

/// The table printed on stdout.
pub fn fingerprint_table(r: &FingerprintReport) -> String {
    let level = (r.level * 100.0).round();
    let mut s = format!("fingerprint: {}\n", r.note);
    s += &format!(
        "{:<11}{:<10}{:>8}{:>9}  {:<30}{:<20}{:<26}{:>12}\n",
        "method",
        "similar.",
        "queries",
        "subjects",
        format!("top-1 [{level}% Clopper-Pearson]"),
        "top-1 bootstrap",
        "top-5 [Clopper-Pearson]",
        "chance 1/5"
    );
    for m in &r.methods {
        let boot = interval(&m.top1.bootstrap, 3);
        let chance = format!("{:.3}/{:.3}", m.top1.chance, m.top5.chance);
        s += &format!(
            "{:<11}{:<10}{:>8}{:>9}  {:<30}{:<20}{:<26}{:>12}\n",
            m.name,
            m.similarity.name(),
            m.n_queries,
            m.n_subjects,
            acc(&m.top1),
            boot,
            acc(&m.top5),
            chance
        );
    }
    s += &separation_rows(r);
    for m in r.methods.iter().filter(|m| !m.features.is_empty()) {
        let pooling = m.pooling.map(|p| format!(" (pooling {})", p.name())).unwrap_or_default();
        s += &format!("{}{pooling}: {}\n", m.name, m.features);
    }
    if let Some(t) = &r.mcnemar {
        s += &format!(
            "McNemar (top-1, {} vs {}): both {}, only {} {}, only {} {}, neither {}; exact two-sided p = {:.4}\n",
            t.methods[0],
            t.methods[1],
            t.both,
            t.methods[0],
            t.only_first,
            t.methods[1],
            t.only_second,
            t.neither,
            t.p_value
        );
    }
    s
}

/// The results table of a search: `results.tsv`, and the winner.
pub fn tune_table(report: &TuneReport, search: &Search) -> String {
    let mut text = tune::results_tsv(report);
    if let (Some(i), Some(f)) = (report.best, &report.best_config) {
        text += &format!("best: {}, configuration in {}\n", tune::trial_dir_name(i), search.out.join(f).display());
    }
    text
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

/// A run's side of the training split in a line: `train`, `heldout`, `unused` or `-`.
pub fn side_word(s: Option<Side>) -> &'static str {
    match s {
        Some(Side::Train) => "train",
        Some(Side::Heldout) => "heldout",
        Some(Side::Unused) => "unused",
        None => "-",
    }
}

fn num(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.6}"))
}

/// The header of `forecast`'s per-run lines.
pub fn forecast_header(horizons: &[usize]) -> String {
    let mut s = format!("{:<28}{:<9}{:>7}{:>8}{:>12}", "run", "side", "TRs", "tokens", "MSE");
    horizons.iter().for_each(|h| s += &format!("{:>12}", format!("h{h}")));
    s
}

/// A run's line of `forecast`: its side, length and MSE overall and per horizon.
pub fn forecast_line(e: &RunEntry) -> String {
    let mut s = format!("{:<28}{:<9}{:>7}{:>8}{:>12}", e.id, side_word(e.side), e.n_tr, e.tokens, num(e.mse.mse));
    e.mse.per_horizon.iter().for_each(|v| s += &format!("{:>12}", num(*v)));
    s
}

/// The pooled lines of `forecast`: all runs, and each side.
pub fn forecast_totals(r: &ForecastReport) -> Vec<String> {
    let line = |t: &Total| {
        let mut s = format!("{:<52}{:>12}", format!("{} ({} runs)", t.runs, t.n_runs), num(t.mse.mse));
        t.mse.per_horizon.iter().for_each(|v| s += &format!("{:>12}", num(*v)));
        s
    };
    r.totals.iter().map(line).collect()
}

/// A run's line of `embed`: its side, length, what was written and its shape.
pub fn embed_line(e: &EmbedEntry) -> String {
    format!("{:<28}{:<9}{:>7} TRs  {} {:?}", e.id, side_word(e.side), e.n_tr, e.embedding, e.shape)
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
    fn long_subject_lists_are_shortened_to_a_count_and_the_ends() {
        let labels = |n: usize| (1..=n).map(|i| format!("{i:04}")).collect::<Vec<_>>();
        assert_eq!(subject_list(&labels(2)), r#"["0001", "0002"]"#);
        assert_eq!(subject_list(&labels(12)).matches('"').count(), 24, "twelve are all listed");
        assert_eq!(subject_list(&labels(3299)), r#"3299 subjects ["0001", "0002", "0003", ..., "3299"]"#);
        assert_eq!(subject_list(&[]), "[]");
    }
}
