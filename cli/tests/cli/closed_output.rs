//! A closed stdout or stderr never kills a run (`bc-cli train ... | head -1`): printing stops,
//! the run goes on, writes its files and exits with the status of its verdict.

use crate::common;

use common::bc;
use std::process::Stdio;

/// Runs `bc-cli args...` with stdout and stderr pipes whose reading ends are closed at once,
/// and returns the exit code.
fn run_with_closed_output(args: &[&str]) -> Option<i32> {
    let mut child = bc().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("the binary runs");
    drop(child.stdout.take());
    drop(child.stderr.take());
    child.wait().expect("the run ends").code()
}

#[test]
fn a_training_run_with_closed_output_finishes_and_writes_its_files() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let code = run_with_closed_output(&["train", "--preset", "quick", "--out", out.to_str().unwrap()]);
    // 0 or 1 is the held-out verdict; a panic would be 101.
    assert!(matches!(code, Some(0 | 1)), "exit code {code:?}");
    for f in ["summary.json", "loss_log.jsonl", "best.safetensors", "checkpoints/latest", "figures/loss_curves.png"] {
        assert!(out.join(f).exists(), "{f} missing");
    }
}

#[test]
fn an_error_with_closed_output_still_exits_2() {
    let code = run_with_closed_output(&["floor", "--data", "/nonexistent/boldcast-data", "--horizons", "1"]);
    assert_eq!(code, Some(2));
}

#[test]
fn overfit_with_closed_output_writes_its_summary() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("ov");
    let code = run_with_closed_output(&["overfit", "--preset", "quick", "--out", out.to_str().unwrap()]);
    assert!(matches!(code, Some(0 | 1)), "exit code {code:?}");
    assert!(out.join("summary.json").exists() && out.join("loss_log.jsonl").exists());
}
