//! The golden-file checker: loads a case of `golden/cases/<case>/` (MODEL.md, "Golden
//! files"; [`crate::cases`] says where the cases are), runs the same computations through any
//! backend and through the core's optimizer, and reports the worst tolerance ratio per group
//! of tensors.
//!
//! - [`GoldenCase::load`] reads `config.json` (every key of the golden README; an unknown key
//!   or an out-of-range value, such as `lr: -1`, is an error naming the file and the key),
//!   `weights.safetensors`, `inputs.safetensors` and `expected.safetensors` (a non-finite value
//!   in any of their tensors is an input error naming the file and the tensor): a case that
//!   loads is checked, one that does not is an input error, never a FAIL.
//! - [`check_optimizer`] needs no model: the case's fixed gradient `grad.*`, clipped once, is
//!   applied `steps` times with the core's [`Adam`] and the case's schedule, and compared with
//!   `opt.*` (and the norm with `opt.grad_norm`).
//! - [`check_model`] drives a backend already loaded with the case's weights, in any element
//!   type ([`GoldenCase::weights_as`], [`GoldenCase::tokens_as`]): forward, embed, targets,
//!   loss, gradients, then `steps` real training steps through the core's [`Trainer`].
//! - [`check_case_dir`] does all of it for one directory and returns a [`Report`], whose
//!   `Display` is what `bc-cli golden <case-dir>` prints.
//!
//! A [`Check`]'s ratio is `max_i |a_i - b_i| / (abs + rel * |b_i|)` with the tolerances of
//! MODEL.md ([`Tolerance::FORWARD`], [`Tolerance::OPTIMIZER`]); a check passes when the ratio is
//! at most 1.

use boldcast_core::forecast::build_forecast_targets;
use boldcast_core::model::NamedTensor;
use boldcast_core::optim::{clip_factor, OptimizerKind};
use boldcast_core::{
    Adam, Adjacency, Elem, ForecastShape, Forecasts, HostTensor, Model, ModelConfig, OptimConfig, Optimizer, ParamMut,
    Schedule, ScheduleConfig, ScheduleKind, Shape, StepRecord, Temporal, TokenShape, Tokens, Trainer,
};
use boldcast_storage::tensorfile::{in_spec_order, CheckpointError, SafetensorsFile};
use boldcast_storage::{io_err, StorageError};
use serde::Deserialize;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// What went wrong loading or checking a golden case.
#[derive(Debug)]
pub enum GoldenError {
    /// `config.json` is malformed, has an unknown key, or an invalid value.
    Config {
        /// The config file.
        path: PathBuf,
        /// What is wrong, naming the key.
        reason: String,
    },
    /// A file or directory could not be read, or a safetensors file could not be read or
    /// lacks a tensor ([`StorageError::TensorFile`]).
    Storage(StorageError),
    /// An input or weight tensor does not fit the case's configuration.
    Input {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the tensor.
        reason: String,
    },
    /// The model or the core failed while checking.
    Model {
        /// What was being done, e.g. `"forward"`.
        during: &'static str,
        /// The error.
        source: boldcast_core::Error,
    },
}

impl fmt::Display for GoldenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GoldenError::Config { path, reason } => write!(f, "{}: {reason}", path.display()),
            GoldenError::Storage(e) => write!(f, "{e}"),
            GoldenError::Input { path, reason } => write!(f, "{}: {reason}", path.display()),
            GoldenError::Model { during, source } => write!(f, "{during}: {source}"),
        }
    }
}

impl std::error::Error for GoldenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GoldenError::Storage(e) => std::error::Error::source(e),
            GoldenError::Model { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<StorageError> for GoldenError {
    fn from(e: StorageError) -> Self {
        GoldenError::Storage(e)
    }
}

/// A tensor file's error reaches `?` through [`StorageError`].
impl From<CheckpointError> for GoldenError {
    fn from(e: CheckpointError) -> Self {
        GoldenError::Storage(e.into())
    }
}

fn model_err(during: &'static str) -> impl FnOnce(boldcast_core::Error) -> GoldenError {
    move |source| GoldenError::Model { during, source }
}

/// The golden `config.json`, key for key as in the golden README. Unknown keys are rejected.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoldenConfig {
    /// The case's name (informational).
    #[serde(default)]
    pub name: Option<String>,
    /// The reference's seed (informational).
    #[serde(default)]
    pub seed: Option<u64>,
    /// The AR(1) coefficient of the reference's tokens (informational).
    #[serde(default)]
    pub rho: Option<f64>,
    /// B.
    pub batch: usize,
    /// T.
    pub tokens: usize,
    /// P.
    pub parcels: usize,
    /// D.
    pub d_in: usize,
    /// `"mamba"` or `"mamba2"`; absent means `"mamba"`.
    #[serde(default)]
    pub temporal: Temporal,
    /// M.
    pub d_model: usize,
    /// Layers.
    pub n_layers: usize,
    /// N.
    pub d_state: usize,
    /// Di / M.
    pub expand: usize,
    /// K.
    pub d_conv: usize,
    /// Mamba-2 head width (mamba2 only).
    #[serde(default)]
    pub headdim: Option<usize>,
    /// The reference's SSD chunk length.
    #[serde(default)]
    pub chunk_size: Option<usize>,
    /// k of the spatial attention, 0 for none.
    #[serde(default)]
    pub k_neighbors: usize,
    /// Forecast horizons in tokens.
    pub horizons: Vec<usize>,
    /// `"adamw"` or `"adam_l2"`; absent means `"adamw"`.
    #[serde(default = "default_optimizer")]
    pub optimizer: OptimizerKind,
    /// Adam betas; absent means `(0.9, 0.999)`.
    #[serde(default)]
    pub betas: Option<(f64, f64)>,
    /// Peak learning rate.
    pub lr: f64,
    /// Weight decay of the decaying group.
    pub weight_decay: f64,
    /// Global-norm clipping threshold; absent means no clipping.
    #[serde(default)]
    pub grad_clip_norm: Option<f64>,
    /// `"constant"` or `"cosine"`.
    pub schedule: ScheduleKind,
    /// Warm-up steps (cosine only).
    #[serde(default)]
    pub warmup_steps: Option<u64>,
    /// Step at which the cosine reaches `min_lr` (cosine only).
    #[serde(default)]
    pub max_steps: Option<u64>,
    /// Final learning rate of the cosine; absent means 0.
    #[serde(default)]
    pub min_lr: Option<f64>,
    /// How many updates `opt.*` and `train.*` cover.
    pub steps: u64,
    /// Whether `inputs.safetensors` holds a forecast offset `offset` `(B, T, P, H, D)` that
    /// every forecast of the case adds (`pred`, the loss, the gradients, the training steps);
    /// absent means false.
    #[serde(default)]
    pub offset: bool,
}

fn default_optimizer() -> OptimizerKind {
    OptimizerKind::AdamW
}

impl GoldenConfig {
    /// Parses `config.json` text; `path` is only used in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, GoldenError> {
        let c: GoldenConfig = serde_json::from_str(text)
            .map_err(|e| GoldenError::Config { path: path.to_path_buf(), reason: e.to_string() })?;
        let bad = |reason: String| GoldenError::Config { path: path.to_path_buf(), reason };
        if c.schedule == ScheduleKind::Cosine {
            for (key, v) in [("warmup_steps", c.warmup_steps), ("max_steps", c.max_steps)] {
                if v.is_none() {
                    return Err(bad(format!("key `{key}` is required with schedule \"cosine\"")));
                }
            }
        }
        if c.temporal == Temporal::Mamba2 && c.headdim.is_none() {
            return Err(bad("key `headdim` is required with temporal \"mamba2\"".into()));
        }
        c.check_values().map_err(bad)?;
        // The model's sizes, each error naming the key (`model.d_model` is `d_model` here).
        c.model_config().validate().map_err(|e| match e {
            boldcast_core::Error::Config { field, value, reason } => match field.strip_prefix("model.") {
                Some(key) => bad(format!("key `{key}` = {value}: {reason}")),
                None => bad(format!("the model's sizes: {value} {reason}")),
            },
            other => bad(other.to_string()),
        })?;
        c.optim_config().validate().map_err(|e| bad(e.to_string()))?;
        Ok(c)
    }

    /// The ranges of the values `serde` cannot check: every error names the key and value
    /// (`key `lr` = -1: must be finite and > 0`).
    fn check_values(&self) -> Result<(), String> {
        let key = |k: &str, v: &dyn fmt::Display, why: &str| Err(format!("key `{k}` = {v}: {why}"));
        for (k, v) in [("batch", self.batch), ("tokens", self.tokens), ("parcels", self.parcels)] {
            if v == 0 {
                return key(k, &v, "must be at least 1");
            }
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return key("lr", &self.lr, "must be finite and > 0");
        }
        if let Some(m) = self.min_lr {
            if !(m.is_finite() && (0.0..=self.lr).contains(&m)) {
                return key("min_lr", &m, &format!("must be in [0, lr = {}]", self.lr));
            }
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return key("weight_decay", &self.weight_decay, "must be finite and >= 0");
        }
        if let Some((b1, b2)) = self.betas {
            if !((0.0..1.0).contains(&b1) && (0.0..1.0).contains(&b2)) {
                return key("betas", &format!("[{b1}, {b2}]"), "each beta must be in [0, 1)");
            }
        }
        if let Some(m) = self.grad_clip_norm {
            if !(m > 0.0 && m.is_finite()) {
                return key("grad_clip_norm", &m, "must be finite and > 0");
            }
        }
        if self.schedule == ScheduleKind::Cosine && self.warmup_steps == Some(0) {
            return key("warmup_steps", &0, "the cosine schedule needs at least 1");
        }
        if self.steps == 0 {
            return key("steps", &0, "must be at least 1");
        }
        Ok(())
    }

    /// The model sizes.
    pub fn model_config(&self) -> ModelConfig {
        ModelConfig {
            temporal: self.temporal,
            d_in: self.d_in,
            d_model: self.d_model,
            n_layers: self.n_layers,
            d_state: self.d_state,
            expand: self.expand,
            d_conv: self.d_conv,
            headdim: self.headdim.unwrap_or(64),
            chunk_size: self.chunk_size.unwrap_or(64),
            k_neighbors: self.k_neighbors,
            horizons: self.horizons.clone(),
            linear_path: boldcast_core::LinearPath::Off,
        }
    }

    /// The optimizer (eps is always 1e-8).
    pub fn optim_config(&self) -> OptimConfig {
        OptimConfig {
            kind: self.optimizer,
            weight_decay: self.weight_decay,
            betas: self.betas.unwrap_or((0.9, 0.999)),
            eps: 1e-8,
        }
    }

    /// The learning-rate schedule.
    pub fn schedule(&self) -> ScheduleConfig {
        self.schedule.config(
            self.lr,
            self.warmup_steps.unwrap_or(0),
            self.max_steps.unwrap_or(0),
            self.min_lr.unwrap_or(0.0),
        )
    }
}

/// One golden case, loaded and checked against its own configuration.
#[derive(Clone, Debug)]
pub struct GoldenCase {
    dir: PathBuf,
    config: GoldenConfig,
    weights: Vec<NamedTensor<f32>>,
    tokens: Tokens<f32>,
    adjacency: Option<Adjacency>,
    offset: Option<Forecasts<f32>>,
    expected: HashMap<String, (Vec<usize>, Vec<f64>)>,
    expected_order: Vec<String>,
}

/// What `inputs.safetensors` holds, checked against the case's configuration.
struct Inputs {
    tokens: Tokens<f32>,
    adjacency: Option<Adjacency>,
    offset: Option<Forecasts<f32>>,
}

impl Inputs {
    /// Reads `tokens` `(B, T, P, D)`, `adjacency` `(P, k)` when `k_neighbors > 0` and `offset`
    /// `(B, T, P, H, D)` exactly when the config says `offset: true`.
    fn read(path: &Path, config: &GoldenConfig) -> Result<Self, GoldenError> {
        let bad = |reason: String| GoldenError::Input { path: path.to_path_buf(), reason };
        let inputs = SafetensorsFile::open(path)?;
        let t = inputs.tensor::<f32>("tokens")?;
        let want = vec![config.batch, config.tokens, config.parcels, config.d_in];
        if t.shape != want {
            return Err(bad(format!("tensor `tokens` has shape {:?}, config.json says (B,T,P,D) = {want:?}", t.shape)));
        }
        finite(path, "tokens", &t.data)?;
        let tokens = HostTensor::new(TokenShape::new(want[0], want[1], want[2], want[3]), t.data)
            .map_err(|e| bad(format!("tensor `tokens`: {e}")))?;
        config.model_config().check_tokens(&tokens.shape()).map_err(|e| bad(format!("tensor `tokens`: {e}")))?;
        let adjacency = match config.k_neighbors {
            0 => None,
            k => Some(Self::adjacency(&inputs, path, config.parcels, k)?),
        };
        let offset = match (config.offset, inputs.names().iter().any(|n| n == "offset")) {
            (true, _) => Some(Self::offset(&inputs, path, config)?),
            (false, true) => {
                return Err(bad("tensor `offset` is present, but config.json does not say `\"offset\": true`".into()))
            }
            (false, false) => None,
        };
        Ok(Inputs { tokens, adjacency, offset })
    }

    /// The valid `(parcels, k)` table `adjacency`.
    fn adjacency(inputs: &SafetensorsFile, path: &Path, p: usize, k: usize) -> Result<Adjacency, GoldenError> {
        let reason = |reason: String| GoldenError::Input { path: path.to_path_buf(), reason };
        let (shape, idx) = inputs.i64("adjacency")?;
        if shape != [p, k] {
            return Err(reason(format!(
                "tensor `adjacency` has shape {shape:?}, config.json says (parcels, k) = [{p}, {k}]"
            )));
        }
        let idx = idx
            .iter()
            .map(|&i| usize::try_from(i))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| reason("tensor `adjacency`: negative index".into()))?;
        Adjacency::new(p, k, idx).map_err(|e| reason(format!("tensor `adjacency`: {e}")))
    }

    /// The forecast offset `(B, T, P, H, D)`, finite.
    fn offset(inputs: &SafetensorsFile, path: &Path, c: &GoldenConfig) -> Result<Forecasts<f32>, GoldenError> {
        let t = inputs.tensor::<f32>("offset")?;
        let shape = ForecastShape::new(c.batch, c.tokens, c.parcels, c.horizons.len(), c.d_in);
        if t.shape != shape.dims() {
            return Err(GoldenError::Input {
                path: path.to_path_buf(),
                reason: format!(
                    "tensor `offset` has shape {:?}, config.json says (B,T,P,H,D) = {:?}",
                    t.shape,
                    shape.dims()
                ),
            });
        }
        finite(path, "offset", &t.data)?;
        Forecasts::new(shape, t.data)
            .map_err(|e| GoldenError::Input { path: path.to_path_buf(), reason: format!("tensor `offset`: {e}") })
    }
}

impl GoldenCase {
    /// Loads `dir/{config.json, weights.safetensors, inputs.safetensors, expected.safetensors}`.
    ///
    /// Checks that the weights have exactly the names and shapes of
    /// [`ModelConfig::param_specs`], that `tokens` is `(batch, tokens, parcels, d_in)` and
    /// that `adjacency` is a valid `(parcels, k)` table when `k_neighbors > 0`.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, GoldenError> {
        let dir = dir.as_ref().to_path_buf();
        let cfg_path = dir.join("config.json");
        let text = std::fs::read_to_string(&cfg_path).map_err(io_err(&cfg_path))?;
        let config = GoldenConfig::parse(&text, &cfg_path)?;
        let mc = config.model_config();

        let wpath = dir.join("weights.safetensors");
        let wfile = SafetensorsFile::open(&wpath)?;
        let weights = in_spec_order(&mc.param_specs(), wfile.all::<f32>()?)
            .map_err(|e| GoldenError::Input { path: wpath.clone(), reason: e.to_string() })?;
        for w in &weights {
            finite(&wpath, &w.name, &w.data)?;
        }

        let Inputs { tokens, adjacency, offset } = Inputs::read(&dir.join("inputs.safetensors"), &config)?;

        let epath = dir.join("expected.safetensors");
        let efile = SafetensorsFile::open(&epath)?;
        let expected_order = efile.names();
        let mut expected = HashMap::with_capacity(expected_order.len());
        for name in &expected_order {
            let t = efile.tensor::<f64>(name)?;
            finite(&epath, name, &t.data)?;
            expected.insert(name.clone(), (t.shape, t.data));
        }
        // The series of `steps` training steps: a `steps` the file does not cover is the
        // config's error (and would run that many steps).
        if let Some((shape, _)) = expected.get("train.loss") {
            if shape.as_slice() != [config.steps as usize] {
                return Err(GoldenError::Config {
                    path: cfg_path,
                    reason: format!(
                        "key `steps` = {}: {} holds train.loss of shape {shape:?}",
                        config.steps,
                        epath.display()
                    ),
                });
            }
        }
        Ok(GoldenCase { dir, config, weights, tokens, adjacency, offset, expected, expected_order })
    }

    /// The case's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The case's name: `name` from the config, else the directory's name.
    pub fn name(&self) -> String {
        self.config
            .name
            .clone()
            .unwrap_or_else(|| self.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
    }

    /// The parsed `config.json`.
    pub fn config(&self) -> &GoldenConfig {
        &self.config
    }

    /// The parsed `config.json`, mutable: for negative tests that change the optimizer or the
    /// schedule and expect the checks to fail.
    pub fn config_mut(&mut self) -> &mut GoldenConfig {
        &mut self.config
    }

    /// The model sizes.
    pub fn model_config(&self) -> ModelConfig {
        self.config.model_config()
    }

    /// The optimizer.
    pub fn optim_config(&self) -> OptimConfig {
        self.config.optim_config()
    }

    /// The learning-rate schedule.
    pub fn schedule(&self) -> ScheduleConfig {
        self.config.schedule()
    }

    /// The global-norm clipping threshold (`None`: no clipping).
    pub fn grad_clip_norm(&self) -> Option<f64> {
        self.config.grad_clip_norm
    }

    /// How many updates `opt.*` and `train.*` cover.
    pub fn steps(&self) -> u64 {
        self.config.steps
    }

    /// The batch `(B, T, P, D)`.
    pub fn tokens(&self) -> Tokens<f32> {
        self.tokens.clone()
    }

    /// The batch in element type `E` (exact for `f64`: the file holds f32 values).
    pub fn tokens_as<E: Elem>(&self) -> Tokens<E> {
        let data = self.tokens.data().iter().map(|&x| E::of(x as f64)).collect();
        HostTensor::new(self.tokens.shape(), data).expect("the same shape as the f32 tokens")
    }

    /// The forecast offset `(B, T, P, H, D)` every forecast of the case adds, `None` when the
    /// case has none (`offset` absent from `config.json`).
    pub fn offset(&self) -> Option<Forecasts<f32>> {
        self.offset.clone()
    }

    /// The offset in element type `E` (exact for `f64`).
    pub fn offset_as<E: Elem>(&self) -> Option<Forecasts<E>> {
        self.offset.as_ref().map(|o| {
            let data = o.data().iter().map(|&x| E::of(x as f64)).collect();
            Forecasts::new(o.shape(), data).expect("the same shape as the f32 offset")
        })
    }

    /// The `(P, k)` neighbour table, `None` when `k_neighbors` is 0.
    pub fn adjacency(&self) -> Option<Adjacency> {
        self.adjacency.clone()
    }

    /// The initial parameters, in state-dict order.
    pub fn weights(&self) -> Vec<NamedTensor<f32>> {
        self.weights.clone()
    }

    /// The initial parameters in element type `E` (exact for `f64`), in state-dict order.
    pub fn weights_as<E: Elem>(&self) -> Vec<NamedTensor<E>> {
        self.weights
            .iter()
            .map(|w| NamedTensor {
                name: w.name.clone(),
                shape: w.shape.clone(),
                data: w.data.iter().map(|&x| E::of(x as f64)).collect(),
            })
            .collect()
    }

    /// An expected tensor, widened to f64: shape and row-major values.
    pub fn expected(&self, name: &str) -> Option<(Vec<usize>, Vec<f64>)> {
        self.expected.get(name).cloned()
    }

    /// The names in `expected.safetensors`, in file order.
    pub fn expected_names(&self) -> &[String] {
        &self.expected_order
    }

    fn expected_ref(&self, name: &str) -> Option<(&[usize], &[f64])> {
        self.expected.get(name).map(|(s, d)| (s.as_slice(), d.as_slice()))
    }
}

/// A non-finite value of tensor `name` of `path` is an input error naming both.
fn finite<E: Elem>(path: &Path, name: &str, data: &[E]) -> Result<(), GoldenError> {
    match data.iter().position(|x| !x.f64().is_finite()) {
        None => Ok(()),
        Some(i) => Err(GoldenError::Input {
            path: path.to_path_buf(),
            reason: format!("tensor `{name}` holds a non-finite value {} at flat index {i}", data[i].f64()),
        }),
    }
}

/// The case directories under `root`: its subdirectories holding a `config.json`, sorted.
/// A missing `root` is an error naming it.
pub fn case_dirs(root: impl AsRef<Path>) -> Result<Vec<PathBuf>, GoldenError> {
    let root = root.as_ref();
    let rd = std::fs::read_dir(root).map_err(io_err(root))?;
    let mut out = Vec::new();
    for e in rd {
        let e = e.map_err(io_err(root))?;
        let p = e.path();
        if p.is_dir() && p.join("config.json").is_file() {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// An elementwise tolerance `abs + rel * |expected|` (MODEL.md, "Golden files").
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Tolerance {
    /// Absolute part.
    pub abs: f64,
    /// Relative part, times `|expected|`.
    pub rel: f64,
}

impl Tolerance {
    /// `pred`, `embed`, `target`, `loss`, `grad.*` and `train.*`: `1e-4 + 1e-3 |b|`.
    pub const FORWARD: Tolerance = Tolerance { abs: 1e-4, rel: 1e-3 };
    /// `opt.*`: `1e-6 + 1e-5 |b|`.
    pub const OPTIMIZER: Tolerance = Tolerance { abs: 1e-6, rel: 1e-5 };

    /// The allowed difference for expected value `b`.
    pub fn of(&self, b: f64) -> f64 {
        self.abs + self.rel * b.abs()
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:e} + {:e}|b|", self.abs, self.rel)
    }
}

/// The comparison of one tensor against its expected values.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// The group: `"pred"`, `"embed"`, `"target"`, `"loss"`, `"grad"`, `"opt"`,
    /// `"train.loss"`, `"train.lr"` or `"train.grad_norm"`.
    pub group: String,
    /// The tensor's name in `expected.safetensors` (e.g. `grad.head.weight`).
    pub tensor: String,
    /// `max_i |a_i - b_i| / tol(b_i)`; infinite when a value is NaN or infinite, or the shapes
    /// differ, or the expected tensor is missing.
    pub worst_ratio: f64,
    /// The flat (row-major) index of the worst element.
    pub worst_index: usize,
    /// Number of elements compared.
    pub n: usize,
    /// The computed value at `worst_index` (NaN when there is none).
    pub got: f64,
    /// The expected value at `worst_index` (NaN when there is none).
    pub want: f64,
    /// The tolerance used.
    pub tol: Tolerance,
    /// Why the comparison could not be made elementwise (shape mismatch, missing tensor).
    pub note: Option<String>,
}

impl Check {
    /// Whether every element is within tolerance (`worst_ratio <= 1`; NaN fails).
    pub fn passed(&self) -> bool {
        self.worst_ratio <= 1.0
    }

    fn failed(group: &str, tensor: &str, tol: Tolerance, note: String) -> Check {
        Check {
            group: group.into(),
            tensor: tensor.into(),
            worst_ratio: f64::INFINITY,
            worst_index: 0,
            n: 0,
            got: f64::NAN,
            want: f64::NAN,
            tol,
            note: Some(note),
        }
    }
}

/// Compares `got` (shape `got_shape`) with the expected tensor `tensor` of `case`.
pub fn compare(
    case: &GoldenCase,
    group: &str,
    tensor: &str,
    got_shape: &[usize],
    got: &[f64],
    tol: Tolerance,
) -> Check {
    match case.expected_ref(tensor) {
        None => Check::failed(group, tensor, tol, "missing from expected.safetensors".into()),
        Some((shape, want)) => compare_values(group, tensor, got_shape, got, shape, want, tol),
    }
}

/// Compares two tensors elementwise: `got` against the expected `want`.
pub fn compare_values(
    group: &str,
    tensor: &str,
    got_shape: &[usize],
    got: &[f64],
    want_shape: &[usize],
    want: &[f64],
    tol: Tolerance,
) -> Check {
    if got_shape != want_shape || got.len() != want.len() {
        return Check::failed(
            group,
            tensor,
            tol,
            format!("shape {got_shape:?} ({} values), expected {want_shape:?} ({} values)", got.len(), want.len()),
        );
    }
    let (mut worst, mut at) = (0.0f64, 0usize);
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        let r = (a - b).abs() / tol.of(b);
        let r = if r.is_nan() { f64::INFINITY } else { r };
        if r > worst {
            worst = r;
            at = i;
        }
    }
    Check {
        group: group.into(),
        tensor: tensor.into(),
        worst_ratio: worst,
        worst_index: at,
        n: got.len(),
        got: got.get(at).copied().unwrap_or(f64::NAN),
        want: want.get(at).copied().unwrap_or(f64::NAN),
        tol,
        note: None,
    }
}

fn widen<E: Elem>(xs: &[E]) -> Vec<f64> {
    xs.iter().map(|x| x.f64()).collect()
}

/// The fixed-gradient optimizer check (`opt.*`), with the case's own optimizer and schedule.
///
/// The update runs in **f64**: the reference promoted the f32 initial weights and the f32
/// gradient `grad.*` to f64, ran PyTorch's AdamW / Adam in f64 and rounded the result to f32,
/// and the tolerance `1e-6 + 1e-5 |b|` is tight enough that running Adam in f32 would compare
/// f32 rounding (amplified by `1 / sqrt(v)` for tiny gradients) rather than the update rule.
///
/// The global norm of `grad.*` is computed here in f64 over every parameter and compared with
/// `opt.grad_norm`; the gradient is scaled once by `min(1, max_norm / (norm + 1e-6))`, then
/// applied `steps` times with `lr(s)` of the case's schedule.
pub fn check_optimizer(case: &GoldenCase) -> Vec<Check> {
    check_optimizer_with(case, &case.optim_config(), &case.schedule())
}

/// [`check_optimizer`] with another optimizer or schedule than the case's (for negative
/// tests: a wrong configuration must fail).
pub fn check_optimizer_with(case: &GoldenCase, optim: &OptimConfig, schedule: &ScheduleConfig) -> Vec<Check> {
    let tol = Tolerance::OPTIMIZER;
    let mut checks = Vec::new();
    let mut values: Vec<Vec<f64>> = case.weights.iter().map(|w| widen(&w.data)).collect();
    let mut grads: Vec<Vec<f64>> = Vec::with_capacity(values.len());
    for w in &case.weights {
        let name = format!("grad.{}", w.name);
        match case.expected_ref(&name) {
            Some((shape, g)) if shape == w.shape.as_slice() => grads.push(g.to_vec()),
            Some((shape, _)) => {
                checks.push(Check::failed("opt", &name, tol, format!("shape {shape:?}, the weight is {:?}", w.shape)));
                return checks;
            }
            None => {
                checks.push(Check::failed("opt", &name, tol, "missing from expected.safetensors".into()));
                return checks;
            }
        }
    }
    let norm = grads.iter().flatten().map(|g| g * g).sum::<f64>().sqrt();
    checks.push(compare(case, "opt", "opt.grad_norm", &[1], &[norm], tol));
    let scale = case.grad_clip_norm().map_or(1.0, |m| clip_factor(norm, m));
    for g in &mut grads {
        g.iter_mut().for_each(|x| *x *= scale);
    }
    let mut opt = match Adam::<f64>::new(optim.clone()) {
        Ok(o) => o,
        Err(e) => {
            checks.push(Check::failed("opt", "opt.*", tol, format!("optimizer config: {e}")));
            return checks;
        }
    };
    for s in 0..case.steps() {
        let lr = schedule.lr(s);
        opt.begin_step();
        for (i, w) in case.weights.iter().enumerate() {
            opt.update(
                ParamMut { index: i, name: &w.name, shape: &w.shape, value: &mut values[i], grad: &grads[i] },
                lr,
            );
        }
    }
    for (w, v) in case.weights.iter().zip(&values) {
        checks.push(compare(case, "opt", &format!("opt.{}", w.name), &w.shape, v, tol));
    }
    checks
}

/// The checks that need a model, on any backend and in any element type `E`: `model` must
/// already hold the case's weights ([`GoldenCase::weights`], or [`GoldenCase::weights_as`]
/// for `f64`). The tolerances are the same in every element type: an `f64` model checks that
/// the f32 reference agrees within them.
///
/// In order: `pred` (forward), `embed`, `target` (the core's `build_forecast_targets`),
/// `loss` (from `loss_and_grads`, plus `loss.eval` from [`Model::loss`] and `loss.host`, the
/// core's `forecasting_loss` of the model's own forecast, all against the expected `loss`),
/// `grad.<param>` for every parameter, then `steps` real training steps through the core's
/// [`Trainer`] (the case's Adam, schedule and clipping, on the same batch) compared with
/// `train.loss`, `train.lr` and `train.grad_norm`. Leaves the model trained by those steps.
///
/// A case with an offset ([`GoldenCase::offset`]) is checked through
/// [`WithOffset`](crate::offset::WithOffset): `pred`, the loss, the gradients and the training
/// steps are those of `forward(tokens) + offset`, through the backend's
/// [`Model::loss_and_grads_offset`]; `loss.eval` is then the core's host loss of that sum.
pub fn check_model<E: Elem, M: Model<E>>(case: &GoldenCase, model: &mut M) -> Result<Vec<Check>, GoldenError> {
    match case.offset_as::<E>() {
        Some(offset) => check_forecaster(case, &mut crate::offset::WithOffset::new(model, &offset)),
        None => check_forecaster(case, model),
    }
}

/// [`check_model`] on the forecaster the case describes (the model, or the model with the
/// case's offset).
fn check_forecaster<E: Elem, M: Model<E>>(case: &GoldenCase, model: &mut M) -> Result<Vec<Check>, GoldenError> {
    let tol = Tolerance::FORWARD;
    let tokens = &case.tokens_as::<E>();
    let horizons = &case.config.horizons;
    let mut checks = Vec::new();

    let pred = model.forward(tokens).map_err(model_err("forward"))?;
    checks.push(compare(case, "pred", "pred", &pred.shape().dims(), &widen(pred.data()), tol));
    let embed = model.embed(tokens).map_err(model_err("embed"))?;
    checks.push(compare(case, "embed", "embed", &embed.shape().dims(), &widen(embed.data()), tol));
    let target: Forecasts<E> = build_forecast_targets(tokens, horizons).map_err(model_err("targets"))?;
    checks.push(compare(case, "target", "target", &target.shape().dims(), &widen(target.data()), tol));

    let loss = model.loss_and_grads(tokens).map_err(model_err("loss_and_grads"))?;
    let loss_eval = model.loss(tokens).map_err(model_err("loss"))?;
    let loss_host = boldcast_core::forecast::forecasting_loss(&pred, &target).map_err(model_err("forecasting_loss"))?;
    let want_loss = case.expected_ref("loss").map(|(s, d)| (s.to_vec(), d.to_vec()));
    for (name, value) in [("loss", loss), ("loss.eval", loss_eval), ("loss.host", loss_host)] {
        checks.push(match &want_loss {
            Some((s, d)) => compare_values("loss", name, &[1], &[value], s, d, tol),
            None => Check::failed("loss", name, tol, "`loss` missing from expected.safetensors".into()),
        });
    }
    let grads = model.grads();
    let specs = model.config().param_specs();
    for s in &specs {
        let name = format!("grad.{}", s.name);
        checks.push(match grads.iter().find(|g| g.name == s.name) {
            Some(g) => compare(case, "grad", &name, &g.shape, &widen(&g.data), tol),
            None => Check::failed("grad", &name, tol, "the model returned no gradient of this name".into()),
        });
    }

    let opt = Adam::<E>::new(case.optim_config()).map_err(model_err("optimizer"))?;
    let mut trainer = Trainer::new(&mut *model, opt, case.schedule(), Vec::<StepRecord>::new(), case.grad_clip_norm());
    for _ in 0..case.steps() {
        trainer.step(tokens).map_err(model_err("training step"))?;
    }
    let recs = trainer.logger;
    let n = recs.len();
    let series: [(&str, Vec<f64>); 3] = [
        ("train.loss", recs.iter().map(|r| r.loss).collect()),
        ("train.lr", recs.iter().map(|r| r.lr).collect()),
        ("train.grad_norm", recs.iter().map(|r| r.grad_norm).collect()),
    ];
    for (name, xs) in series {
        checks.push(compare(case, name, name, &[n], &xs, tol));
    }
    Ok(checks)
}

/// Loads the case in `dir`, builds a model with `build(model_config, adjacency)`, loads the
/// case's weights into it, and runs [`check_optimizer`] and [`check_model`].
pub fn check_case_dir<M, F>(dir: impl AsRef<Path>, build: F) -> Result<Report, GoldenError>
where
    M: Model<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>) -> boldcast_core::error::Result<M>,
{
    let case = GoldenCase::load(dir)?;
    let mut model = build(case.model_config(), case.adjacency()).map_err(model_err("building the model"))?;
    model.load_state(&case.weights).map_err(model_err("loading the weights"))?;
    let mut checks = check_optimizer(&case);
    checks.extend(check_model(&case, &mut model)?);
    Ok(Report::new(&case, checks))
}

/// Every check of one case, with a human-readable `Display` (one line per group, then the
/// failing tensors by name).
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The case's name.
    pub case: String,
    /// The case's directory.
    pub dir: PathBuf,
    /// The checks, in the order they were made.
    pub checks: Vec<Check>,
}

impl Report {
    /// A report of `checks` on `case`.
    pub fn new(case: &GoldenCase, checks: Vec<Check>) -> Self {
        Report { case: case.name(), dir: case.dir.clone(), checks }
    }

    /// Whether every check passed (and there is at least one).
    pub fn passed(&self) -> bool {
        !self.checks.is_empty() && self.checks.iter().all(Check::passed)
    }

    /// The checks outside tolerance.
    pub fn failures(&self) -> Vec<&Check> {
        self.checks.iter().filter(|c| !c.passed()).collect()
    }

    /// The groups in order of first appearance, each with its worst check.
    pub fn groups(&self) -> Vec<(&str, usize, &Check)> {
        let mut out: Vec<(&str, usize, &Check)> = Vec::new();
        for c in &self.checks {
            match out.iter_mut().find(|(g, _, _)| *g == c.group) {
                Some((_, n, worst)) => {
                    *n += 1;
                    if c.worst_ratio > worst.worst_ratio || c.worst_ratio.is_nan() {
                        *worst = c;
                    }
                }
                None => out.push((&c.group, 1, c)),
            }
        }
        out
    }

    /// The worst ratio of a group, `None` when the group has no check.
    pub fn worst(&self, group: &str) -> Option<f64> {
        self.groups().into_iter().find(|(g, _, _)| *g == group).map(|(_, _, c)| c.worst_ratio)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fails = self.failures();
        let verdict = if self.passed() { "PASS" } else { "FAIL" };
        writeln!(f, "golden case `{}` ({}): {verdict}", self.case, self.dir.display())?;
        writeln!(f, "  {:<16} {:>7}  {:>11}  worst tensor [flat index]", "group", "tensors", "worst ratio")?;
        for (g, n, c) in self.groups() {
            let mark = if c.passed() { "" } else { "  <-- FAIL" };
            writeln!(f, "  {g:<16} {n:>7}  {:>11.3e}  {}[{}]{mark}", c.worst_ratio, c.tensor, c.worst_index)?;
        }
        writeln!(f, "  (ratio = max |a - b| / tol(b); a check passes when it is <= 1)")?;
        if fails.is_empty() {
            write!(f, "  all {} tensors within tolerance", self.checks.len())
        } else {
            writeln!(f, "  {} of {} tensors outside tolerance:", fails.len(), self.checks.len())?;
            for (i, c) in fails.iter().enumerate() {
                match &c.note {
                    Some(note) => write!(f, "    {} ({}): {note}", c.tensor, c.group)?,
                    None => write!(
                        f,
                        "    {} ({}): ratio {:.3e} at [{}] of {}: got {:.9e}, expected {:.9e}, tol {}",
                        c.tensor, c.group, c.worst_ratio, c.worst_index, c.n, c.got, c.want, c.tol
                    )?,
                }
                if i + 1 < fails.len() {
                    writeln!(f)?;
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn golden_root() -> PathBuf {
        crate::cases::repo_cases_dir()
    }

    fn tiny() -> GoldenCase {
        let dir = golden_root().join("tiny");
        GoldenCase::load(&dir).unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()))
    }

    #[test]
    fn config_rejects_unknown_keys_naming_key_and_file() {
        let path = Path::new("/x/tiny/config.json");
        let text = std::fs::read_to_string(golden_root().join("tiny/config.json")).unwrap();
        let c = GoldenConfig::parse(&text, path).unwrap();
        assert_eq!(c.optimizer, OptimizerKind::AdamW);
        assert_eq!(c.betas, Some((0.9, 0.95)));
        let bad = text.replacen('{', "{\"learning_rate\": 0.1,", 1);
        let e = GoldenConfig::parse(&bad, path).unwrap_err().to_string();
        assert!(e.contains("learning_rate") && e.contains("/x/tiny/config.json"), "{e}");
        let bad = text.replace("\"warmup_steps\": 2,", "");
        let e = GoldenConfig::parse(&bad, path).unwrap_err().to_string();
        assert!(e.contains("warmup_steps") && e.contains("config.json"), "{e}");
        let bad = text.replace("\"adamw\"", "\"sgd\"");
        assert!(GoldenConfig::parse(&bad, path).unwrap_err().to_string().contains("sgd"));
        // The defaults of the README: betas, min_lr, optimizer.
        let min = r#"{"batch":1,"tokens":4,"parcels":2,"d_in":1,"d_model":4,"n_layers":1,"d_state":2,
            "expand":2,"d_conv":2,"horizons":[1],"lr":0.01,"weight_decay":0.0,"schedule":"constant","steps":1}"#;
        let c = GoldenConfig::parse(min, path).unwrap();
        assert_eq!(c.optim_config(), OptimConfig::adamw(0.0, (0.9, 0.999)));
        assert_eq!(c.schedule(), ScheduleConfig::Constant { lr: 0.01 });
        assert_eq!((c.k_neighbors, c.temporal, c.grad_clip_norm), (0, Temporal::Mamba, None));
    }

    /// Issue 17: `lr: -1` loaded and ran, and the report said FAIL; every out-of-range value
    /// is an input error naming the file and the key.
    #[test]
    fn out_of_range_values_are_input_errors_naming_file_and_key() {
        let path = Path::new("/x/tiny/config.json");
        let text = std::fs::read_to_string(golden_root().join("tiny/config.json")).unwrap();
        let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        for (key, value, why) in [
            ("lr", serde_json::json!(-1), "key `lr` = -1: must be finite and > 0"),
            ("lr", serde_json::json!(0), "key `lr` = 0: must be finite and > 0"),
            ("min_lr", serde_json::json!(-0.5), "key `min_lr` = -0.5: must be in [0, lr = 0.001]"),
            ("min_lr", serde_json::json!(0.01), "key `min_lr` = 0.01: must be in [0, lr = 0.001]"),
            ("weight_decay", serde_json::json!(-1), "key `weight_decay` = -1: must be finite and >= 0"),
            ("betas", serde_json::json!([0.9, 1.0]), "key `betas` = [0.9, 1]: each beta must be in [0, 1)"),
            ("warmup_steps", serde_json::json!(0), "key `warmup_steps` = 0: the cosine schedule needs at least 1"),
            ("steps", serde_json::json!(0), "key `steps` = 0: must be at least 1"),
            ("d_model", serde_json::json!(0), "key `d_model` = 0: must be at least 1"),
            (
                "n_layers",
                serde_json::json!(1u64 << 40),
                "key `n_layers` = 1099511627776: must be at most 1024 (the parameters with their Adam state would need \
                 91.9 PiB of memory)",
            ),
            ("batch", serde_json::json!(0), "key `batch` = 0: must be at least 1"),
            ("parcels", serde_json::json!(0), "key `parcels` = 0: must be at least 1"),
        ] {
            let mut bad = doc.clone();
            bad[key] = value;
            let e = GoldenConfig::parse(&bad.to_string(), path).unwrap_err();
            assert!(matches!(e, GoldenError::Config { .. }), "{key}: {e:?}");
            assert_eq!(e.to_string(), format!("/x/tiny/config.json: {why}"), "{key}");
        }
        // A JSON number too large for f64 is no number at all.
        let e = GoldenConfig::parse(&text.replace("\"lr\": 0.001", "\"lr\": 1e999"), path).unwrap_err().to_string();
        assert!(e.starts_with("/x/tiny/config.json: ") && e.contains("number out of range"), "{e}");
        doc["lr"] = serde_json::json!(0.5);
        doc["min_lr"] = serde_json::json!(0.5);
        assert!(GoldenConfig::parse(&doc.to_string(), path).is_ok());
    }

    /// Issue 17: NaN tokens ran into the model and ended in an error that named no file; a
    /// non-finite value in any tensor of a case is an input error naming the file and tensor.
    #[test]
    fn non_finite_tensors_are_input_errors_naming_file_and_tensor() {
        use boldcast_storage::tensorfile::{load_safetensors, save_safetensors};
        let src = golden_root().join("flat-d3");
        for (file, tensor, index) in [
            ("inputs.safetensors", "tokens", 7),
            ("weights.safetensors", "head.bias", 0),
            ("expected.safetensors", "pred", 5),
        ] {
            let dir = std::env::temp_dir().join(format!("boldcast-golden-nonfinite-{}-{file}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            for f in ["config.json", "weights.safetensors", "inputs.safetensors", "expected.safetensors"] {
                std::fs::copy(src.join(f), dir.join(f)).unwrap();
            }
            let mut ts = load_safetensors::<f64>(src.join(file)).unwrap();
            let t = ts.iter_mut().find(|t| t.name == tensor).unwrap();
            t.data[index] = f64::NAN;
            if file == "expected.safetensors" {
                save_safetensors(dir.join(file), &ts, None).unwrap();
            } else {
                let ts: Vec<NamedTensor<f32>> = ts
                    .into_iter()
                    .map(|t| NamedTensor {
                        name: t.name,
                        shape: t.shape,
                        data: t.data.iter().map(|&x| x as f32).collect(),
                    })
                    .collect();
                save_safetensors(dir.join(file), &ts, None).unwrap();
            }
            let e = GoldenCase::load(&dir).unwrap_err();
            let text = e.to_string();
            std::fs::remove_dir_all(&dir).unwrap();
            assert!(matches!(e, GoldenError::Input { .. }), "{file}: {e:?}");
            assert!(
                text.contains(&format!("{file}: tensor `{tensor}` holds a non-finite value NaN at flat index {index}")),
                "{text}"
            );
        }
    }

    #[test]
    fn tiny_case_loads_with_torch_written_weights_unchanged() {
        let case = tiny();
        assert_eq!(case.name(), "tiny");
        let mc = case.model_config();
        assert_eq!((mc.d_model, mc.n_layers, mc.k_neighbors, mc.horizons.clone()), (16, 2, 3, vec![1, 5]));
        assert_eq!(case.optim_config(), OptimConfig::adamw(0.05, (0.9, 0.95)));
        assert_eq!(case.schedule(), ScheduleConfig::Cosine { lr: 1e-3, warmup_steps: 2, max_steps: 6, min_lr: 0.0 });
        assert_eq!((case.grad_clip_norm(), case.steps()), (Some(1.0), 6));
        assert_eq!(case.tokens().shape(), TokenShape::new(2, 24, 5, 1));
        assert_eq!(case.adjacency().unwrap(), Adjacency::ring(5, 3).unwrap());
        // Weights in state-dict order, values as PyTorch wrote them: MambaMixer's
        // A_log[d, n] = ln(n + 1) and D = 1.
        let w = case.weights();
        assert!(w.iter().zip(mc.param_specs()).all(|(t, s)| t.name == s.name && t.shape == s.shape));
        let a = w.iter().find(|t| t.name == "layers.0.mamba.mamba.A_log").unwrap();
        assert_eq!(a.shape, vec![32, 4]);
        for (i, &x) in a.data.iter().enumerate() {
            assert_eq!(x, ((i % 4 + 1) as f64).ln() as f32, "A_log[{}, {}]", i / 4, i % 4);
        }
        let d = w.iter().find(|t| t.name == "layers.1.mamba.mamba.D").unwrap();
        assert!(d.data.iter().all(|&x| x == 1.0));
        let (shape, pred) = case.expected("pred").unwrap();
        assert_eq!(shape, vec![2, 24, 5, 2, 1]);
        assert_eq!(pred.len(), 480);
        assert_eq!(case.expected("train.loss").unwrap().0, vec![6]);
        assert!(case.expected("nope").is_none());
        assert!(case.expected_names().iter().any(|n| n == "opt.grad_norm"));
    }

    /// A copy of the case `name` in a fresh temporary folder, its `config.json` passed through
    /// `edit`.
    fn edited_copy(name: &str, edit: impl Fn(&str) -> String) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let src = golden_root().join(name);
        for f in ["weights.safetensors", "inputs.safetensors", "expected.safetensors"] {
            std::fs::copy(src.join(f), tmp.path().join(f)).unwrap();
        }
        let text = std::fs::read_to_string(src.join("config.json")).unwrap();
        std::fs::write(tmp.path().join("config.json"), edit(&text)).unwrap();
        tmp
    }

    #[test]
    fn an_offset_case_is_checked_through_the_forecasts_plus_the_offset() {
        let mut case = GoldenCase::load(golden_root().join("linear-offset")).unwrap();
        let offset = case.offset().unwrap();
        assert_eq!(offset.shape().dims(), vec![2, 16, 4, 2, 1]);
        assert!(tiny().offset().is_none());
        let (mc, adjacency, weights) = (case.model_config(), case.adjacency(), case.weights());
        let build = || {
            let mut m = boldcast_cpu::CpuModel::<f32>::new(mc.clone(), adjacency.clone(), 0).unwrap();
            m.load_state(&weights).unwrap();
            m
        };
        let mut checks = check_optimizer(&case);
        checks.extend(check_model(&case, &mut build()).unwrap());
        let report = Report::new(&case, checks);
        eprintln!("{report}");
        assert!(report.passed(), "{report}");
        // Without the offset every forecast-dependent group fails: the checker really adds it.
        case.offset = None;
        let report = Report::new(&case, check_model(&case, &mut build()).unwrap());
        for group in ["pred", "loss", "grad", "train.loss", "train.grad_norm"] {
            assert!(report.worst(group).unwrap() > 1.0, "{group}:\n{report}");
        }
        // The embedding does not see the offset.
        assert!(report.worst("embed").unwrap() <= 1.0, "{report}");
    }

    #[test]
    fn an_offset_the_config_does_not_declare_or_lacks_is_an_input_error() {
        // The tensor without the key: refused, not ignored.
        let dir = edited_copy("linear-offset", |t| t.replace(",\n  \"offset\": true", ""));
        let e = GoldenCase::load(dir.path()).unwrap_err();
        assert!(matches!(e, GoldenError::Input { .. }), "{e:?}");
        assert!(e.to_string().contains("tensor `offset` is present"), "{e}");
        // The key without the tensor: the missing tensor is named.
        let dir = edited_copy("tiny", |t| t.replacen('{', "{\"offset\": true,", 1));
        let e = GoldenCase::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("offset") && e.contains("inputs.safetensors"), "{e}");
        // The key must be a boolean, and a misspelt one stays an unknown key.
        let path = Path::new("/x/c/config.json");
        let text = std::fs::read_to_string(golden_root().join("linear-offset/config.json")).unwrap();
        assert!(GoldenConfig::parse(&text, path).unwrap().offset);
        let e = GoldenConfig::parse(&text.replace("\"offset\": true", "\"offset\": 1"), path).unwrap_err();
        assert!(e.to_string().contains("/x/c/config.json"), "{e}");
        let e = GoldenConfig::parse(&text.replace("\"offset\"", "\"offsets\""), path).unwrap_err();
        assert!(e.to_string().contains("offsets"), "{e}");
    }

    #[test]
    fn targets_of_the_core_match_the_golden_target() {
        for name in ["tiny", "tiny-l2-clip", "tiny-mamba2"] {
            let case = GoldenCase::load(golden_root().join(name)).unwrap();
            let target: Forecasts<f32> = build_forecast_targets(&case.tokens, &case.config.horizons).unwrap();
            let c =
                compare(&case, "target", "target", &target.shape().dims(), &widen(target.data()), Tolerance::FORWARD);
            assert!(c.passed() && c.worst_ratio == 0.0, "{name}: {c:?}");
        }
    }

    #[test]
    fn comparison_flags_nan_shape_and_missing() {
        let t = Tolerance::FORWARD;
        let c = compare_values("g", "x", &[3], &[1.0, 2.0, 3.0], &[3], &[1.0, 2.0005, 3.0], t);
        assert!(c.passed() && c.worst_index == 1);
        assert!((c.worst_ratio - 5e-4 / (1e-4 + 2.0005e-3)).abs() < 1e-9);
        let c = compare_values("g", "x", &[2], &[1.0, f64::NAN], &[2], &[1.0, 1.0], t);
        assert!(!c.passed() && c.worst_index == 1 && c.worst_ratio.is_infinite());
        let c = compare_values("g", "x", &[2, 1], &[1.0, 1.0], &[2], &[1.0, 1.0], t);
        assert!(!c.passed() && c.note.as_deref().unwrap().contains("[2, 1]"));
        let case = tiny();
        let c = compare(&case, "g", "absent", &[1], &[0.0], t);
        assert!(!c.passed() && c.note.as_deref().unwrap().contains("missing"));
    }

    #[test]
    fn report_prints_one_line_per_group_and_the_failures() {
        let case = tiny();
        let mut checks = check_optimizer(&case);
        assert!(checks.iter().all(Check::passed));
        let ok = Report::new(&case, checks.clone());
        let text = ok.to_string();
        assert!(ok.passed() && text.contains("PASS") && text.contains("opt"), "{text}");
        assert_eq!(text.lines().filter(|l| l.trim_start().starts_with("opt ")).count(), 1, "{text}");
        checks.push(compare_values("pred", "pred", &[1], &[2.0], &[1], &[1.0], Tolerance::FORWARD));
        let bad = Report::new(&case, checks);
        let text = bad.to_string();
        assert!(!bad.passed());
        assert!(text.contains("FAIL") && text.contains("1 of") && text.contains("pred (pred): ratio"), "{text}");
        assert_eq!(bad.worst("pred"), Some(1.0 / (1e-4 + 1e-3)));
        assert!(bad.worst("opt").unwrap() <= 1.0);
        assert!(!Report { case: "x".into(), dir: PathBuf::new(), checks: vec![] }.passed());
    }
}
