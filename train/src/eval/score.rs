//! The per-horizon MSE of the baselines ([`score_baselines`]) and of a model beside them
//! ([`evaluate`]) over windows, each the window-weighted mean of the batches' MSEs, the
//! model in f32 as it trains and the baselines in f64, against the same targets.

use super::baselines::Baselines;
use super::report::Row;
use crate::error::TrainError;
use boldcast_core::forecast::{build_forecast_targets, per_horizon_losses};
use boldcast_core::Model;
use boldcast_data::{Dataset, WindowRef, WindowSpec};

/// Adds `w` times the per-horizon MSEs of each forecast of `batch` to `sums`.
fn add_baselines(
    sums: &mut [Vec<f64>],
    b: &Baselines,
    ds: &Dataset,
    (chunk, spec): (&[WindowRef], &WindowSpec),
) -> Result<(), TrainError> {
    let w = chunk.len() as f64;
    let t64 = ds.tokens::<f64>(chunk, spec)?;
    let target = build_forecast_targets(&t64, &b.horizons)?;
    for (s, f) in sums.iter_mut().zip(b.forecasts(&t64)) {
        for (s, v) in s.iter_mut().zip(per_horizon_losses(&f, &target)?) {
            *s += v * w;
        }
    }
    Ok(())
}

fn rows(names: &[&str], sums: Vec<Vec<f64>>, windows: usize) -> Vec<Row> {
    let n = windows.max(1) as f64;
    names.iter().zip(sums).map(|(name, s)| Row::new(name, s.into_iter().map(|x| x / n).collect())).collect()
}

/// The baselines' rows ([`Baselines::names`]) on `windows` of `ds` (batches of `batch`).
pub fn score_baselines(
    b: &Baselines,
    ds: &Dataset,
    spec: &WindowSpec,
    windows: &[WindowRef],
    batch: usize,
) -> Result<Vec<Row>, TrainError> {
    let names = b.names();
    let mut sums = vec![vec![0.0f64; b.horizons.len()]; names.len()];
    for chunk in windows.chunks(batch.max(1)) {
        add_baselines(&mut sums, b, ds, (chunk, spec))?;
    }
    Ok(rows(&names, sums, windows.len()))
}

/// Evaluates `model` and the baselines `b` on `windows` of `ds` (batches of `batch`): the
/// row `model`, then the baselines' rows ([`Baselines::names`]).
pub fn evaluate<M: Model<f32>>(
    model: &M,
    ds: &Dataset,
    spec: &WindowSpec,
    windows: &[WindowRef],
    b: &Baselines,
    batch: usize,
) -> Result<Vec<Row>, TrainError> {
    let horizons = model.config().horizons.clone();
    let mut names = vec!["model"];
    names.extend(b.names());
    let mut sums = vec![vec![0.0f64; horizons.len()]; names.len()];
    for chunk in windows.chunks(batch.max(1)) {
        let t32 = ds.tokens::<f32>(chunk, spec)?;
        let pred = model.forward(&t32)?;
        let target = build_forecast_targets(&t32, &horizons)?;
        for (s, v) in sums[0].iter_mut().zip(per_horizon_losses(&pred, &target)?) {
            *s += v * chunk.len() as f64;
        }
        add_baselines(&mut sums[1..], b, ds, (chunk, spec))?;
    }
    Ok(rows(&names, sums, windows.len()))
}
