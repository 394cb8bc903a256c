//! A run directory never lies and is never left half-made (issue 17, items 5 to 8): checks
//! before `--out` is created, a directory without a checkpoint that `--resume` starts again,
//! the identity of a checkpoint's three files, non-finite weights, and the lock that keeps a
//! second process out.

use crate::common;

use boldcast::core::model::NamedTensor;
use boldcast::storage::tensorfile::{save_safetensors, SafetensorsFile};
use common::{bc, run, s, spawn_paused, text, zero_parcel_data};
use std::path::{Path, PathBuf};

/// A quick run of `steps` steps, checkpointing every 10, in a new directory under `d`.
fn stopped_run(d: &Path, steps: &str) -> PathBuf {
    let out = d.join("run");
    let o = run(&["train", "--preset", "quick", "--ckpt-every", "10", "--stop-after", steps, "--out", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    out
}

fn resume(out: &Path) -> (Option<i32>, String, String) {
    let o = run(&["train", "--resume", s(out)]);
    let (so, se) = text(&o);
    (o.status.code(), so, se)
}

fn step_dir(out: &Path, step: u64) -> PathBuf {
    out.join(format!("checkpoints/step-{step:06}"))
}

/// An edit of a `state.json`.
type Edit = fn(&mut serde_json::Value);

/// Edits `state.json` of a checkpoint with `f`.
fn edit_state(dir: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let p = dir.join("state.json");
    let mut v = common::json(&p);
    f(&mut v);
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

/// Asserts a resume of `out` is refused with an error containing every one of `words`, and
/// that it changed nothing in the log.
fn assert_refused(out: &Path, words: &[&str]) {
    let log = std::fs::read(out.join("loss_log.jsonl")).unwrap();
    let (code, so, se) = resume(out);
    assert_eq!(code, Some(2), "stdout:\n{so}\nstderr:\n{se}");
    for w in words {
        assert!(se.contains(w), "`{w}` missing from: {se}");
    }
    assert!(!se.contains("panicked"), "{se}");
    assert_eq!(std::fs::read(out.join("loss_log.jsonl")).unwrap(), log, "the refused resume touched the log");
}

// ---- item 5: nothing half-made ----

#[test]
fn a_batch_larger_than_the_data_creates_no_directory() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let o = run(&["train", "--preset", "quick", "--batch-size", "1000", "--out", s(&out)]);
    let (_, se) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("batch_size = 1000"), "{se}");
    assert!(!out.exists(), "the refused run created {}", out.display());
}

#[test]
fn zero_parcel_data_creates_no_directory() {
    let d = tempfile::tempdir().unwrap();
    let data = zero_parcel_data(d.path(), 100);
    let out = d.path().join("run");
    let o = run(&["train", "--preset", "quick", "--data", s(&data), "--out", s(&out)]);
    let se = text(&o).1;
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("no parcels") && se.contains("sub-01_run-1_bold.npy"), "{se}");
    assert!(!out.exists(), "the refused run created {}", out.display());
}

#[test]
fn a_run_killed_before_its_first_checkpoint_starts_again_with_resume() {
    let d = tempfile::tempdir().unwrap();
    let reference = d.path().join("reference");
    let args = |out: &Path| -> Vec<String> {
        ["train", "--preset", "quick", "--ckpt-every", "10", "--stop-after", "20", "--out", s(out)]
            .map(String::from)
            .to_vec()
    };
    assert_eq!(bc().args(args(&reference)).output().unwrap().status.code(), Some(0));
    // Killed inside the write of its first checkpoint.
    let out = d.path().join("run");
    let mut cmd = bc();
    cmd.args(args(&out));
    let mut child = spawn_paused(cmd, "10", PAUSED).child;
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!out.join("checkpoints/latest").exists());
    let o = run(&["train", "--resume", s(&out), "--stop-after", "20"]);
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{so}\nstderr:\n{se}");
    assert!(so.contains("no checkpoint yet") && so.contains("from step 0"), "{so}");
    let log = |p: &Path| std::fs::read(p.join("loss_log.jsonl")).unwrap();
    assert_eq!(log(&out), log(&reference), "the restarted run's log equals an uninterrupted run's");
    common::assert_same_tensors(&out.join("best.safetensors"), &reference.join("best.safetensors"));
}

/// A quick run at learning rate 100, checkpointing every `ckpt_every` steps, in `d/run`: it
/// stops with exit status 2 at step 7, the first step whose weights (those after 6 steps) give
/// NaN. Returns the run
/// directory and the standard error.
fn non_finite_run(d: &Path, ckpt_every: &str) -> (PathBuf, String) {
    let out = d.join("run");
    let o = run(&["train", "--preset", "quick", "--lr", "100", "--ckpt-every", ckpt_every, "--out", s(&out)]);
    let se = text(&o).1;
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("non-finite loss (NaN) at step 7"), "{se}");
    (out, se)
}

#[test]
fn a_non_finite_stop_before_the_first_checkpoint_leaves_a_directory_resume_accepts() {
    let d = tempfile::tempdir().unwrap();
    let (out, _) = non_finite_run(d.path(), "1000");
    // The directory is accepted: the run starts again and meets the same stop.
    let (code, so, se) = resume(&out);
    assert_eq!(code, Some(2), "{so}\n{se}");
    assert!(so.contains("no checkpoint yet"), "{so}");
    assert!(se.contains("non-finite loss (NaN) at step 7"), "{se}");
}

// ---- item 6: one identity per checkpoint ----

#[test]
fn a_state_whose_step_was_edited_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let out = stopped_run(d.path(), "20");
    edit_state(&step_dir(&out, 20), |v| v["step"] = 15.into());
    assert_refused(&out, &["step-000020", "step 15", "model.safetensors"]);
}

#[test]
fn an_optimizer_t_of_zero_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let out = stopped_run(d.path(), "20");
    edit_state(&step_dir(&out, 20), |v| v["optimizer_t"] = 0.into());
    assert_refused(&out, &["step-000020", "optimizer_t"]);
}

/// For the model and the optimizer file of step 20 of a fresh run: after `edit(out, file)`,
/// resuming is refused naming the file.
fn each_tensor_file_refused(edit: impl Fn(&Path, &str)) {
    for file in ["model.safetensors", "optimizer.safetensors"] {
        let d = tempfile::tempdir().unwrap();
        let out = stopped_run(d.path(), "20");
        edit(&out, file);
        assert_refused(&out, &[&format!("step-000020/{file}")]);
    }
}

#[test]
fn a_model_or_optimizer_file_from_another_step_is_refused() {
    each_tensor_file_refused(|out, file| {
        std::fs::copy(step_dir(out, 10).join(file), step_dir(out, 20).join(file)).unwrap();
    });
}

/// A tensor file's metadata.
type Metadata = std::collections::HashMap<String, String>;

/// Rewrites the tensor file `file` of step 20 of a fresh run with `edit` applied to its tensors
/// and metadata, the recorded hash left as it was; returns the run directory.
fn edited_step_20(d: &Path, file: &str, edit: impl FnOnce(&mut Vec<NamedTensor<f32>>, &mut Metadata)) -> PathBuf {
    let out = stopped_run(d, "20");
    let p = step_dir(&out, 20).join(file);
    let f = SafetensorsFile::open(&p).unwrap();
    let (mut tensors, mut meta) = (f.all::<f32>().unwrap(), f.metadata().unwrap());
    edit(&mut tensors, &mut meta);
    save_safetensors(&p, &tensors, Some(meta)).unwrap();
    out
}

#[test]
fn moments_removed_from_the_optimizer_file_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let out = edited_step_20(d.path(), "optimizer.safetensors", |tensors, _| {
        tensors.retain(|t| !t.name.ends_with("head.weight"));
    });
    assert_refused(&out, &["step-000020/optimizer.safetensors"]);
}

#[test]
fn a_model_file_whose_metadata_names_another_configuration_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let out = edited_step_20(d.path(), "model.safetensors", |_, meta| {
        let config = meta["config"].replace("seed = 0", "seed = 7");
        assert_ne!(config, meta["config"], "the edit changes the configuration");
        meta.insert("config".into(), config);
    });
    assert_refused(&out, &["step-000020/model.safetensors", "metadata `config`"]);
}

#[test]
fn a_flipped_bit_in_tensor_data_is_refused() {
    each_tensor_file_refused(|out, file| common::flip_tensor_bit(&step_dir(out, 20).join(file)));
}

#[test]
fn state_fields_that_contradict_the_configuration_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let out = stopped_run(d.path(), "20");
    let dir = step_dir(&out, 20);
    let original = std::fs::read(dir.join("state.json")).unwrap();
    let cases: [(&str, Edit); 4] = [
        ("max_steps", |v| v["max_steps"] = 30.into()),
        ("finished", |v| v["finished"] = "max_steps".into()),
        ("val.best", |v| v["val"]["best"] = serde_json::json!([0, 0.5])),
        ("epoch", |v| v["epoch"] = 0.into()),
    ];
    for (field, edit) in cases {
        edit_state(&dir, edit);
        assert_refused(&out, &["step-000020/state.json", field]);
        std::fs::write(dir.join("state.json"), &original).unwrap();
    }
    let (code, so, se) = resume(&out);
    assert_eq!(code, Some(1), "the restored checkpoint resumes (the quick verdict fails): {so}\n{se}");
}

// ---- item 7: non-finite weights ----

#[test]
fn the_last_good_checkpoint_of_a_non_finite_stop_can_train() {
    let d = tempfile::tempdir().unwrap();
    // The checkpoint of step 6 is not good (its weights, those after 6 steps, give NaN); the
    // one of step 5 is, and `latest` names it again.
    let (out, se) = non_finite_run(d.path(), "1");
    assert!(se.contains("last good checkpoint is") && se.contains("step-000005"), "{se}");
    assert_eq!(common::latest(&out), step_dir(&out, 5));
    // Training goes on from it: the resumed run's first step (step 5, from the weights after 5
    // steps; the checkpoint's log ends with step 4) has a finite loss.
    let ck5 = common::state(&step_dir(&out, 5))["log_bytes"].as_u64().unwrap() as usize;
    let (code, so, se) = resume(&out);
    assert_eq!(code, Some(2), "{so}\n{se}");
    assert!(so.contains("resuming from") && so.contains("step-000005"), "{so}");
    let log = std::fs::read_to_string(out.join("loss_log.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(log[ck5..].lines().next().unwrap()).unwrap();
    assert_eq!(first["step"], 6, "the first step after the checkpoint of 5 steps: {first}");
    assert!(first["loss"].as_f64().is_some_and(f64::is_finite), "{first}");
}

#[test]
fn eval_of_non_finite_weights_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let out = stopped_run(d.path(), "20");
    let p = out.join("best.safetensors");
    common::edited_copy(&p, &p, |t| {
        if t.name == "head.weight" {
            t.data[1] = f32::NAN;
        }
    });
    let o = run(&["eval", "--checkpoint", s(&p)]);
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(2), "stdout:\n{so}\nstderr:\n{se}");
    assert!(se.contains("head.weight") && se.contains("non-finite"), "{se}");
    assert!(!so.contains("NaN"), "{so}");
}

// ---- item 8: one process per run directory ----

/// The pause hook's line on standard error.
const PAUSED: &str = "test hook: paused";

#[test]
fn a_second_process_in_a_run_directory_is_refused_naming_the_first() {
    let d = tempfile::tempdir().unwrap();
    let out = stopped_run(d.path(), "10");
    let mut cmd = bc();
    cmd.args(["train", "--resume", s(&out)]);
    let mut first = spawn_paused(cmd, "20", PAUSED).child;
    let log = std::fs::read(out.join("loss_log.jsonl")).unwrap();
    let (code, _, se) = resume(&out);
    let pid = first.id();
    first.kill().unwrap();
    first.wait().unwrap();
    assert_eq!(code, Some(2), "{se}");
    assert!(se.contains(&format!("process {pid}")) && se.contains("in use"), "{se}");
    assert_eq!(std::fs::read(out.join("loss_log.jsonl")).unwrap(), log, "the refused process wrote the log");
    // The lock died with its process: the directory resumes, and the killed write's leftovers go.
    let (code, so, se) = resume(&out);
    assert_eq!(code, Some(1), "{so}\n{se}");
    assert!(!out.join("checkpoints/.step-000020.tmp").exists());
}

#[test]
fn a_lock_file_that_is_a_symbolic_link_is_not_followed() {
    let d = tempfile::tempdir().unwrap();
    let out = stopped_run(d.path(), "10");
    let lock = out.join(".lock");
    let victim = d.path().join("victim");
    std::fs::write(&victim, b"4242\n").unwrap();
    std::fs::remove_file(&lock).unwrap();
    std::os::unix::fs::symlink(&victim, &lock).unwrap();
    let log = std::fs::read(out.join("loss_log.jsonl")).unwrap();
    let (code, so, se) = resume(&out);
    assert_eq!(code, Some(2), "{so}\n{se}");
    assert!(se.contains(s(&lock)) && se.contains("symbolic link") && se.contains("process 4242"), "{se}");
    assert_eq!(std::fs::read(&victim).unwrap(), b"4242\n", "the lock wrote through the link");
    assert_eq!(std::fs::read(out.join("loss_log.jsonl")).unwrap(), log);
    // A dangling link: refused, and nothing is created where it points.
    let nowhere = d.path().join("nowhere");
    std::fs::remove_file(&lock).unwrap();
    std::os::unix::fs::symlink(&nowhere, &lock).unwrap();
    let (code, so, se) = resume(&out);
    assert_eq!(code, Some(2), "{so}\n{se}");
    assert!(se.contains(s(&lock)) && se.contains("symbolic link"), "{se}");
    assert!(!nowhere.exists(), "the lock created the link's target");
    // A regular lock file left by a finished process: the run goes on.
    std::fs::remove_file(&lock).unwrap();
    std::fs::write(&lock, b"999999\n").unwrap();
    let (code, so, se) = resume(&out);
    assert_eq!(code, Some(1), "{so}\n{se}");
}

#[test]
fn an_edited_log_bytes_is_refused_on_resume() {
    let d = tempfile::tempdir().unwrap();
    let out = stopped_run(d.path(), "20");
    let dir = step_dir(&out, 20);
    let bytes = common::state(&dir)["log_bytes"].as_u64().unwrap() as usize;
    let log = std::fs::read(out.join("loss_log.jsonl")).unwrap();
    // The end of the line before the last one the checkpoint counted: a line boundary.
    let earlier = log[..bytes - 1].iter().rposition(|&b| b == b'\n').unwrap() + 1;
    edit_state(&dir, |v| v["log_bytes"] = serde_json::json!(earlier));
    assert_refused(&out, &["step-000020/state.json", "log_bytes", "loss_log.jsonl"]);
}

// ---- weaker answers: notes, leftovers, data identity ----

#[test]
fn a_dangling_latest_or_a_missing_state_is_said_and_every_broken_checkpoint_too() {
    let d = tempfile::tempdir().unwrap();
    let out = stopped_run(d.path(), "20");
    std::fs::write(out.join("checkpoints/latest"), "step-000090\n").unwrap();
    let (code, so, se) = resume(&out);
    assert_eq!(code, Some(1), "{so}\n{se}");
    assert!(se.contains("step-000090") && se.contains("does not exist"), "{se}");

    let out = d.path().join("second");
    let o = run(&["train", "--preset", "quick", "--ckpt-every", "10", "--stop-after", "20", "--out", s(&out)]);
    assert_eq!(o.status.code(), Some(0));
    std::fs::remove_file(step_dir(&out, 20).join("state.json")).unwrap();
    let (code, so, se) = resume(&out);
    assert_eq!(code, Some(1), "{so}\n{se}");
    assert!(se.contains("step-000020") && se.contains("no state.json"), "{se}");
    assert!(so.contains("step-000010"), "{so}");

    std::fs::remove_file(common::latest(&out).join("state.json")).unwrap();
    for e in std::fs::read_dir(out.join("checkpoints")).unwrap() {
        let p = e.unwrap().path().join("state.json");
        let _ = std::fs::remove_file(p);
    }
    let (code, _, se) = resume(&out);
    assert_eq!(code, Some(2), "{se}");
    assert!(se.contains("every checkpoint") && se.contains("broken"), "{se}");
    assert!(!se.contains("no checkpoint in"), "{se}");
}

#[test]
fn stale_temporaries_are_removed_when_a_run_starts() {
    let d = tempfile::tempdir().unwrap();
    let out = stopped_run(d.path(), "20");
    let stale = [
        out.join(".loss_log.jsonl.tmp-999999"),
        out.join(".best.safetensors.tmp-999999"),
        out.join("checkpoints/.latest.tmp-999999"),
    ];
    for p in &stale {
        std::fs::write(p, b"left by a killed run").unwrap();
    }
    std::fs::create_dir_all(out.join("checkpoints/.step-000030.tmp")).unwrap();
    std::fs::create_dir_all(out.join("checkpoints/.pruned-step-000005")).unwrap();
    let (code, so, se) = resume(&out);
    assert_eq!(code, Some(1), "{so}\n{se}");
    for p in &stale {
        assert!(!p.exists(), "{} is still there", p.display());
    }
    assert!(!out.join("checkpoints/.step-000030.tmp").exists());
    assert!(!out.join("checkpoints/.pruned-step-000005").exists());
}

#[test]
fn a_checkpoint_knows_its_data_and_refuses_other_data() {
    let d = tempfile::tempdir().unwrap();
    let (data, other) = (d.path().join("data"), d.path().join("other"));
    for (dir, seed) in [(&data, "1"), (&other, "2")] {
        let o = run(&["synth", "--out", s(dir), "--subjects", "4", "--trs", "200", "--seed", seed]);
        assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    }
    let out = d.path().join("run");
    let args = ["train", "--preset", "quick", "--data", s(&data), "--ckpt-every", "10", "--stop-after", "10"];
    let o = run(&[&args[..], &["--out", s(&out)]].concat());
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    // A training file replaced by another with the same shape and names.
    let name = "sub-01_run-1_bold.npy";
    let original = std::fs::read(data.join(name)).unwrap();
    std::fs::copy(other.join(name), data.join(name)).unwrap();
    assert_refused(&out, &["training data", "fingerprint"]);
    std::fs::write(data.join(name), original).unwrap();
    // Evaluation on data with other parcel names: refused, or allowed with a warning.
    let renamed = std::fs::read_to_string(other.join("parcels.tsv")).unwrap().replace("parcel", "roi");
    std::fs::write(other.join("parcels.tsv"), renamed).unwrap();
    let ckpt = common::latest(&out);
    let o = run(&["eval", "--checkpoint", s(&ckpt), "--data", s(&other)]);
    let se = text(&o).1;
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("parcel names") && se.contains("--allow-other-data"), "{se}");
    let o = run(&["eval", "--checkpoint", s(&ckpt), "--data", s(&other), "--allow-other-data"]);
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{so}\n{se}");
    assert!(se.contains("warning") && se.contains("parcel names"), "{se}");
    assert!(so.contains("model"), "{so}");
}
