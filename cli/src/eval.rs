//! `bc-cli eval`: the per-horizon MSE of a checkpoint on held-out windows, beside the
//! baselines a reviewer asks for and the loss floor.
//!
//! The weights are a `.safetensors` file with the MODEL.md names: a checkpoint directory's
//! `model.safetensors`, a run directory's `best.safetensors` (or, without one, its newest
//! checkpoint), or any file given by path. The configuration and adjacency come from the
//! file's metadata (every file `train` writes carries them); a file without them (written by
//! PyTorch) needs `--config`, and its adjacency is rebuilt from the training runs. The data is
//! `--data`, else the configuration's `data.dir`, else its synthetic fixture; the held-out
//! windows are those of the configuration's subject split ([`boldcast::data::split()`]) at
//! `window.stride`.
//!
//! Rows, each a mean squared error per horizon and their mean (the loss):
//!
//! - `model`: the checkpoint;
//! - `zero`: predict 0 (the standardized mean): the MSE is the targets' mean square, about 1;
//! - `last_token`: repeat the last token seen, `pred[t, h, j] = tokens[t, j]`, every horizon;
//! - `window_mean`: the mean of the window's tokens up to `t`;
//! - `ar1`: per parcel, `phi_p^L * x_last` with `phi_p` fitted by least squares
//!   (`sum x_t x_(t+1) / sum x_t^2`, pooled over the training runs) and `L = (h - 1) D + j + 1`
//!   TRs past the last TR seen: the best single-lag predictor, optimal for AR(1) data;
//!
//! and the floors: `1 - acf(L)^2` on the held-out runs (empirical), and for the synthetic
//! fixture the exact `1 - rho^(2L)`.

use crate::error::CliError;
use crate::presets::{Overrides, Purpose, DEFAULT_PRESET};
use boldcast::core::forecast::{build_forecast_targets, per_horizon_losses};
use boldcast::core::{Adjacency, ForecastShape, Forecasts, Model, ModelConfig, Tokens};
use boldcast::data::{Dataset, WindowSpec};
use boldcast_train::checkpoint as ck;
use boldcast_train::config::RunConfig;
use boldcast_train::data::{empirical_floor, load_data, FloorInfo};
use boldcast_train::tensorfile::SafetensorsFile;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// `model`, `zero`, `last_token`, `window_mean`, `ar1`, `floor_empirical`, `floor_exact`.
    pub name: String,
    /// MSE per horizon.
    pub per_horizon: Vec<f64>,
    /// Their mean (the loss).
    pub mean: f64,
}

/// What `eval` reports (its `--json` output).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvalReport {
    /// The weights file.
    pub weights: PathBuf,
    /// Where the data came from.
    pub data: String,
    /// The horizons, in tokens.
    pub horizons: Vec<usize>,
    /// Held-out subjects.
    pub heldout_subjects: Vec<String>,
    /// Held-out windows evaluated.
    pub windows: usize,
    /// The model and the baselines.
    pub rows: Vec<Row>,
    /// The floors (empirical; exact for the synthetic fixture).
    pub floors: Vec<Row>,
    /// The fitted AR(1) coefficient per parcel.
    pub ar1_phi: Vec<f64>,
}

impl EvalReport {
    /// The row called `name` (model, baselines or floors).
    pub fn row(&self, name: &str) -> Option<&Row> {
        self.rows.iter().chain(&self.floors).find(|r| r.name == name)
    }

    /// The table printed on stdout.
    pub fn table(&self) -> String {
        let mut s = format!(
            "eval: {} on {}\nheld-out subjects {:?}, {} windows\n{:<18}",
            self.weights.display(),
            self.data,
            self.heldout_subjects,
            self.windows,
            "MSE"
        );
        for h in &self.horizons {
            s += &format!("{:>12}", format!("h{h}"));
        }
        s += &format!("{:>12}\n", "mean");
        for r in self.rows.iter().chain(&self.floors) {
            s += &format!("{:<18}", r.name);
            for v in &r.per_horizon {
                s += &format!("{v:>12.6}");
            }
            s += &format!("{:>12.6}\n", r.mean);
        }
        s
    }
}

fn row(name: &str, per: Vec<f64>) -> Row {
    let mean = per.iter().sum::<f64>() / per.len().max(1) as f64;
    Row { name: name.into(), per_horizon: per, mean }
}

/// Per-parcel AR(1) coefficients by least squares over `runs`: `sum x_t x_(t+1) / sum x_t^2`.
pub fn fit_ar1(ds: &Dataset, runs: &[usize]) -> Vec<f64> {
    let p = ds.parcels;
    let (mut num, mut den) = (vec![0.0f64; p], vec![0.0f64; p]);
    for &r in runs {
        let run = &ds.runs[r];
        for t in 0..run.n_tr.saturating_sub(1) {
            for q in 0..p {
                let (a, b) = (run.data[t * p + q], run.data[(t + 1) * p + q]);
                num[q] += a * b;
                den[q] += a * a;
            }
        }
    }
    num.iter().zip(&den).map(|(n, d)| if *d > 0.0 { n / d } else { 0.0 }).collect()
}

/// The baselines' forecasts `(B, T, P, H, D)` of `tokens`: zero, last token, window mean, AR(1)
/// (`phi`: one coefficient per parcel).
pub fn baseline_forecasts(tokens: &Tokens<f64>, horizons: &[usize], phi: &[f64]) -> [Forecasts<f64>; 4] {
    let s = tokens.shape();
    let (nb, nt, np, nd, nh) = (s.batch, s.time, s.parcels, s.d_in, horizons.len());
    let shape = ForecastShape::new(nb, nt, np, nh, nd);
    let zero = Forecasts::<f64>::zeros(shape);
    let (mut last, mut mean, mut ar1) = (zero.clone(), zero.clone(), zero.clone());
    for b in 0..nb {
        for (p, &phi_p) in phi.iter().enumerate().take(np) {
            let mut sum = vec![0.0f64; nd];
            for t in 0..nt {
                for (j, sj) in sum.iter_mut().enumerate() {
                    *sj += tokens.at(b, t, p, j);
                }
                let x_last = tokens.at(b, t, p, nd - 1);
                for (i, &h) in horizons.iter().enumerate() {
                    for (j, sj) in sum.iter().enumerate() {
                        let k = last.index(b, t, p, i, j);
                        last.data_mut()[k] = tokens.at(b, t, p, j);
                        mean.data_mut()[k] = sj / (t + 1) as f64;
                        let l = boldcast::core::floor::lag(h, j, nd) as i32;
                        ar1.data_mut()[k] = phi_p.powi(l) * x_last;
                    }
                }
            }
        }
    }
    [zero, last, mean, ar1]
}

/// Evaluates `model` and the baselines on `windows` of `ds` (batches of `batch`).
pub fn evaluate<M: Model<f32>>(
    model: &M,
    ds: &Dataset,
    spec: &WindowSpec,
    windows: &[boldcast::data::WindowRef],
    phi: &[f64],
    batch: usize,
) -> Result<Vec<Row>, CliError> {
    let horizons = model.config().horizons.clone();
    let nh = horizons.len();
    let mut sums = vec![vec![0.0f64; nh]; 5];
    for chunk in windows.chunks(batch.max(1)) {
        let w = chunk.len() as f64;
        let t32 = ds.tokens::<f32>(chunk, spec)?;
        let pred = model.forward(&t32)?;
        let target = build_forecast_targets(&t32, &horizons)?;
        for (s, v) in sums[0].iter_mut().zip(per_horizon_losses(&pred, &target)?) {
            *s += v * w;
        }
        let t64 = ds.tokens::<f64>(chunk, spec)?;
        let target = build_forecast_targets(&t64, &horizons)?;
        for (i, f) in baseline_forecasts(&t64, &horizons, phi).iter().enumerate() {
            for (s, v) in sums[i + 1].iter_mut().zip(per_horizon_losses(f, &target)?) {
                *s += v * w;
            }
        }
    }
    let n = windows.len().max(1) as f64;
    let names = ["model", "zero", "last_token", "window_mean", "ar1"];
    Ok(names.iter().zip(sums).map(|(name, s)| row(name, s.into_iter().map(|x| x / n).collect())).collect())
}

/// Where the weights of `path` are: the file itself, a checkpoint directory's
/// `model.safetensors`, a run directory's `best.safetensors`, or its newest checkpoint.
pub fn weights_path(path: &Path) -> Result<PathBuf, CliError> {
    if path.is_file() {
        return Ok(path.to_path_buf());
    }
    if !path.is_dir() {
        return Err(CliError::Msg(format!("--checkpoint {}: no such file or directory", path.display())));
    }
    for name in ["model.safetensors", "best.safetensors"] {
        if path.join(name).is_file() {
            return Ok(path.join(name));
        }
    }
    match ck::latest_checkpoint(path)? {
        Some(d) => Ok(d.join("model.safetensors")),
        None => Err(CliError::Msg(format!(
            "--checkpoint {}: holds no model.safetensors, best.safetensors or checkpoints/",
            path.display()
        ))),
    }
}

/// Flags of `bc-cli eval` as the library takes them.
#[derive(Clone, Debug, Default)]
pub struct EvalRequest {
    /// `--checkpoint`.
    pub checkpoint: PathBuf,
    /// `--data`.
    pub data: Option<PathBuf>,
    /// `--config` (for weights without a stored configuration).
    pub config: Option<PathBuf>,
}

/// `bc-cli eval`: loads the weights (see the module documentation), builds the model with
/// `build`, evaluates it and the baselines on the held-out windows.
pub fn eval_command<M, F>(req: &EvalRequest, build: F) -> Result<EvalReport, CliError>
where
    M: Model<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast::core::Error>,
{
    let weights = weights_path(&req.checkpoint)?;
    let file = SafetensorsFile::open(&weights).map_err(|e| CliError::Msg(e.to_string()))?;
    let meta = file.metadata().unwrap_or_default();
    let mut cfg: RunConfig = match (&req.config, meta.get("config")) {
        (Some(c), _) => crate::presets::resolve(
            &Overrides { config: Some(c.clone()), ..Overrides::default() },
            DEFAULT_PRESET,
            Purpose::Train,
        )?,
        (None, Some(text)) => {
            toml::from_str(text).map_err(|e| CliError::Msg(format!("{}: metadata `config`: {e}", weights.display())))?
        }
        (None, None) => {
            return Err(CliError::Msg(format!(
                "{}: no configuration in the file's metadata: give --config",
                weights.display()
            )))
        }
    };
    if let Some(d) = &req.data {
        cfg.data.dir = Some(d.clone());
    }
    cfg.validate()?;
    let loaded = load_data(&cfg)?;
    for n in &loaded.notes {
        eprintln!("{n}");
    }
    let ds = &loaded.ds;
    let split = boldcast::data::split(ds, &cfg.data, cfg.train.seed)?;
    let spec = WindowSpec { window: cfg.window.window, stride: cfg.window.stride, d_in: cfg.model.d_in };
    let windows = ds.windows_of(&spec, &split.heldout_runs)?;
    let adjacency = match meta.get("adjacency") {
        Some(t) if req.config.is_none() => ck::adjacency_from_json(&weights, t)?,
        _ => ds.adjacency(cfg.model.k_neighbors, &split.train_runs)?,
    };
    if let Some(a) = &adjacency {
        if a.parcels() != ds.parcels {
            return Err(CliError::Msg(format!(
                "{}: the model's adjacency has {} parcels, the data {}",
                weights.display(),
                a.parcels(),
                ds.parcels
            )));
        }
    }
    let mut model = build(cfg.model_config(), adjacency, cfg.train.seed)?;
    let params = file.all::<f32>().map_err(|e| CliError::Msg(e.to_string()))?;
    model.load_state(&params).map_err(|e| CliError::Msg(format!("{}: {e}", weights.display())))?;
    let phi = fit_ar1(ds, &split.train_runs);
    let rows = evaluate(&model, ds, &spec, &windows, &phi, cfg.train.batch_size)?;
    let h = &cfg.model.horizons;
    let emp: FloorInfo = empirical_floor(ds, &split.heldout_runs, h, spec.d_in)?;
    let mut floors = vec![row("floor_empirical", emp.per_horizon)];
    if let Some(fx) = &loaded.fixture {
        floors.push(row("floor_exact", fx.floor(h, spec.d_in)?.per_horizon));
    }
    Ok(EvalReport {
        weights,
        data: loaded.source.clone(),
        horizons: h.clone(),
        heldout_subjects: split.heldout_subjects,
        windows: windows.len(),
        rows,
        floors,
        ar1_phi: phi,
    })
}
