//! The linear baselines a forecaster of BOLD must beat, and the scoring of forecasts against
//! them: every baseline is fitted on the training subjects only and scored on exactly the
//! windows the model is scored on, seeing only what the model sees (a window's tokens up to
//! `t`).
//!
//! - the simple ones ([`baseline_forecasts`]): `zero` (the standardized mean), `last_token`,
//!   `window_mean`, and `ar1_iterated` (per parcel, `phi^L x_last` with `phi` fitted by least
//!   squares, [`fit_ar1`]);
//! - `ar_p` ([`ar`]): per parcel, a direct regression of `x(n + L)` on its last `p` TRs for
//!   every lead `L`, `p` chosen by cross-validation over the training subjects among every
//!   order up to the window's length, what the shortest training run allows and `AR_P_MAX`
//!   ([`linear::order_bound`]);
//! - `var1`, `var_p` ([`var`]): every parcel from every parcel's last 1 (or `p`) TRs, direct
//!   ridge regressions for every lead, the penalty (and `p`) chosen by cross-validation;
//! - `var_pca` ([`pca`]): every parcel from the last `p` TRs of the first `r` principal
//!   components of the parcels, rank, order and penalty chosen by cross-validation.
//!
//! The fits stream over the training runs accumulating moments per fold ([`moments`]: `X'X`,
//! `X'Y`), so cross-validation refits from `total - fold` without revisiting data ([`cv`]:
//! the folds and the choice rule, the simplest candidate within one paired standard error or
//! 0.1 % of the lowest cross-validated MSE; [`ridge`]: the solve). [`score`] gives every
//! row's MSE per horizon and, beside a model, the squared errors per subject, horizon and
//! parcel ([`rsquared`]); [`stats`] holds the resampling and binomial statistics that the
//! evaluation and fingerprinting report.
//!
//! ```
//! use boldcast_baselines::Row;
//! let r = Row::new("zero", vec![1.0, 0.5]);
//! assert_eq!(r.mean, 0.75);
//! ```

#![deny(missing_docs)]

pub mod ar;
pub mod cv;
pub mod fit;
pub mod linear;
pub mod moments;
pub mod pca;
pub mod ridge;
pub mod rsquared;
pub mod score;
pub mod stats;
pub mod var;

pub use fit::{baseline_forecasts, fit_ar1, fit_baselines, BaselineChoices, Baselines};
pub use rsquared::{ErrorSums, RSquared};
pub use score::{evaluate, score_baselines, Row, Scored};
pub use stats::Interval;

/// What fitting or scoring a baseline can fail with.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// A linear baseline cannot be fitted (too few training samples, a singular system).
    #[error("baseline `{name}`: {reason}")]
    Fit {
        /// The baseline's row name.
        name: String,
        /// Why, in words.
        reason: String,
    },
    /// The runs could not be read or windowed.
    #[error(transparent)]
    Data(#[from] boldcast_data::DataError),
    /// A forecast or its targets could not be built, or the model failed.
    #[error(transparent)]
    Model(#[from] boldcast_core::Error),
}
