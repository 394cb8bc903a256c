//! `model.linear_path` end to end: a run starts from the linear fit (its step-0 validation
//! loss is the eval's `ar_p` row), never ends worse than it, resumes bit for bit with the path
//! in its checkpoints, and eval reads the path back from the weights.

use crate::common;
use common::*;
use std::path::Path;

fn train(out: &Path, config: &Path, extra: &[&str]) -> std::process::Output {
    let flags = ["--config", s(config), "--max-steps", "20", "--val-every", "5", "--ckpt-every", "5"];
    quick("train", out, &[&flags[..], extra].concat())
}

#[test]
fn a_run_with_the_linear_path_starts_at_the_fit_and_resumes_bit_for_bit() {
    let d = tempfile::tempdir().unwrap();
    let config = d.path().join("lp.toml");
    std::fs::write(&config, "[model]\nlinear_path = \"ar\"\n").unwrap();
    let (a, b) = (d.path().join("full"), d.path().join("split"));
    let o = train(&a, &config, &[]);
    assert_verdict(&o);
    let s = json(&a.join("summary.json"));
    assert_eq!(s["linear_path"]["kind"], "ar", "{s}");
    assert!(s["linear_path"]["p"].as_u64().unwrap() >= 1);
    // Judged against the best baseline, not against its own start (the fit).
    assert_eq!(s["rule"], "final val_loss <= the best baseline's MSE, and < predicting zero's");
    let (last, best_mse) = (s["heldout"]["val_loss"].as_f64().unwrap(), s["heldout"]["best_mse"].as_f64().unwrap());
    assert_eq!(s["threshold"].as_f64(), Some(best_mse));
    let passed = last <= best_mse && s["heldout"]["beats_zero"] == true;
    assert_eq!(s["passed"].as_bool(), Some(passed), "{s}");
    assert_eq!(o.status.code(), Some(if passed { 0 } else { 1 }));
    assert!(stdout(&o).contains("judged against the best baseline"), "{}", stdout(&o));
    let resolved = std::fs::read_to_string(a.join("config.resolved.toml")).unwrap();
    assert!(resolved.contains("linear_path = \"ar\""), "{resolved}");

    // Eval reads the path from best.safetensors; step 0 forecast what ar_p does.
    let o = run(&["eval", "--checkpoint", a.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let e: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let row = |name: &str| {
        e["rows"].as_array().unwrap().iter().find(|r| r["name"] == name).unwrap()["mean"].as_f64().unwrap()
    };
    let (model, ar_p) = (row("model"), row("ar_p"));
    let log = log_lines(&a.join("loss_log.jsonl"));
    let val0 = log.iter().find(|v| v.get("val_loss").is_some()).unwrap()["val_loss"].as_f64().unwrap();
    assert!((val0 / ar_p - 1.0).abs() < 1e-5, "step-0 validation {val0} vs ar_p {ar_p}");
    assert!(model <= ar_p * (1.0 + 1e-5), "model {model} vs ar_p {ar_p}");
    // The run's best validation loss, summed in another order.
    let best = s["best"]["val_loss"].as_f64().unwrap();
    assert!((model / best - 1.0).abs() < 1e-6, "eval {model} vs the run's best {best}");

    // Stopped and resumed: the same run, the path restored from the checkpoint.
    let o = train(&b, &config, &["--stop-after", "10"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let o = run(&["train", "--resume", b.to_str().unwrap()]);
    assert_verdict(&o);
    assert_eq!(std::fs::read(a.join("loss_log.jsonl")).unwrap(), std::fs::read(b.join("loss_log.jsonl")).unwrap());
    assert_same_tensors(&a.join("best.safetensors"), &b.join("best.safetensors"));
    let names: Vec<String> = tensors(&b.join("best.safetensors")).into_iter().map(|t| t.name).collect();
    assert!(names.iter().any(|n| n == "linear_path.ar.1"), "{names:?}");
}
