//! The run configuration: sections `[data]`, `[window]`, `[model]`, `[train]` and
//! `[overfit]`, validation, the mapping onto [`ModelConfig`], [`OptimConfig`] and
//! [`ScheduleConfig`], and its TOML text.
//!
//! The TOML text of a configuration ([`RunConfig::to_toml`]) is what a checkpoint stores and
//! hashes ([`crate::checkpoint::config_hash`]): it must stay byte-identical for the
//! configurations of existing run directories, so a key added later is skipped when it has its
//! default value (`train.overfit_ratio`). How a configuration is assembled from presets, files
//! and flags: [`crate::presets`].

use boldcast_core::{ModelConfig, OptimConfig, OptimizerKind, ScheduleConfig};
pub use boldcast_data::config::{DataConfig, SyntheticConfig, WindowConfig};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The backends a configuration may name.
pub const BACKENDS: &[&str] = &["cpu", "dfdx-cpu", "dfdx-cuda", "cuda"];

/// The precisions of the matrix products a configuration may name (`train.precision`):
/// `f32`, and `bf16` autocast (bf16 operands, f32 accumulation; the `cuda` backend only).
pub const PRECISIONS: &[&str] = &["f32", "bf16"];

/// What can go wrong resolving a configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The configuration file could not be read.
    #[error("cannot read configuration {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The TOML is malformed or a value has the wrong type.
    #[error("{origin}: {message}")]
    Parse {
        /// The file, or `preset NAME`.
        origin: String,
        /// The parser's message (with line and column where it knows them).
        message: String,
    },
    /// A key that no section has.
    #[error("{origin}: unknown key `{key}` (known keys of {section}: {known})")]
    UnknownKey {
        /// The file.
        origin: String,
        /// The dotted key, e.g. `train.lrr`.
        key: String,
        /// The section, e.g. `[train]`.
        section: String,
        /// The keys the section accepts.
        known: String,
    },
    /// No preset of that name.
    #[error("unknown preset `{name}` (known: {known})")]
    UnknownPreset {
        /// The name asked for.
        name: String,
        /// The known names.
        known: String,
    },
    /// A value is out of range.
    #[error("invalid {field} = {value}: {reason}")]
    Invalid {
        /// The dotted field, e.g. `train.lr`.
        field: String,
        /// The value.
        value: String,
        /// Why.
        reason: String,
    },
    /// What the run would need exceeds the machine's memory ([`RunConfig::check_memory`]).
    #[error(transparent)]
    Memory(#[from] boldcast_storage::memory::OutOfMemory),
    /// Writing the resolved configuration failed.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

fn invalid(field: &str, value: impl std::fmt::Display, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { field: field.into(), value: value.to_string(), reason: reason.into() }
}

/// The learning-rate schedule of `[train]`: `"constant"` or `"cosine"`.
pub use boldcast_core::schedule::ScheduleKind;

/// `[train]`: the optimizer, schedule and loop.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// `cpu` or `dfdx`.
    pub backend: String,
    /// Seed of the model's initialization and the batch order.
    pub seed: u64,
    /// `adamw` (decoupled decay) or `adam_l2` (coupled L2).
    pub optimizer: OptimizerKind,
    /// Peak learning rate.
    pub lr: f64,
    /// Weight decay of the decaying tensors.
    pub weight_decay: f64,
    /// Adam's `(beta1, beta2)`.
    pub betas: [f64; 2],
    /// `cosine` or `constant`.
    pub schedule: ScheduleKind,
    /// Warm-up steps of the cosine schedule.
    pub warmup_steps: u64,
    /// Final learning rate of the cosine schedule.
    pub min_lr: f64,
    /// Optimizer steps.
    pub max_steps: u64,
    /// Global-norm clipping threshold; 0 disables clipping.
    pub grad_clip_norm: f64,
    /// Windows per batch.
    pub batch_size: usize,
    /// Print a line every this many steps.
    pub log_every: u64,
    /// Validate on the held-out subjects every this many steps (also after step 0 and at the
    /// end). `eval_every`, its former name, is accepted as an alias in a `--config` file.
    pub val_every: u64,
    /// Early stopping: stop after this many validations in a row without an improvement of at
    /// least `min_delta` over the best so far; 0 disables early stopping.
    pub patience: u64,
    /// The smallest decrease of the validation loss that counts as an improvement.
    pub min_delta: f64,
    /// Write a checkpoint every this many steps (and always at the end of a run).
    pub ckpt_every: u64,
    /// Shuffle the windows every epoch.
    pub shuffle: bool,
    /// The red flag of overfitting: a `val_over_train` ratio above this value that rises over
    /// [`crate::flags::RISING_VALIDATIONS`] validations in a row. Optional (default
    /// [`DEFAULT_OVERFIT_RATIO`], and then left out of the TOML text, so configurations
    /// written before the key existed keep their text and hash).
    #[serde(default = "default_overfit_ratio", skip_serializing_if = "is_default_overfit_ratio")]
    pub overfit_ratio: f64,
    /// The precision of the matrix products, one of [`PRECISIONS`]. Optional (default `f32`,
    /// and then left out of the TOML text, so configurations written before the key existed
    /// keep their text and hash).
    #[serde(default = "default_precision", skip_serializing_if = "is_default_precision")]
    pub precision: String,
    /// Also write TensorBoard event files into `<out>/tensorboard/` (`--tensorboard`;
    /// [`crate::tracking`]). Optional (default off, and then left out of the TOML text).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tensorboard: bool,
    /// Output directory; absent: `runs/<command>-<preset>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out: Option<PathBuf>,
}

/// `[overfit]`: the single-batch overfit run (weight decay 0, constant schedule).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverfitConfig {
    /// The constant learning rate.
    pub lr: f64,
    /// Steps on the one batch.
    pub max_steps: u64,
}

/// A whole run configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// The preset this configuration starts from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// `[data]`.
    pub data: DataConfig,
    /// `[window]`.
    pub window: WindowConfig,
    /// `[model]`: the fields of [`ModelConfig`].
    pub model: ModelConfig,
    /// `[train]`.
    pub train: TrainConfig,
    /// `[overfit]`.
    pub overfit: OverfitConfig,
}

/// `train.overfit_ratio` when the configuration does not set it.
pub const DEFAULT_OVERFIT_RATIO: f64 = 1.5;

fn default_precision() -> String {
    "f32".into()
}

fn is_default_precision(p: &str) -> bool {
    p == "f32"
}

fn default_overfit_ratio() -> f64 {
    DEFAULT_OVERFIT_RATIO
}

fn is_default_overfit_ratio(x: &f64) -> bool {
    *x == DEFAULT_OVERFIT_RATIO
}

impl RunConfig {
    /// Parses a configuration file's text exactly as `bc-cli --config` does (any subset of
    /// keys over its `preset`, else the default preset; see [`crate::presets`]) and validates
    /// it; `origin` names the text in errors.
    pub fn from_toml_str(origin: &str, text: &str) -> Result<RunConfig, ConfigError> {
        crate::presets::resolve_str(origin, text)
    }

    /// Checks every value; the error names the field and the value. The sizes are checked
    /// too: a configuration whose memory estimate ([`RunConfig::memory_need`]) overflows a
    /// 64-bit count is refused naming the field of the largest factor. Whether it fits this
    /// machine is not asked here ([`RunConfig::check_memory`] asks it).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.model.validate().map_err(|e| match e {
            boldcast_core::Error::Config { field, value, reason } => ConfigError::Invalid { field, value, reason },
            other => invalid("model", "", other.to_string()),
        })?;
        self.validate_window()?;
        self.validate_train()?;
        self.validate_subjects()?;
        self.validate_schedule()?;
        self.validate_synthetic()?;
        self.validate_sizes()
    }

    /// `[window]` against the model's `d_in` and horizons.
    fn validate_window(&self) -> Result<(), ConfigError> {
        let (w, d) = (self.window.window, self.model.d_in);
        if w == 0 {
            return Err(invalid("window.window", w, "must be at least 1"));
        }
        if w % d != 0 {
            return Err(invalid("window.window", w, format!("must be a multiple of model.d_in = {d}")));
        }
        if w / d <= self.model.max_horizon() {
            return Err(invalid(
                "window.window",
                w,
                format!(
                    "gives {} tokens, which must exceed the largest horizon {} (T_valid = T - max(horizons) >= 1)",
                    w / d,
                    self.model.max_horizon()
                ),
            ));
        }
        if self.window.stride == 0 {
            return Err(invalid("window.stride", 0, "must be at least 1"));
        }
        Ok(())
    }

    /// `[train]`'s backend and numbers, and `overfit.lr` / `overfit.max_steps`.
    fn validate_train(&self) -> Result<(), ConfigError> {
        let t = &self.train;
        if !BACKENDS.contains(&t.backend.as_str()) {
            return Err(invalid("train.backend", &t.backend, format!("must be one of {}", BACKENDS.join(", "))));
        }
        if !PRECISIONS.contains(&t.precision.as_str()) {
            return Err(invalid("train.precision", &t.precision, format!("must be one of {}", PRECISIONS.join(", "))));
        }
        if t.precision != "f32" && t.backend != "cuda" {
            let why = format!("bf16 autocast runs on the cuda backend only (train.backend is {})", t.backend);
            return Err(invalid("train.precision", &t.precision, why));
        }
        for (f, v) in [("train.lr", t.lr), ("overfit.lr", self.overfit.lr)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(invalid(f, v, "must be finite and > 0"));
            }
        }
        if !(t.min_lr.is_finite() && t.min_lr >= 0.0 && t.min_lr <= t.lr) {
            return Err(invalid("train.min_lr", t.min_lr, format!("must be in [0, train.lr = {}]", t.lr)));
        }
        if !(t.grad_clip_norm.is_finite() && t.grad_clip_norm >= 0.0) {
            return Err(invalid("train.grad_clip_norm", t.grad_clip_norm, "must be finite and >= 0 (0 disables)"));
        }
        for (f, v) in [
            ("train.max_steps", t.max_steps),
            ("train.log_every", t.log_every),
            ("train.val_every", t.val_every),
            ("train.ckpt_every", t.ckpt_every),
            ("overfit.max_steps", self.overfit.max_steps),
            ("train.batch_size", t.batch_size as u64),
        ] {
            if v == 0 {
                return Err(invalid(f, v, "must be at least 1"));
            }
        }
        if !(t.min_delta.is_finite() && t.min_delta >= 0.0) {
            return Err(invalid("train.min_delta", t.min_delta, "must be finite and >= 0"));
        }
        if !(t.overfit_ratio.is_finite() && t.overfit_ratio > 0.0) {
            return Err(invalid("train.overfit_ratio", t.overfit_ratio, "must be finite and > 0"));
        }
        Ok(())
    }

    /// The subject lists and fraction of `[data]`: no label twice, none in both lists.
    fn validate_subjects(&self) -> Result<(), ConfigError> {
        let d = &self.data;
        if !(d.heldout_fraction.is_finite() && (0.0..1.0).contains(&d.heldout_fraction)) {
            return Err(invalid("data.heldout_fraction", d.heldout_fraction, "must be in [0, 1)"));
        }
        if let Some(fd) = d.fd_max.filter(|v| !(v.is_finite() && *v > 0.0)) {
            return Err(invalid("data.fd_max", fd, "must be a positive number of millimetres"));
        }
        for (field, list) in
            [("data.subjects_train", &d.subjects_train), ("data.subjects_heldout", &d.subjects_heldout)]
        {
            for (i, a) in list.iter().enumerate() {
                if list[..i].contains(a) {
                    return Err(invalid(field, format!("{list:?}"), format!("subject `{a}` is listed twice")));
                }
            }
        }
        let bare = |s: &String| s.strip_prefix("sub-").unwrap_or(s).to_string();
        if let Some(both) = d.subjects_train.iter().find(|a| d.subjects_heldout.iter().any(|b| bare(a) == bare(b))) {
            return Err(invalid(
                "data.subjects_heldout",
                format!("{:?}", d.subjects_heldout),
                format!(
                    "subject `sub-{}` is also in data.subjects_train: a subject is either trained on or held out",
                    bare(both)
                ),
            ));
        }
        Ok(())
    }

    /// The schedule's warm-up and the optimizer's settings.
    fn validate_schedule(&self) -> Result<(), ConfigError> {
        let t = &self.train;
        if t.schedule == ScheduleKind::Cosine && t.warmup_steps == 0 {
            return Err(invalid("train.warmup_steps", 0, "the cosine schedule needs at least 1 warm-up step"));
        }
        self.optim_config().validate().map_err(|e| match e {
            boldcast_core::Error::Config { field, value, reason } => ConfigError::Invalid { field, value, reason },
            other => invalid("train", "", other.to_string()),
        })?;
        Ok(())
    }

    /// `[data.synthetic]`, and `model.k_neighbors` against its parcels when it is used.
    fn validate_synthetic(&self) -> Result<(), ConfigError> {
        let s = &self.data.synthetic;
        for (f, v) in [
            ("data.synthetic.subjects", s.subjects),
            ("data.synthetic.runs", s.runs),
            ("data.synthetic.trs", s.trs),
            ("data.synthetic.parcels", s.parcels),
        ] {
            if v == 0 {
                return Err(invalid(f, v, "must be at least 1"));
            }
        }
        if !(s.rho.is_finite() && s.rho.abs() < 1.0) {
            return Err(invalid("data.synthetic.rho", s.rho, "must lie in (-1, 1)"));
        }
        if self.data.dir.is_none() && self.model.k_neighbors > s.parcels {
            return Err(invalid(
                "model.k_neighbors",
                self.model.k_neighbors,
                format!("exceeds data.synthetic.parcels = {}", s.parcels),
            ));
        }
        Ok(())
    }

    /// The model sizes.
    pub fn model_config(&self) -> ModelConfig {
        self.model.clone()
    }

    /// The training optimizer (eps 1e-8).
    pub fn optim_config(&self) -> OptimConfig {
        let b = (self.train.betas[0], self.train.betas[1]);
        match self.train.optimizer {
            OptimizerKind::AdamW => OptimConfig::adamw(self.train.weight_decay, b),
            OptimizerKind::AdamL2 => OptimConfig::adam_l2(self.train.weight_decay, b),
        }
    }

    /// The training schedule.
    pub fn schedule_config(&self) -> ScheduleConfig {
        let t = &self.train;
        t.schedule.config(t.lr, t.warmup_steps, t.max_steps, t.min_lr)
    }

    /// The training clipping threshold (`None` when `grad_clip_norm = 0`).
    pub fn max_norm(&self) -> Option<f64> {
        (self.train.grad_clip_norm > 0.0).then_some(self.train.grad_clip_norm)
    }

    /// The overfit optimizer: the training one with `weight_decay = 0`.
    pub fn overfit_optim_config(&self) -> OptimConfig {
        OptimConfig { weight_decay: 0.0, ..self.optim_config() }
    }

    /// The overfit schedule: constant `overfit.lr`.
    pub fn overfit_schedule_config(&self) -> ScheduleConfig {
        ScheduleConfig::Constant { lr: self.overfit.lr }
    }

    /// The configuration with its data paths (`data.dir`, `data.parcellation`, `data.cache`)
    /// absolute, from the working directory: what a run stores, so that `eval`, `forecast` and
    /// `--resume` find the data from any other directory.
    pub fn with_absolute_paths(&self) -> RunConfig {
        let abs = |p: &Option<PathBuf>| p.as_ref().map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()));
        let mut cfg = self.clone();
        cfg.data.dir = abs(&self.data.dir);
        cfg.data.parcellation = abs(&self.data.parcellation);
        cfg.data.cache = abs(&self.data.cache);
        cfg
    }

    /// The configuration as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a run configuration always serializes")
    }

    /// The text of a configuration file that [`RunConfig::from_toml_str`] (and `bc-cli
    /// --config`) read back to this configuration: [`RunConfig::to_toml`] plus
    /// `model.linear_path` even when off, since a file is laid over its preset and `fmri`
    /// turns the path on.
    pub fn to_config_file(&self) -> String {
        let mut t = toml::Table::try_from(self).expect("a run configuration always serializes");
        if let Some(toml::Value::Table(m)) = t.get_mut("model") {
            m.insert("linear_path".into(), toml::Value::String(self.model.linear_path.as_str().into()));
        }
        toml::to_string_pretty(&t).expect("a run configuration always serializes")
    }

    /// Writes `config.resolved.toml` into `dir` (created if missing) atomically: to a
    /// temporary file in `dir`, then renamed; its data paths absolute
    /// ([`RunConfig::with_absolute_paths`]). Returns the path.
    pub fn write_resolved(&self, dir: &Path) -> Result<PathBuf, ConfigError> {
        let path = dir.join("config.resolved.toml");
        let text = format!(
            "# Resolved by bc-cli {}: preset {}, then the --config file, then the command-line flags.\n{}",
            env!("CARGO_PKG_VERSION"),
            self.preset.as_deref().unwrap_or("?"),
            self.with_absolute_paths().to_config_file()
        );
        boldcast_storage::fsutil::write_atomic(&path, text.as_bytes())
            .map_err(|source| ConfigError::Write { path: path.clone(), source })?;
        Ok(path)
    }
}
