//! How a run stops: a diverging learning rate (non-finite loss) and early stopping.

use crate::common;
use common::*;

#[test]
fn a_diverging_run_stops_naming_the_step_and_keeps_the_last_good_checkpoint() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("nan");
    // lr 100 with decoupled weight decay 0.05 multiplies the weights by about -4 per step.
    let o = quick("train", &out, &["--lr", "100", "--max-steps", "100", "--val-every", "100", "--ckpt-every", "4"]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stdout}{stderr}");
    let log = log_lines(&out.join("loss_log.jsonl"));
    let last = log.last().unwrap();
    assert_eq!((last["event"].as_str(), last["reason"].as_str()), (Some("stopped"), Some("non_finite")), "{last}");
    let step = last["step"].as_u64().unwrap();
    assert!(step > 4, "diverges after the first checkpoint (step {step})");
    assert!(stderr.contains(&format!("at step {step}")) && stderr.contains("non-finite"), "{stderr}");
    // Every step before it was logged, and none after.
    let steps: Vec<u64> = log.iter().filter(|v| v.get("loss").is_some()).map(|v| v["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, (1..step).collect::<Vec<_>>());
    // The last good checkpoint is intact, finite, and named in the record and the message.
    let good = latest(&out);
    assert_eq!(good, out.join(format!("checkpoints/step-{:06}", (step - 1) / 4 * 4)));
    assert_eq!(last["last_checkpoint"].as_str(), Some(good.to_str().unwrap()));
    assert!(stderr.contains(good.to_str().unwrap()), "{stderr}");
    assert_eq!(state(&good)["step"].as_u64(), Some((step - 1) / 4 * 4));
    for t in tensors(&good.join("model.safetensors")) {
        assert!(t.data.iter().all(|x| x.is_finite()), "{}", t.name);
    }
    assert!(!out.join("summary.json").exists(), "no summary of a failed run");
}

#[test]
fn early_stopping_ends_the_run_and_best_holds_the_best_validation_weights() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("early");
    // A learning rate too small to move the validation loss by min_delta: the loss stops
    // improving, and after 2 validations without improvement the run ends.
    let o = quick(
        "train",
        &out,
        &[
            "--lr",
            "1e-9",
            "--max-steps",
            "100",
            "--val-every",
            "5",
            "--ckpt-every",
            "50",
            "--patience",
            "2",
            "--min-delta",
            "1e-3",
        ],
    );
    let (stdout, stderr) = text(&o);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{stdout}{stderr}");
    assert!(stdout.contains("finished (early_stopping) at step 10"), "{stdout}");
    let log = log_lines(&out.join("loss_log.jsonl"));
    let vals: Vec<&serde_json::Value> = log.iter().filter(|v| v.get("val_loss").is_some()).collect();
    assert_eq!(vals.iter().map(|v| v["step"].as_u64().unwrap()).collect::<Vec<_>>(), [0, 5, 10]);
    assert_eq!(vals.iter().map(|v| v["bad_validations"].as_u64().unwrap()).collect::<Vec<_>>(), [0, 1, 2]);
    let last = log.last().unwrap();
    assert_eq!(
        (last["event"].as_str(), last["reason"].as_str(), last["step"].as_u64()),
        (Some("finished"), Some("early_stopping"), Some(10))
    );
    // The run's end is a checkpoint, marked finished.
    assert_eq!(latest(&out), out.join("checkpoints/step-000010"));
    assert_eq!(state(&latest(&out))["finished"], "early_stopping");
    let summary = json(&out.join("summary.json"));
    assert_eq!((summary["stop_reason"].as_str(), summary["steps"].as_u64()), (Some("early_stopping"), Some(10)));
    // best.safetensors holds the lowest validation loss, and says which.
    let (bs, bv) = vals
        .iter()
        .map(|v| (v["step"].as_u64().unwrap(), v["val_loss"].as_f64().unwrap()))
        .fold((0, f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a });
    assert_eq!((summary["best"]["step"].as_u64(), summary["best"]["val_loss"].as_f64()), (Some(bs), Some(bv)));
    let f = boldcast::storage::tensorfile::SafetensorsFile::open(out.join("best.safetensors")).unwrap();
    let meta = f.metadata().unwrap();
    assert_eq!((meta["step"].parse::<u64>().unwrap(), meta["val_loss"].parse::<f64>().unwrap()), (bs, bv));
    if bs == 10 {
        assert_same_tensors(&out.join("best.safetensors"), &out.join("checkpoints/step-000010/model.safetensors"));
    }
    // Exactly the MODEL.md names, PyTorch-loadable.
    let names: Vec<String> = f.names();
    let cfg = boldcast_train::presets::preset("quick").unwrap().model_config();
    let mut want: Vec<String> = cfg.param_specs().into_iter().map(|s| s.name).collect();
    let mut got = names.clone();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    assert!(out.join("figures/loss_curves.png").is_file());
}
