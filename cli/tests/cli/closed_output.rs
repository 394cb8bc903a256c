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
fn a_training_run_and_the_overfit_check_with_closed_output_finish_and_write_their_files() {
    let d = tempfile::tempdir().unwrap();
    let train = ["summary.json", "loss_log.jsonl", "best.safetensors", "checkpoints/latest", "figures/loss_curves.png"];
    for (cmd, files) in [("train", &train[..]), ("overfit", &["summary.json", "loss_log.jsonl"][..])] {
        let out = d.path().join(cmd);
        let code = run_with_closed_output(&[cmd, "--preset", "quick", "--out", common::s(&out)]);
        // 0 or 1 is the verdict; a panic would be 101.
        assert!(matches!(code, Some(0 | 1)), "{cmd}: exit code {code:?}");
        for f in files {
            assert!(out.join(f).exists(), "{cmd}: {f} missing");
        }
    }
}

#[test]
fn an_error_with_closed_output_still_exits_2() {
    let code = run_with_closed_output(&["floor", "--data", "/nonexistent/boldcast-data", "--horizons", "1"]);
    assert_eq!(code, Some(2));
}
