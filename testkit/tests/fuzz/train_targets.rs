//! The fuzz targets of the training crate and their seeds: a run configuration's TOML
//! ([`RunConfig::from_toml_str`]) and the files of a real checkpoint, made by training a tiny
//! synthetic run through [`Run`] on the CPU backend, each mutated in turn and read back with
//! [`resume_point`] (what `bc-cli train --resume` and a library user's resume call); and a run
//! directory's `.lock` ([`lock_file`]).
//!
//! Shared with the `cargo fuzz` targets of `fuzz/` (included there by path).

#![allow(dead_code)]

use boldcast_cpu::CpuModel;
use boldcast_testkit::fuzz::targets::{file_len, put, scratch};
use boldcast_testkit::fuzz::{Format, Outcome, Plan, Seed, Target};
use boldcast_train::checkpoint::{config_hash, resume_point, step_dir_name, TrainState, CKPT_DIR, LATEST};
use boldcast_train::config::RunConfig;
use boldcast_train::data::TrainData;
use boldcast_train::run_dir::{ensure_free, RunDirLock, LOCK_FILE};
use boldcast_train::{Run, TrainError};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The presets and the documented example configuration, as `(name, text)`.
pub const CONFIGS: &[(&str, &str)] = &[
    ("quick.toml", include_str!("../../../configs/presets/quick.toml")),
    ("laptop.toml", include_str!("../../../configs/presets/laptop.toml")),
    ("cpu-demo.toml", include_str!("../../../configs/presets/cpu-demo.toml")),
    ("boldcast-demo.toml", include_str!("../../../configs/presets/boldcast-demo.toml")),
    ("demo.toml", include_str!("../../../configs/demo.toml")),
];

/// The steps of the seed run (one checkpoint, at its end).
const STEPS: u64 = 2;

/// A valid configuration's value, checked: it survives its own TOML text, and its parameter
/// count (what building a model computes first) is a number.
fn check_config(cfg: &RunConfig) {
    let text = cfg.to_config_file();
    let back = RunConfig::from_toml_str("its own TOML", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(&back, cfg, "the configuration-file text of a valid configuration reads back to it");
    let _ = cfg.model_config().n_params();
}

/// A run configuration's TOML text, parsed and validated.
pub fn run_toml(bytes: &[u8]) -> Outcome {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("fuzz.toml: not UTF-8: {e}"))?;
    let cfg = RunConfig::from_toml_str("fuzz.toml", text).map_err(|e| e.to_string())?;
    check_config(&cfg);
    Ok(())
}

/// The seed run: the `quick` preset for [`STEPS`] steps, trained once per process.
fn seed_run() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let mut cfg = RunConfig::from_toml_str("quick", CONFIGS[0].1).expect("the quick preset");
        cfg.train.max_steps = STEPS;
        cfg.train.val_every = STEPS;
        cfg.train.ckpt_every = STEPS;
        cfg.train.warmup_steps = 1;
        cfg.train.patience = 0;
        let data = TrainData::load(&cfg).expect("the quick preset's synthetic data");
        let model = CpuModel::<f32>::new(cfg.model_config(), data.adjacency.clone(), cfg.train.seed).expect("a model");
        let out = scratch("train-seed");
        Run::new(&cfg, &data, &out).run(model, &mut []).expect("the seed run trains");
        out
    })
}

/// The seed run's checkpoint directory.
fn seed_ckpt() -> PathBuf {
    seed_run().join(CKPT_DIR).join(step_dir_name(STEPS))
}

/// A copy of the seed run's checkpoints for target `name`, made on its first call.
fn run_copy(name: &str, cell: &'static OnceLock<PathBuf>) -> &'static Path {
    cell.get_or_init(|| {
        let out = scratch(name);
        let ck = out.join(CKPT_DIR);
        let step = ck.join(step_dir_name(STEPS));
        std::fs::create_dir_all(&step).expect("the copy's checkpoint directory");
        std::fs::copy(seed_run().join(CKPT_DIR).join(LATEST), ck.join(LATEST)).expect("latest copied");
        for f in ["state.json", "model.safetensors", "optimizer.safetensors"] {
            std::fs::copy(seed_ckpt().join(f), step.join(f)).expect("a checkpoint file copied");
        }
        // A resume checks the log against the state's `log_hash`: the run's log comes along.
        std::fs::copy(seed_run().join("loss_log.jsonl"), out.join("loss_log.jsonl")).expect("the log copied");
        out
    })
}

/// `resume_point` of `out`; a valid value is checked: its configuration validates, and there
/// is a moment pair (or none) per parameter of the model it configures.
fn resume(out: &Path) -> Outcome {
    match resume_point(out).map_err(|e| e.to_string())? {
        None => Ok(()),
        Some((cfg, loaded)) => {
            check_config(&cfg);
            assert_eq!(loaded.moments.len(), cfg.model_config().param_specs().len());
            Ok(())
        }
    }
}

/// Writes `bytes` as the file `file` of the checkpoint of `out` and resumes; the checkpoint's
/// own file is put back afterwards.
fn resume_with(out: &Path, file: &str, bytes: &[u8]) -> Outcome {
    let p = out.join(CKPT_DIR).join(step_dir_name(STEPS)).join(file);
    put(&p, bytes);
    let r = resume(out);
    std::fs::copy(seed_ckpt().join(file), &p).expect("the checkpoint file restored");
    r
}

/// A checkpoint's `state.json`.
pub fn state_json(bytes: &[u8]) -> Outcome {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    resume_with(run_copy("state_json", &DIR), "state.json", bytes)
}

/// The configuration stored in `state.json` (the input is its TOML text; the state holds it
/// with its hash, so the resume goes past the hash check to the configuration's parser).
pub fn state_config(bytes: &[u8]) -> Outcome {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    static STATE: OnceLock<TrainState> = OnceLock::new();
    let out = run_copy("state_config", &DIR);
    let seed = STATE.get_or_init(|| {
        serde_json::from_slice(&std::fs::read(seed_ckpt().join("state.json")).expect("the seed state"))
            .expect("the seed state parses")
    });
    let text = String::from_utf8_lossy(bytes).into_owned();
    let state = TrainState { config_hash: config_hash(&text), config: text, ..seed.clone() };
    let json = serde_json::to_vec_pretty(&state).expect("a state serializes");
    resume_with(out, "state.json", &json)
}

/// A checkpoint's `model.safetensors`.
pub fn checkpoint_model(bytes: &[u8]) -> Outcome {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    resume_with(run_copy("checkpoint_model", &DIR), "model.safetensors", bytes)
}

/// A checkpoint's `optimizer.safetensors`.
pub fn checkpoint_optimizer(bytes: &[u8]) -> Outcome {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    resume_with(run_copy("checkpoint_optimizer", &DIR), "optimizer.safetensors", bytes)
}

/// The `checkpoints/latest` pointer.
pub fn latest(bytes: &[u8]) -> Outcome {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let out = run_copy("latest", &DIR);
    put(&out.join(CKPT_DIR).join(LATEST), bytes);
    resume(out)
}

/// A run directory's `.lock` holding `bytes` while another handle holds its lock: the refusal
/// reads the holder's pid from whatever the file holds (and names it when the bytes are one);
/// released, the directory is locked over them and the file holds this process's id.
pub fn lock_file(bytes: &[u8]) -> Outcome {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let out = run_copy("lock_file", &DIR);
    let path = out.join(LOCK_FILE);
    put(&path, bytes);
    let holder = std::fs::OpenOptions::new().read(true).write(true).open(&path).expect("the lock file opens");
    holder.try_lock().expect("the target holds the lock");
    let want = std::str::from_utf8(bytes).ok().and_then(|t| t.trim().parse::<u32>().ok());
    match ensure_free(out) {
        Err(TrainError::Busy { pid, .. }) => assert_eq!(pid, want, "the pid the refusal names"),
        other => panic!("a held lock is refused as busy, not {other:?}"),
    }
    drop(holder);
    let lock = RunDirLock::acquire(out).map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(lock.path()).expect("the lock file reads back");
    assert_eq!(text.trim(), std::process::id().to_string(), "the lock file holds this process's id");
    Ok(())
}

/// What an error of a mutated `state.json` names: the file (the stored configuration's hash is
/// checked before it is validated, and its validation errors name the file too).
const STATE_ERRORS: &[&str] = &["state.json"];

/// Every training target with its seeds and plan, as the harness runs them.
pub fn train_targets() -> Vec<Target> {
    let ck = seed_ckpt();
    let read = |f: &str| std::fs::read(ck.join(f)).expect("a seed checkpoint file");
    let ckpt_bytes: usize =
        ["state.json", "model.safetensors", "optimizer.safetensors"].iter().map(|f| file_len(&ck.join(f))).sum();
    let state: TrainState = serde_json::from_slice(&read("state.json")).expect("the seed state");
    let tomls: Vec<Seed> = CONFIGS.iter().map(|(n, t)| Seed::new(*n, Format::Toml, t.as_bytes())).collect();
    // Case counts: fixed, sized with those of the data targets (about 40 s in all).
    let plan =
        Plan { random: 2000, max_structured: 600, max_numbers: 300, sampled_truncations: 128, ..Plan::default() };
    vec![
        Target {
            name: "run_toml",
            seeds: tomls,
            plan: Plan { random: 3000, max_structured: 2000, ..plan },
            other_input: 0,
            must_name: &[],
            run: Box::new(run_toml),
        },
        Target {
            name: "state_json",
            seeds: vec![Seed::new("state.json", Format::Json, read("state.json"))],
            plan,
            other_input: ckpt_bytes,
            must_name: STATE_ERRORS,
            run: Box::new(state_json),
        },
        Target {
            name: "state_config",
            seeds: vec![Seed::new("state.json config", Format::Toml, state.config.into_bytes())],
            plan,
            other_input: ckpt_bytes,
            must_name: &[],
            run: Box::new(state_config),
        },
        Target {
            name: "checkpoint_model",
            seeds: vec![Seed::new("model.safetensors", Format::Safetensors, read("model.safetensors"))],
            plan,
            other_input: ckpt_bytes,
            must_name: &["model.safetensors"],
            run: Box::new(checkpoint_model),
        },
        Target {
            name: "checkpoint_optimizer",
            seeds: vec![Seed::new("optimizer.safetensors", Format::Safetensors, read("optimizer.safetensors"))],
            plan: Plan { random: 1500, ..plan },
            other_input: ckpt_bytes,
            must_name: &["optimizer.safetensors"],
            run: Box::new(checkpoint_optimizer),
        },
        Target {
            name: "latest",
            seeds: vec![Seed::new(
                "latest",
                Format::Binary,
                std::fs::read(seed_run().join(CKPT_DIR).join(LATEST)).expect("latest"),
            )],
            plan: Plan { random: 200, ..plan },
            other_input: ckpt_bytes,
            must_name: &[],
            run: Box::new(latest),
        },
        Target {
            name: "lock_file",
            seeds: vec![Seed::new(LOCK_FILE, Format::Binary, b"4194303\n".to_vec())],
            plan: Plan { random: 500, ..plan },
            other_input: ckpt_bytes,
            must_name: &[LOCK_FILE],
            run: Box::new(lock_file),
        },
    ]
}
