//! A run's forecasts at every horizon ([`run_forecasts`]) and the files of `bc-cli forecast`
//! ([`forecast_runs`]).
//!
//! Layout ([`RunForecast`]): `(n_tokens, H, D, P)` float32, C order; `[i, h, j, :]` is a row of
//! the P parcels, like a row of the run file. Token `i` covers TRs `i D ..= i D + D - 1`, so the
//! last TR it has seen is `last_tr[i] = i D + D - 1`, and `[i, h, j, p]` forecasts parcel `p` at
//! TR `last_tr[i] + (horizons[h] - 1) D + j + 1` (MODEL.md). Per run, in `--out`:
//!
//! - `<run>_forecast.npy`: in the run file's units ([`ParcelStats::undo`](boldcast_data::ParcelStats::undo));
//! - `<run>_forecast_std.npy`: standardized, as the model computes them;
//! - in both, NaN where the target TR falls past the run's end;
//! - `<run>_last_tr.npy`: int64 `(n_tokens,)`, `last_tr[i]`;
//!
//! and `forecast.json` ([`ForecastReport`]): the context, the layout, and per run its MSE
//! overall, per horizon and per parcel, standardized, over the targets inside the run; then the
//! same pooled over every run and over each side of the split. The directory is built under a
//! temporary name and renamed at the end: on an error nothing is left.

use super::context::{per_token, Context, Outputs};
use super::mse::{Mse, MseSums};
use super::{Job, Predictor, Side};
use crate::AnalysisError;
use boldcast_core::Model;
use boldcast_data::write::write_npy;
use boldcast_data::Run;
use boldcast_storage::fsutil::StagedDir;
use std::path::Path;

/// The layout, as `forecast.json` states it.
pub const LAYOUT: &str = "forecast[i, h, j, p], float32 (n_tokens, H, D, P): parcel p at TR last_tr[i] + \
                          (horizons[h] - 1) * d_in + j + 1, having seen TRs up to last_tr[i] = i * d_in + d_in - 1; \
                          NaN where that TR is past the run's end";

/// One run's forecasts, standardized, `(n_tokens, H, D, P)`.
#[derive(Clone, Debug, PartialEq)]
pub struct RunForecast {
    /// The forecast horizons (`model.horizons`).
    pub horizons: Vec<usize>,
    /// TRs per token.
    pub d_in: usize,
    /// Parcels.
    pub parcels: usize,
    /// Tokens, `n_tr / d_in`.
    pub tokens: usize,
    /// Standardized values at [`RunForecast::index`].
    pub std: Vec<f32>,
}

impl RunForecast {
    /// The shape `(n_tokens, H, D, P)`.
    pub fn shape(&self) -> [usize; 4] {
        [self.tokens, self.horizons.len(), self.d_in, self.parcels]
    }

    /// Where `[i, h, j, p]` is.
    pub fn index(&self, i: usize, h: usize, j: usize, p: usize) -> usize {
        ((i * self.horizons.len() + h) * self.d_in + j) * self.parcels + p
    }

    /// The last TR token `i` has seen.
    pub fn last_tr(&self, i: usize) -> usize {
        i * self.d_in + self.d_in - 1
    }

    /// The TR `[i, h, j, ..]` forecasts (`h` the horizon's index).
    pub fn target_tr(&self, i: usize, h: usize, j: usize) -> usize {
        self.last_tr(i) + (self.horizons[h] - 1) * self.d_in + j + 1
    }

    /// The forecasts in `run`'s own units, at the same indices.
    pub fn in_units(&self, run: &Run) -> Vec<f32> {
        let p = self.parcels;
        self.std.iter().enumerate().map(|(k, &z)| run.stats[k % p].undo(z as f64) as f32).collect()
    }

    /// `values` (at [`RunForecast::index`]) with NaN wherever the target TR falls past the
    /// run's `n_tr` TRs: there is nothing there to compare with, and a file must not offer a
    /// number a reader could take for a forecast of the run.
    pub fn masked_past_end(&self, mut values: Vec<f32>, n_tr: usize) -> Vec<f32> {
        for i in 0..self.tokens {
            for h in 0..self.horizons.len() {
                for j in (0..self.d_in).filter(|&j| self.target_tr(i, h, j) >= n_tr) {
                    let at = self.index(i, h, j, 0);
                    values[at..at + self.parcels].fill(f32::NAN);
                }
            }
        }
        values
    }

    /// The squared errors against `run`'s standardized values, over the targets inside it.
    pub fn sums(&self, run: &Run) -> Result<MseSums, AnalysisError> {
        let mut sums = MseSums::new(self.horizons.len(), self.parcels);
        // The run read once (a run kept on disk is read here, not once per target).
        let x = run.rows(0, run.n_tr)?;
        let p = self.parcels;
        for i in 0..self.tokens {
            for h in 0..self.horizons.len() {
                for j in 0..self.d_in {
                    let tr = self.target_tr(i, h, j);
                    if tr >= run.n_tr {
                        continue;
                    }
                    for (q, &v) in x[tr * p..(tr + 1) * p].iter().enumerate() {
                        sums.add(h, q, self.std[self.index(i, h, j, q)] as f64 - v);
                    }
                }
            }
        }
        Ok(sums)
    }
}

/// The forecasts of `model` for every token of `run` under `ctx` (see [`per_token`]).
pub fn run_forecasts<M: Model<f32>>(model: &M, run: &Run, ctx: &Context) -> Result<RunForecast, AnalysisError> {
    let cfg = model.config();
    let (d, horizons, p) = (cfg.d_in, cfg.horizons.clone(), run.stats.len());
    let nh = horizons.len();
    // The model's order is (t, p, h, j); the files' is (t, h, j, p).
    let out = per_token(run, Outputs::of(cfg, nh * d), ctx, |t| model.forward(t).map(|f| f.into_data()))?;
    let n = out.len() / (p * nh * d).max(1);
    let mut f = RunForecast { horizons, d_in: d, parcels: p, tokens: n, std: vec![0.0; out.len()] };
    for i in 0..n {
        for q in 0..p {
            for h in 0..nh {
                for j in 0..d {
                    let k = f.index(i, h, j, q);
                    f.std[k] = out[((i * p + q) * nh + h) * d + j];
                }
            }
        }
    }
    Ok(f)
}

/// One run in `forecast.json`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RunEntry {
    /// The run's entities, `sub-01_run-1`.
    pub id: String,
    /// Its subject, without `sub-`.
    pub subject: String,
    /// Its side of the training split (`null` without one).
    pub side: Option<Side>,
    /// Its TRs.
    pub n_tr: usize,
    /// Its tokens, `n_tr / d_in`.
    pub tokens: usize,
    /// The files, in the output directory.
    pub forecast: String,
    /// Standardized.
    pub forecast_std: String,
    /// `last_tr`.
    pub last_tr: String,
    /// Standardized MSE over its targets.
    pub mse: Mse,
}

/// MSE pooled over a set of runs.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Total {
    /// `all`, `train`, `heldout` or `unused`.
    pub runs: String,
    /// How many.
    pub n_runs: usize,
    /// Their MSE over every target of theirs.
    pub mse: Mse,
}

/// What `forecast` did: `forecast.json`, and what `bc-cli forecast --json` prints.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ForecastReport {
    /// The weights, the data, the output and the context.
    #[serde(flatten)]
    pub job: super::JobHeader,
    /// TRs per token.
    pub d_in: usize,
    /// The horizons, in tokens.
    pub horizons: Vec<usize>,
    /// The parcel names (the last axis).
    pub parcels: Vec<String>,
    /// [`LAYOUT`].
    pub layout: String,
    /// Per run, in file-name order.
    pub runs: Vec<RunEntry>,
    /// Pooled: `all`, then each side of the split present.
    pub totals: Vec<Total>,
}

/// Writes run `run`'s three arrays into `dir` and returns its entry and sums.
fn write_run(dir: &Path, run: &Run, side: Option<Side>, f: &RunForecast) -> Result<(RunEntry, MseSums), AnalysisError> {
    let id = run.id.to_string();
    let names = [format!("{id}_forecast.npy"), format!("{id}_forecast_std.npy"), format!("{id}_last_tr.npy")];
    let last: Vec<i64> = (0..f.tokens).map(|i| f.last_tr(i) as i64).collect();
    write_npy(&dir.join(&names[0]), &f.shape(), &f.masked_past_end(f.in_units(run), run.n_tr))?;
    write_npy(&dir.join(&names[1]), &f.shape(), &f.masked_past_end(f.std.clone(), run.n_tr))?;
    write_npy(&dir.join(&names[2]), &[f.tokens], &last)?;
    let sums = f.sums(run)?;
    let [forecast, forecast_std, last_tr] = names;
    let (subject, n_tr, tokens, mse) = (run.id.subject.clone(), run.n_tr, f.tokens, sums.mse());
    Ok((RunEntry { id, subject, side, n_tr, tokens, forecast, forecast_std, last_tr, mse }, sums))
}

/// The pooled MSEs: every run, then each side present.
fn totals(entries: &[RunEntry], sums: &[MseSums], horizons: usize, parcels: usize) -> Vec<Total> {
    let sides =
        [("all", None), ("train", Some(Side::Train)), ("heldout", Some(Side::Heldout)), ("unused", Some(Side::Unused))];
    let mut out = Vec::new();
    for (name, side) in sides {
        let chosen: Vec<&MseSums> =
            entries.iter().zip(sums).filter(|(e, _)| side.is_none() || e.side == side).map(|(_, s)| s).collect();
        if chosen.is_empty() && side.is_some() {
            continue;
        }
        let mut pooled = MseSums::new(horizons, parcels);
        chosen.iter().for_each(|s| pooled.merge(s));
        out.push(Total { runs: name.into(), n_runs: chosen.len(), mse: pooled.mse() });
    }
    out
}

/// Forecasts the runs of `job` (see the module documentation), one run at a time, calling
/// `on_run` after each.
pub fn forecast_runs<M: Model<f32>>(
    p: &Predictor<M>,
    job: &Job<'_>,
    on_run: &mut dyn FnMut(&RunEntry),
) -> Result<ForecastReport, AnalysisError> {
    let stage = StagedDir::new(job.out)?;
    let (mut entries, mut sums) = (Vec::new(), Vec::new());
    for (run, side) in p.runs(job.runs) {
        let f = run_forecasts(&p.model, run, &job.context)?;
        boldcast_train::checkpoint::verify::check_outputs(&p.weights, &format!("the forecasts of {}", run.id), &f.std)?;
        let (entry, s) = write_run(stage.path(), run, side, &f)?;
        on_run(&entry);
        entries.push(entry);
        sums.push(s);
    }
    let cfg = &p.model.config();
    let report = ForecastReport {
        job: super::JobHeader::of(p, job),
        d_in: cfg.d_in,
        horizons: cfg.horizons.clone(),
        parcels: p.loaded.ds.parcel_names.clone(),
        layout: LAYOUT.to_string(),
        totals: totals(&entries, &sums, cfg.horizons.len(), p.loaded.ds.parcels),
        runs: entries,
    };
    super::write_json(&stage.path().join("forecast.json"), &report)?;
    stage.commit()?;
    Ok(report)
}
