//! Evaluation of trained weights: the per-horizon MSE and `R^2` of a checkpoint on held-out
//! windows, beside the baselines a reviewer asks for and the single-lag AR reference (what
//! `bc-cli eval` reports).
//!
//! The weights are a `.safetensors` file with the MODEL.md names ([`Weights::open`]: a
//! checkpoint directory's `model.safetensors`, a run directory's `best.safetensors` or, without
//! one, its newest checkpoint, or any file given by path). The configuration and adjacency come
//! from the file's metadata (every file a run writes carries them, [`Weights::stored_config`]);
//! for a file without them (written by PyTorch) the caller gives the configuration, and the
//! adjacency is rebuilt from the training runs ([`Weights::rebuild_adjacency`]). The held-out
//! windows are those of the configuration's subject split ([`boldcast_data::split()`]) at
//! `window.stride` ([`EvalData`]).
//!
//! Rows ([`baselines`](boldcast_baselines::fit), scored by
//! [`score`](boldcast_baselines::score)), each a mean squared error per horizon and their mean
//! (the loss); every baseline is fitted on the training subjects only and scored on exactly
//! the held-out windows the model is scored on, seeing only what the model sees (the window's
//! tokens up to `t`):
//!
//! - `model`: the checkpoint;
//! - `zero`: predict 0 (the standardized mean): the MSE is the targets' mean square, about 1;
//! - `last_token`: repeat the last token seen, `pred[t, h, j] = tokens[t, j]`, every horizon;
//! - `window_mean`: the mean of the window's tokens up to `t`;
//! - `ar1_iterated`: per parcel, `phi_p^L * x_last` with `phi_p` fitted by least squares
//!   (`sum x_t x_(t+1) / sum x_t^2`, pooled over the training runs) and `L = (h - 1) D + j + 1`
//!   TRs past the last TR seen: a one-step fit iterated (the `ar1` of earlier versions);
//! - `ar_p` ([`ar`](boldcast_baselines::ar)): per parcel, a direct regression of `x(n + L)` on
//!   its last `p` TRs for every lead `L`, `p` chosen by cross-validation over the training
//!   subjects among every order up to the window's length, what the shortest training run
//!   allows and `AR_P_MAX = 128` ([`order_bound`](boldcast_baselines::linear::order_bound));
//! - `var1`, `var_p` ([`var`](boldcast_baselines::var)): every parcel from every parcel's last
//!   1 (or `p`) TRs, direct ridge regressions for every lead, the penalty (and `p`) chosen by
//!   cross-validation; `var_p` where its moments fit (else left out, the reason in the report);
//! - `var_pca` ([`pca`](boldcast_baselines::pca)): every parcel from the last `p` TRs of the
//!   first `r` principal components of the parcels, rank, order and penalty chosen by
//!   cross-validation.
//!
//! The linear fits, the choice rule of their cross-validation and their forecasts are
//! [`boldcast_baselines`]'s. Beside the rows: `R^2 = 1 - SSE / SST` of every row per horizon
//! and parcel ([`rsquared`](boldcast_baselines::rsquared)); the single-lag AR reference
//! `1 - acf(L)^2` on the held-out runs (a reference, not a floor: fits with more lags or
//! parcels beat it on real data; the JSON keeps it also as `floors[floor_empirical]`) and, for
//! the synthetic fixture, the exact floor `1 - rho^(2L)`; the model against the best baseline
//! at each horizon ([`Improvement`], in words) with a paired bootstrap over the held-out
//! subjects ([`bootstrap`]); the baselines' choices, and a warning for a ridge penalty at an
//! end of its grid; a forecast example ([`example`]); the held-out runs' head motion
//! ([`boldcast_data::motion`]). [`evaluate_weights`] puts them into an [`EvalReport`]
//! ([`report`]); [`eval_checkpoint`] does everything from a path.

pub mod bootstrap;
pub mod example;
pub mod names;
pub mod report;
pub mod request;

pub use bootstrap::{paired_bootstrap, PairedBootstrap};
pub use example::{forecast_example, ForecastExample, HorizonForecast};
pub use report::{EvalReport, Improvement, Row};

use crate::AnalysisError;
use boldcast_baselines::{evaluate, fit_baselines};
use boldcast_core::{Adjacency, Model, ModelConfig};
use boldcast_data::{WindowRef, WindowSpec};
use boldcast_storage::tensorfile::SafetensorsFile;
use boldcast_train::checkpoint as ck;
use boldcast_train::config::RunConfig;
use boldcast_train::data::{empirical_floor, load_data, windows_of_runs, LoadedData, Split};
use boldcast_train::linear_path::LinearPathModel;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Where the weights of `path` are: the file itself, a checkpoint directory's
/// `model.safetensors`, a run directory's `best.safetensors`, or its newest checkpoint.
pub fn weights_path(path: &Path) -> Result<PathBuf, AnalysisError> {
    let none = |reason: &str| AnalysisError::Weights { path: path.to_path_buf(), reason: reason.into() };
    if path.is_file() {
        return Ok(path.to_path_buf());
    }
    if !path.is_dir() {
        return Err(none("no such file or directory"));
    }
    for name in ["model.safetensors", "best.safetensors"] {
        if path.join(name).is_file() {
            return Ok(path.join(name));
        }
    }
    match ck::latest_checkpoint(path)? {
        Some(d) => Ok(d.join("model.safetensors")),
        None => Err(none("holds no model.safetensors, best.safetensors or checkpoints/")),
    }
}

/// An opened weights file and its metadata.
pub struct Weights {
    path: PathBuf,
    file: SafetensorsFile,
    meta: HashMap<String, String>,
    stored_adjacency: bool,
    allow_other_data: bool,
}

impl Weights {
    /// Opens the weights of `path` ([`weights_path`]) and checks their tensors against the
    /// hashes recorded for them ([`ck::verify::check_weights_file`]).
    pub fn open(path: &Path) -> Result<Weights, AnalysisError> {
        let path = weights_path(path)?;
        let file = SafetensorsFile::open(&path)?;
        ck::verify::check_weights_file(&file)?;
        let meta = file.metadata().unwrap_or_default();
        Ok(Weights { path, file, meta, stored_adjacency: true, allow_other_data: false })
    }

    /// The weights file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The run configuration stored in the metadata (`None` for a file without one).
    pub fn stored_config(&self) -> Result<Option<RunConfig>, AnalysisError> {
        let Some(text) = self.meta.get("config") else { return Ok(None) };
        toml::from_str(text).map(Some).map_err(|e| self.bad(format!("metadata `config`: {e}")))
    }

    /// The stored run configuration; a file without one is an error.
    pub fn config(&self) -> Result<RunConfig, AnalysisError> {
        self.stored_config()?.ok_or_else(|| self.bad("no configuration in the file's metadata"))
    }

    /// Ignores the adjacency stored in the metadata: the model's is rebuilt from the training
    /// runs (for a configuration other than the stored one).
    pub fn rebuild_adjacency(mut self) -> Weights {
        self.stored_adjacency = false;
        self
    }

    /// Evaluates on data other than the training data (other parcel names, or training runs
    /// with another fingerprint) with a warning in the report, instead of refusing them.
    pub fn allow_other_data(mut self) -> Weights {
        self.allow_other_data = true;
        self
    }

    /// Whether `data` is the data the weights were trained on, as far as the metadata tells
    /// (`parcels`, `data_fingerprint`; files without them are not checked): an error when not,
    /// or with [`Weights::allow_other_data`] a warning.
    fn check_data(&self, data: &EvalData) -> Result<Vec<String>, AnalysisError> {
        let Some(trained) = self.trained_identity()? else { return Ok(Vec::new()) };
        let now = boldcast_train::data::DataIdentity::of(&data.loaded.ds, &data.split.train_runs)?;
        match trained.differs_from(&now) {
            None => Ok(Vec::new()),
            Some(why) if self.allow_other_data => {
                Ok(vec![format!("warning: {}: {why}; evaluating anyway, as asked", self.path.display())])
            }
            Some(why) => Err(AnalysisError::OtherData { path: self.path.clone(), reason: why }),
        }
    }

    /// The model's adjacency for `ds`: the stored one, else `k_neighbors` rebuilt from its runs
    /// `train_runs` (`None`, a caller without the training split, makes that an error); it
    /// must have the data's parcels.
    fn adjacency_for(
        &self,
        cfg: &RunConfig,
        ds: &boldcast_data::Dataset,
        train_runs: Option<&[usize]>,
    ) -> Result<Option<Adjacency>, AnalysisError> {
        let adjacency = match (self.meta.get("adjacency"), train_runs) {
            (Some(t), _) if self.stored_adjacency => ck::adjacency_from_json(&self.path, t)?,
            (_, Some(train_runs)) => ds.adjacency(cfg.model.k_neighbors, train_runs)?,
            (_, None) => {
                return Err(self.bad("no stored adjacency, and no training split of these data to rebuild it from"))
            }
        };
        match &adjacency {
            Some(a) if a.parcels() != ds.parcels => {
                Err(self.bad(format!("the model's adjacency has {} parcels, the data {}", a.parcels(), ds.parcels)))
            }
            _ => Ok(adjacency),
        }
    }
}

impl Weights {
    /// A weights file that is not what a run wrote, and why.
    fn bad(&self, reason: impl Into<String>) -> AnalysisError {
        AnalysisError::Checkpoint { path: self.path.clone(), reason: reason.into() }
    }

    /// What the weights record of their training data (metadata `parcels` and
    /// `data_fingerprint`; `None` for a file without them).
    pub fn trained_identity(&self) -> Result<Option<boldcast_train::data::DataIdentity>, AnalysisError> {
        let (Some(names), Some(fingerprint)) = (self.meta.get("parcels"), self.meta.get("data_fingerprint")) else {
            return Ok(None);
        };
        let parcels = serde_json::from_str(names).map_err(|e| self.bad(format!("metadata `parcels`: {e}")))?;
        Ok(Some(boldcast_train::data::DataIdentity { parcels, fingerprint: fingerprint.clone(), provenance: None }))
    }

    /// Builds the model of `cfg` with `build` for the data `ds` (with its linear path,
    /// [`LinearPathModel`]) and loads these weights into it, refusing non-finite values (what
    /// `eval`, `forecast` and `embed` run). The adjacency is the stored one, else rebuilt from
    /// `ds`'s runs `train_runs` (`None`: the caller has no training split of `ds`, and weights
    /// without a stored adjacency are an error).
    pub fn build_model<M, F>(
        &self,
        cfg: &RunConfig,
        ds: &boldcast_data::Dataset,
        train_runs: Option<&[usize]>,
        build: F,
    ) -> Result<LinearPathModel<M>, AnalysisError>
    where
        M: Model<f32>,
        F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast_core::Error>,
    {
        let adjacency = self.adjacency_for(cfg, ds, train_runs)?;
        let built = build(cfg.model_config(), adjacency, cfg.train.seed)?;
        let mut model = LinearPathModel::unfitted(built, cfg.model.linear_path);
        let params = self.file.all::<f32>()?;
        boldcast_train::checkpoint::verify::check_finite(&self.path, &params)?;
        model.load_state(&params).map_err(|e| self.bad(e.to_string()))?;
        Ok(model)
    }
}

/// The data of an evaluation: the dataset, its subject split and the held-out windows.
pub struct EvalData {
    /// The dataset (its notes are for the user).
    pub loaded: LoadedData,
    /// The subject split of the configuration.
    pub split: Split,
    /// Windows at `window.stride`.
    pub spec: WindowSpec,
    /// The held-out windows.
    pub windows: Vec<WindowRef>,
}

impl EvalData {
    /// Splits `loaded` as `cfg` says and takes the held-out windows.
    pub fn new(mut loaded: LoadedData, cfg: &RunConfig) -> Result<EvalData, AnalysisError> {
        let split = boldcast_data::split(&loaded.ds, &cfg.data, cfg.train.seed)?;
        let spec = WindowSpec { window: cfg.window.window, stride: cfg.window.stride, d_in: cfg.model.d_in };
        let notes = ("held-out", &mut loaded.notes);
        let windows = windows_of_runs(&loaded.ds, &spec, &split.heldout_runs, cfg.data.fd_max, notes)?;
        Ok(EvalData { loaded, split, spec, windows })
    }

    /// Scores the runs of `test` instead of the configuration's held-out subjects: a test set
    /// kept out of both training and validation (the held-out subjects of a run choose its
    /// best step, so scoring them again flatters it). The configuration must list its
    /// training subjects (`data.subjects_train`), which the baselines are fitted on as before;
    /// a test subject among them is an error naming it.
    pub fn with_test_subjects(loaded: LoadedData, cfg: &RunConfig, test: &[String]) -> Result<EvalData, AnalysisError> {
        if cfg.data.subjects_train.is_empty() {
            return Err(AnalysisError::Config(boldcast_train::config::ConfigError::Invalid {
                field: "data.subjects_train".into(),
                value: "[]".into(),
                reason: "scoring test subjects needs the run's training subjects listed explicitly".into(),
            }));
        }
        let mut cfg = cfg.clone();
        cfg.data.subjects_heldout = test.to_vec();
        EvalData::new(loaded, &cfg)
    }

    /// Loads the data of `cfg` ([`load_data`]) and splits it.
    pub fn load(cfg: &RunConfig) -> Result<EvalData, AnalysisError> {
        EvalData::new(load_data(cfg)?, cfg)
    }
}

/// Builds the model of `cfg` with `build`, loads `weights` into it and evaluates it and the
/// baselines on `data`'s held-out windows, beside the floors.
pub fn evaluate_weights<M, F>(
    weights: &Weights,
    cfg: &RunConfig,
    data: &EvalData,
    build: F,
) -> Result<EvalReport, AnalysisError>
where
    M: Model<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast_core::Error>,
{
    let mut warnings = weights.check_data(data)?;
    let model = weights.build_model(cfg, &data.loaded.ds, Some(&data.split.train_runs), build)?;
    let (ds, split, spec) = (&data.loaded.ds, &data.split, &data.spec);
    let baselines = fit_baselines(ds, &split.train_runs, &cfg.model.horizons, spec)?;
    let scored = evaluate(&model, ds, spec, &data.windows, &baselines, cfg.train.batch_size)?;
    let rows = scored.rows;
    for r in &rows {
        ck::verify::check_outputs(&weights.path, &format!("the `{}` row's MSE per horizon", r.name), &r.per_horizon)?;
    }
    let h = &cfg.model.horizons;
    let emp = empirical_floor(ds, &split.heldout_runs, h, spec.d_in)?;
    let reference = Row::new("single_lag_ar_reference", emp.per_horizon);
    let mut floors = vec![Row { name: "floor_empirical".into(), ..reference.clone() }];
    if let Some(fx) = &data.loaded.fixture {
        floors.push(Row::new("floor_exact", fx.floor(h, spec.d_in)?.per_horizon));
    }
    let improvement = Improvement::of(&rows);
    let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    let r_squared = names.iter().enumerate().map(|(i, n)| scored.sums.r_squared(i, n)).collect();
    let bootstrap = paired_bootstrap(&scored.sums, &names, &improvement, h);
    warnings.extend(baselines.choices().warnings());
    let forecast_example = match data.windows.first() {
        Some(&w) => {
            let mut ex = forecast_example(&model, ds, spec, w, 0)?;
            example::add_best_baselines(&mut ex, (&baselines, &improvement.best_baseline), (ds, spec), w, 0)?;
            Some(ex)
        }
        None => None,
    };
    Ok(EvalReport {
        weights: weights.path.clone(),
        data: data.loaded.source.clone(),
        horizons: h.clone(),
        tr_seconds: ds.tr,
        horizon_seconds: ds.tr.map(|tr| h.iter().map(|&x| boldcast_data::horizon_seconds(x, spec.d_in, tr)).collect()),
        heldout_subjects: split.heldout_subjects.clone(),
        windows: data.windows.len(),
        rows,
        floors,
        ar1_phi: baselines.ar1_phi.clone(),
        baselines: baselines.choices(),
        improvement,
        single_lag_ar_reference: reference,
        r_squared,
        bootstrap,
        forecast_example,
        warnings,
        motion: boldcast_data::motion::run_motion(ds, &split.heldout_runs)?,
        input_spectrum: data.loaded.spectrum.clone(),
    })
}

/// Everything from a path: opens the weights, takes their stored configuration (with
/// `data.dir` replaced by `data` when given), loads and splits the data and evaluates.
pub fn eval_checkpoint<M, F>(path: &Path, data: Option<PathBuf>, build: F) -> Result<EvalReport, AnalysisError>
where
    M: Model<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast_core::Error>,
{
    let weights = Weights::open(path)?;
    let mut cfg = weights.config()?;
    if let Some(d) = data {
        cfg.data.dir = Some(d);
    }
    cfg.validate()?;
    evaluate_weights(&weights, &cfg, &EvalData::load(&cfg)?, build)
}
