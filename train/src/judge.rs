//! The held-out judgement of a finished training run ([`judge`]): its last validation loss
//! beside predicting zero (the standardized mean) and beside the best baseline of `eval`
//! ([`boldcast_baselines`], fitted on the training subjects) on the same held-out windows.
//!
//! `train`'s verdict passes only when the validation loss fell (the drop rule of
//! [`boldcast_core::accept::heldout_verdict`]) and the model beats predicting zero: a loss
//! that fell from a worse start can still be worse than predicting nothing. The best
//! baseline is reported beside it, in words, when the training runs allow fitting it; when
//! they do not (too short for the fits), the reason is given instead.

use crate::config::RunConfig;
use crate::data::TrainData;
use crate::error::TrainError;
use boldcast_baselines::{fit_baselines, score_baselines, BaselineError};
use serde::Serialize;

/// A finished run's last validation loss against predicting zero and the best baseline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Judgement {
    /// The last validation loss (MSE, variance units).
    pub val_loss: f64,
    /// The MSE of predicting zero on the same windows.
    pub zero: f64,
    /// Whether the model's loss is below predicting zero's.
    pub beats_zero: bool,
    /// The baseline of lowest MSE (`eval`'s baselines), when they could be fitted.
    pub best_baseline: Option<String>,
    /// Its MSE.
    pub best_mse: Option<f64>,
    /// Why the fitted baselines are missing, when they are.
    pub baselines_skipped: Option<String>,
    /// What it says, in words.
    pub words: String,
}

/// "better than X (0.812) by 4.1 %" or "worse than X (0.812) by 122.4 %".
fn compare(model: f64, name: &str, mse: f64) -> String {
    let rel = (model - mse) / mse;
    let word = if rel < 0.0 { "better" } else { "worse" };
    format!("{word} than {name} ({mse:.6}) by {:.1} %", 100.0 * rel.abs())
}

/// Judges `val_loss` on `data`'s validation windows (see the module documentation).
pub fn judge(val_loss: f64, data: &TrainData, cfg: &RunConfig) -> Result<Judgement, TrainError> {
    let h = &cfg.model.horizons;
    let (ds, spec, windows) = (&data.ds, &data.spec, &data.val_windows);
    let rows = match fit_baselines(ds, &data.split.train_runs, h, spec) {
        Ok(b) => Ok(score_baselines(&b, ds, spec, windows, cfg.train.batch_size)?),
        Err(BaselineError::Fit { name, reason }) => Err(format!("{name}: {reason}")),
        Err(e) => return Err(e.into()),
    };
    let (zero, best, skipped) = match &rows {
        Ok(rows) => {
            let zero = rows.iter().find(|r| r.name == "zero").map_or(f64::NAN, |r| r.mean);
            let best = rows.iter().min_by(|a, b| a.mean.total_cmp(&b.mean)).map(|r| (r.name.clone(), r.mean));
            (zero, best, None)
        }
        Err(why) => (zero_mse(data, cfg)?, None, Some(why.clone())),
    };
    let mut words = format!("val_loss {val_loss:.6} is {}", compare(val_loss, "predicting zero", zero));
    match (&best, &skipped) {
        (Some((name, mse)), _) => words += &format!("; {} (the best baseline)", compare(val_loss, name, *mse)),
        (None, Some(why)) => words += &format!("; no fitted baseline ({why})"),
        _ => {}
    }
    Ok(Judgement {
        val_loss,
        zero,
        beats_zero: val_loss < zero,
        best_mse: best.as_ref().map(|b| b.1),
        best_baseline: best.map(|b| b.0),
        baselines_skipped: skipped,
        words,
    })
}

/// The MSE of predicting zero on the validation windows: the targets' mean square.
fn zero_mse(data: &TrainData, cfg: &RunConfig) -> Result<f64, TrainError> {
    let h = &cfg.model.horizons;
    let (mut sum, mut n) = (0.0f64, 0usize);
    for chunk in data.val_windows.chunks(cfg.train.batch_size.max(1)) {
        let t = data.ds.tokens::<f64>(chunk, &data.spec)?;
        let target: boldcast_core::Forecasts<f64> = boldcast_core::forecast::build_forecast_targets(&t, h)?;
        sum += target.data().iter().map(|y| y * y).sum::<f64>();
        n += target.data().len();
    }
    Ok(sum / n.max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loss_is_judged_against_predicting_zero_and_the_best_baseline() {
        let cfg = crate::presets::preset("quick").unwrap();
        let td = TrainData::load(&cfg).unwrap();
        let zero = zero_mse(&td, &cfg).unwrap();
        // The case: a loss of 2.24 where predicting zero costs about 1.
        let j = judge(2.24, &td, &cfg).unwrap();
        assert!((j.zero - zero).abs() < 1e-12 && (zero - 1.0).abs() < 0.3, "{j:?}");
        assert!(!j.beats_zero);
        let want = format!(
            "val_loss 2.240000 is worse than predicting zero ({zero:.6}) by {:.1} %",
            100.0 * (2.24 - zero) / zero
        );
        assert!(j.words.starts_with(&want), "{}", j.words);
        // The best baseline of AR(1) data beats predicting zero; a loss below it beats both.
        let (name, best) = (j.best_baseline.clone().unwrap(), j.best_mse.unwrap());
        assert!(best < 0.9 * zero, "{j:?}");
        let j = judge(0.9 * best, &td, &cfg).unwrap();
        assert!(j.beats_zero);
        assert!(
            j.words.ends_with(&format!("better than {name} ({best:.6}) by 10.0 % (the best baseline)")),
            "{}",
            j.words
        );
    }

    #[test]
    fn comparisons_say_better_or_worse_by_how_much() {
        // The real-data case of issue 28: 2.24 against predicting zero's 1.007.
        assert_eq!(compare(2.24, "predicting zero", 1.007), "worse than predicting zero (1.007000) by 122.4 %");
        assert_eq!(compare(0.9, "var_p", 1.0), "better than var_p (1.000000) by 10.0 %");
    }
}
