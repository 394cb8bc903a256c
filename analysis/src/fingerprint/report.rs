//! The fingerprint report ([`FingerprintReport`], serialized as JSON): per method its top-1
//! and top-5 accuracy with the Clopper-Pearson and bootstrap intervals and the chance level,
//! its differential identifiability and margins ([`Separation`]), the similarity matrix and
//! the queries; and the paired McNemar test of two methods.

use super::identify::{Identification, Query, Similarity, TOP_K};
use super::separation::{separation, Separation};
use crate::infer::Pool;
use crate::AnalysisError;
use boldcast_baselines::stats::{bootstrap_subjects, clopper_pearson, mcnemar_exact, Interval};
use serde::Serialize;

/// The confidence level of every interval.
pub const LEVEL: f64 = 0.95;
/// Resamples of the bootstrap over subjects.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;
/// The bootstrap's seed (fixed, so a report is reproducible).
pub const BOOTSTRAP_SEED: u64 = 2015;

/// One accuracy (top-1 or top-k) of one method.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Accuracy {
    /// The `k` of top-`k`.
    pub k: usize,
    /// Queries identified.
    pub correct: usize,
    /// Queries scored.
    pub queries: usize,
    /// `correct / queries`.
    pub value: f64,
    /// The exact interval of `correct / queries` as a binomial proportion.
    pub clopper_pearson: Interval,
    /// The percentile bootstrap interval over subjects.
    pub bootstrap: Interval,
    /// The mean chance of the queries (the identification module's documentation).
    pub chance: f64,
}

/// One method's identification and its statistics.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MethodReport {
    /// The method's name, e.g. `embedding` or `fc`.
    pub name: String,
    /// Its similarity.
    pub similarity: Similarity,
    /// How a model's embeddings were pooled into the features (`mean`, `corr`; `null` for
    /// features that are not a model's).
    pub pooling: Option<Pool>,
    /// What the features are, in words (empty when the caller did not say).
    pub features: String,
    /// Queries scored.
    pub n_queries: usize,
    /// Distinct subjects among the queries.
    pub n_subjects: usize,
    /// Top-1 accuracy.
    pub top1: Accuracy,
    /// Top-[`TOP_K`] accuracy.
    pub top5: Accuracy,
    /// Differential identifiability and the same-vs-other margins, with intervals.
    pub separation: Separation,
    /// Each sample's label (the rows and columns of `matrix`).
    pub labels: Vec<String>,
    /// Each sample's subject.
    pub subjects: Vec<String>,
    /// `matrix[i][j]`: the similarity of samples `i` and `j`.
    pub matrix: Vec<Vec<f64>>,
    /// Every scored query.
    pub queries: Vec<Query>,
    /// Samples not scored (their subject has no other sample).
    pub unscored: Vec<String>,
}

/// The exact McNemar test of two methods' top-1 outcomes on the same queries.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct McNemar {
    /// The two methods, first and second.
    pub methods: [String; 2],
    /// Queries both identify.
    pub both: usize,
    /// Queries only the first identifies (`b`).
    pub only_first: usize,
    /// Queries only the second identifies (`c`).
    pub only_second: usize,
    /// Queries neither identifies.
    pub neither: usize,
    /// The exact two-sided p-value, `min(1, 2 P(Bin(b + c, 1/2) <= min(b, c)))`.
    pub p_value: f64,
}

/// What `bc-cli fingerprint` reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FingerprintReport {
    /// Whether each run was split into halves (no subject had two runs).
    pub halves: bool,
    /// `N` when each run was cut to its first `N` TRs (`--segment`), else `null`.
    pub segment_trs: Option<usize>,
    /// What a sample is, in a few words (`whole runs`, `the first 30 TRs of each run`).
    pub samples: String,
    /// What the samples are, in words (halves or whole runs).
    pub note: String,
    /// The `participants.tsv` column whose groups (families) are related subjects, never
    /// compared with each other (`null`: none; [`super::Relatives`]).
    pub group_column: Option<String>,
    /// Pairs of samples of related subjects left out of every comparison.
    pub related_pairs: usize,
    /// The confidence level of every interval.
    pub level: f64,
    /// The bootstrap's resamples.
    pub bootstrap_resamples: usize,
    /// The bootstrap's seed.
    pub bootstrap_seed: u64,
    /// Every method, in the order given.
    pub methods: Vec<MethodReport>,
    /// The test of the first two methods, when there are two.
    pub mcnemar: Option<McNemar>,
    /// The paired difference of the first two methods' `I_diff` and margins, when there are
    /// two.
    pub separation_difference: Option<super::separation::SeparationDifference>,
}

/// One accuracy of `id`: `hit` says whether a query is identified, `chance` its chance.
fn accuracy(id: &Identification, k: usize, hit: fn(&Query) -> bool, chance: fn(&Query) -> f64) -> Accuracy {
    let q = &id.queries;
    let correct = q.iter().filter(|x| hit(x)).count();
    let mut subjects: Vec<&str> = q.iter().map(|x| x.subject.as_str()).collect();
    subjects.sort_unstable();
    subjects.dedup();
    let groups: Vec<(usize, usize)> = subjects
        .iter()
        .map(|s| {
            let mine = q.iter().filter(|x| x.subject == *s);
            (mine.clone().filter(|x| hit(x)).count(), mine.count())
        })
        .collect();
    Accuracy {
        k,
        correct,
        queries: q.len(),
        value: correct as f64 / q.len() as f64,
        clopper_pearson: clopper_pearson(correct, q.len(), LEVEL),
        bootstrap: bootstrap_subjects(&groups, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, LEVEL),
        chance: q.iter().map(chance).sum::<f64>() / q.len() as f64,
    }
}

/// The report of one method's identification (its pooling and features not said:
/// [`super::fingerprint`] sets them from its [`super::Method`]).
pub fn method_report(name: &str, id: &Identification) -> MethodReport {
    let top1 = accuracy(id, 1, |q| q.top1, |q| q.chance_top1);
    let top5 = accuracy(id, TOP_K, |q| q.top5, |q| q.chance_top5);
    let mut subjects: Vec<&str> = id.queries.iter().map(|q| q.subject.as_str()).collect();
    subjects.sort_unstable();
    subjects.dedup();
    MethodReport {
        name: name.into(),
        similarity: id.similarity,
        pooling: None,
        features: String::new(),
        n_queries: id.queries.len(),
        n_subjects: subjects.len(),
        top1,
        top5,
        separation: separation(
            &id.matrix,
            (&id.subjects, &id.relatives),
            &id.queries.iter().map(|q| q.sample).collect::<Vec<_>>(),
        ),
        labels: id.labels.clone(),
        subjects: id.subjects.clone(),
        matrix: id.matrix.clone(),
        queries: id.queries.clone(),
        unscored: id.unscored.clone(),
    }
}

/// The McNemar test of `a` and `b`'s top-1 outcomes; they must hold the same queries (by
/// label, in order), else the pairing is meaningless and this is an error.
pub fn mcnemar(a: &MethodReport, b: &MethodReport) -> Result<McNemar, AnalysisError> {
    let la: Vec<&str> = a.queries.iter().map(|q| q.label.as_str()).collect();
    let lb: Vec<&str> = b.queries.iter().map(|q| q.label.as_str()).collect();
    if la != lb {
        let reason = format!("`{}` and `{}` did not score the same queries: no paired test", a.name, b.name);
        return Err(AnalysisError::Fingerprint { reason });
    }
    let mut t = [[0usize; 2]; 2];
    for (x, y) in a.queries.iter().zip(&b.queries) {
        t[usize::from(!x.top1)][usize::from(!y.top1)] += 1;
    }
    let (b_, c_) = (t[0][1], t[1][0]);
    Ok(McNemar {
        methods: [a.name.clone(), b.name.clone()],
        both: t[0][0],
        only_first: b_,
        only_second: c_,
        neither: t[1][1],
        p_value: mcnemar_exact(b_, c_),
    })
}
