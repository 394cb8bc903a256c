//! Resume gives the run that was never interrupted, bit for bit (CPU backend, two threads):
//! after a clean `--stop-after`, and after a SIGKILL in the middle of a checkpoint write.

use crate::common;
use common::*;
use std::path::{Path, PathBuf};

const FLAGS: &[&str] = &["--max-steps", "60", "--val-every", "20", "--ckpt-every", "10"];

fn train(out: &Path, extra: &[&str]) -> std::process::Output {
    quick("train", out, &[FLAGS, extra].concat())
}

/// The uninterrupted run, in `d/full`.
fn full_run(d: &Path) -> PathBuf {
    let a = d.join("full");
    quick_run(&a, FLAGS);
    a
}

/// Everything that must be equal between two finished runs.
fn assert_same_run(a: &Path, b: &Path) {
    let (la, lb) = (std::fs::read(a.join("loss_log.jsonl")).unwrap(), std::fs::read(b.join("loss_log.jsonl")).unwrap());
    assert!(la == lb, "loss_log.jsonl differs between {} and {}", a.display(), b.display());
    for f in ["model.safetensors", "optimizer.safetensors"] {
        assert_same_tensors(&a.join("checkpoints/step-000060").join(f), &b.join("checkpoints/step-000060").join(f));
    }
    assert_same_tensors(&a.join("best.safetensors"), &b.join("best.safetensors"));
    assert_eq!(state(&a.join("checkpoints/step-000060")), state(&b.join("checkpoints/step-000060")));
    // The same summary but for what made it (the dates and command lines differ).
    let summary = |p: &Path| {
        let mut v = common::json(&p.join("summary.json"));
        assert!(v["made_by"]["date"].is_string(), "{v}");
        v.as_object_mut().unwrap().remove("made_by");
        v
    };
    assert_eq!(summary(a), summary(b));
}

#[test]
fn stop_after_then_resume_equals_the_uninterrupted_run() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (full_run(d.path()), d.path().join("split"));
    let log = log_lines(&a.join("loss_log.jsonl"));
    assert_eq!(log.iter().filter(|v| v.get("loss").is_some()).count(), 60);
    assert_eq!(log.iter().filter(|v| v.get("val_loss").is_some()).count(), 4, "validations at 0, 20, 40, 60");
    assert_eq!(log.last().unwrap()["event"], "finished");
    // Keeps the last two checkpoints.
    assert_eq!(ls(&a.join("checkpoints")), ["latest", "step-000050", "step-000060"]);

    // Half the run (a step that is not a checkpoint step: the stop writes one), then resume.
    let o = train(&b, &["--stop-after", "25"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("stopped after 25 step(s)") && out.contains("--resume"), "{out}");
    assert_eq!(latest(&b), b.join("checkpoints/step-000025"));
    let st = state(&latest(&b));
    assert_eq!((st["step"].as_u64(), st["optimizer_t"].as_u64(), st["finished"].is_null()), (Some(25), Some(25), true));
    assert_eq!(log_lines(&b.join("loss_log.jsonl")).last().unwrap()["reason"], "stop_after");
    // --resume takes no configuration flag.
    let o = run(&["train", "--resume", b.to_str().unwrap(), "--lr", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("give no other configuration flag"), "{:?}", text(&o));
    let o = run(&["train", "--resume", b.to_str().unwrap()]);
    assert_verdict(&o);
    assert!(text(&o).0.contains("resuming from"), "{:?}", text(&o));
    assert_same_run(&a, &b);
    // A finished run is not resumed.
    let o = run(&["train", "--resume", b.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("already finished"), "{:?}", text(&o));
    // A fresh run refuses a non-empty output directory.
    let o = train(&b, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("not empty"), "{:?}", text(&o));
}

#[test]
fn sigkill_during_a_checkpoint_write_keeps_the_previous_one_and_resume_equals_the_uninterrupted_run() {
    let d = tempfile::tempdir().unwrap();
    let (a, c) = (full_run(d.path()), d.path().join("killed"));

    let mut cmd = bc();
    cmd.args(["train", "--preset", "quick", "--out", s(&c)]).args(FLAGS);
    let Paused { mut child, err: _err, .. } =
        spawn_paused(cmd, "40", "test hook: paused in the checkpoint write of step 40");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Mid-write: the half-written checkpoint is only a temporary directory; latest is intact.
    let tmp = c.join("checkpoints/.step-000040.tmp");
    assert!(tmp.join("model.safetensors").is_file() && !tmp.join("state.json").exists());
    assert!(!c.join("checkpoints/step-000040").exists());
    assert_eq!(latest(&c), c.join("checkpoints/step-000030"));
    assert_eq!(state(&latest(&c))["step"], 30);
    // The log ran past the checkpoint (validation of step 40 included).
    let log = log_lines(&c.join("loss_log.jsonl"));
    assert!(log.iter().any(|v| v["step"] == 40 && v.get("val_loss").is_some()));

    let o = run(&["train", "--resume", c.to_str().unwrap()]);
    assert_verdict(&o);
    assert!(!tmp.exists(), "the leftover of the killed write is removed");
    assert_same_run(&a, &c);

    // Killed after the final checkpoint, before the summary: resume redoes only the end.
    let fin = c.join("checkpoints/step-000060");
    let bytes = state(&fin)["log_bytes"].as_u64().unwrap() as usize;
    let log = std::fs::read(c.join("loss_log.jsonl")).unwrap();
    std::fs::write(c.join("loss_log.jsonl"), &log[..bytes]).unwrap();
    std::fs::remove_file(c.join("summary.json")).unwrap();
    let o = run(&["train", "--resume", c.to_str().unwrap()]);
    assert_verdict(&o);
    assert_same_run(&a, &c);
}
