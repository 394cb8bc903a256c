//! Validation: the mean loss and per-horizon loss of a model over the held-out windows, shared
//! over the ranks. Each rank evaluates its [`val_share`] of the windows; the per-horizon sums
//! and the count are summed over the ranks, so every rank gets the same loss (and takes the
//! same early-stopping decision). With one rank the reduction is the identity and the result
//! is the plain mean over every window.

use crate::data::TrainData;
use crate::dist::Dist;
use crate::error::TrainError;
use crate::order::val_share;
use boldcast_core::forecast::{build_forecast_targets, per_horizon_losses};
use boldcast_core::Model;
use boldcast_data::WindowRef;

/// Mean loss and per-horizon loss of `model` over `windows`, in batches of `batch`.
pub fn validate<M: Model<f32>>(
    model: &M,
    data: &TrainData,
    windows: &[WindowRef],
    batch: usize,
    dist: &Dist,
) -> Result<(f64, Vec<f64>), TrainError> {
    let horizons = model.config().horizons.clone();
    let mine = &windows[val_share(windows.len(), dist.rank(), dist.size())];
    // Per-horizon sums, then the window count, reduced together.
    let mut sums = vec![0.0f64; horizons.len() + 1];
    for chunk in mine.chunks(batch.max(1)) {
        let tokens = data.ds.tokens::<f32>(chunk, &data.spec)?;
        let pred = model.forward(&tokens)?;
        let target = build_forecast_targets(&tokens, &horizons)?;
        let per = per_horizon_losses(&pred, &target)?;
        for (s, p) in sums.iter_mut().zip(per) {
            *s += p * chunk.len() as f64;
        }
    }
    sums[horizons.len()] = mine.len() as f64;
    if dist.size() > 1 {
        dist.collective().all_reduce_sum_f64(&mut sums)?;
    }
    let n = sums.pop().expect("count").max(1.0);
    let per: Vec<f64> = sums.into_iter().map(|s| s / n).collect();
    let mean = per.iter().sum::<f64>() / per.len() as f64;
    Ok((mean, per))
}
