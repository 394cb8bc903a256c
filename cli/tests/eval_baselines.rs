//! `bc-cli eval`: the baselines' values on AR(1) data, the table, the JSON, and where the
//! weights come from.

mod common;
use boldcast::core::forecast::{build_forecast_targets, per_horizon_losses};
use boldcast::core::{TokenShape, Tokens};
use boldcast::data::Dataset;
use boldcast::fixtures::{Ar1Spec, Layout};
use boldcast_train::eval::{baseline_forecasts, fit_ar1};
use common::*;

#[test]
fn baselines_by_hand() {
    // One window, one parcel, D = 1: tokens 1, 2, 4, 8; horizons 1 and 2.
    let t = Tokens::<f64>::new(TokenShape::new(1, 4, 1, 1), vec![1.0, 2.0, 4.0, 8.0]).unwrap();
    let h = [1, 2];
    let [zero, last, mean, ar1] = baseline_forecasts(&t, &h, &[0.5]);
    let target = build_forecast_targets(&t, &h).unwrap(); // T_valid = 2
                                                          // zero: targets (2, 4) at h1 and (4, 8) at h2.
    assert_eq!(per_horizon_losses(&zero, &target).unwrap(), [10.0, 40.0]);
    // last token: preds (1, 2): h1 errors (1, 2), h2 errors (3, 6).
    assert_eq!(per_horizon_losses(&last, &target).unwrap(), [2.5, 22.5]);
    // window mean: preds (1, 1.5): h1 (1, 2.5), h2 (3, 6.5).
    assert_eq!(per_horizon_losses(&mean, &target).unwrap(), [(1.0 + 6.25) / 2.0, (9.0 + 42.25) / 2.0]);
    // AR(1) with phi 0.5: h1 preds (0.5, 1), h2 (0.25, 0.5).
    let want = [(1.5f64.powi(2) + 9.0) / 2.0, (3.75f64.powi(2) + 7.5f64.powi(2)) / 2.0];
    assert_eq!(per_horizon_losses(&ar1, &target).unwrap(), want);
}

#[test]
fn ar1_fit_recovers_rho() {
    let fx = Ar1Spec::new(Layout { subjects: 2, runs: 2, trs: 4000, parcels: 3, seed: 5 }, 0.8);
    let ds = Dataset::from_synth(&fx.generate().unwrap(), None).unwrap();
    for phi in fit_ar1(&ds, &[0, 1, 2, 3]).unwrap() {
        assert!((phi - 0.8).abs() < 0.02, "{phi}");
    }
}

#[test]
fn eval_json_and_table_of_a_short_run() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let o = run(&["train", "--preset", "quick", "--out", out.to_str().unwrap(), "--max-steps", "20"]);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{:?}", text(&o));
    // A run directory: best.safetensors.
    let o = run(&["eval", "--checkpoint", out.to_str().unwrap(), "--json"]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
    let e: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(e["weights"].as_str(), Some(out.join("best.safetensors").to_str().unwrap()));
    assert_eq!(
        (e["horizons"].clone(), e["heldout_subjects"].clone()),
        (serde_json::json!([1, 5]), serde_json::json!(["04"]))
    );
    assert_eq!(e["windows"], 11);
    let row = |name: &str| {
        let rows = e["rows"].as_array().unwrap().iter().chain(e["floors"].as_array().unwrap());
        rows.into_iter().find(|r| r["name"] == name).unwrap().clone()
    };
    let names: Vec<&str> = e["rows"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["model", "zero", "last_token", "window_mean", "ar1"]);
    // Standardized data: predicting zero costs about the variance, 1.
    let zero = row("zero")["mean"].as_f64().unwrap();
    assert!((zero - 1.0).abs() < 0.25, "zero baseline {zero}");
    // The fitted AR(1) is close to the floor (on 200 TRs of held-out data).
    let (ar1, emp, exact) = (
        row("ar1")["mean"].as_f64().unwrap(),
        row("floor_empirical")["mean"].as_f64().unwrap(),
        row("floor_exact")["mean"].as_f64().unwrap(),
    );
    assert!((ar1 / exact - 1.0).abs() < 0.15 && (ar1 / emp - 1.0).abs() < 0.15, "ar1 {ar1}, floors {emp} {exact}");
    for r in ["model", "zero", "last_token", "window_mean", "ar1", "floor_empirical", "floor_exact"] {
        let v = row(r);
        let per: Vec<f64> = v["per_horizon"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert_eq!(per.len(), 2);
        assert!(((per[0] + per[1]) / 2.0 - v["mean"].as_f64().unwrap()).abs() < 1e-12, "{r}");
        assert!(per[0] < per[1] || r == "zero" || r == "model", "{r}: the farther horizon is harder: {per:?}");
    }
    assert_eq!(e["ar1_phi"].as_array().unwrap().len(), 4);
    // The model row is the best validation loss of the run.
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(row("model")["mean"].as_f64(), s["best"]["val_loss"].as_f64());
    // The table: every row and number of the JSON.
    let o = run(&["eval", "--checkpoint", out.join("checkpoints/step-000020/model.safetensors").to_str().unwrap()]);
    let (table, _) = text(&o);
    assert_eq!(o.status.code(), Some(0));
    for r in ["model", "zero", "last_token", "window_mean", "ar1", "floor_empirical", "floor_exact"] {
        assert!(table.contains(&format!("{:.6}", row(r)["mean"].as_f64().unwrap())) || r == "model", "{r}: {table}");
        assert!(table.lines().any(|l| l.starts_with(r)), "{table}");
    }
    // Errors name the path.
    let o = run(&["eval", "--checkpoint", d.path().join("nope").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("nope: no such file or directory"), "{:?}", text(&o));
}
