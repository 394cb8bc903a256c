//! The TOML run configuration of the command-line tool: sections `[data]`, `[window]`,
//! `[model]`, `[train]` and `[overfit]`, presets, command-line overrides, validation, and the
//! mapping onto [`ModelConfig`], [`OptimConfig`] and [`ScheduleConfig`].
//!
//! # Resolution
//!
//! A configuration is resolved in three layers, each overriding the one before:
//!
//! 1. a **preset**: `--preset NAME`, else the `preset = "NAME"` key of the `--config` file, else
//!    the command's default (`laptop`). Presets are the files `configs/presets/*.toml`, embedded
//!    in the binary, and list every key;
//! 2. the **`--config FILE`**, which may set any subset of keys;
//! 3. the **command-line flags** `--lr --max-steps --data --out --backend --seed --temporal`
//!    (`--lr` and `--max-steps` set `[overfit]` for the `overfit` command, `[train]` otherwise).
//!
//! Every table is checked for unknown keys: an unknown key is an error naming the key, its
//! section and the file. The result is validated as a whole (every error names the field and
//! value) and can be written as `config.resolved.toml` ([`RunConfig::write_resolved`]).

use boldcast_core::{ModelConfig, OptimConfig, OptimizerKind, ScheduleConfig, Temporal};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The presets, as `(name, TOML text)`; embedded so the binary works anywhere.
pub const PRESETS: &[(&str, &str)] = &[
    ("quick", include_str!("../configs/presets/quick.toml")),
    ("laptop", include_str!("../configs/presets/laptop.toml")),
    ("cpu-demo", include_str!("../configs/presets/cpu-demo.toml")),
    ("boldcast-demo", include_str!("../configs/presets/boldcast-demo.toml")),
];

/// The preset of `overfit` and `train` when none is named.
pub const DEFAULT_PRESET: &str = "laptop";

/// The backends a configuration may name.
pub const BACKENDS: &[&str] = &["cpu", "dfdx-cpu", "dfdx-cuda"];

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

pub use boldcast_data::config::{DataConfig, SyntheticConfig, WindowConfig};

/// The learning-rate schedule of `[train]`.
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

/// Which command the configuration is for: decides where `--lr` and `--max-steps` go.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// `train` (and `eval`): `[train]`.
    Train,
    /// `overfit`: `[overfit]`.
    Overfit,
}

/// The command-line layer of the resolution.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    /// `--preset`.
    pub preset: Option<String>,
    /// `--config FILE`.
    pub config: Option<PathBuf>,
    /// `--lr`.
    pub lr: Option<f64>,
    /// `--max-steps`.
    pub max_steps: Option<u64>,
    /// `--data DIR`.
    pub data: Option<PathBuf>,
    /// `--out DIR`.
    pub out: Option<PathBuf>,
    /// `--backend`.
    pub backend: Option<String>,
    /// `--seed`.
    pub seed: Option<u64>,
    /// `--temporal`.
    pub temporal: Option<Temporal>,
}

/// The TOML text of a preset.
pub fn preset_text(name: &str) -> Result<&'static str, ConfigError> {
    PRESETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t).ok_or_else(|| ConfigError::UnknownPreset {
        name: name.into(),
        known: PRESETS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
    })
}

fn parse_table(origin: &str, text: &str) -> Result<toml::Table, ConfigError> {
    text.parse::<toml::Table>().map_err(|e| ConfigError::Parse { origin: origin.into(), message: e.to_string() })
}

/// Overlays `top` on `base`, table by table.
fn merge(base: &mut toml::Table, top: toml::Table) {
    for (k, v) in top {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(t)) => merge(b, t),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// Every key a configuration may hold, as a table of the same nesting (values are dummies).
fn schema() -> toml::Table {
    let mut t = parse_table("preset laptop", preset_text(DEFAULT_PRESET).expect("the default preset exists"))
        .expect("the default preset parses");
    t.insert("preset".into(), toml::Value::String(String::new()));
    if let Some(toml::Value::Table(d)) = t.get_mut("data") {
        d.insert("dir".into(), toml::Value::String(String::new()));
    }
    if let Some(toml::Value::Table(d)) = t.get_mut("train") {
        d.insert("out".into(), toml::Value::String(String::new()));
        d.insert("eval_every".into(), toml::Value::Integer(0));
    }
    t
}

/// Renames the aliases of a `--config` file to their current keys (`train.eval_every` ->
/// `train.val_every`); both spellings at once is an error.
fn rename_aliases(origin: &str, user: &mut toml::Table) -> Result<(), ConfigError> {
    if let Some(toml::Value::Table(t)) = user.get_mut("train") {
        if let Some(v) = t.remove("eval_every") {
            if t.contains_key("val_every") {
                return Err(ConfigError::Parse {
                    origin: origin.into(),
                    message: "`train.eval_every` is an alias of `train.val_every`: give only one of them".into(),
                });
            }
            t.insert("val_every".into(), v);
        }
    }
    Ok(())
}

/// The allowed spellings of the string-valued keys that name a choice.
const CHOICES: &[(&str, &[&str])] = &[
    ("train.optimizer", &["adamw", "adam_w", "adam_l2"]),
    ("train.schedule", &["cosine", "constant"]),
    ("train.backend", BACKENDS),
    ("model.temporal", &["mamba", "mamba2"]),
];

fn kind(v: &toml::Value) -> &'static str {
    match v {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a number",
        toml::Value::Boolean(_) => "a boolean",
        toml::Value::Datetime(_) => "a date",
        toml::Value::Array(_) => "an array",
        toml::Value::Table(_) => "a table",
    }
}

/// Whether `v` may stand where the schema has `want`; integers are accepted for numbers (and
/// converted by [`normalize`]).
fn same_kind(want: &toml::Value, v: &toml::Value) -> bool {
    use toml::Value as V;
    match (want, v) {
        (V::Float(_), V::Integer(_)) => true,
        (V::Array(w), V::Array(a)) => w.first().is_none_or(|w0| a.iter().all(|x| same_kind(w0, x))),
        _ => kind(want) == kind(v),
    }
}

/// Converts integers to floats where the schema has a float.
fn normalize(user: &mut toml::Table, schema: &toml::Table) {
    use toml::Value as V;
    for (k, v) in user.iter_mut() {
        match (schema.get(k), v) {
            (Some(V::Table(s)), V::Table(u)) => normalize(u, s),
            (Some(V::Float(_)), v @ V::Integer(_)) => *v = V::Float(v.as_integer().unwrap_or(0) as f64),
            (Some(V::Array(s)), V::Array(a)) if matches!(s.first(), Some(V::Float(_))) => {
                for x in a.iter_mut() {
                    if let V::Integer(i) = x {
                        *x = V::Float(*i as f64);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Rejects any key of `user` that `schema` lacks, or whose value has the wrong type or is not
/// one of the allowed choices, naming it with its section.
fn check_keys(origin: &str, user: &toml::Table, schema: &toml::Table, prefix: &str) -> Result<(), ConfigError> {
    for (k, v) in user {
        let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        let bad = |message: String| ConfigError::Parse { origin: origin.into(), message };
        match schema.get(k) {
            None => {
                let mut known: Vec<&str> = schema.keys().map(String::as_str).collect();
                known.sort_unstable();
                return Err(ConfigError::UnknownKey {
                    origin: origin.into(),
                    key,
                    section: if prefix.is_empty() { "the top level".into() } else { format!("[{prefix}]") },
                    known: known.join(", "),
                });
            }
            Some(toml::Value::Table(s)) => match v {
                toml::Value::Table(u) => check_keys(origin, u, s, &key)?,
                other => return Err(bad(format!("`{key}` must be a table, found {} `{other}`", kind(other)))),
            },
            Some(want) => {
                if !same_kind(want, v) {
                    return Err(bad(format!(
                        "`{key}` must be {} (like `{want}`), found {} `{v}`",
                        kind(want),
                        kind(v)
                    )));
                }
                if let (Some((_, allowed)), toml::Value::String(sv)) = (CHOICES.iter().find(|(c, _)| *c == key), v) {
                    if !allowed.contains(&sv.as_str()) {
                        return Err(bad(format!("`{key}` = \"{sv}\" is not one of {}", allowed.join(", "))));
                    }
                }
            }
        }
    }
    Ok(())
}

fn set(t: &mut toml::Table, section: &str, key: &str, v: toml::Value) {
    let s = t.entry(section.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if let toml::Value::Table(s) = s {
        s.insert(key.into(), v);
    }
}

fn path_value(p: &Path) -> toml::Value {
    toml::Value::String(p.to_string_lossy().into_owned())
}

impl RunConfig {
    /// A preset as it is, validated.
    pub fn preset(name: &str) -> Result<RunConfig, ConfigError> {
        Self::resolve(&Overrides { preset: Some(name.into()), ..Overrides::default() }, name, Purpose::Train)
    }

    /// Resolves preset, `--config` file and flags (see the module documentation), then
    /// validates.
    pub fn resolve(o: &Overrides, default_preset: &str, purpose: Purpose) -> Result<RunConfig, ConfigError> {
        let user = match &o.config {
            Some(path) => {
                let text =
                    std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.clone(), source })?;
                let origin = path.display().to_string();
                let mut t = parse_table(&origin, &text)?;
                let schema = schema();
                check_keys(&origin, &t, &schema, "")?;
                normalize(&mut t, &schema);
                rename_aliases(&origin, &mut t)?;
                Some((origin, t))
            }
            None => None,
        };
        let file_preset = match user.as_ref().and_then(|(_, t)| t.get("preset")) {
            Some(toml::Value::String(s)) => Some(s.clone()),
            Some(other) => {
                return Err(ConfigError::Parse {
                    origin: user.as_ref().map(|(o, _)| o.clone()).unwrap_or_default(),
                    message: format!("`preset` must be a string, found {other}"),
                })
            }
            None => None,
        };
        let name = o.preset.clone().or(file_preset).unwrap_or_else(|| default_preset.to_string());
        let mut table = parse_table(&format!("preset {name}"), preset_text(&name)?)?;
        let origin = match user {
            Some((origin, t)) => {
                merge(&mut table, t);
                origin
            }
            None => format!("preset {name}"),
        };
        table.insert("preset".into(), toml::Value::String(name));
        let (steps_section, lr_section) = match purpose {
            Purpose::Train => ("train", "train"),
            Purpose::Overfit => ("overfit", "overfit"),
        };
        if let Some(lr) = o.lr {
            set(&mut table, lr_section, "lr", toml::Value::Float(lr));
        }
        if let Some(n) = o.max_steps {
            let n = i64::try_from(n).map_err(|_| invalid(&format!("{steps_section}.max_steps"), n, "too large"))?;
            set(&mut table, steps_section, "max_steps", toml::Value::Integer(n));
        }
        if let Some(d) = &o.data {
            set(&mut table, "data", "dir", path_value(d));
        }
        if let Some(d) = &o.out {
            set(&mut table, "train", "out", path_value(d));
        }
        if let Some(b) = &o.backend {
            set(&mut table, "train", "backend", toml::Value::String(b.clone()));
        }
        if let Some(s) = o.seed {
            let s = i64::try_from(s).map_err(|_| invalid("train.seed", s, "must fit in a signed 64-bit integer"))?;
            set(&mut table, "train", "seed", toml::Value::Integer(s));
        }
        if let Some(t) = o.temporal {
            set(&mut table, "model", "temporal", toml::Value::String(t.as_str().into()));
        }
        let cfg: RunConfig = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Parse { origin, message: e.message().trim().to_string() })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks every value; the error names the field and the value.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.model.validate().map_err(|e| match e {
            boldcast_core::Error::Config { field, value, reason } => ConfigError::Invalid { field, value, reason },
            other => invalid("model", "", other.to_string()),
        })?;
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
        let t = &self.train;
        if !BACKENDS.contains(&t.backend.as_str()) {
            return Err(invalid("train.backend", &t.backend, format!("must be one of {}", BACKENDS.join(", "))));
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
        let d = &self.data;
        if !(d.heldout_fraction.is_finite() && (0.0..1.0).contains(&d.heldout_fraction)) {
            return Err(invalid("data.heldout_fraction", d.heldout_fraction, "must be in [0, 1)"));
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
        if t.schedule == ScheduleKind::Cosine && t.warmup_steps == 0 {
            return Err(invalid("train.warmup_steps", 0, "the cosine schedule needs at least 1 warm-up step"));
        }
        self.optim_config().validate().map_err(|e| match e {
            boldcast_core::Error::Config { field, value, reason } => ConfigError::Invalid { field, value, reason },
            other => invalid("train", "", other.to_string()),
        })?;
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
        match t.schedule {
            ScheduleKind::Constant => ScheduleConfig::Constant { lr: t.lr },
            ScheduleKind::Cosine => ScheduleConfig::Cosine {
                lr: t.lr,
                warmup_steps: t.warmup_steps,
                max_steps: t.max_steps,
                min_lr: t.min_lr,
            },
        }
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

    /// The configuration as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a run configuration always serializes")
    }

    /// Writes `config.resolved.toml` into `dir` (created if missing) atomically: to a
    /// temporary file in `dir`, then renamed. Returns the path.
    pub fn write_resolved(&self, dir: &Path) -> Result<PathBuf, ConfigError> {
        let path = dir.join("config.resolved.toml");
        let text = format!(
            "# Resolved by bc-cli {}: preset {}, then the --config file, then the command-line flags.\n{}",
            env!("CARGO_PKG_VERSION"),
            self.preset.as_deref().unwrap_or("?"),
            self.to_toml()
        );
        write_atomic(&path, text.as_bytes()).map_err(|source| ConfigError::Write { path: path.clone(), source })?;
        Ok(path)
    }
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename, so
/// `path` is either absent, the old file or the whole new file. Creates the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let res = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("run.toml");
        std::fs::write(&p, text).unwrap();
        (d, p)
    }

    fn with_file(text: &str) -> Result<RunConfig, ConfigError> {
        let (_d, p) = file(text);
        RunConfig::resolve(&Overrides { config: Some(p), ..Overrides::default() }, DEFAULT_PRESET, Purpose::Train)
    }

    #[test]
    fn every_preset_parses_validates_and_is_complete() {
        let schema = schema();
        for (name, text) in PRESETS {
            let c = RunConfig::preset(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(c.preset.as_deref(), Some(*name));
            // Complete: every schema key except the optional ones is in the file.
            let t: toml::Table = text.parse().unwrap();
            for (sec, v) in &schema {
                if let toml::Value::Table(keys) = v {
                    let have = t[sec].as_table().unwrap();
                    for k in keys.keys() {
                        let optional = ["dir", "out", "eval_every"].contains(&k.as_str());
                        assert!(have.contains_key(k) || optional, "{name}: missing {sec}.{k}");
                    }
                }
            }
            let m = c.model_config();
            assert_eq!((m.d_in, m.expand, m.d_conv, m.d_state, m.horizons.clone()), (1, 2, 4, 16, vec![1, 5]));
            let o = c.optim_config();
            assert_eq!((o.kind, o.weight_decay, o.betas, o.eps), (OptimizerKind::AdamW, 0.05, (0.9, 0.95), 1e-8));
            assert_eq!(
                c.schedule_config(),
                ScheduleConfig::Cosine {
                    lr: 3e-4,
                    warmup_steps: c.train.warmup_steps,
                    max_steps: c.train.max_steps,
                    min_lr: 0.0
                }
            );
            assert_eq!((c.max_norm(), c.train.log_every), (Some(1.0), 10));
            assert!(c.data.subjects_train.is_empty() && c.data.subjects_heldout.is_empty());
            assert_eq!((c.data.heldout_fraction, c.train.ckpt_every), (0.0, c.train.val_every));
        }
        let q = RunConfig::preset("quick").unwrap();
        assert_eq!((q.window.window, q.data.synthetic.parcels, q.model.d_model, q.model.n_layers), (32, 4, 8, 1));
        assert_eq!((q.model.k_neighbors, q.train.max_steps), (2, 60));
        let l = RunConfig::preset("laptop").unwrap();
        assert_eq!((l.window.window, l.data.synthetic.parcels, l.model.d_model, l.model.n_layers), (128, 16, 32, 2));
        assert_eq!((l.model.k_neighbors, l.overfit.max_steps, l.overfit.lr), (4, 3000, 1e-3));
        let c = RunConfig::preset("cpu-demo").unwrap();
        assert_eq!((c.train.batch_size, c.window.window, c.data.synthetic.parcels), (4, 256, 64));
        assert_eq!((c.model.d_model, c.model.n_layers, c.model.k_neighbors), (64, 2, 8));
        let b = RunConfig::preset("boldcast-demo").unwrap();
        assert_eq!((b.train.batch_size, b.window.window, b.data.synthetic.parcels), (4, 256, 1024));
        assert_eq!(b.model_config(), ModelConfig::boldcast_demo());
        assert_eq!(b.model_config().n_params(), 732_930);
    }

    #[test]
    fn demo_config_resolves() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/demo.toml");
        let c = RunConfig::resolve(&Overrides { config: Some(path), ..Overrides::default() }, "quick", Purpose::Train)
            .unwrap();
        assert_eq!(c.preset.as_deref(), Some("boldcast-demo"));
        assert_eq!(c.model_config(), ModelConfig::boldcast_demo());
    }

    #[test]
    fn unknown_keys_are_named_with_section_and_file() {
        let e = with_file("[train]\nlrr = 1e-3\n").unwrap_err().to_string();
        assert!(e.contains("run.toml: unknown key `train.lrr`") && e.contains("[train]"), "{e}");
        assert!(e.contains("grad_clip_norm"), "lists the known keys: {e}");
        let e = with_file("[data.synthetic]\nparcel = 3\n").unwrap_err().to_string();
        assert!(e.contains("unknown key `data.synthetic.parcel`"), "{e}");
        let e = with_file("[trian]\nlr = 1\n").unwrap_err().to_string();
        assert!(e.contains("unknown key `trian`") && e.contains("the top level"), "{e}");
        let e = with_file("[train]\nlr = \"fast\"\n").unwrap_err().to_string();
        assert!(e.contains("run.toml: `train.lr` must be a number (like `0.0003`), found a string `\"fast\"`"), "{e}");
        let e = with_file("[train]\noptimizer = \"sgd\"\n").unwrap_err().to_string();
        assert!(e.contains("`train.optimizer` = \"sgd\" is not one of adamw, adam_w, adam_l2"), "{e}");
        let e = with_file("[model]\nhorizons = [1, \"x\"]\n").unwrap_err().to_string();
        assert!(e.contains("`model.horizons` must be an array"), "{e}");
        // An integer where a number is expected is fine.
        assert_eq!(with_file("[train]\nlr = 1\n").unwrap().train.lr, 1.0);
        let e = with_file("[train\nlr = 1\n").unwrap_err().to_string();
        assert!(e.contains("run.toml") && e.contains("line 1"), "{e}");
        let e = with_file("preset = \"huge\"\n").unwrap_err().to_string();
        assert!(e.contains("unknown preset `huge`") && e.contains("laptop"), "{e}");
    }

    #[test]
    fn invalid_values_name_the_field() {
        let e = with_file("[train]\nlr = -1.0\n").unwrap_err().to_string();
        assert_eq!(e, "invalid train.lr = -1: must be finite and > 0");
        let e = with_file("[model]\nd_in = 3\n").unwrap_err().to_string();
        assert!(e.contains("invalid window.window = 128: must be a multiple of model.d_in = 3"), "{e}");
        let e = with_file("[window]\nwindow = 5\n").unwrap_err().to_string();
        assert!(e.contains("window.window = 5") && e.contains("largest horizon 5"), "{e}");
        let e = with_file("[model]\nhorizons = [0]\n").unwrap_err().to_string();
        assert!(e.contains("model.horizons"), "{e}");
        let e = with_file("[train]\nbackend = \"tpu\"\n").unwrap_err().to_string();
        assert!(e.contains("run.toml: `train.backend` = \"tpu\" is not one of cpu, dfdx-cpu, dfdx-cuda"), "{e}");
        let o = Overrides { backend: Some("tpu".into()), ..Overrides::default() };
        let e = RunConfig::resolve(&o, "quick", Purpose::Train).unwrap_err().to_string();
        assert_eq!(e, "invalid train.backend = tpu: must be one of cpu, dfdx-cpu, dfdx-cuda");
        let e = with_file("[train]\nbetas = [0.9, 1.5]\n").unwrap_err().to_string();
        assert!(e.contains("train.betas"), "{e}");
    }

    #[test]
    fn layers_override_in_order() {
        let (_d, p) = file("preset = \"quick\"\n[train]\nlr = 0.01\nmax_steps = 7\n[model]\nd_model = 16\n");
        let mut o = Overrides { config: Some(p), ..Overrides::default() };
        let c = RunConfig::resolve(&o, DEFAULT_PRESET, Purpose::Train).unwrap();
        assert_eq!(c.preset.as_deref(), Some("quick"));
        assert_eq!((c.train.lr, c.train.max_steps, c.model.d_model, c.window.window), (0.01, 7, 16, 32));
        o.preset = Some("laptop".into());
        o.lr = Some(0.5);
        o.max_steps = Some(9);
        o.data = Some("/data/x".into());
        o.out = Some("out/y".into());
        o.backend = Some("dfdx-cpu".into());
        o.seed = Some(42);
        o.temporal = Some(Temporal::Mamba2);
        let c = RunConfig::resolve(&o, DEFAULT_PRESET, Purpose::Train).unwrap();
        assert_eq!(c.preset.as_deref(), Some("laptop"));
        assert_eq!((c.train.lr, c.train.max_steps, c.model.d_model, c.window.window), (0.5, 9, 16, 128));
        assert_eq!(c.data.dir.as_deref(), Some(Path::new("/data/x")));
        assert_eq!(c.train.out.as_deref(), Some(Path::new("out/y")));
        assert_eq!((c.train.backend.as_str(), c.train.seed, c.model.temporal), ("dfdx-cpu", 42, Temporal::Mamba2));
        // Overfit: --lr and --max-steps go to [overfit]; [train] keeps the file's values.
        let c = RunConfig::resolve(&o, DEFAULT_PRESET, Purpose::Overfit).unwrap();
        assert_eq!((c.overfit.lr, c.overfit.max_steps, c.train.lr, c.train.max_steps), (0.5, 9, 0.01, 7));
        assert_eq!(c.overfit_schedule_config(), ScheduleConfig::Constant { lr: 0.5 });
        assert_eq!(c.overfit_optim_config().weight_decay, 0.0);
    }

    #[test]
    fn resolved_config_round_trips() {
        let d = tempfile::tempdir().unwrap();
        let c = RunConfig::preset("quick").unwrap();
        let p = c.write_resolved(&d.path().join("sub")).unwrap();
        assert_eq!(p, d.path().join("sub/config.resolved.toml"));
        let again =
            RunConfig::resolve(&Overrides { config: Some(p), ..Overrides::default() }, "laptop", Purpose::Train)
                .unwrap();
        assert_eq!(again, c);
        let names: Vec<_> = std::fs::read_dir(d.path().join("sub")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
    }

    #[test]
    fn training_keys_validate_and_eval_every_is_an_alias() {
        let c = with_file("[train]\neval_every = 7\n").unwrap();
        assert_eq!(c.train.val_every, 7);
        let e = with_file("[train]\neval_every = 7\nval_every = 8\n").unwrap_err().to_string();
        assert!(e.contains("alias of `train.val_every`"), "{e}");
        let c = with_file("[train]\npatience = 3\nmin_delta = 0.01\nckpt_every = 50\n").unwrap();
        assert_eq!((c.train.patience, c.train.min_delta, c.train.ckpt_every), (3, 0.01, 50));
        let c = with_file("[data]\nsubjects_train = [\"01\", \"02\"]\nsubjects_heldout = [\"sub-03\"]\n").unwrap();
        assert_eq!((c.data.subjects_train.len(), c.data.subjects_heldout[0].as_str()), (2, "sub-03"));
        let e = with_file("[data]\nsubjects_train = [\"01\", \"02\"]\nsubjects_heldout = [\"sub-02\"]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid data.subjects_heldout") && !e.contains("`01`"), "{e}");
        assert!(e.contains("subject `sub-02` is also in data.subjects_train"), "{e}");
        let e = with_file("[data]\nsubjects_heldout = [\"03\", \"03\"]\n").unwrap_err().to_string();
        assert!(e.contains("data.subjects_heldout") && e.contains("listed twice"), "{e}");
        let e = with_file("[data]\nheldout_fraction = 1.5\n").unwrap_err().to_string();
        assert_eq!(e, "invalid data.heldout_fraction = 1.5: must be in [0, 1)");
        let e = with_file("[train]\nckpt_every = 0\n").unwrap_err().to_string();
        assert_eq!(e, "invalid train.ckpt_every = 0: must be at least 1");
        let e = with_file("[train]\nmin_delta = -1\n").unwrap_err().to_string();
        assert_eq!(e, "invalid train.min_delta = -1: must be finite and >= 0");
        let e = with_file("[data]\nsubjects_train = [1]\n").unwrap_err().to_string();
        assert!(e.contains("run.toml"), "{e}");
    }
}
