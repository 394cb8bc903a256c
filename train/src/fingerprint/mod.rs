//! Subject fingerprinting: can a subject be identified from one of their runs, given their
//! other runs? Features of each run ([`Sample`]: pooled model embeddings, or the classical
//! functional-connectivity fingerprint of [`fc`]) are compared leave-one-run-out
//! ([`identify()`]), and each method's top-1 and top-5 accuracy is reported with an exact
//! Clopper-Pearson interval, a bootstrap interval over subjects and its chance level, beside
//! the paired McNemar test of two methods ([`report`], [`stats`]); [`model`] does it for a
//! checkpoint's pooled embeddings against the functional-connectivity fingerprint.
//!
//! With one run per subject no run has a partner, so each run is split into halves
//! ([`halves`]) and a half is identified from the other half; the report says so
//! ([`FingerprintReport::halves`]).
//!
//! ```
//! # fn main() -> Result<(), boldcast_train::TrainError> {
//! use boldcast_fixtures::{IdentitySpec, Layout};
//! use boldcast_train::fingerprint::{self, FcEdges, Method, Similarity};
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
pub mod report;
pub mod stats;

pub use fc::{fc_features, fc_samples, fisher_z, halves, needs_halves, whole_runs, FcEdges, Segment};
pub use identify::{identify, Identification, Query, Similarity, TOP_K};
pub use report::{method_report, Accuracy, FingerprintReport, McNemar, MethodReport};
pub use stats::Interval;

use crate::infer::Pool;
use crate::TrainError;
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

/// The segments of `runs` to fingerprint and whether they are halves: whole runs when some
/// subject has two of them, else each run's two halves ([`needs_halves`]).
pub fn segments(ds: &Dataset, runs: &[usize]) -> Result<(Vec<Segment>, bool), TrainError> {
    if needs_halves(ds, runs) {
        Ok((halves(ds, runs)?, true))
    } else {
        Ok((whole_runs(ds, runs)?, false))
    }
}

/// The report's note on what a sample is.
fn note(halves: bool) -> String {
    if halves {
        "every subject has one run: each run was split into halves, and each half is identified from the other \
         halves (its own other half among them)"
            .into()
    } else {
        "leave-one-run-out: each run is identified from every other run".into()
    }
}

/// Identifies the samples of each method and reports them, with the McNemar test of the first
/// two when there are two (they must score the same queries). `halves` says whether the
/// samples are halves of runs ([`segments`]).
pub fn fingerprint(methods: &[Method<'_>], halves: bool) -> Result<FingerprintReport, TrainError> {
    let reports = methods
        .iter()
        .map(|m| {
            let id = identify(m.samples, m.similarity)?;
            Ok(MethodReport { pooling: m.pooling, features: m.features.into(), ..method_report(m.name, &id) })
        })
        .collect::<Result<Vec<_>, TrainError>>()?;
    let mcnemar = match reports.as_slice() {
        [a, b, ..] => Some(report::mcnemar(a, b)?),
        _ => None,
    };
    Ok(FingerprintReport {
        halves,
        note: note(halves),
        level: report::LEVEL,
        bootstrap_resamples: report::BOOTSTRAP_RESAMPLES,
        bootstrap_seed: report::BOOTSTRAP_SEED,
        methods: reports,
        mcnemar,
    })
}

#[cfg(test)]
mod tests;
