//! How a run configuration ([`RunConfig`]) is assembled from presets, a configuration file
//! and command-line values; `bc-cli` and a library user get exactly the same result.
//!
//! A configuration is resolved in three layers, each overriding the one before:
//!
//! 1. a **preset**: `--preset NAME`, else the `preset = "NAME"` key of the `--config` file, else
//!    the command's default (`laptop`). Presets are the files `configs/presets/*.toml`, embedded
//!    in the binary, and list every key;
//! 2. the **`--config FILE`**, which may set any subset of keys;
//! 3. the **command-line flags** `--lr --max-steps --data --out --backend --precision --seed --temporal`
//!    (`--lr` and `--max-steps` set `[overfit]` for the `overfit` command, `[train]` otherwise).
//!
//! Every table is checked for unknown keys: an unknown key is an error naming the key, its
//! section and the file. The result is validated as a whole (every error names the field and
//! value, [`RunConfig::validate`]) and can be written as `config.resolved.toml`
//! ([`RunConfig::write_resolved`]).

use crate::config::{ConfigError, RunConfig, BACKENDS, PRECISIONS};
use boldcast_core::Temporal;
use boldcast_data::Selection;
use std::path::{Path, PathBuf};

/// The presets, as `(name, TOML text)`; embedded so the binary works anywhere.
pub const PRESETS: &[(&str, &str)] = &[
    ("quick", include_str!("../../configs/presets/quick.toml")),
    ("laptop", include_str!("../../configs/presets/laptop.toml")),
    ("cpu-demo", include_str!("../../configs/presets/cpu-demo.toml")),
    ("boldcast-demo", include_str!("../../configs/presets/boldcast-demo.toml")),
    ("fmri", include_str!("../../configs/presets/fmri.toml")),
];

/// The preset of `overfit` and `train` when none is named.
pub const DEFAULT_PRESET: &str = "laptop";

fn invalid(field: &str, value: impl std::fmt::Display, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { field: field.into(), value: value.to_string(), reason: reason.into() }
}

/// Which command the configuration is for: decides where `--lr` and `--max-steps` go.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// `train` (and `eval`): `[train]`.
    Train,
    /// `overfit`: `[overfit]`.
    Overfit,
}

/// The command-line layer of the resolution (and, with the feature `clap`, the flags of
/// `bc-cli overfit` and `train` that set it).
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Overrides {
    /// Start from this preset: quick, laptop (the default), cpu-demo, boldcast-demo or fmri (real data: the linear path).
    #[cfg_attr(feature = "clap", arg(long))]
    pub preset: Option<String>,
    /// A TOML configuration overriding the preset (see configs/demo.toml).
    #[cfg_attr(feature = "clap", arg(long))]
    pub config: Option<PathBuf>,
    /// Learning rate (`[overfit]` for overfit, `[train]` otherwise).
    #[cfg_attr(feature = "clap", arg(long, allow_hyphen_values = true))]
    pub lr: Option<f64>,
    /// Optimizer steps (`[overfit]` for overfit, `[train]` otherwise).
    #[cfg_attr(feature = "clap", arg(long))]
    pub max_steps: Option<u64>,
    /// Dataset directory (default: the synthetic AR(1) fixture).
    #[cfg_attr(feature = "clap", arg(long))]
    pub data: Option<PathBuf>,
    /// Output directory.
    #[cfg_attr(feature = "clap", arg(long))]
    pub out: Option<PathBuf>,
    /// Backend: cpu, dfdx-cpu, dfdx-cuda or cuda (the GPU ones: a build with `--features cuda` on a machine with a GPU).
    #[cfg_attr(feature = "clap", arg(long))]
    pub backend: Option<String>,
    /// Precision of the matrix products: f32 (the default) or bf16 (autocast: bf16 operands,
    /// f32 accumulation; --backend cuda only).
    #[cfg_attr(feature = "clap", arg(long))]
    pub precision: Option<String>,
    /// Seed of the model's initialization.
    #[cfg_attr(feature = "clap", arg(long))]
    pub seed: Option<u64>,
    /// Temporal mixer: mamba or mamba2.
    #[cfg_attr(feature = "clap", arg(long, value_parser = parse_temporal))]
    pub temporal: Option<Temporal>,
    /// How the runs of --data are picked.
    #[cfg_attr(feature = "clap", command(flatten))]
    pub picks: Selection,
}

/// A temporal mixer by its name (`mamba`, `mamba2`), as a flag gives it.
pub fn parse_temporal(s: &str) -> Result<Temporal, String> {
    match s {
        "mamba" => Ok(Temporal::Mamba),
        "mamba2" => Ok(Temporal::Mamba2),
        _ => Err(format!("`{s}` is not a temporal mixer (mamba or mamba2)")),
    }
}

impl Overrides {
    /// Whether any value is given.
    pub fn any(&self) -> bool {
        *self != Overrides::default()
    }
}

/// The training run's own settings beyond [`Overrides`]: the subject split and the loop (with
/// the feature `clap`, the flags of `bc-cli train` that set them). Applied after the layers,
/// before the configuration is validated ([`resolve_train`]).
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct TrainOverrides {
    /// Subjects to train on: `01,02,sub-03` or `@FILE` (labels separated by whitespace, commas
    /// or newlines). Sets data.subjects_train.
    #[cfg_attr(feature = "clap", arg(long, value_name = "LIST|@FILE"))]
    pub subjects_train: Option<String>,
    /// Subjects held out for validation: `04,05` or `@FILE`. Sets data.subjects_heldout.
    #[cfg_attr(feature = "clap", arg(long, value_name = "LIST|@FILE"))]
    pub subjects_heldout: Option<String>,
    /// Hold out this fraction of the subjects, drawn with train.seed (without explicit lists).
    #[cfg_attr(feature = "clap", arg(long))]
    pub heldout_fraction: Option<f64>,
    /// Keep related subjects together: subjects with the same value in this column of the
    /// data directory's participants.tsv (e.g. `family_id`, HCP's twins) never straddle
    /// training and held out. Explicit lists that split a group are an error naming it; a
    /// drawn split holds out each picked subject's whole group. Sets data.group_column.
    #[cfg_attr(feature = "clap", arg(long, value_name = "COL"))]
    pub group_column: Option<String>,
    /// Leave out windows with a TR of framewise displacement above MM (from the fMRIPrep or
    /// XCP-D motion table beside each run). Sets data.fd_max.
    #[cfg_attr(feature = "clap", arg(long, value_name = "MM"))]
    pub fd_max: Option<f64>,
    /// Validate every N steps (train.val_every).
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub val_every: Option<u64>,
    /// Checkpoint every N steps (train.ckpt_every).
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub ckpt_every: Option<u64>,
    /// Early-stopping patience in validations; 0 disables (train.patience).
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub patience: Option<u64>,
    /// Smallest improvement of the validation loss that resets the patience (train.min_delta).
    #[cfg_attr(feature = "clap", arg(long))]
    pub min_delta: Option<f64>,
    /// Windows per optimizer step (train.batch_size); under mpirun/srun the global batch,
    /// split evenly over the ranks (it must be divisible by their number).
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub batch_size: Option<usize>,
    /// Also write TensorBoard event files into OUT/tensorboard/ (loss, learning rate,
    /// gradient norm, step time, validation loss per horizon); `metrics.csv` is always
    /// written. Sets train.tensorboard.
    #[cfg_attr(feature = "clap", arg(long))]
    pub tensorboard: bool,
}

impl TrainOverrides {
    /// Whether any value is given.
    pub fn any(&self) -> bool {
        *self != TrainOverrides::default()
    }

    /// Sets the values given into `cfg` (subject lists read as [`boldcast_data::parse_subject_list`]).
    pub fn apply(&self, cfg: &mut RunConfig) -> Result<(), crate::TrainError> {
        let list = |s: &Option<String>| s.as_deref().map(boldcast_data::parse_subject_list).transpose();
        if let Some(l) = list(&self.subjects_train)? {
            cfg.data.subjects_train = l;
        }
        if let Some(l) = list(&self.subjects_heldout)? {
            cfg.data.subjects_heldout = l;
        }
        let (d, t) = (&mut cfg.data, &mut cfg.train);
        d.heldout_fraction = self.heldout_fraction.unwrap_or(d.heldout_fraction);
        d.group_column = self.group_column.clone().or(d.group_column.take());
        d.fd_max = self.fd_max.or(d.fd_max);
        t.tensorboard |= self.tensorboard;
        t.val_every = self.val_every.unwrap_or(t.val_every);
        t.ckpt_every = self.ckpt_every.unwrap_or(t.ckpt_every);
        t.patience = self.patience.unwrap_or(t.patience);
        t.min_delta = self.min_delta.unwrap_or(t.min_delta);
        t.batch_size = self.batch_size.unwrap_or(t.batch_size);
        Ok(())
    }
}

/// The configuration of a training run: the layers of `o` over `default_preset`, then the
/// split and loop values of `t`, validated.
pub fn resolve_train(o: &Overrides, t: &TrainOverrides, default_preset: &str) -> Result<RunConfig, crate::TrainError> {
    let mut cfg = resolve(o, default_preset, Purpose::Train)?;
    t.apply(&mut cfg)?;
    cfg.validate()?;
    Ok(cfg)
}

/// Sets the picks `sel` gives (`--task --space --seg --format --parcellation --tr
/// --allow-mixed-tr --cache`) into `table`'s `[data]`.
fn set_picks(table: &mut toml::Table, sel: &Selection) {
    for (key, v) in [("task", &sel.task), ("space", &sel.space), ("seg", &sel.seg), ("format", &sel.format)] {
        if let Some(v) = v {
            set(table, "data", key, toml::Value::String(v.clone()));
        }
    }
    if let Some(p) = &sel.parcellation {
        set(table, "data", "parcellation", path_value(p));
    }
    if let Some(tr) = sel.tr {
        set(table, "data", "tr", toml::Value::Float(tr));
    }
    if sel.allow_mixed_tr {
        set(table, "data", "allow_mixed_tr", toml::Value::Boolean(true));
    }
    if let Some(p) = &sel.cache {
        set(table, "data", "cache", path_value(p));
    }
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

/// The keys of the schema that a preset need not list (they have defaults), by section.
pub const OPTIONAL_KEYS: [(&str, &str); 15] = [
    ("data", "dir"),
    ("data", "task"),
    ("data", "space"),
    ("data", "seg"),
    ("data", "atlas"),
    ("data", "format"),
    ("data", "parcellation"),
    ("data", "tr"),
    ("data", "allow_mixed_tr"),
    ("data", "cache"),
    ("train", "out"),
    ("train", "eval_every"),
    ("train", "overfit_ratio"),
    ("model", "linear_path"),
    ("", "preset"),
];

/// Every key a configuration may hold, as a table of the same nesting (values are dummies).
pub fn schema() -> toml::Table {
    let mut t = parse_table("preset laptop", preset_text(DEFAULT_PRESET).expect("the default preset exists"))
        .expect("the default preset parses");
    t.insert("preset".into(), toml::Value::String(String::new()));
    if let Some(toml::Value::Table(d)) = t.get_mut("data") {
        for key in ["dir", "task", "space", "seg", "atlas", "format", "parcellation", "cache"] {
            d.insert(key.into(), toml::Value::String(String::new()));
        }
        d.insert("tr".into(), toml::Value::Float(0.0));
        d.insert("allow_mixed_tr".into(), toml::Value::Boolean(false));
    }
    if let Some(toml::Value::Table(d)) = t.get_mut("model") {
        d.insert("linear_path".into(), toml::Value::String(String::new()));
    }
    if let Some(toml::Value::Table(d)) = t.get_mut("train") {
        d.insert("out".into(), toml::Value::String(String::new()));
        d.insert("eval_every".into(), toml::Value::Integer(0));
        d.insert("overfit_ratio".into(), toml::Value::Float(0.0));
    }
    t
}

/// Renames the aliases of a `--config` file to their current keys (`train.eval_every` ->
/// `train.val_every`); both spellings at once is an error.
fn rename_aliases(origin: &str, user: &mut toml::Table) -> Result<(), ConfigError> {
    if let Some(toml::Value::Table(t)) = user.get_mut("data") {
        if let Some(v) = t.remove("atlas") {
            if t.contains_key("seg") {
                return Err(ConfigError::Parse {
                    origin: origin.into(),
                    message: "`data.atlas` is an alias of `data.seg`: give only one of them".into(),
                });
            }
            t.insert("seg".into(), v);
        }
    }
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
    ("train.precision", PRECISIONS),
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

/// A preset as it is, validated.
pub fn preset(name: &str) -> Result<RunConfig, ConfigError> {
    resolve(&Overrides { preset: Some(name.into()), ..Overrides::default() }, name, Purpose::Train)
}

/// Parses the text of a configuration file (any subset of keys): unknown keys, wrong types and
/// unknown choices are errors naming the key and `origin`; aliases are renamed.
fn user_layer(origin: &str, text: &str) -> Result<toml::Table, ConfigError> {
    let mut t = parse_table(origin, text)?;
    let schema = schema();
    check_keys(origin, &t, &schema, "")?;
    normalize(&mut t, &schema);
    rename_aliases(origin, &mut t)?;
    Ok(t)
}

/// Resolves preset, `--config` file and flags (see the module documentation), then
/// validates.
pub fn resolve(o: &Overrides, default_preset: &str, purpose: Purpose) -> Result<RunConfig, ConfigError> {
    let user = match &o.config {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.clone(), source })?;
            let origin = path.display().to_string();
            let t = user_layer(&origin, &text)?;
            Some((origin, t))
        }
        None => None,
    };
    layer(user, o, default_preset, purpose)
}

/// The configuration a file's text gives, exactly as `bc-cli --config FILE` resolves it: the
/// file's keys over its `preset` (else [`DEFAULT_PRESET`]). [`RunConfig::from_toml_str`]
/// calls this.
pub fn resolve_str(origin: &str, text: &str) -> Result<RunConfig, ConfigError> {
    let user = user_layer(origin, text)?;
    layer(Some((origin.to_string(), user)), &Overrides::default(), DEFAULT_PRESET, Purpose::Train)
}

/// The preset a configuration file names with its `preset` key, if any.
fn named_preset(user: Option<&(String, toml::Table)>) -> Result<Option<String>, ConfigError> {
    match user.and_then(|(_, t)| t.get("preset").map(|v| (user, v))) {
        Some((_, toml::Value::String(s))) => Ok(Some(s.clone())),
        Some((u, other)) => Err(ConfigError::Parse {
            origin: u.map(|(o, _)| o.clone()).unwrap_or_default(),
            message: format!("`preset` must be a string, found {other}"),
        }),
        None => Ok(None),
    }
}

/// The three layers: the preset, the file's table, the command-line values.
fn layer(
    user: Option<(String, toml::Table)>,
    o: &Overrides,
    default_preset: &str,
    purpose: Purpose,
) -> Result<RunConfig, ConfigError> {
    let file_preset = named_preset(user.as_ref())?;
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
    set_overrides(&mut table, o, purpose)?;
    let cfg: RunConfig = toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| ConfigError::Parse { origin, message: e.message().trim().to_string() })?;
    cfg.validate()?;
    Ok(cfg)
}

/// Sets the command-line values of `o` into `table`.
fn set_overrides(table: &mut toml::Table, o: &Overrides, purpose: Purpose) -> Result<(), ConfigError> {
    let section = match purpose {
        Purpose::Train => "train",
        Purpose::Overfit => "overfit",
    };
    if let Some(lr) = o.lr {
        set(table, section, "lr", toml::Value::Float(lr));
    }
    if let Some(n) = o.max_steps {
        let n = i64::try_from(n).map_err(|_| invalid(&format!("{section}.max_steps"), n, "too large"))?;
        set(table, section, "max_steps", toml::Value::Integer(n));
    }
    if let Some(d) = &o.data {
        set(table, "data", "dir", path_value(d));
    }
    if let Some(d) = &o.out {
        set(table, "train", "out", path_value(d));
    }
    if let Some(b) = &o.backend {
        set(table, "train", "backend", toml::Value::String(b.clone()));
    }
    if let Some(p) = &o.precision {
        set(table, "train", "precision", toml::Value::String(p.clone()));
    }
    if let Some(s) = o.seed {
        let s = i64::try_from(s).map_err(|_| invalid("train.seed", s, "must fit in a signed 64-bit integer"))?;
        set(table, "train", "seed", toml::Value::Integer(s));
    }
    if let Some(t) = o.temporal {
        set(table, "model", "temporal", toml::Value::String(t.as_str().into()));
    }
    set_picks(table, &o.picks);
    Ok(())
}
