//! Subject fingerprinting: can a subject be identified from one of their runs, given their
//! other runs? Features of each run ([`Sample`]: pooled model embeddings, or the classical
//! functional-connectivity fingerprint of [`fc`]) are compared leave-one-run-out
//! ([`identify()`]), and each method's top-1 and top-5 accuracy is reported with an exact
//! Clopper-Pearson interval, a bootstrap interval over subjects and its chance level, beside
//! the paired McNemar test of two methods ([`report`], [`boldcast_baselines::stats`]); [`model`] does it for a
//! checkpoint's pooled embeddings against the functional-connectivity fingerprint.
//!
//! With one run per subject no run has a partner, so each run is split into halves
//! ([`halves`]) and a half is identified from the other half; the report says so
//! ([`FingerprintReport::halves`]).
//!
//! Short scans are where a fingerprint is tested hardest, so each run can be cut to its first
//! `N` TRs ([`Cut::First`], [`first_trs`]): still one sample per run, identified from the
//! other runs' segments, so identification is always across runs, never within one (the
//! other segments of the query's own run would share its session, not only its subject).
//! Top-1 saturates when every subject is found; [`separation`] adds measures that keep
//! moving (differential identifiability, the same-vs-other margin). Related subjects
//! (twins, siblings) are compared with no one of their family ([`relatives`]).
//!
//! ```
//! # fn main() -> Result<(), boldcast_analysis::AnalysisError> {
//! use boldcast_fixtures::{IdentitySpec, Layout};
//! use boldcast_analysis::fingerprint::{self, FcEdges, Method, Similarity};
//! let layout = Layout { subjects: 4, runs: 2, trs: 200, parcels: 8, seed: 1 };
//! let ds = boldcast_data::Dataset::from_synth(&IdentitySpec::planted(layout).generate()?, None)?;
//! let runs: Vec<usize> = (0..ds.runs.len()).collect();
//! let (segments, halves) = fingerprint::segments(&ds, &runs)?;
//! let fc = fingerprint::fc_samples(&segments, FcEdges::FisherZ);
//! let report = fingerprint::fingerprint(&[Method::new("fc", &fc, Similarity::Pearson)], halves)?;
//! assert!(report.methods[0].top1.value > 0.5);
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod fc;
pub mod identify;
pub mod model;
pub mod relatives;
pub mod report;
pub mod separation;

pub use boldcast_baselines::stats::Interval;
pub use fc::{fc_features, fc_samples, first_trs, fisher_z, halves, needs_halves, whole_runs, FcEdges, Segment};
pub use identify::{identify, identify_among, Identification, Query, Similarity, TOP_K};
pub use relatives::Relatives;
pub use report::{method_report, Accuracy, FingerprintReport, McNemar, MethodReport};
pub use separation::Separation;

use crate::infer::Pool;
use crate::AnalysisError;
use boldcast_data::Dataset;

/// One sample to identify: a run (or half a run) of a subject and its features.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The subject label.
    pub subject: String,
    /// The sample's label (`sub-01_run-1`, `sub-01_run-1 (first half)`).
    pub label: String,
    /// The features: a flattened pooled embedding `(P, M)`, FC edges, ...
    pub features: Vec<f64>,
}

/// One method of a fingerprint report: a name, its samples and their similarity, and what
/// the features are (for the report).
#[derive(Clone, Copy, Debug)]
pub struct Method<'a> {
    /// The name in the report (`embedding`, `fc`).
    pub name: &'a str,
    /// The samples, in the same order for every method.
    pub samples: &'a [Sample],
    /// How they are compared.
    pub similarity: Similarity,
    /// How a model's embeddings were pooled into the features (`None`: not a model's).
    pub pooling: Option<Pool>,
    /// What the features are, in words (empty: not said).
    pub features: &'a str,
}

impl<'a> Method<'a> {
    /// A method of `samples` under `similarity`, its features not described.
    pub fn new(name: &'a str, samples: &'a [Sample], similarity: Similarity) -> Self {
        Self { name, samples, similarity, pooling: None, features: "" }
    }

    /// The same, its features described in words and, for a model's embeddings, pooled by
    /// `pooling`.
    pub fn described(self, features: &'a str, pooling: Option<Pool>) -> Self {
        Self { features, pooling, ..self }
    }
}

/// What one sample of a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// The whole run.
    Whole,
    /// Each half of the run (one run per subject).
    Halves,
    /// The run's first `N` TRs.
    First(usize),
}

impl Cut {
    /// What a sample is, in a few words (a figure's subtitle).
    pub fn words(self) -> String {
        match self {
            Cut::Whole => "whole runs".into(),
            Cut::Halves => "each run split into halves".into(),
            Cut::First(n) => format!("the first {n} TRs of each run"),
        }
    }

    /// The report's note on what a sample is.
    fn note(self) -> String {
        match self {
            Cut::Whole => "leave-one-run-out: each run is identified from every other run".into(),
            Cut::Halves => "every subject has one run: each run was split into halves, and each half is identified \
                            from the other halves (its own other half among them)"
                .into(),
            Cut::First(n) => format!(
                "leave-one-run-out on the first {n} TRs of each run (standardized again over them): each run's \
                 segment is identified from the other runs' segments, never from its own run"
            ),
        }
    }
}

/// The segments of `runs` to fingerprint and whether they are halves: whole runs when some
/// subject has two of them, else each run's two halves ([`needs_halves`]).
pub fn segments(ds: &Dataset, runs: &[usize]) -> Result<(Vec<Segment>, bool), AnalysisError> {
    if needs_halves(ds, runs) {
        Ok((halves(ds, runs)?, true))
    } else {
        Ok((whole_runs(ds, runs)?, false))
    }
}

/// The segments of `runs` and their cut: with `first = Some(n)` each run's first `n` TRs
/// ([`first_trs`]; an error when no subject has two of the runs), else [`segments`].
pub fn cut_segments(ds: &Dataset, runs: &[usize], first: Option<usize>) -> Result<(Vec<Segment>, Cut), AnalysisError> {
    match first {
        Some(n) if needs_halves(ds, runs) => {
            let reason = format!(
                "--segment {n}: no subject has two runs, and a run's segment is identified only from other runs"
            );
            Err(AnalysisError::Fingerprint { reason })
        }
        Some(n) => Ok((first_trs(ds, runs, n)?, Cut::First(n))),
        None => segments(ds, runs).map(|(s, h)| (s, if h { Cut::Halves } else { Cut::Whole })),
    }
}

/// Identifies the samples of each method and reports them, with the McNemar test of the first
/// two when there are two (they must score the same queries). `halves` says whether the
/// samples are halves of runs ([`segments`]).
pub fn fingerprint(methods: &[Method<'_>], halves: bool) -> Result<FingerprintReport, AnalysisError> {
    fingerprint_cut(methods, if halves { Cut::Halves } else { Cut::Whole }, &Relatives::none())
}

/// [`fingerprint`] of samples cut from the runs as `cut` says ([`cut_segments`]), samples of
/// related subjects (`kin`) never compared.
pub fn fingerprint_cut(methods: &[Method<'_>], cut: Cut, kin: &Relatives) -> Result<FingerprintReport, AnalysisError> {
    let reports = methods
        .iter()
        .map(|m| {
            let id = identify_among(m.samples, m.similarity, kin)?;
            Ok(MethodReport { pooling: m.pooling, features: m.features.into(), ..method_report(m.name, &id) })
        })
        .collect::<Result<Vec<_>, AnalysisError>>()?;
    let (mcnemar, separation_difference) = match reports.as_slice() {
        [a, b, ..] => {
            let test = report::mcnemar(a, b)?;
            let queries: Vec<usize> = a.queries.iter().map(|q| q.sample).collect();
            let d = separation::difference((&a.name, &a.matrix), (&b.name, &b.matrix), (&a.subjects, kin), &queries);
            (Some(test), Some(d))
        }
        _ => (None, None),
    };
    let related = reports.first().map_or(0, |m| kin.related_pairs(&m.subjects));
    Ok(FingerprintReport {
        halves: cut == Cut::Halves,
        segment_trs: match cut {
            Cut::First(n) => Some(n),
            Cut::Whole | Cut::Halves => None,
        },
        samples: cut.words(),
        note: match kin.column() {
            Some(c) => {
                format!("{}; samples of related subjects (one {c}) are not compared: {related} pairs", cut.note())
            }
            None => cut.note(),
        },
        group_column: kin.column().map(str::to_string),
        related_pairs: related,
        level: report::LEVEL,
        bootstrap_resamples: report::BOOTSTRAP_RESAMPLES,
        bootstrap_seed: report::BOOTSTRAP_SEED,
        methods: reports,
        mcnemar,
        separation_difference,
    })
}

#[cfg(test)]
mod tests;
