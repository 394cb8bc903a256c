//! `bc-cli tune` end to end on the synthetic fixture: a 2x1 grid, its files, the winner in
//! `best.toml`, a second invocation that keeps the finished trials, and bad input.

use crate::common;
use boldcast_train::config::RunConfig;
use common::*;

const FLAGS: &[&str] =
    &["--max-steps", "4", "--val-every", "2", "--subjects-train", "01,02,03", "--subjects-heldout", "04"];

fn tune(out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    quick("tune", out, &[FLAGS, extra].concat())
}

#[test]
fn a_two_by_one_grid_writes_the_table_and_the_winning_configuration() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("tune");
    let grid = ["--grid", "model.d_model=8,16", "--grid", "train.lr=1e-3"];
    let o = tune(&out, &grid);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("trial 1/2 trial-000 model.d_model=8 train.lr=0.001: best val_mse"), "{stdout}");
    assert!(stdout.contains("trial 2/2 trial-001 model.d_model=16 train.lr=0.001: best val_mse"), "{stdout}");

    let json = json(&out.join("results.json"));
    assert_eq!(json["keys"], serde_json::json!(["model.d_model", "train.lr"]));
    assert_eq!(json["validation_subjects"], serde_json::json!(["04"]));
    let trials = json["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 2);
    let losses: Vec<f64> = trials.iter().map(|t| t["best_val_loss"].as_f64().unwrap()).collect();
    for t in trials {
        assert_eq!((t["status"].as_str(), t["steps"].as_u64()), (Some("finished"), Some(4)), "{t}");
        assert_eq!(t["best_val_per_horizon"].as_array().unwrap().len(), 2, "{t}");
        let hz: Vec<f64> = t["best_val_per_horizon"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert!((hz.iter().sum::<f64>() / 2.0 - t["best_val_loss"].as_f64().unwrap()).abs() < 1e-9, "{t}");
        assert!(out.join(t["dir"].as_str().unwrap()).join("summary.json").is_file());
    }
    let winner = if losses[1] < losses[0] { 1 } else { 0 };
    assert_eq!(json["best"].as_u64(), Some(winner as u64));

    let tsv = std::fs::read_to_string(out.join("results.tsv")).unwrap();
    let lines: Vec<&str> = tsv.lines().collect();
    assert_eq!(lines.len(), 3, "{tsv}");
    assert!(lines[0].contains("val_mse (variance units)"), "{}", lines[0]);
    assert!(lines[1].starts_with(&format!("0\t8\t0.001\tfinished\t{:.6}\t", losses[0])), "{}", lines[1]);
    assert!(stdout.contains(lines[2]), "the table is printed: {stdout}");

    let toml_text = std::fs::read_to_string(out.join("best.toml")).unwrap();
    let best = RunConfig::from_toml_str("best.toml", &toml_text).unwrap();
    assert_eq!((best.model.d_model, best.train.lr), ([8, 16][winner], 1e-3));
    assert_eq!((best.train.max_steps, best.data.subjects_heldout.clone()), (4, vec!["04".to_string()]));
    assert_eq!(best.train.out, None);

    // Run again: both trials are finished, so they are kept, not rerun.
    let o = tune(&out, &[grid.as_slice(), &["--json"]].concat());
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(stdout.matches("(finished before: kept)").count(), 2, "{stdout}");
    let again: serde_json::Value = serde_json::from_str(&stdout[stdout.find("\n{").unwrap()..]).unwrap();
    assert_eq!(again["best"], json["best"]);
    assert_eq!(again["trials"][1]["best_val_loss"], json["trials"][1]["best_val_loss"]);
    assert_eq!(again["trials"][0]["reused"], serde_json::json!(true));

    // Another grid into the same directory is refused before anything runs.
    let o = tune(&out, &["--grid", "model.d_model=32"]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("trial-000: holds a run of another configuration"), "{stderr}");
}

#[test]
fn a_bad_key_or_no_validation_subjects_is_exit_2_before_anything_runs() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("tune");
    let o = tune(&out, &["--grid", "model.d_modl=8,16"]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("error: tune key `model.d_modl` = 8"), "{stderr}");
    assert!(!out.exists());
    let o = quick("tune", &out, &["--grid", "train.lr=1e-3"]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("no validation subjects (data.subjects_heldout is empty)"), "{stderr}");
    assert!(!out.exists());
}
