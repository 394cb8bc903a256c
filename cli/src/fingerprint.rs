//! `bc-cli fingerprint`: the table, the JSON and the figure of a subject-fingerprinting report
//! around the library's [`boldcast_train::fingerprint::model::fingerprint_model`] (which says
//! what is compared and how; [`boldcast_train::fingerprint`] documents the statistics).

use crate::args::FingerprintArgs;
use crate::error::CliError;
use boldcast::core::{Adjacency, Model, ModelConfig};
use boldcast_train::fingerprint::model::fingerprint_model;
use boldcast_train::fingerprint::{Accuracy, FingerprintReport, Interval};

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
pub fn table(r: &FingerprintReport) -> String {
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

/// `bc-cli fingerprint`: opens the checkpoint and the data, embeds every selected run (or half
/// run) and identifies subjects by its embeddings and by functional connectivity; draws the
/// figure when `--figure` is given (its path checked first, [`boldcast_plot::check_figure_path`]).
pub fn fingerprint_command<M, F>(a: &FingerprintArgs, build: F) -> Result<FingerprintReport, CliError>
where
    M: Model<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast::core::Error>,
{
    if let Some(path) = &a.figure {
        boldcast_plot::check_figure_path(path, a.replace.overwrite)?;
    }
    let (p, runs, context, _) = crate::infer::open(&a.model, build)?;
    let report = fingerprint_model(&p.model, &p.loaded.ds, &runs, (&context, a.pool.pool()), a.segment)?;
    if let Some(path) = &a.figure {
        let svg = boldcast_plot::fingerprint::draw_fingerprint(&report, path, a.replace.overwrite)?;
        crate::errln!("figure: {} (and {})", path.display(), svg.display());
    }
    Ok(report)
}
