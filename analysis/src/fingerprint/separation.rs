//! Measures of identifiability that do not saturate when top-1 does: differential
//! identifiability and the same-vs-other similarity margin ([`separation`]), each with a
//! bootstrap interval over subjects.
//!
//! # Differential identifiability
//!
//! Amico & Goni (2018) compare the mean similarity of a subject's test and retest scans,
//! `I_self`, with the mean similarity of scans of different subjects, `I_others`:
//! `I_diff = 100 (I_self - I_others)`. With any number of samples per subject, here `I_self`
//! is the mean similarity over every pair of *different* samples of one subject and
//! `I_others` over every pair of samples of different subjects (each pair counted once; a
//! sample is never paired with itself). Each sample is a different run, except in the halves
//! of a one-run data set, where a subject's pair is the two halves of its run. Pairs of
//! related subjects ([`super::Relatives`]) are in neither mean.
//!
//! # The margin
//!
//! A query's margin is the mean of its similarities to the other samples of its subject minus
//! its highest similarity to a sample of another, unrelated subject ([`margin`]). It is positive when the
//! subject's samples on average beat the best impostor, so the fraction of positive margins is
//! at most the top-1 accuracy (with two samples per subject it is top-1, ties aside), and its
//! mean keeps moving where top-1 is already 1.
//!
//! # The bootstrap
//!
//! Subjects are resampled with replacement ([`boldcast_baselines::stats::bootstrap_groups`], the seed and
//! resamples of the report). For `I_diff` each subject carries the sums and counts of its
//! samples' same-subject and other-subject pairs (its other-subject pairs are those with every
//! other subject of the data, not only the resampled ones), and a resample's `I_diff` is
//! `100 (sum same / n same - sum other / n other)` over its subjects; a margin statistic is
//! the mean over the resampled subjects' queries.

use super::report::{BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, LEVEL};
use super::Relatives;
use boldcast_baselines::stats::{bootstrap_groups, Interval};
use serde::Serialize;

/// One method's differential identifiability and margins.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Separation {
    /// `I_self`: the mean similarity over pairs of different samples of one subject.
    pub same_mean: f64,
    /// `I_others`: the mean similarity over pairs of samples of different subjects.
    pub other_mean: f64,
    /// Same-subject pairs (each counted once).
    pub same_pairs: usize,
    /// Other-subject pairs (each counted once).
    pub other_pairs: usize,
    /// `I_diff = 100 (same_mean - other_mean)`.
    pub idiff: f64,
    /// Its percentile bootstrap interval over subjects.
    pub idiff_bootstrap: Interval,
    /// The mean margin of the scored queries ([`margin`]).
    pub margin_mean: f64,
    /// Its bootstrap interval over subjects.
    pub margin_bootstrap: Interval,
    /// The fraction of scored queries whose margin is above 0.
    pub margin_positive: f64,
    /// Its bootstrap interval over subjects.
    pub margin_positive_bootstrap: Interval,
}

/// Whose each sample is: the samples' subjects, and which subjects are related.
pub type Owners<'a> = (&'a [String], &'a Relatives);

/// The margin of sample `q` whose similarities to every sample are `row`: the mean similarity
/// to the other samples of its subject minus the highest to a sample of another, unrelated
/// subject (the module documentation). NaN when it has no same-subject or no other-subject
/// sample.
pub fn margin(row: &[f64], (subjects, kin): Owners<'_>, q: usize) -> f64 {
    let (mut same, mut n, mut best) = (0.0, 0usize, f64::NEG_INFINITY);
    for (j, (&s, subject)) in row.iter().zip(subjects).enumerate() {
        if j == q || kin.kin(subjects, q, j) {
            continue;
        }
        if *subject == subjects[q] {
            (same, n) = (same + s, n + 1);
        } else {
            best = best.max(s);
        }
    }
    if n == 0 || best == f64::NEG_INFINITY {
        return f64::NAN;
    }
    same / n as f64 - best
}

/// Per subject: the sums and counts of its samples' ordered same- and other-subject pairs.
#[derive(Clone, Copy, Default)]
struct PairSums {
    same: f64,
    n_same: usize,
    other: f64,
    n_other: usize,
}

/// `100 (mean same - mean other)` of the subjects `draw` (NaN without a same-subject pair).
fn idiff_of(groups: &[PairSums], draw: impl Iterator<Item = usize>) -> f64 {
    let t = draw.fold(PairSums::default(), |t, g| {
        let s = groups[g];
        PairSums {
            same: t.same + s.same,
            n_same: t.n_same + s.n_same,
            other: t.other + s.other,
            n_other: t.n_other + s.n_other,
        }
    });
    100.0 * (t.same / t.n_same as f64 - t.other / t.n_other as f64)
}

/// The distinct subjects in order of first appearance, and each sample's index among them.
fn subject_index(subjects: &[String]) -> (Vec<&str>, Vec<usize>) {
    let mut names: Vec<&str> = Vec::new();
    let index = subjects
        .iter()
        .map(|s| {
            names.iter().position(|n| n == s).unwrap_or_else(|| {
                names.push(s);
                names.len() - 1
            })
        })
        .collect();
    (names, index)
}

/// The pair sums of each subject of `matrix` (rows and columns in the order of the owners'
/// subjects), related subjects' pairs left out.
fn pair_sums(matrix: &[Vec<f64>], (subjects, kin): Owners<'_>) -> Vec<PairSums> {
    let (names, index) = subject_index(subjects);
    let mut out = vec![PairSums::default(); names.len()];
    for (i, row) in matrix.iter().enumerate() {
        let g = &mut out[index[i]];
        for (j, &s) in row.iter().enumerate().filter(|&(j, _)| j != i && !kin.kin(subjects, i, j)) {
            if index[j] == index[i] {
                (g.same, g.n_same) = (g.same + s, g.n_same + 1);
            } else {
                (g.other, g.n_other) = (g.other + s, g.n_other + 1);
            }
        }
    }
    out
}

/// The mean of `f` over the queries of the subjects `draw`, `margins` grouped by subject.
fn mean_of(margins: &[Vec<f64>], draw: &[usize], f: fn(f64) -> f64) -> Option<f64> {
    let (sum, n) = draw.iter().flat_map(|&g| &margins[g]).fold((0.0, 0usize), |(s, n), &m| (s + f(m), n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// The differential identifiability and margins of a similarity `matrix` whose samples belong
/// to `owners`; `queries` are the scored samples (the margins' rows). See the module
/// documentation.
pub fn separation(matrix: &[Vec<f64>], owners: Owners<'_>, queries: &[usize]) -> Separation {
    let subjects = owners.0;
    let groups = pair_sums(matrix, owners);
    let all = groups.iter().fold((0usize, 0usize), |(a, b), g| (a + g.n_same, b + g.n_other));
    let (names, index) = subject_index(subjects);
    let mut margins: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for &q in queries {
        margins[index[q]].push(margin(&matrix[q], owners, q));
    }
    let with_queries: Vec<usize> = (0..names.len()).filter(|&g| !margins[g].is_empty()).collect();
    let config = (BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, LEVEL);
    let by_query = |f: fn(f64) -> f64| {
        let value = mean_of(&margins, &with_queries, f).unwrap_or(f64::NAN);
        let boot = bootstrap_groups(with_queries.len(), config, |d| {
            mean_of(&margins, &d.iter().map(|&i| with_queries[i]).collect::<Vec<_>>(), f)
        });
        (value, boot)
    };
    let (margin_mean, margin_bootstrap) = by_query(|m| m);
    let (margin_positive, margin_positive_bootstrap) = by_query(|m| f64::from(u8::from(m > 0.0)));
    let sum = |f: fn(&PairSums) -> f64| groups.iter().map(f).sum::<f64>();
    Separation {
        same_mean: sum(|g| g.same) / all.0 as f64,
        other_mean: sum(|g| g.other) / all.1 as f64,
        same_pairs: all.0 / 2,
        other_pairs: all.1 / 2,
        idiff: idiff_of(&groups, 0..groups.len()),
        idiff_bootstrap: bootstrap_groups(groups.len(), config, |d| {
            Some(idiff_of(&groups, d.iter().copied())).filter(|v| v.is_finite())
        }),
        margin_mean,
        margin_bootstrap,
        margin_positive,
        margin_positive_bootstrap,
    }
}

/// The paired difference of two methods' separation on the same samples (first minus
/// second), each with a bootstrap interval over subjects whose draws are shared by the two
/// methods, so the interval is that of the difference, not of two separate estimates.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeparationDifference {
    /// The two methods, first and second.
    pub methods: [String; 2],
    /// `I_diff` of the first minus that of the second.
    pub idiff: f64,
    /// Its percentile bootstrap interval over subjects.
    pub idiff_bootstrap: Interval,
    /// The mean over queries of the first's margin minus the second's.
    pub margin: f64,
    /// Its bootstrap interval over subjects.
    pub margin_bootstrap: Interval,
}

/// One method's similarity matrix and its name, for [`difference`].
pub type Named<'a> = (&'a str, &'a [Vec<f64>]);

/// The paired difference of `a` and `b`, two similarity matrices of the same samples (of
/// `owners`; `queries` the scored ones): see [`SeparationDifference`].
pub fn difference(a: Named<'_>, b: Named<'_>, owners: Owners<'_>, queries: &[usize]) -> SeparationDifference {
    let subjects = owners.0;
    let (ga, gb) = (pair_sums(a.1, owners), pair_sums(b.1, owners));
    let (names, index) = subject_index(subjects);
    let mut margins: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for &q in queries {
        margins[index[q]].push(margin(&a.1[q], owners, q) - margin(&b.1[q], owners, q));
    }
    let with_queries: Vec<usize> = (0..names.len()).filter(|&g| !margins[g].is_empty()).collect();
    let config = (BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, LEVEL);
    let idiff = |d: &[usize]| idiff_of(&ga, d.iter().copied()) - idiff_of(&gb, d.iter().copied());
    let all: Vec<usize> = (0..ga.len()).collect();
    SeparationDifference {
        methods: [a.0.to_string(), b.0.to_string()],
        idiff: idiff(&all),
        idiff_bootstrap: bootstrap_groups(ga.len(), config, |d| Some(idiff(d)).filter(|v| v.is_finite())),
        margin: mean_of(&margins, &with_queries, |m| m).unwrap_or(f64::NAN),
        margin_bootstrap: bootstrap_groups(with_queries.len(), config, |d| {
            mean_of(&margins, &d.iter().map(|&i| with_queries[i]).collect::<Vec<_>>(), |m| m)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none() -> Relatives {
        Relatives::none()
    }

    fn names(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    /// A symmetric matrix from its upper triangle, row by row, with 1 on the diagonal.
    fn symmetric(n: usize, upper: &[f64]) -> Vec<Vec<f64>> {
        let mut m = vec![vec![1.0; n]; n];
        let pairs = (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j)));
        for ((i, j), &v) in pairs.zip(upper) {
            (m[i][j], m[j][i]) = (v, v);
        }
        m
    }

    /// Runs a1 a2 b1 b2 c1 c2 of subjects A, B, C and their similarities.
    fn hand_made() -> (Vec<Vec<f64>>, Vec<String>) {
        #[rustfmt::skip]
        let m = symmetric(6, &[
            0.8, 0.3, 0.1, 0.0, 0.4,
            0.2, 0.0, 0.1, 0.1,
            0.6, 0.5, 0.0,
            0.2, 0.3,
            0.2,
        ]);
        (m, names(&["A", "A", "B", "B", "C", "C"]))
    }

    #[test]
    fn idiff_and_margins_of_a_hand_made_matrix() {
        // a1 a2 b1 b2 c1 c2. Same-subject pairs: 0.8, 0.6, 0.2 (mean 1.6 / 3); the 12
        // other-subject pairs sum to 2.2 (mean 2.2 / 12): I_diff = 100 (0.5333 - 0.1833) = 35.
        // Margins (own run minus best impostor): a1 0.8 - 0.4, a2 0.8 - 0.2, b1 0.6 - 0.5,
        // b2 0.6 - 0.3, c1 0.2 - 0.5, c2 0.2 - 0.4: 0.4, 0.6, 0.1, 0.3, -0.3, -0.2, mean 0.15,
        // 4 of 6 above 0.
        let (m, subjects) = hand_made();
        let s = separation(&m, (&subjects, &none()), &[0, 1, 2, 3, 4, 5]);
        assert_eq!((s.same_pairs, s.other_pairs), (3, 12));
        assert!((s.same_mean - 1.6 / 3.0).abs() < 1e-12 && (s.other_mean - 2.2 / 12.0).abs() < 1e-12, "{s:?}");
        assert!((s.idiff - 35.0).abs() < 1e-9, "{}", s.idiff);
        let want = [0.4, 0.6, 0.1, 0.3, -0.3, -0.2];
        for (q, w) in want.iter().enumerate() {
            assert!((margin(&m[q], (&subjects, &none()), q) - w).abs() < 1e-12, "query {q}");
        }
        assert!((s.margin_mean - 0.15).abs() < 1e-12 && (s.margin_positive - 4.0 / 6.0).abs() < 1e-12);
        for (v, i) in [
            (s.idiff, s.idiff_bootstrap),
            (s.margin_mean, s.margin_bootstrap),
            (s.margin_positive, s.margin_positive_bootstrap),
        ] {
            assert!(i.lo < v && v < i.hi && i.level == 0.95, "{v} in {i:?}");
        }
        assert!(s.margin_positive_bootstrap.lo >= 0.0 && s.margin_positive_bootstrap.hi <= 1.0);
        assert_eq!(s, separation(&m, (&subjects, &none()), &[0, 1, 2, 3, 4, 5]), "the seed fixes the intervals");
    }

    #[test]
    fn related_subjects_pairs_are_left_out() {
        // The hand-made matrix with A and B one family: the 4 A-B pairs (0.3, 0.1,
        // 0.2, 0.0) leave I_others, now 1.6 / 8, and each A or B query's best impostor is C's:
        // margins 0.8 - 0.4, 0.8 - 0.1, 0.6 - 0.5, 0.6 - 0.3, and C's as before.
        let (m, subjects) = hand_made();
        let groups = [("A", "F"), ("B", "F"), ("C", "G")].map(|(s, g)| (s.to_string(), g.to_string()));
        let kin = Relatives::from_groups("family", groups.into_iter().collect());
        let s = separation(&m, (&subjects, &kin), &[0, 1, 2, 3, 4, 5]);
        assert_eq!((s.same_pairs, s.other_pairs), (3, 8));
        assert!((s.idiff - 100.0 * (1.6 / 3.0 - 0.2)).abs() < 1e-9, "{}", s.idiff);
        let want = [0.4, 0.7, 0.1, 0.3, -0.3, -0.2];
        for (q, w) in want.iter().enumerate() {
            assert!((margin(&m[q], (&subjects, &kin), q) - w).abs() < 1e-12, "query {q}");
        }
        assert!((s.margin_mean - 1.0 / 6.0).abs() < 1e-12);
    }

    #[test]
    fn the_margin_averages_a_subjects_samples_and_skips_the_query() {
        // a1 against a2 (0.9), a3 (0.5) and b1 (0.6): mean own 0.7 - 0.6 = 0.1, while the best
        // own sample would give 0.3.
        let m = symmetric(4, &[0.9, 0.5, 0.6, 0.4, 0.1, 0.2]);
        let subjects = names(&["A", "A", "A", "B"]);
        assert!((margin(&m[0], (&subjects, &none()), 0) - 0.1).abs() < 1e-12);
        assert!(margin(&m[3], (&subjects, &none()), 3).is_nan(), "b1 has no other sample of its subject");
        // Only A's samples are queries; B's sample still counts among the other-subject pairs.
        let s = separation(&m, (&subjects, &none()), &[0, 1, 2]);
        assert_eq!((s.same_pairs, s.other_pairs), (3, 3));
        assert!((s.idiff - 100.0 * ((0.9 + 0.5 + 0.4) / 3.0 - (0.6 + 0.1 + 0.2) / 3.0)).abs() < 1e-9);
        // One subject with queries: every resample is that subject, the interval is a point.
        assert_eq!((s.margin_bootstrap.lo, s.margin_bootstrap.hi), (s.margin_mean, s.margin_mean));
    }

    #[test]
    fn the_paired_difference_of_two_matrices() {
        // b is a with every other-subject similarity raised by 0.1: I_diff falls by exactly 10
        // and every margin by 0.1, in every resample, so both intervals are points.
        let a = symmetric(4, &[0.8, 0.3, 0.1, 0.2, 0.0, 0.6]);
        let b = symmetric(4, &[0.8, 0.4, 0.2, 0.3, 0.1, 0.6]);
        let subjects = names(&["A", "A", "B", "B"]);
        let d = difference(("a", &a), ("b", &b), (&subjects, &none()), &[0, 1, 2, 3]);
        assert_eq!(d.methods, ["a".to_string(), "b".to_string()]);
        assert!((d.idiff - 10.0).abs() < 1e-9 && (d.margin - 0.1).abs() < 1e-12, "{d:?}");
        assert!((d.idiff_bootstrap.lo - 10.0).abs() < 1e-9 && (d.idiff_bootstrap.hi - 10.0).abs() < 1e-9);
        assert!((d.margin_bootstrap.lo - 0.1).abs() < 1e-12 && (d.margin_bootstrap.hi - 0.1).abs() < 1e-12);
        let (sa, sb) =
            (separation(&a, (&subjects, &none()), &[0, 1, 2, 3]), separation(&b, (&subjects, &none()), &[0, 1, 2, 3]));
        assert!((d.idiff - (sa.idiff - sb.idiff)).abs() < 1e-9);
    }
}
