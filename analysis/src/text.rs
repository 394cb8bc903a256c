//! The plain text of the analyses' reports, as `bc-cli` prints them: the same numbers as the
//! JSON, laid out for a terminal. A library user prints them too.
//!
//! ```
//! use boldcast_analysis::text::side_word;
//! assert_eq!(side_word(None), "-");
//! ```

use crate::eval::EvalReport;
use crate::fingerprint::{Accuracy, FingerprintReport};
use crate::infer::embed::EmbedEntry;
use crate::infer::forecast::{ForecastReport, RunEntry, Total};
use crate::infer::Side;
use boldcast_baselines::cv::FoldUnit;
use boldcast_baselines::var::VarChoice;
use boldcast_baselines::{BaselineChoices, Interval};
use boldcast_train::text::subject_list;

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
    let names: Vec<&str> = r.rows.iter().map(|row| row.name.as_str()).collect();
    s += &format!("  ({})\n", crate::eval::names::key(&names));
    s + &r_squared(r) + &improvement(r) + &choices(&r.baselines) + &motion(r)
}

/// The held-out runs' head motion in a line, when the data carry motion tables.
fn motion(r: &EvalReport) -> String {
    let m = &r.motion;
    if m.is_empty() {
        return String::new();
    }
    let mean = m.iter().map(|x| x.mean_fd).sum::<f64>() / m.len() as f64;
    let worst = m.iter().max_by(|a, b| a.mean_fd.total_cmp(&b.mean_fd)).expect("not empty");
    let high: usize = m.iter().map(|x| x.high_trs).sum();
    format!(
        "head motion of {} held-out runs: mean framewise displacement {mean:.3} mm (highest {} at {:.3} mm); \
         {high} TRs above {} mm\n",
        m.len(),
        worst.run,
        worst.mean_fd,
        boldcast_data::motion::FD_HIGH_MM
    )
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
