//! How `bc-cli` assembles a run configuration ([`RunConfig`]) from presets, a `--config`
//! file and flags.
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
//! value, [`RunConfig::validate`]) and can be written as `config.resolved.toml`
//! ([`RunConfig::write_resolved`]).

use boldcast::core::Temporal;
use boldcast_train::config::{ConfigError, RunConfig, BACKENDS};
use std::path::{Path, PathBuf};

/// The presets, as `(name, TOML text)`; embedded so the binary works anywhere.
pub const PRESETS: &[(&str, &str)] = &[
    ("quick", include_str!("../../configs/presets/quick.toml")),
    ("laptop", include_str!("../../configs/presets/laptop.toml")),
    ("cpu-demo", include_str!("../../configs/presets/cpu-demo.toml")),
    ("boldcast-demo", include_str!("../../configs/presets/boldcast-demo.toml")),
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
        d.insert("overfit_ratio".into(), toml::Value::Float(0.0));
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

/// A preset as it is, validated.
pub fn preset(name: &str) -> Result<RunConfig, ConfigError> {
    resolve(&Overrides { preset: Some(name.into()), ..Overrides::default() }, name, Purpose::Train)
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

#[cfg(test)]
mod tests {
    use super::*;
    use boldcast::core::{ModelConfig, OptimizerKind, ScheduleConfig};

    fn file(text: &str) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("run.toml");
        std::fs::write(&p, text).unwrap();
        (d, p)
    }

    fn with_file(text: &str) -> Result<RunConfig, ConfigError> {
        let (_d, p) = file(text);
        resolve(&Overrides { config: Some(p), ..Overrides::default() }, DEFAULT_PRESET, Purpose::Train)
    }

    #[test]
    fn every_preset_parses_validates_and_is_complete() {
        let schema = schema();
        for (name, text) in PRESETS {
            let c = preset(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(c.preset.as_deref(), Some(*name));
            // Complete: every schema key except the optional ones is in the file.
            let t: toml::Table = text.parse().unwrap();
            for (sec, v) in &schema {
                if let toml::Value::Table(keys) = v {
                    let have = t[sec].as_table().unwrap();
                    for k in keys.keys() {
                        let optional = ["dir", "out", "eval_every", "overfit_ratio"].contains(&k.as_str());
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
        let q = preset("quick").unwrap();
        assert_eq!((q.window.window, q.data.synthetic.parcels, q.model.d_model, q.model.n_layers), (32, 4, 8, 1));
        assert_eq!((q.model.k_neighbors, q.train.max_steps), (2, 60));
        let l = preset("laptop").unwrap();
        assert_eq!((l.window.window, l.data.synthetic.parcels, l.model.d_model, l.model.n_layers), (128, 16, 32, 2));
        assert_eq!((l.model.k_neighbors, l.overfit.max_steps, l.overfit.lr), (4, 3000, 1e-3));
        let c = preset("cpu-demo").unwrap();
        assert_eq!((c.train.batch_size, c.window.window, c.data.synthetic.parcels), (4, 256, 64));
        assert_eq!((c.model.d_model, c.model.n_layers, c.model.k_neighbors), (64, 2, 8));
        let b = preset("boldcast-demo").unwrap();
        assert_eq!((b.train.batch_size, b.window.window, b.data.synthetic.parcels), (4, 256, 1024));
        assert_eq!(b.model_config(), ModelConfig::boldcast_demo());
        assert_eq!(b.model_config().n_params(), 732_930);
    }

    #[test]
    fn demo_config_resolves() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/demo.toml");
        let c = resolve(&Overrides { config: Some(path), ..Overrides::default() }, "quick", Purpose::Train).unwrap();
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
        let e = resolve(&o, "quick", Purpose::Train).unwrap_err().to_string();
        assert_eq!(e, "invalid train.backend = tpu: must be one of cpu, dfdx-cpu, dfdx-cuda");
        let e = with_file("[train]\nbetas = [0.9, 1.5]\n").unwrap_err().to_string();
        assert!(e.contains("train.betas"), "{e}");
    }

    #[test]
    fn layers_override_in_order() {
        let (_d, p) = file("preset = \"quick\"\n[train]\nlr = 0.01\nmax_steps = 7\n[model]\nd_model = 16\n");
        let mut o = Overrides { config: Some(p), ..Overrides::default() };
        let c = resolve(&o, DEFAULT_PRESET, Purpose::Train).unwrap();
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
        let c = resolve(&o, DEFAULT_PRESET, Purpose::Train).unwrap();
        assert_eq!(c.preset.as_deref(), Some("laptop"));
        assert_eq!((c.train.lr, c.train.max_steps, c.model.d_model, c.window.window), (0.5, 9, 16, 128));
        assert_eq!(c.data.dir.as_deref(), Some(Path::new("/data/x")));
        assert_eq!(c.train.out.as_deref(), Some(Path::new("out/y")));
        assert_eq!((c.train.backend.as_str(), c.train.seed, c.model.temporal), ("dfdx-cpu", 42, Temporal::Mamba2));
        // Overfit: --lr and --max-steps go to [overfit]; [train] keeps the file's values.
        let c = resolve(&o, DEFAULT_PRESET, Purpose::Overfit).unwrap();
        assert_eq!((c.overfit.lr, c.overfit.max_steps, c.train.lr, c.train.max_steps), (0.5, 9, 0.01, 7));
        assert_eq!(c.overfit_schedule_config(), ScheduleConfig::Constant { lr: 0.5 });
        assert_eq!(c.overfit_optim_config().weight_decay, 0.0);
    }

    #[test]
    fn resolved_config_round_trips() {
        let d = tempfile::tempdir().unwrap();
        let c = preset("quick").unwrap();
        let p = c.write_resolved(&d.path().join("sub")).unwrap();
        assert_eq!(p, d.path().join("sub/config.resolved.toml"));
        let again = resolve(&Overrides { config: Some(p), ..Overrides::default() }, "laptop", Purpose::Train).unwrap();
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
