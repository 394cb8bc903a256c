//! The acceptance rules of the training-loop decisions (MODEL.md, "Acceptance rules"): an
//! overfit run must drop its windowed-mean loss by 30 %, a held-out run its validation loss.

/// The outcome of a windowed-mean rule, with both numbers for the verdict line.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Verdict {
    /// Mean of the first window.
    pub first: f64,
    /// Mean of the last window.
    pub last: f64,
    /// Whether `last <= ratio * first`.
    pub passed: bool,
    /// The ratio required (0.7).
    pub ratio: f64,
}

/// `mean(xs[-window:]) <= ratio * mean(xs[:window])`; `None` when `xs` is empty. With fewer
/// than `window` values both windows are the whole series shortened to its length.
pub fn windowed_drop(xs: &[f64], window: usize, ratio: f64) -> Option<Verdict> {
    if xs.is_empty() || window == 0 {
        return None;
    }
    let w = window.min(xs.len());
    let first = xs[..w].iter().sum::<f64>() / w as f64;
    let last = xs[xs.len() - w..].iter().sum::<f64>() / w as f64;
    Some(Verdict { first, last, passed: last <= ratio * first, ratio })
}

/// The steps the overfit rule averages at each end.
pub const OVERFIT_WINDOW: usize = 50;

/// The overfit rule: `mean(loss[-50:]) <= 0.7 * mean(loss[:50])` ([`OVERFIT_WINDOW`] steps).
pub fn overfit_verdict(losses: &[f64]) -> Option<Verdict> {
    windowed_drop(losses, OVERFIT_WINDOW, 0.7)
}

/// The validations the held-out rule averages at each end.
pub const HELDOUT_WINDOW: usize = 3;

/// The held-out rule: `mean(val[-3:]) <= 0.7 * mean(val[:3])` ([`HELDOUT_WINDOW`] validations).
pub fn heldout_verdict(val_losses: &[f64]) -> Option<Verdict> {
    windowed_drop(val_losses, HELDOUT_WINDOW, 0.7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_use_the_right_windows() {
        let mut xs = alloc::vec![1.0; 50];
        xs.extend(core::iter::repeat_n(0.5, 50));
        let v = overfit_verdict(&xs).unwrap();
        assert_eq!((v.first, v.last, v.passed), (1.0, 0.5, true));
        // A 20 % drop fails.
        let v = heldout_verdict(&[1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8]).unwrap();
        assert!((v.last - 0.8).abs() < 1e-12 && !v.passed);
        assert!(heldout_verdict(&[]).is_none());
    }
}
