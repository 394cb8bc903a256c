//! What a run leaves for the people who read it: `metrics.csv` and the TensorBoard files of
//! `train --tensorboard` (equal to the log), `made_by` in every JSON result, and the progress
//! lines of a redirected run (`BOLDCAST_PROGRESS_SECONDS=0`: one per unit of work).

use crate::common::*;
use boldcast::storage::tfevents;
use std::path::Path;

fn redirected(args: &[&str]) -> std::process::Output {
    let o = bc().env(bc_cli::progress::TICK_ENV, "0").args(args).output().unwrap();
    // A quick run of 8 steps may fail its verdict (1); it must not fail (2).
    assert!(matches!(o.status.code(), Some(0 | 1)), "{args:?}: {:?}", text(&o));
    o
}

fn metrics(out: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
    text.lines().map(|l| l.split(',').map(String::from).collect()).collect()
}

#[test]
fn train_tracks_its_metrics_and_says_what_made_it() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let flags = ["--max-steps", "8", "--val-every", "4", "--ckpt-every", "8", "--tensorboard"];
    let o = redirected(&[&["train", "--preset", "quick", "--out", s(&out)][..], &flags].concat());
    let err = stderr(&o);
    assert!(
        err.contains("progress: 1/8 steps (12 %)  elapsed ") && err.contains("progress: 8/8 steps (100 %)"),
        "{err}"
    );
    assert!(err.contains(" steps/s  eta "), "{err}");

    let log = log_lines(&out.join("loss_log.jsonl"));
    let train: Vec<(u64, f64)> = log
        .iter()
        .filter(|v| v["kind"] == "train")
        .map(|v| (v["step"].as_u64().unwrap(), v["loss"].as_f64().unwrap()))
        .collect();
    let val: Vec<(u64, f64)> = log
        .iter()
        .filter(|v| v["kind"] == "validation")
        .map(|v| (v["step"].as_u64().unwrap(), v["val_loss"].as_f64().unwrap()))
        .collect();
    assert_eq!(train.len(), 8);
    assert_eq!(val.iter().map(|v| v.0).collect::<Vec<_>>(), [0, 4, 8]);

    // metrics.csv: the same steps and losses as the log, to the last bit.
    let rows = metrics(&out);
    assert_eq!(rows[0][..3], ["kind", "step", "loss"]);
    let csv_train: Vec<(u64, f64)> =
        rows.iter().filter(|r| r[0] == "train").map(|r| (r[1].parse().unwrap(), r[2].parse().unwrap())).collect();
    assert_eq!(csv_train, train);
    let csv_val: Vec<(u64, f64)> =
        rows.iter().filter(|r| r[0] == "validation").map(|r| (r[1].parse().unwrap(), r[6].parse().unwrap())).collect();
    assert_eq!(csv_val, val);
    assert!(rows.iter().filter(|r| r[0] == "train").all(|r| r[5].parse::<f64>().unwrap() > 0.0), "step seconds");

    // The event file: the same scalars, as 32-bit floats.
    let dir = out.join("tensorboard");
    let files = ls(&dir);
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].starts_with("events.out.tfevents."), "{files:?}");
    let scalars = tfevents::read_scalars(&std::fs::read(dir.join(&files[0])).unwrap()).unwrap();
    let tag = |t: &str| -> Vec<(u64, f32)> {
        scalars.iter().filter(|s| s.tag == t).map(|s| (s.step as u64, s.value)).collect()
    };
    assert_eq!(tag("train/loss"), train.iter().map(|(s, l)| (*s, *l as f32)).collect::<Vec<_>>());
    assert_eq!(tag("validation/loss"), val.iter().map(|(s, l)| (*s, *l as f32)).collect::<Vec<_>>());
    assert_eq!(tag("validation/loss_h5").len(), 3);
    assert_eq!(tag("train/step_seconds").len(), 8);

    // What made the summary: this command line, the version and the revision built from.
    let made = &json(&out.join("summary.json"))["made_by"];
    assert_eq!(made["tool"], "boldcast");
    assert_eq!(made["version"], env!("CARGO_PKG_VERSION"));
    let cmd: Vec<&str> = made["command_line"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(cmd[1..4], ["train", "--preset", "quick"]);
    assert!(cmd.contains(&"--tensorboard"), "{cmd:?}");
    assert!(made["date"].as_str().unwrap().ends_with('Z'), "{made}");
    // A checkout built with git names its revision (40 hex digits).
    let rev = made["git_revision"].as_str().unwrap_or("");
    assert!(rev.len() == 40 && rev.chars().all(|c| c.is_ascii_hexdigit()), "{made}");

    // Inference reports count tokens, and its JSON says what made it.
    let fc = d.path().join("fc");
    let o = redirected(&["forecast", "--checkpoint", s(&out), "--out", s(&fc), "--json"]);
    let err = stderr(&o);
    assert!(err.contains(" tokens (100 %)") && err.contains(" tokens/s  eta "), "{err}");
    let printed: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(printed["made_by"]["command_line"][1], "forecast");
    assert_eq!(json(&fc.join("forecast.json"))["made_by"]["tool"], "boldcast");
}
