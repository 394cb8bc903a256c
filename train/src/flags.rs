//! Red flags: signs that a run that ended without an error did not learn what it should. They
//! do not stop the run; they are reported to the observers ([`crate::Observer::on_flag`]), on
//! `bc-cli`'s stdout and in `summary.json` under `"red_flags"`.
//!
//! - [`FlagKind::BestAtStart`]: at the end of a finished run with more than one validation,
//!   the best validation loss is the one of step 0: nothing was learned beyond the
//!   initialization.
//! - [`FlagKind::Overfitting`]: `val_over_train` above `train.overfit_ratio` and rising, at
//!   [`RISING_VALIDATIONS`] validations in a row (raised once). A resumed run replays the
//!   ratios of its log, so it raises the flag where an uninterrupted run would.
//! - [`FlagKind::GradientGrowth`]: at the end of each invocation, the last logged gradient
//!   norm exceeds [`GRAD_GROWTH`] times the median of the first [`GRAD_BASELINE_STEPS`] logged
//!   norms (read from the log, so resumes do not matter).
//! - [`FlagKind::WeightDecayUnused`]: `train.weight_decay > 0`, but the optimizer decayed no
//!   element in any step of this invocation: every tensor was outside the decay group, or the
//!   backend's optimizer ignored it. Judged from what the optimizer reports it applied: the
//!   host [`boldcast_core::Adam::decayed_last_step`], or for a backend that runs its own
//!   optimizer [`boldcast_core::Model::decayed_elements`] (not judged when it says `None`).

use serde::{Deserialize, Serialize};

/// Validations in a row of a rising ratio above the threshold that raise the overfitting flag.
pub const RISING_VALIDATIONS: usize = 3;
/// How many times the median of the first norms the last gradient norm must exceed.
pub const GRAD_GROWTH: f64 = 1000.0;
/// Logged steps whose median gradient norm is the reference.
pub const GRAD_BASELINE_STEPS: usize = 10;

/// Which red flag.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlagKind {
    /// The best validation is the one of step 0.
    BestAtStart,
    /// `val_over_train` above the threshold and rising.
    Overfitting,
    /// The gradient norm grew by orders of magnitude.
    GradientGrowth,
    /// A positive weight decay that no tensor received.
    WeightDecayUnused,
}

/// A red flag: what, when, and a sentence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RedFlag {
    /// Which one.
    pub kind: FlagKind,
    /// The step it was judged at.
    pub step: u64,
    /// What was seen, in words.
    pub message: String,
}

/// The overfitting judge: sees every validation's ratio.
#[derive(Clone, Debug)]
pub struct OverfitJudge {
    threshold: f64,
    recent: Vec<f64>,
    raised: bool,
}

impl OverfitJudge {
    /// A judge for `train.overfit_ratio = threshold`.
    pub fn new(threshold: f64) -> Self {
        Self { threshold, recent: Vec::new(), raised: false }
    }

    /// One validation's `val_over_train` (`None` at step 0); the flag the first time the last
    /// [`RISING_VALIDATIONS`] ratios are all above the threshold and each above the one before.
    pub fn observe(&mut self, step: u64, ratio: Option<f64>) -> Option<RedFlag> {
        let r = ratio?;
        let rising = self.recent.last().is_some_and(|&p| r > p);
        if r > self.threshold && (self.recent.is_empty() || rising) {
            self.recent.push(r);
        } else {
            self.recent.clear();
            if r > self.threshold {
                self.recent.push(r);
            }
        }
        if self.raised || self.recent.len() < RISING_VALIDATIONS {
            return None;
        }
        self.raised = true;
        let last: Vec<String> =
            self.recent[self.recent.len() - RISING_VALIDATIONS..].iter().map(|r| format!("{r:.3}")).collect();
        Some(RedFlag {
            kind: FlagKind::Overfitting,
            step,
            message: format!(
                "val/train ratio above train.overfit_ratio = {} and rising over {RISING_VALIDATIONS} validations ({}): \
                 overfitting",
                self.threshold,
                last.join(", ")
            ),
        })
    }
}

/// The flag of a finished run whose best validation is the one of step 0.
pub fn best_at_start(best: Option<(u64, f64)>, validations: usize, step: u64) -> Option<RedFlag> {
    let (s, l) = best?;
    (s == 0 && validations > 1).then(|| RedFlag {
        kind: FlagKind::BestAtStart,
        step,
        message: format!(
            "the best validation loss ({l:.6}) is the one of step 0: nothing was learned beyond the initialization"
        ),
    })
}

/// The flag of a gradient norm grown by [`GRAD_GROWTH`], from the `(step, grad_norm)` points
/// of the log (`step` counts the steps done, as the log does).
pub fn gradient_growth(norms: &[(u64, f64)]) -> Option<RedFlag> {
    let &(step, last) = norms.last()?;
    if norms.len() <= GRAD_BASELINE_STEPS {
        return None;
    }
    let mut first: Vec<f64> = norms[..GRAD_BASELINE_STEPS].iter().map(|p| p.1).collect();
    first.sort_by(f64::total_cmp);
    let median = (first[GRAD_BASELINE_STEPS / 2 - 1] + first[GRAD_BASELINE_STEPS / 2]) / 2.0;
    (last > GRAD_GROWTH * median).then(|| RedFlag {
        kind: FlagKind::GradientGrowth,
        step,
        message: format!(
            "the gradient norm of step {step} ({last:.4e}) is more than {GRAD_GROWTH} times the median of the first \
             {GRAD_BASELINE_STEPS} steps ({median:.4e})"
        ),
    })
}

/// The flag of a positive weight decay that no element received over `steps` steps
/// (`decayed`: the elements the optimizer reports it decayed, `None` when it cannot say).
pub fn weight_decay_unused(weight_decay: f64, steps: u64, decayed: Option<u64>, step: u64) -> Option<RedFlag> {
    (weight_decay > 0.0 && steps > 0 && decayed == Some(0)).then(|| RedFlag {
        kind: FlagKind::WeightDecayUnused,
        step,
        message: format!(
            "train.weight_decay = {weight_decay}, but the optimizer decayed no element in {steps} step(s): no tensor \
             received it"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overfitting_needs_a_rising_ratio_above_the_threshold() {
        let mut j = OverfitJudge::new(1.5);
        assert!(j.observe(0, None).is_none());
        for (k, r) in [(1, 1.6), (2, 1.7), (3, 1.65), (4, 1.8)] {
            assert!(j.observe(k, Some(r)).is_none(), "step {k}");
        }
        let f = j.observe(5, Some(1.9)).expect("1.65 < 1.8 < 1.9");
        assert_eq!((f.kind, f.step), (FlagKind::Overfitting, 5));
        assert!(j.observe(6, Some(2.0)).is_none(), "raised once");
        let mut low = OverfitJudge::new(1.5);
        assert!([1.1, 1.2, 1.3, 1.4].iter().all(|&r| low.observe(1, Some(r)).is_none()));
    }

    #[test]
    fn gradient_growth_compares_with_the_median_of_the_first_steps() {
        let mut n: Vec<(u64, f64)> = (1..=10).map(|s| (s, 1.0)).collect();
        assert!(gradient_growth(&n).is_none());
        n.push((11, 999.0));
        assert!(gradient_growth(&n).is_none());
        n.push((12, 1001.0));
        assert_eq!(gradient_growth(&n).unwrap().step, 12);
    }

    #[test]
    fn best_at_start_and_unused_decay() {
        assert!(best_at_start(Some((0, 1.0)), 3, 30).is_some());
        assert!(best_at_start(Some((0, 1.0)), 1, 30).is_none());
        assert!(best_at_start(Some((10, 1.0)), 3, 30).is_none());
        assert!(weight_decay_unused(0.05, 10, Some(0), 10).is_some());
        assert!(weight_decay_unused(0.05, 10, Some(4), 10).is_none());
        assert!(weight_decay_unused(0.05, 10, None, 10).is_none());
        assert!(weight_decay_unused(0.0, 10, Some(0), 10).is_none());
    }
}
