//! The presets and the preset / `--config` / flag layers of a configuration (`boldcast_train::presets`):
//! every preset parses, validates and lists every key; each layer overrides the one before;
//! unknown keys, aliases and bad values are errors naming the key and the file.

use boldcast_core::{ModelConfig, OptimizerKind, ScheduleConfig, Temporal};
use boldcast_train::config::{ConfigError, RunConfig};
use boldcast_train::presets::*;
use std::path::{Path, PathBuf};

fn file(text: &str) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("run.toml");
    std::fs::write(&p, text).unwrap();
    (d, p)
}

/// `text` as a `--config` file, and the same text through the library's parser: both give one
/// result (the same configuration, or the same error).
fn with_file(text: &str) -> Result<RunConfig, ConfigError> {
    let (_d, p) = file(text);
    let cli = resolve(&Overrides { config: Some(p.clone()), ..Overrides::default() }, DEFAULT_PRESET, Purpose::Train);
    let lib = RunConfig::from_toml_str(&p.display().to_string(), text);
    match (&cli, &lib) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "{text}"),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{text}"),
        _ => panic!("--config gives {cli:?}, RunConfig::from_toml_str {lib:?}\n{text}"),
    }
    cli
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
                    let optional = OPTIONAL_KEYS.contains(&(sec.as_str(), k.as_str()));
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

/// Each `(toml, needles)`: the file is refused with an error that holds every needle.
fn assert_refused(cases: &[(&str, &[&str])]) {
    for (toml, needles) in cases {
        let e = with_file(toml).unwrap_err().to_string();
        assert!(needles.iter().all(|n| e.contains(n)), "{toml:?}: {e}");
    }
}

#[test]
fn unknown_keys_are_named_with_section_and_file() {
    assert_refused(&[
        // The known keys are listed.
        ("[train]\nlrr = 1e-3\n", &["run.toml: unknown key `train.lrr`", "[train]", "grad_clip_norm"]),
        ("[data.synthetic]\nparcel = 3\n", &["unknown key `data.synthetic.parcel`"]),
        ("[trian]\nlr = 1\n", &["unknown key `trian`", "the top level"]),
        (
            "[train]\nlr = \"fast\"\n",
            &["run.toml: `train.lr` must be a number (like `0.0003`), found a string `\"fast\"`"],
        ),
        ("[train]\noptimizer = \"sgd\"\n", &["`train.optimizer` = \"sgd\" is not one of adamw, adam_w, adam_l2"]),
        ("[model]\nhorizons = [1, \"x\"]\n", &["`model.horizons` must be an array"]),
        ("[train\nlr = 1\n", &["run.toml", "line 1"]),
        ("preset = \"huge\"\n", &["unknown preset `huge`", "laptop"]),
    ]);
    // An integer where a number is expected is fine.
    assert_eq!(with_file("[train]\nlr = 1\n").unwrap().train.lr, 1.0);
}

#[test]
fn invalid_values_name_the_field() {
    let e = with_file("[train]\nlr = -1.0\n").unwrap_err().to_string();
    assert_eq!(e, "invalid train.lr = -1: must be finite and > 0");
    assert_refused(&[
        ("[model]\nd_in = 3\n", &["invalid window.window = 128: must be a multiple of model.d_in = 3"]),
        ("[window]\nwindow = 5\n", &["window.window = 5", "largest horizon 5"]),
        ("[model]\nhorizons = [0]\n", &["model.horizons"]),
        (
            "[train]\nbackend = \"tpu\"\n",
            &["run.toml: `train.backend` = \"tpu\" is not one of cpu, dfdx-cpu, dfdx-cuda"],
        ),
        ("[train]\nbetas = [0.9, 1.5]\n", &["train.betas"]),
    ]);
    let o = Overrides { backend: Some("tpu".into()), ..Overrides::default() };
    let e = resolve(&o, "quick", Purpose::Train).unwrap_err().to_string();
    assert_eq!(e, "invalid train.backend = tpu: must be one of cpu, dfdx-cpu, dfdx-cuda, cuda");
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
    assert!(with_file("[train]\ntensorboard = true\n").unwrap().train.tensorboard);
    assert!(!with_file("[train]\npatience = 3\n").unwrap().train.tensorboard, "off by default");
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
