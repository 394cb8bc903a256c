//! Early stopping: stop after `patience` validations in a row that do not beat the reference
//! loss by `min_delta`. The reference is the loss of the last validation that did (the first
//! validation always does); `patience = 0` never stops.
//!
//! Its state is two numbers, stored in a checkpoint's `state.json` as `val.patience_ref` and
//! `val.bad_validations` ([`crate::checkpoint::ValState`]), so a resumed run stops exactly
//! where an uninterrupted one would.

/// Patience over validation losses.
#[derive(Clone, Debug, PartialEq)]
pub struct EarlyStopping {
    /// Validations without improvement that stop the run; 0 never stops.
    pub patience: u64,
    /// The smallest decrease that counts as an improvement.
    pub min_delta: f64,
    /// The loss the next validation must beat by `min_delta`.
    pub patience_ref: Option<f64>,
    /// Validations in a row without such an improvement.
    pub bad_validations: u64,
}

impl EarlyStopping {
    /// A fresh one (no validation seen).
    pub fn new(patience: u64, min_delta: f64) -> Self {
        Self { patience, min_delta, patience_ref: None, bad_validations: 0 }
    }

    /// One continuing from a checkpoint's `patience_ref` and `bad_validations`.
    pub fn resumed(patience: u64, min_delta: f64, patience_ref: Option<f64>, bad_validations: u64) -> Self {
        Self { patience, min_delta, patience_ref, bad_validations }
    }

    /// Records one validation loss; true when the run should stop.
    pub fn observe(&mut self, val_loss: f64) -> bool {
        match self.patience_ref {
            Some(r) if val_loss > r - self.min_delta => self.bad_validations += 1,
            _ => {
                self.patience_ref = Some(val_loss);
                self.bad_validations = 0;
            }
        }
        self.patience > 0 && self.bad_validations >= self.patience
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_after_patience_validations_without_min_delta() {
        let mut e = EarlyStopping::new(2, 0.1);
        assert!(!e.observe(1.0));
        assert!(!e.observe(0.95), "0.05 is less than min_delta");
        assert_eq!((e.bad_validations, e.patience_ref), (1, Some(1.0)));
        assert!(!e.observe(0.8), "an improvement of 0.2 resets");
        assert_eq!((e.bad_validations, e.patience_ref), (0, Some(0.8)));
        assert!(!e.observe(0.9));
        assert!(e.observe(0.75));
    }

    #[test]
    fn patience_zero_never_stops_and_a_resumed_one_continues() {
        let mut e = EarlyStopping::new(0, 0.0);
        assert!((0..10).all(|_| !e.observe(1.0)));
        let mut r = EarlyStopping::resumed(3, 0.0, Some(0.5), 2);
        assert!(r.observe(0.6));
    }
}
