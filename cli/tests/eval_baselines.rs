//! `bc-cli eval`: the baselines' values on AR(1) data, the table, the JSON (the rows, the
//! fitted baselines' choices, the improvement over the best baseline, the forecast example),
//! and where the weights come from.

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
    let all = ["model", "zero", "last_token", "window_mean", "ar1_iterated", "ar_p", "var1", "var_p"];
    assert_eq!(names, all);
    // Standardized data: predicting zero costs about the variance, 1.
    let zero = row("zero")["mean"].as_f64().unwrap();
    assert!((zero - 1.0).abs() < 0.25, "zero baseline {zero}");
    // The fitted AR(1) is close to the floor (on 200 TRs of held-out data).
    let (ar1, emp, exact) = (
        row("ar1_iterated")["mean"].as_f64().unwrap(),
        row("floor_empirical")["mean"].as_f64().unwrap(),
        row("floor_exact")["mean"].as_f64().unwrap(),
    );
    assert!((ar1 / exact - 1.0).abs() < 0.15 && (ar1 / emp - 1.0).abs() < 0.15, "ar1 {ar1}, floors {emp} {exact}");
    let with_floors: Vec<&str> = all.iter().copied().chain(["floor_empirical", "floor_exact"]).collect();
    for &r in &with_floors {
        let v = row(r);
        let per: Vec<f64> = v["per_horizon"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert_eq!(per.len(), 2);
        assert!(((per[0] + per[1]) / 2.0 - v["mean"].as_f64().unwrap()).abs() < 1e-12, "{r}");
        assert!(per[0] < per[1] || r == "zero" || r == "model", "{r}: the farther horizon is harder: {per:?}");
    }
    assert_eq!(e["ar1_phi"].as_array().unwrap().len(), 4);
    check_choices(&e["baselines"]);
    check_improvement(&e);
    check_example(&e["forecast_example"]);
    // The model row is the best validation loss of the run.
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(row("model")["mean"].as_f64(), s["best"]["val_loss"].as_f64());
    // The table: every row and number of the JSON.
    let o = run(&["eval", "--checkpoint", out.join("checkpoints/step-000020/model.safetensors").to_str().unwrap()]);
    let (table, _) = text(&o);
    assert_eq!(o.status.code(), Some(0));
    for &r in &with_floors {
        assert!(table.contains(&format!("{:.6}", row(r)["mean"].as_f64().unwrap())) || r == "model", "{r}: {table}");
        assert!(table.lines().any(|l| l.starts_with(r)), "{table}");
    }
    check_table(&table, &e);
    // Errors name the path.
    let o = run(&["eval", "--checkpoint", d.path().join("nope").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("nope: no such file or directory"), "{:?}", text(&o));
}

/// The fitted baselines' choices: 3 training subjects, 3 folds; AR(1) data.
fn check_choices(b: &serde_json::Value) {
    assert_eq!((b["cv_unit"].as_str(), b["cv_folds"].as_u64()), (Some("subject"), Some(3)), "{b}");
    assert_eq!(b["ar_p"]["p_max"], 8);
    assert_eq!(b["ar_p"]["cv_mse"].as_array().unwrap().len(), 8);
    let p = b["ar_p"]["p"].as_u64().unwrap();
    assert!((1..=8).contains(&p), "{b}");
    assert_eq!((b["var1"]["status"].as_str(), b["var1"]["p"].as_u64()), (Some("fitted"), Some(1)), "{b}");
    let grid = [1.0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6];
    assert!(grid.contains(&b["var1"]["lambda"].as_f64().unwrap()), "{b}");
    assert_eq!(b["var1"]["cv"].as_array().unwrap().len(), 7);
    // 4 parcels x 8 lags are 32 features: VAR(p) is fitted, every order considered.
    assert_eq!((b["var_p"]["status"].as_str(), b["var_p"]["p_max"].as_u64()), (Some("fitted"), Some(8)), "{b}");
    assert_eq!(b["var_p"]["cv"].as_array().unwrap().len(), 8 * 7);
}

/// `improvement`: at each horizon the best baseline is the row (other than the model's and
/// the floors) of least MSE, and the improvement is `1 - model / best`.
fn check_improvement(e: &serde_json::Value) {
    let rows = e["rows"].as_array().unwrap();
    let at = |r: &serde_json::Value, i: usize| r["per_horizon"][i].as_f64().unwrap();
    let imp = &e["improvement"];
    for i in 0..2 {
        let best = rows[1..].iter().min_by(|a, b| at(a, i).total_cmp(&at(b, i))).unwrap();
        assert_eq!(imp["best_baseline"][i], best["name"]);
        assert_eq!(imp["best_mse"][i].as_f64(), Some(at(best, i)));
        let want = 1.0 - at(&rows[0], i) / at(best, i);
        assert!((imp["relative"][i].as_f64().unwrap() - want).abs() < 1e-15, "{imp}");
    }
}

/// The forecast example: parcel 0 of the held-out subject's first window, 32 TRs; the
/// forecasts at h target TRs h..32 (D = 1).
fn check_example(x: &serde_json::Value) {
    assert_eq!(
        (x["run"].as_str(), x["start"].as_u64(), x["parcel"].as_str()),
        (Some("sub-04_run-1"), Some(0), Some("parcel-000"))
    );
    assert_eq!(x["truth"].as_array().unwrap().len(), 32);
    for (i, h) in [1u64, 5].into_iter().enumerate() {
        let f = &x["forecasts"][i];
        assert_eq!(f["horizon"], h);
        let tr: Vec<u64> = f["tr"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        assert_eq!(tr, (h..32).collect::<Vec<_>>());
        assert_eq!(f["value"].as_array().unwrap().len(), tr.len());
    }
}

/// The table's units, the improvement and the choices, as in the JSON.
fn check_table(table: &str, e: &serde_json::Value) {
    assert!(table.contains("MSE of standardized BOLD (variance units), per horizon h (tokens ahead)"), "{table}");
    let imp = &e["improvement"];
    let line = |start: &str| table.lines().find(|l| l.starts_with(start)).unwrap_or_else(|| panic!("{start}: {table}"));
    for i in 0..2 {
        assert!(line("best baseline").contains(imp["best_baseline"][i].as_str().unwrap()), "{table}");
        assert!(line("best MSE").contains(&format!("{:.6}", imp["best_mse"][i].as_f64().unwrap())), "{table}");
        assert!(line("improvement").contains(&format!("{:+.4}", imp["relative"][i].as_f64().unwrap())), "{table}");
    }
    let b = &e["baselines"];
    assert!(table.contains(&format!("  ar_p: p = {} (of 1..=8)", b["ar_p"]["p"])), "{table}");
    for name in ["var1", "var_p"] {
        let v = &b[name];
        let want =
            format!("  {name}: p = {} (of 1..={}), lambda = {:e}", v["p"], v["p_max"], v["lambda"].as_f64().unwrap());
        assert!(table.contains(&want), "`{want}` not in {table}");
    }
    assert!(table.contains("chosen by 3-fold cross-validation over training subjects (orders p in TRs"), "{table}");
}
