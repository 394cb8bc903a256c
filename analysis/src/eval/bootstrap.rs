//! The model against the best baseline at each horizon with a paired bootstrap over the
//! held-out subjects ([`PairedBootstrap`]).
//!
//! The best baseline of a horizon is the one of lowest held-out MSE ([`super::Improvement`];
//! the single-lag AR reference and the exact floor are not baselines). The statistic is the
//! relative difference `(MSE_model - MSE_best) / MSE_best`, computed from per-subject sums of
//! squared errors (both rows are scored on the same targets, so the counts cancel): negative
//! when the model is better. Each of [`RESAMPLES`] resamples draws the held-out subjects with
//! replacement ([`boldcast_baselines::stats::bootstrap_groups`], seed [`SEED`]) and sums the
//! drawn subjects' errors of both rows, so the pairing of the model and the baseline on the
//! same subject is kept; the interval is the 2.5 and 97.5 percentiles. With one held-out
//! subject no interval can be computed, and the sentence says so.

use super::report::Improvement;
use boldcast_baselines::rsquared::ErrorSums;
use boldcast_baselines::stats::{bootstrap_groups, Interval};
use serde::Serialize;

/// Bootstrap resamples.
pub const RESAMPLES: usize = 2000;
/// The bootstrap's seed.
pub const SEED: u64 = 28;
/// The interval's confidence level.
pub const LEVEL: f64 = 0.95;

/// The model against the best baseline at one horizon.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HorizonComparison {
    /// The horizon, in tokens.
    pub horizon: usize,
    /// The baseline of lowest held-out MSE.
    pub best_baseline: String,
    /// `(MSE_model - MSE_best) / MSE_best` on all held-out subjects (negative: the model is
    /// better).
    pub relative_difference: f64,
    /// Its percentile interval over subject resamples (`None` with one held-out subject).
    pub interval: Option<Interval>,
}

/// The paired bootstrap of the model against the best baseline at every horizon.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairedBootstrap {
    /// Resamples.
    pub resamples: usize,
    /// The seed of the resampler (`ChaCha8Rng::seed_from_u64`).
    pub seed: u64,
    /// The confidence level of the intervals.
    pub level: f64,
    /// The held-out subjects resampled.
    pub subjects: usize,
    /// Per horizon.
    pub per_horizon: Vec<HorizonComparison>,
    /// What it says, in words (what `bc-cli eval` prints).
    pub sentence: String,
}

/// The relative difference of the summed errors of the subjects `draw`.
fn relative(model: &[f64], best: &[f64], draw: &[usize]) -> Option<f64> {
    let (m, b) = draw.iter().fold((0.0, 0.0), |(m, b), &s| (m + model[s], b + best[s]));
    (b > 0.0).then(|| (m - b) / b)
}

/// The paired bootstrap of row `model` of `sums` against the best baselines of `imp` (the
/// rows `names` of `sums`, in order) at `horizons`.
pub fn paired_bootstrap(sums: &ErrorSums, names: &[&str], imp: &Improvement, horizons: &[usize]) -> PairedBootstrap {
    let n = sums.subjects.len();
    let all: Vec<usize> = (0..n).collect();
    let model = names.iter().position(|&r| r == "model");
    let per_horizon: Vec<HorizonComparison> = imp
        .best_baseline
        .iter()
        .enumerate()
        .filter_map(|(h, best)| {
            let (m, b) = (model?, names.iter().position(|r| r == best)?);
            let (sm, sb) = (sums.subject_sse(m, h), sums.subject_sse(b, h));
            let interval =
                (n >= 2).then(|| bootstrap_groups(n, (RESAMPLES, SEED, LEVEL), |draw| relative(&sm, &sb, draw)));
            Some(HorizonComparison {
                horizon: horizons[h],
                best_baseline: best.clone(),
                relative_difference: relative(&sm, &sb, &all).unwrap_or(f64::NAN),
                interval,
            })
        })
        .collect();
    let sentence = sentence(&per_horizon, n);
    PairedBootstrap { resamples: RESAMPLES, seed: SEED, level: LEVEL, subjects: n, per_horizon, sentence }
}

/// A percentage of a fraction, one decimal.
fn pct(x: f64) -> String {
    format!("{:.1}", 100.0 * x)
}

/// One horizon's clause: "beats X at h1 by 4.1 % [2.0, 6.3]" (a reduction of the MSE and its
/// interval), "is worse than X at h5 by 1.2 % [0.3, 2.0]", or, when the interval holds 0,
/// "is better (worse) than X at h5 by 1.2 %, not clearly: [-0.5, 3.0] holds 0".
fn clause(c: &HorizonComparison) -> String {
    let (r, x, h) = (c.relative_difference, &c.best_baseline, c.horizon);
    let (word, by) = if r <= 0.0 { ("better than", -r) } else { ("worse than", r) };
    // The interval in the units of `by`: reductions for "better", increases for "worse".
    let Some(i) = c.interval else {
        return format!("is {word} {x} at h{h} by {} % (one held-out subject: no interval can be computed)", pct(by));
    };
    let (lo, hi) = if r <= 0.0 { (-i.hi, -i.lo) } else { (i.lo, i.hi) };
    let span = format!("[{}, {}]", pct(lo), pct(hi));
    match (i.hi < 0.0, i.lo > 0.0) {
        (true, _) => format!("beats {x} at h{h} by {} % {span}", pct(by)),
        (_, true) => format!("is worse than {x} at h{h} by {} % {span}", pct(by)),
        _ => format!("is {word} {x} at h{h} by {} %, not clearly: {span} holds 0", pct(by)),
    }
}

/// The sentence of every horizon (see [`clause`]).
fn sentence(per: &[HorizonComparison], subjects: usize) -> String {
    if per.is_empty() {
        return "no model or no baseline to compare".into();
    }
    let clauses: Vec<String> = per.iter().map(clause).collect();
    format!(
        "the model {} (relative MSE, 95 % interval of a paired bootstrap over {subjects} held-out subject{}, \
         {RESAMPLES} resamples)",
        clauses.join("; "),
        if subjects == 1 { "" } else { "s" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::report::Row;
    use boldcast_core::{ForecastShape, Forecasts};

    /// Sums of a model and a baseline over `subjects` subjects (one window each, 20 tokens,
    /// one parcel, one horizon): the baseline's errors `e` vary over tokens, the model's are
    /// `e ratio (1 +- 0.05)`, the sign alternating over subjects.
    fn sums(subjects: usize, ratio: f64) -> (ErrorSums, Improvement) {
        let shape = ForecastShape::new(subjects, 20, 1, 1, 1);
        let target = Forecasts::<f64>::zeros(shape);
        let base =
            Forecasts::<f64>::new(shape, (0..subjects * 20).map(|i| 1.0 + (i % 7) as f64 * 0.1).collect()).unwrap();
        let model = Forecasts::<f64>::new(
            shape,
            base.data()
                .iter()
                .enumerate()
                .map(|(i, v)| v * ratio * (1.0 + 0.05 * (-1f64).powi((i / 20) as i32)))
                .collect(),
        )
        .unwrap();
        let mut s = ErrorSums::new(2, (0..subjects).map(|i| i.to_string()).collect(), 1, 1);
        s.add_targets(&target);
        let subj: Vec<usize> = (0..subjects).collect();
        s.add_errors(0, &model, &target, &subj);
        s.add_errors(1, &base, &target, &subj);
        let mse = |r: usize| s.subject_sse(r, 0).iter().sum::<f64>();
        let imp = Improvement::of(&[Row::new("model", vec![mse(0)]), Row::new("var_p", vec![mse(1)])]);
        (s, imp)
    }

    #[test]
    fn a_clearly_better_model_beats_the_baseline_reproducibly() {
        let (s, imp) = sums(8, 0.9);
        let b = paired_bootstrap(&s, &["model", "var_p"], &imp, &[1]);
        let c = &b.per_horizon[0];
        let i = c.interval.unwrap();
        // The model's squared errors are 0.81 (1 +- 0.05)^2 of the baseline's: about -18.8 %.
        assert!((c.relative_difference + 0.188).abs() < 0.005, "{c:?}");
        assert!(i.lo <= c.relative_difference && c.relative_difference <= i.hi && i.hi < 0.0, "{i:?}");
        assert_eq!(b, paired_bootstrap(&s, &["model", "var_p"], &imp, &[1]), "the seed fixes it");
        assert_eq!((b.resamples, b.seed, b.subjects), (2000, 28, 8));
        assert!(b.sentence.starts_with("the model beats var_p at h1 by 18."), "{}", b.sentence);
        // A model as good as the baseline: the interval holds 0.
        let (s, imp) = sums(8, 1.0);
        let b = paired_bootstrap(&s, &["model", "var_p"], &imp, &[5]);
        let i = b.per_horizon[0].interval.unwrap();
        assert!(i.lo < 0.0 && i.hi > 0.0, "{i:?}");
        assert!(b.sentence.contains("var_p at h5 by") && b.sentence.contains("not clearly"), "{}", b.sentence);
        // A worse model.
        let (s, imp) = sums(8, 1.2);
        let b = paired_bootstrap(&s, &["model", "var_p"], &imp, &[1]);
        assert!(b.sentence.starts_with("the model is worse than var_p at h1 by 44."), "{}", b.sentence);
    }

    #[test]
    fn one_subject_has_no_interval() {
        let (s, imp) = sums(1, 0.9);
        let b = paired_bootstrap(&s, &["model", "var_p"], &imp, &[1]);
        assert_eq!(b.per_horizon[0].interval, None);
        assert!(b.sentence.contains("one held-out subject: no interval can be computed"), "{}", b.sentence);
    }
}
