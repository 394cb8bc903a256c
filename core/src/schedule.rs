//! Learning-rate schedules with the exact formulas of MODEL.md: `constant`, and linear warm-up
//! then cosine to `min_lr`. [`ScheduleKind`] is the name a configuration file gives one (the
//! run configuration's `train.schedule`, a golden case's `schedule`), and
//! [`ScheduleKind::config`] the one mapping from a name and its numbers to a [`ScheduleConfig`].

use core::f64::consts::PI;
use serde::{Deserialize, Serialize};

/// A learning rate as a function of the 0-based step whose update uses it.
pub trait Schedule {
    /// The learning rate of step `step`.
    fn lr(&self, step: u64) -> f64;
}

/// A schedule as configured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "schedule", rename_all = "lowercase", deny_unknown_fields)]
pub enum ScheduleConfig {
    /// `lr(s) = lr`.
    Constant {
        /// The learning rate.
        lr: f64,
    },
    /// Linear warm-up over `warmup_steps`, then cosine from `lr` to `min_lr` at `max_steps`.
    Cosine {
        /// Peak learning rate.
        lr: f64,
        /// Warm-up steps `w`.
        warmup_steps: u64,
        /// Step at which the cosine reaches `min_lr`.
        max_steps: u64,
        /// Final learning rate.
        min_lr: f64,
    },
}

/// The kind of a schedule as a configuration file names it: `"constant"` or `"cosine"`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScheduleKind {
    /// Constant `lr`.
    Constant,
    /// Linear warm-up over `warmup_steps`, then cosine to `min_lr` at `max_steps`.
    Cosine,
}

impl ScheduleKind {
    /// The schedule of this kind with peak `lr`; `warmup_steps`, `max_steps` and `min_lr` are
    /// used by `Cosine` only.
    pub fn config(self, lr: f64, warmup_steps: u64, max_steps: u64, min_lr: f64) -> ScheduleConfig {
        match self {
            ScheduleKind::Constant => ScheduleConfig::Constant { lr },
            ScheduleKind::Cosine => ScheduleConfig::Cosine { lr, warmup_steps, max_steps, min_lr },
        }
    }
}

impl Schedule for ScheduleConfig {
    fn lr(&self, step: u64) -> f64 {
        match *self {
            ScheduleConfig::Constant { lr } => lr,
            ScheduleConfig::Cosine { lr, warmup_steps, max_steps, min_lr } => {
                let (s, w) = (step as f64, warmup_steps as f64);
                if step < warmup_steps {
                    lr * (1.0 / w + (1.0 - 1.0 / w) * s / w)
                } else {
                    let span = if max_steps > warmup_steps { (max_steps - warmup_steps) as f64 } else { 1.0 };
                    let prog = ((s - w) / span).min(1.0);
                    min_lr + (lr - min_lr) * (1.0 + libm_cos(PI * prog)) / 2.0
                }
            }
        }
    }
}

fn libm_cos(x: f64) -> f64 {
    num_traits::Float::cos(x)
}

impl ScheduleConfig {
    /// The peak learning rate.
    pub fn peak_lr(&self) -> f64 {
        match *self {
            ScheduleConfig::Constant { lr } | ScheduleConfig::Cosine { lr, .. } => lr,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_kind_maps_to_its_config_and_keeps_lowercase_names() {
        assert_eq!(ScheduleKind::Constant.config(0.1, 2, 6, 0.01), ScheduleConfig::Constant { lr: 0.1 });
        assert_eq!(
            ScheduleKind::Cosine.config(0.1, 2, 6, 0.01),
            ScheduleConfig::Cosine { lr: 0.1, warmup_steps: 2, max_steps: 6, min_lr: 0.01 }
        );
        assert_eq!(serde_json::to_string(&ScheduleKind::Cosine).unwrap(), "\"cosine\"");
        assert_eq!(serde_json::from_str::<ScheduleKind>("\"constant\"").unwrap(), ScheduleKind::Constant);
        assert!(serde_json::from_str::<ScheduleKind>("\"Cosine\"").is_err());
    }
}
