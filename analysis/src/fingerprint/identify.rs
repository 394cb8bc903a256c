//! Leave-one-run-out identification ([`identify`]): each sample (a run, or half a run) is a
//! query and every other sample the gallery; the query's subject is identified at rank `k`
//! when one of the `k` gallery samples most similar to it belongs to the same subject.
//!
//! # Ties
//!
//! The gallery is ordered by similarity, highest first; among equal similarities the samples
//! of *other* subjects come first, then the lower index. A tie with another subject therefore
//! never counts as an identification, so features that carry no information (all equal)
//! score zero rather than whatever the input order would give.
//!
//! # Chance
//!
//! Under the null every ordering of the gallery is equally likely, and a query whose gallery
//! holds `G` samples, `m` of its own subject, is identified within the top `k` with
//! probability `1 - C(G - m, k) / C(G, k)` (`k` capped at `G`). The chance level of an
//! accuracy is the mean of that over the scored queries. With one gallery sample per subject
//! (`m = 1`, `G` subjects) it is `1 / G` for top-1 and `min(5, G) / G` for top-5; with 10
//! subjects of 2 runs each it is `1/19` and `5/19`, not `1/10`, because the query's gallery
//! holds 19 runs of which one is its subject's.
//!
//! # Relatives
//!
//! [`identify_among`] leaves the samples of a query's relatives ([`Relatives`]) out of its
//! gallery, so `G` counts only its own subject's samples and strangers'.

use super::{Relatives, Sample};
use crate::AnalysisError;
use serde::Serialize;

/// The `k` of top-`k` accuracy reported beside top-1.
pub const TOP_K: usize = 5;

/// How two feature vectors are compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Similarity {
    /// `a . b / (|a| |b|)`: for embeddings, whose origin means something.
    Cosine,
    /// The Pearson correlation of the two vectors' entries (the cosine of the centred vectors):
    /// for functional-connectivity edge vectors (Finn et al. 2015).
    Pearson,
}

impl Similarity {
    /// Its name in the report: `cosine` or `pearson`.
    pub fn name(self) -> &'static str {
        match self {
            Similarity::Cosine => "cosine",
            Similarity::Pearson => "pearson",
        }
    }

    /// The vector compared: centred for [`Similarity::Pearson`].
    fn prepare(self, x: &[f64]) -> Vec<f64> {
        match self {
            Similarity::Cosine => x.to_vec(),
            Similarity::Pearson => {
                let m = x.iter().sum::<f64>() / x.len() as f64;
                x.iter().map(|v| v - m).collect()
            }
        }
    }

    /// The similarity of `a` and `b` (NaN when either vector has zero norm after centring).
    pub fn between(self, a: &[f64], b: &[f64]) -> f64 {
        cosine(&self.prepare(a), &self.prepare(b))
    }
}

fn cosine(a: &[f64], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f64 = a.iter().map(|x| x * x).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| x * x).sum::<f64>().sqrt();
    dot / (na * nb)
}

/// One query's outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Query {
    /// The query's index among the samples.
    pub sample: usize,
    /// Its subject.
    pub subject: String,
    /// Its label.
    pub label: String,
    /// The 1-based position of the first gallery sample of its subject in the ordered gallery.
    pub rank: usize,
    /// The index of the most similar gallery sample (first in the order, ties as documented).
    pub best_match: usize,
    /// Identified at top-1 (`rank == 1`).
    pub top1: bool,
    /// Identified at top-[`TOP_K`].
    pub top5: bool,
    /// Its mean similarity to the other samples of its subject minus its highest to a sample
    /// of another subject ([`super::separation::margin`]; NaN, `null` in JSON, without one).
    pub margin: f64,
    /// The top-1 chance of this query, `m / G`.
    pub chance_top1: f64,
    /// Its top-[`TOP_K`] chance, `1 - C(G - m, k) / C(G, k)`.
    pub chance_top5: f64,
}

/// What [`identify`] found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Identification {
    /// The similarity used.
    pub similarity: Similarity,
    /// Each sample's label, in input order.
    pub labels: Vec<String>,
    /// Each sample's subject, in input order.
    pub subjects: Vec<String>,
    /// The related subjects whose samples were not compared.
    pub relatives: Relatives,
    /// `matrix[i][j]`: the similarity of samples `i` and `j` (the diagonal is each sample
    /// with itself, 1).
    pub matrix: Vec<Vec<f64>>,
    /// The scored queries, in input order.
    pub queries: Vec<Query>,
    /// Labels of the samples not scored: their subject has no other sample.
    pub unscored: Vec<String>,
}

/// `1 - C(G - m, k) / C(G, k)` with `k = min(k, G)`, as the product
/// `prod_{i < k} (G - m - i) / (G - i)` of the chance that each of `k` draws misses.
pub fn chance_within(k: usize, gallery: usize, same: usize) -> f64 {
    let k = k.min(gallery);
    let miss: f64 = (0..k).map(|i| (gallery.saturating_sub(same + i)) as f64 / (gallery - i) as f64).product();
    1.0 - miss
}

/// Every sample has features of one length, all finite, of nonzero norm (after centring for
/// Pearson); the error names the first that has not.
fn check(samples: &[Sample], sim: Similarity) -> Result<(), AnalysisError> {
    let bad = |s: &Sample, why: &str| AnalysisError::Fingerprint { reason: format!("{}: {why}", s.label) };
    let first = samples.first().ok_or_else(|| AnalysisError::Fingerprint { reason: "no samples".into() })?;
    let n = first.features.len();
    for s in samples {
        if s.features.len() != n || n == 0 {
            return Err(bad(s, &format!("{} features, the first sample has {n}", s.features.len())));
        }
        if let Some(v) = s.features.iter().find(|v| !v.is_finite()) {
            return Err(bad(s, &format!("a non-finite feature ({v})")));
        }
        if sim.prepare(&s.features).iter().all(|v| *v == 0.0) {
            return Err(bad(s, &format!("the features have zero norm, so their {sim:?} similarity is undefined")));
        }
    }
    Ok(())
}

/// The similarity of every pair of samples (symmetric; computed once per pair).
fn matrix(samples: &[Sample], sim: Similarity) -> Vec<Vec<f64>> {
    let v: Vec<Vec<f64>> = samples.iter().map(|s| sim.prepare(&s.features)).collect();
    let n = v.len();
    let mut m = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in i..n {
            let c = cosine(&v[i], &v[j]);
            (m[i][j], m[j][i]) = (c, c);
        }
    }
    m
}

/// Query `q` against the gallery of every other sample but its relatives', ordered as the
/// module documents.
fn score(q: usize, samples: &[Sample], m: &[Vec<f64>], kin: &Relatives) -> Query {
    let own = &samples[q].subject;
    let same = |j: usize| samples[j].subject == *own;
    let mut gallery: Vec<usize> =
        (0..samples.len()).filter(|&j| j != q && !kin.related(own, &samples[j].subject)).collect();
    gallery.sort_by(|&a, &b| m[q][b].total_cmp(&m[q][a]).then(same(a).cmp(&same(b))).then(a.cmp(&b)));
    let rank = gallery.iter().position(|&j| same(j)).map_or(usize::MAX, |i| i + 1);
    let m_same = gallery.iter().filter(|&&j| same(j)).count();
    Query {
        sample: q,
        subject: own.clone(),
        label: samples[q].label.clone(),
        rank,
        best_match: gallery[0],
        top1: rank == 1,
        top5: rank <= TOP_K,
        margin: super::separation::margin(
            &m[q],
            (&samples.iter().map(|s| s.subject.clone()).collect::<Vec<_>>(), kin),
            q,
        ),
        chance_top1: chance_within(1, gallery.len(), m_same),
        chance_top5: chance_within(TOP_K, gallery.len(), m_same),
    }
}

/// Leave-one-run-out identification of `samples` under `sim` (see the module
/// documentation). Samples whose subject has no other sample are not queries (listed in
/// [`Identification::unscored`]) but stay in every other query's gallery. Errors: no samples,
/// samples of one subject only, features of different lengths, non-finite or of zero norm, or
/// no scorable query.
pub fn identify(samples: &[Sample], sim: Similarity) -> Result<Identification, AnalysisError> {
    identify_among(samples, sim, &Relatives::none())
}

/// [`identify`], each query's gallery without the samples of its relatives (the module
/// documentation).
pub fn identify_among(samples: &[Sample], sim: Similarity, kin: &Relatives) -> Result<Identification, AnalysisError> {
    check(samples, sim)?;
    if let Some(first) = samples.first().filter(|f| samples.iter().all(|s| s.subject == f.subject)) {
        let reason = format!(
            "every sample is of one subject (sub-{}): identifying a subject needs at least two in the gallery (with one, \
             top-1 is 1 by construction)",
            first.subject
        );
        return Err(AnalysisError::Fingerprint { reason });
    }
    let m = matrix(samples, sim);
    let count = |s: &str| samples.iter().filter(|x| x.subject == s).count();
    let (mut queries, mut unscored) = (Vec::new(), Vec::new());
    for (q, s) in samples.iter().enumerate() {
        if count(&s.subject) < 2 {
            unscored.push(s.label.clone());
        } else {
            queries.push(score(q, samples, &m, kin));
        }
    }
    if queries.is_empty() {
        let reason = "no subject has two samples: split each run into halves (fingerprint::halves)".into();
        return Err(AnalysisError::Fingerprint { reason });
    }
    Ok(Identification {
        similarity: sim,
        labels: samples.iter().map(|s| s.label.clone()).collect(),
        subjects: samples.iter().map(|s| s.subject.clone()).collect(),
        relatives: kin.clone(),
        matrix: m,
        queries,
        unscored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(subject: &str, label: &str, features: &[f64]) -> Sample {
        Sample { subject: subject.into(), label: label.into(), features: features.to_vec() }
    }

    /// Subject A points along x, B along y, C away from both; B's second run leans towards A.
    fn hand_made() -> [Sample; 5] {
        [
            s("A", "a1", &[1.0, 0.0]),
            s("A", "a2", &[0.9, 0.1]),
            s("B", "b1", &[0.0, 1.0]),
            s("B", "b2", &[1.0, 0.6]),
            s("C", "c1", &[-1.0, -1.0]),
        ]
    }

    /// Each query's label, rank of its own subject and best match.
    fn ranks(id: &Identification) -> Vec<(&str, usize, usize)> {
        id.queries.iter().map(|q| (q.label.as_str(), q.rank, q.best_match)).collect()
    }

    #[test]
    fn cosine_and_pearson_of_known_vectors() {
        let (a, b) = ([1.0, 0.0, 1.0], [1.0, 1.0, 0.0]);
        assert!((Similarity::Cosine.between(&a, &b) - 0.5).abs() < 1e-15);
        // Centred: (1/3, -2/3, 1/3) and (1/3, 1/3, -2/3): (1/9 - 2/9 - 2/9) / (6/9) = -1/2.
        assert!((Similarity::Pearson.between(&a, &b) + 0.5).abs() < 1e-15);
        assert!((Similarity::Pearson.between(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]) - 1.0).abs() < 1e-15);
        assert_eq!(serde_json::to_value(Similarity::Pearson).unwrap(), Similarity::Pearson.name());
    }

    #[test]
    fn a_hand_made_case_with_a_known_answer() {
        // Subject A points along x, B along y; B's second run leans towards A's direction,
        // so it is misidentified at top-1 but found at rank 3 (after both A runs), while b1's
        // nearest run is still b2 (cosine 0.51 against a2's 0.11).
        let samples = hand_made();
        let id = identify(&samples, Similarity::Cosine).unwrap();
        assert_eq!(ranks(&id), [("a1", 1, 1), ("a2", 1, 0), ("b1", 1, 3), ("b2", 3, 1)]);
        assert_eq!(id.unscored, ["c1"]);
        assert_eq!(id.queries.iter().filter(|q| q.top1).count(), 3);
        assert!(id.queries.iter().all(|q| q.top5), "a gallery of 4 holds every run in its top 5");
        assert!((id.matrix[0][2]).abs() < 1e-15 && id.matrix[2][0] == id.matrix[0][2]);
        assert!((id.queries[0].chance_top1 - 0.25).abs() < 1e-15 && id.queries[0].chance_top5 == 1.0);
    }

    #[test]
    fn relatives_leave_the_gallery() {
        // The case above with A and B one family: b2's gallery is b1 and c1, so b2 is found;
        // a1's is a2 and c1 (chance 1/2).
        let samples = hand_made();
        let groups = [("A", "F"), ("B", "F"), ("C", "G")].map(|(s, g)| (s.to_string(), g.to_string()));
        let kin = Relatives::from_groups("family", groups.into_iter().collect());
        let id = identify_among(&samples, Similarity::Cosine, &kin).unwrap();
        assert_eq!(ranks(&id), [("a1", 1, 1), ("a2", 1, 0), ("b1", 1, 3), ("b2", 1, 2)]);
        assert!((id.queries[0].chance_top1 - 0.5).abs() < 1e-15);
        assert_eq!(id.relatives, kin);
    }

    #[test]
    fn ties_with_another_subject_never_identify() {
        let samples = [s("A", "a1", &[1.0]), s("A", "a2", &[1.0]), s("B", "b1", &[1.0]), s("B", "b2", &[1.0])];
        let id = identify(&samples, Similarity::Cosine).unwrap();
        assert!(id.queries.iter().all(|q| q.rank == 3 && !q.top1), "after both of the other subject: {:?}", id.queries);
        assert_eq!(id.queries[0].best_match, 2, "the other subject's run comes first");
    }

    #[test]
    fn chance_is_the_hypergeometric_miss_probability() {
        assert!((chance_within(1, 19, 1) - 1.0 / 19.0).abs() < 1e-15);
        assert!((chance_within(5, 19, 1) - 5.0 / 19.0).abs() < 1e-15);
        assert!((chance_within(5, 10, 1) - 0.5).abs() < 1e-15, "min(5, n) / n with one sample per subject");
        // Two of 6 gallery samples, top 2: 1 - C(4, 2) / C(6, 2) = 1 - 6/15.
        assert!((chance_within(2, 6, 2) - 0.6).abs() < 1e-15);
        assert_eq!(chance_within(5, 3, 1), 1.0);
    }

    #[test]
    fn bad_features_are_errors_naming_the_sample() {
        let e = |v: &[Sample], sim| identify(v, sim).unwrap_err().to_string();
        assert_eq!(e(&[], Similarity::Cosine), "fingerprint: no samples");
        let two = [s("A", "a1", &[1.0, 2.0]), s("A", "a2", &[1.0])];
        assert!(
            e(&two, Similarity::Cosine).starts_with("fingerprint: a2: 1 features"),
            "{}",
            e(&two, Similarity::Cosine)
        );
        let flat = [s("A", "a1", &[1.0, 2.0]), s("A", "a2", &[3.0, 3.0]), s("B", "b1", &[2.0, 1.0])];
        assert!(e(&flat, Similarity::Pearson).contains("a2: the features have zero norm"));
        assert!(identify(&flat, Similarity::Cosine).is_ok(), "a constant vector has a cosine");
        // One subject: every query would find its own subject first.
        let one = [s("A", "a1", &[1.0, 2.0]), s("A", "a2", &[2.0, 1.0])];
        assert!(
            e(&one, Similarity::Cosine).contains("every sample is of one subject (sub-A)"),
            "{}",
            e(&one, Similarity::Cosine)
        );
        let nan = [s("A", "a1", &[f64::NAN]), s("A", "a2", &[1.0])];
        assert!(e(&nan, Similarity::Cosine).contains("a1: a non-finite feature (NaN)"));
        let lone = [s("A", "a1", &[1.0]), s("B", "b1", &[2.0])];
        assert!(e(&lone, Similarity::Cosine).contains("no subject has two samples"));
    }
}
