//! Cross-validation over training subjects: the folds ([`folds`]) and the rule that picks a
//! candidate from its cross-validated errors ([`choose`]).
//!
//! Folds: the training subjects, sorted, go round-robin into `k = min(MAX_FOLDS, subjects)`
//! folds, so a fold's runs are whole subjects (a model is scored on subjects it never saw,
//! and so is a baseline's candidate). With a single training subject the folds are its runs
//! the same way; with a single training run there is no cross-validation and each fit takes
//! its documented default candidate.
//!
//! The rule: the cross-validated MSE of a candidate is its squared error summed over the
//! folds' held-out samples over their count. Candidates come simplest first; the chosen one
//! is the simplest whose cross-validated MSE exceeds the lowest by at most
//! `max(one standard error of its per-fold difference from the lowest, CV_TOLERANCE x the
//! lowest)`. The paired standard error is that of the noise between two candidates on the
//! same folds (not the larger spread between subjects); the tolerance keeps a tie that noise
//! decides from adding parameters that do not help (an AR(2) on AR(1) data). The chosen
//! candidate is then worse than the best in cross-validation by at most 0.1 % or by what the
//! folds cannot tell apart.

use boldcast_data::Dataset;
use serde::Serialize;

/// At most this many cross-validation folds.
pub const MAX_FOLDS: usize = 5;
/// A candidate within this fraction of the best cross-validated MSE counts as as good.
pub const CV_TOLERANCE: f64 = 1e-3;

/// What a fold holds.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FoldUnit {
    /// Whole training subjects.
    Subject,
    /// The runs of the single training subject.
    Run,
    /// No cross-validation (a single training run).
    None,
}

/// The cross-validation folds of the training runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Folds {
    /// What a fold holds.
    pub unit: FoldUnit,
    /// The runs (indices into [`Dataset::runs`]) of each fold.
    pub runs: Vec<Vec<usize>>,
}

impl Folds {
    /// Whether there is cross-validation (two folds or more).
    pub fn cross_validates(&self) -> bool {
        self.runs.len() >= 2
    }
}

/// The folds of `train_runs` (see the module documentation).
pub fn folds(ds: &Dataset, train_runs: &[usize]) -> Folds {
    let mut subjects: Vec<&str> = train_runs.iter().map(|&r| ds.runs[r].id.subject.as_str()).collect();
    subjects.sort();
    subjects.dedup();
    let round_robin = |key: &dyn Fn(usize) -> usize, n: usize| {
        let k = n.min(MAX_FOLDS);
        let mut runs = vec![Vec::new(); k];
        for (i, &r) in train_runs.iter().enumerate() {
            runs[key(i) % k].push(r);
        }
        runs
    };
    if subjects.len() >= 2 {
        let of = |i: usize| subjects.binary_search(&ds.runs[train_runs[i]].id.subject.as_str()).unwrap_or(0);
        Folds { unit: FoldUnit::Subject, runs: round_robin(&of, subjects.len()) }
    } else if train_runs.len() >= 2 {
        Folds { unit: FoldUnit::Run, runs: round_robin(&|i| i, train_runs.len()) }
    } else {
        Folds { unit: FoldUnit::None, runs: vec![train_runs.to_vec()] }
    }
}

/// The held-out squared error and sample count of one candidate on one fold.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct FoldError {
    /// Squared error summed over the fold's samples and targets.
    pub sse: f64,
    /// Samples times targets.
    pub count: usize,
}

impl FoldError {
    fn mse(&self) -> f64 {
        self.sse / self.count.max(1) as f64
    }
}

/// The cross-validated MSE of a candidate's fold errors.
pub fn cv_mse(errors: &[FoldError]) -> f64 {
    let (sse, n) = errors.iter().fold((0.0, 0usize), |(s, n), e| (s + e.sse, n + e.count));
    sse / n.max(1) as f64
}

/// The chosen candidate of `errors[c][f]` (candidates simplest first; see the module
/// documentation); `default` when there are fewer than two folds with samples.
pub fn choose(errors: &[Vec<FoldError>], default: usize) -> usize {
    let folds = errors.first().map_or(0, |e| e.iter().filter(|f| f.count > 0).count());
    if folds < 2 {
        return default;
    }
    let cv: Vec<f64> = errors.iter().map(|e| cv_mse(e)).collect();
    let best = (0..cv.len()).min_by(|&a, &b| cv[a].total_cmp(&cv[b])).unwrap_or(default);
    let se = |c: usize| {
        let d: Vec<f64> =
            errors[c].iter().zip(&errors[best]).filter(|(a, _)| a.count > 0).map(|(a, b)| a.mse() - b.mse()).collect();
        let mean = d.iter().sum::<f64>() / d.len() as f64;
        let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (d.len() - 1) as f64;
        (var / d.len() as f64).sqrt()
    };
    (0..cv.len()).find(|&c| cv[c] - cv[best] <= se(c).max(CV_TOLERANCE * cv[best])).unwrap_or(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use boldcast_fixtures::{Ar1Spec, Layout};

    fn fe(mses: &[f64]) -> Vec<FoldError> {
        mses.iter().map(|&m| FoldError { sse: m * 100.0, count: 100 }).collect()
    }

    #[test]
    fn the_simplest_candidate_within_the_tolerance_or_one_paired_error_wins() {
        // Candidate 1 is clearly better than 0 on every fold; 2 beats 1 by less than 0.1 %.
        let errs = vec![fe(&[1.0, 1.1, 0.9]), fe(&[0.5, 0.6, 0.4]), fe(&[0.4998, 0.5998, 0.3998])];
        assert_eq!(choose(&errs, 0), 1);
        // The second beats the first by 2 % on every fold, with no noise: the second.
        let errs = vec![fe(&[0.5, 0.6, 0.4]), fe(&[0.49, 0.588, 0.392])];
        assert_eq!(choose(&errs, 0), 1);
        // The second beats the first by 2 % on average, but with a noise larger than that: the first.
        let errs = vec![fe(&[0.5, 0.6, 0.4]), fe(&[0.40, 0.64, 0.43])];
        assert!(cv_mse(&errs[1]) < cv_mse(&errs[0]));
        assert_eq!(choose(&errs, 1), 0);
        // One fold: the default.
        assert_eq!(choose(&[fe(&[1.0]), fe(&[0.1])], 0), 0);
    }

    #[test]
    fn folds_hold_whole_subjects_then_runs() {
        let ds = |subjects, runs| {
            let fx = Ar1Spec::new(Layout { subjects, runs, trs: 10, parcels: 1, seed: 1 }, 0.5);
            Dataset::from_synth(&fx.generate().unwrap(), None).unwrap()
        };
        // 7 subjects x 2 runs: 5 folds, subjects 1 and 6 together.
        let d = ds(7, 2);
        let f = folds(&d, &(0..14).collect::<Vec<_>>());
        assert_eq!((f.unit, f.runs.len()), (FoldUnit::Subject, 5));
        assert_eq!(f.runs[0], vec![0, 1, 10, 11]);
        assert_eq!(f.runs[4], vec![8, 9]);
        let f = folds(&d, &[0, 1]);
        assert_eq!((f.unit, f.runs.clone()), (FoldUnit::Run, vec![vec![0], vec![1]]));
        let f = folds(&d, &[3]);
        assert!(!f.cross_validates() && f.unit == FoldUnit::None);
    }
}
