//! The per-horizon MSE of the baselines ([`score_baselines`]) and of a model beside them
//! ([`evaluate`]) over windows, each the window-weighted mean of the batches' MSEs, the
//! model in f32 as it trains and the baselines in f64, against the same targets; with the
//! model, every row's squared errors per held-out subject, horizon and parcel too
//! ([`ErrorSums`], for `R^2` and the paired bootstrap).

use super::rsquared::ErrorSums;
use crate::fit::Baselines;
use crate::BaselineError;
use boldcast_core::forecast::{build_forecast_targets, per_horizon_losses};
use boldcast_core::Model;
use boldcast_data::{Dataset, WindowRef, WindowSpec};
use serde::Serialize;

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// `model`, `zero`, `last_token`, `window_mean`, `ar1_iterated`, `ar_p`, `var1`, `var_p`,
    /// `var_pca`, `single_lag_ar_reference`, `floor_empirical`, `floor_exact`.
    pub name: String,
    /// MSE per horizon.
    pub per_horizon: Vec<f64>,
    /// Their mean (the loss).
    pub mean: f64,
}

impl Row {
    /// The row `name` of the values `per` per horizon, with their mean.
    pub fn new(name: &str, per: Vec<f64>) -> Row {
        let mean = per.iter().sum::<f64>() / per.len().max(1) as f64;
        Row { name: name.into(), per_horizon: per, mean }
    }
}

/// Where the squared errors of a batch go, beside the MSE sums: the error sums (rows from
/// `first`) and the subject of each window of the batch.
struct Detail<'a> {
    sums: &'a mut ErrorSums,
    first: usize,
    subject: Vec<usize>,
}

/// Adds `w` times the per-horizon MSEs of each forecast of `batch` to `sums`, and with
/// `detail` their squared errors (and the targets) to its error sums.
fn add_baselines(
    sums: &mut [Vec<f64>],
    b: &Baselines,
    ds: &Dataset,
    (chunk, spec): (&[WindowRef], &WindowSpec),
    mut detail: Option<&mut Detail>,
) -> Result<(), BaselineError> {
    let w = chunk.len() as f64;
    let t64 = ds.tokens::<f64>(chunk, spec)?;
    let target = build_forecast_targets(&t64, &b.horizons)?;
    if let Some(d) = detail.as_deref_mut() {
        d.sums.add_targets(&target);
    }
    for (i, (s, f)) in sums.iter_mut().zip(b.forecasts(&t64)).enumerate() {
        for (s, v) in s.iter_mut().zip(per_horizon_losses(&f, &target)?) {
            *s += v * w;
        }
        if let Some(d) = detail.as_deref_mut() {
            d.sums.add_errors(d.first + i, &f, &target, &d.subject);
        }
    }
    Ok(())
}

/// The sorted subjects of `windows` and the index of each window's subject among them.
fn subjects_of(ds: &Dataset, windows: &[WindowRef]) -> (Vec<String>, Vec<usize>) {
    let name = |w: &WindowRef| ds.runs[w.run].id.subject.clone();
    let mut subjects: Vec<String> = windows.iter().map(name).collect();
    subjects.sort();
    subjects.dedup();
    let index = windows.iter().map(|w| subjects.binary_search(&name(w)).unwrap_or(0)).collect();
    (subjects, index)
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
) -> Result<Vec<Row>, BaselineError> {
    let names = b.names();
    let mut sums = vec![vec![0.0f64; b.horizons.len()]; names.len()];
    for chunk in windows.chunks(batch.max(1)) {
        add_baselines(&mut sums, b, ds, (chunk, spec), None)?;
    }
    Ok(rows(&names, sums, windows.len()))
}

/// The rows of an evaluation and their squared errors in detail.
pub struct Scored {
    /// The row `model`, then the baselines' rows ([`Baselines::names`]).
    pub rows: Vec<Row>,
    /// Their squared errors per held-out subject, horizon and parcel (rows in that order).
    pub sums: ErrorSums,
}

/// Evaluates `model` and the baselines `b` on `windows` of `ds` (batches of `batch`).
pub fn evaluate<M: Model<f32>>(
    model: &M,
    ds: &Dataset,
    spec: &WindowSpec,
    windows: &[WindowRef],
    b: &Baselines,
    batch: usize,
) -> Result<Scored, BaselineError> {
    let horizons = model.config().horizons.clone();
    let mut names = vec!["model"];
    names.extend(b.names());
    let mut sums = vec![vec![0.0f64; horizons.len()]; names.len()];
    let (subjects, subject) = subjects_of(ds, windows);
    let mut errors = ErrorSums::new(names.len(), subjects, horizons.len(), ds.parcels);
    let step = batch.max(1);
    for (k, chunk) in windows.chunks(step).enumerate() {
        let t32 = ds.tokens::<f32>(chunk, spec)?;
        let pred = model.forward(&t32)?;
        let target = build_forecast_targets(&t32, &horizons)?;
        for (s, v) in sums[0].iter_mut().zip(per_horizon_losses(&pred, &target)?) {
            *s += v * chunk.len() as f64;
        }
        let subject = subject[k * step..][..chunk.len()].to_vec();
        errors.add_errors(0, &pred, &target, &subject);
        let mut detail = Detail { sums: &mut errors, first: 1, subject };
        add_baselines(&mut sums[1..], b, ds, (chunk, spec), Some(&mut detail))?;
    }
    Ok(Scored { rows: rows(&names, sums, windows.len()), sums: errors })
}
