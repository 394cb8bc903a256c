//! `bc-cli eval`: the baselines' values on AR(1) data, the table, the JSON (the rows, the
//! fitted baselines' choices, the improvement over the best baseline, R^2, the paired
//! bootstrap, the single-lag AR reference, the forecast example), and where the weights come
//! from.

use crate::common;
use boldcast::baselines::{baseline_forecasts, fit_ar1};
use boldcast::core::forecast::{build_forecast_targets, per_horizon_losses};
use boldcast::core::{TokenShape, Tokens};
use boldcast::data::Dataset;
use boldcast::fixtures::{Ar1Spec, Layout};
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
    quick_run(&out, &["--max-steps", "20"]);
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
    let all = ["model", "zero", "last_token", "window_mean", "ar1_iterated", "ar_p", "var1", "var_p", "var_pca"];
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
    // The single-lag AR reference is `floor_empirical`'s numbers under its own name.
    assert_eq!(e["single_lag_ar_reference"]["per_horizon"], row("floor_empirical")["per_horizon"]);
    assert_eq!(e["single_lag_ar_reference"]["name"], "single_lag_ar_reference");
    check_choices(&e["baselines"]);
    check_improvement(&e);
    check_r_squared(&e, &all);
    check_bootstrap(&e);
    check_example(&e["forecast_example"]);
    // The model row is the best validation loss of the run.
    let s = json(&out.join("summary.json"));
    assert_eq!(row("model")["mean"].as_f64(), s["best"]["val_loss"].as_f64());
    // The table: every row and number of the JSON.
    let o = run(&["eval", "--checkpoint", out.join("checkpoints/step-000020/model.safetensors").to_str().unwrap()]);
    let (table, _) = text(&o);
    assert_eq!(o.status.code(), Some(0));
    let printed: Vec<&str> = all.iter().copied().chain(["floor_exact"]).collect();
    for &r in &printed {
        assert!(table.contains(&format!("{:.6}", row(r)["mean"].as_f64().unwrap())) || r == "model", "{r}: {table}");
        assert!(table.lines().any(|l| l.starts_with(r)), "{table}");
    }
    // The single-lag AR reference is printed under that name, and "floor" only for the exact one.
    let reference = e["single_lag_ar_reference"]["mean"].as_f64().unwrap();
    let line = table.lines().find(|l| l.starts_with("single-lag AR reference")).expect("the reference row");
    assert!(line.contains(&format!("{reference:.6}")), "{table}");
    assert!(!table.contains("floor_empirical") && !table.contains("empirical floor"), "{table}");
    check_table(&table, &e);
    // Errors name the path.
    let o = run(&["eval", "--checkpoint", d.path().join("nope").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("nope: no such file or directory"), "{:?}", text(&o));
}

/// The fitted baselines' choices: 3 training subjects, 3 folds; AR(1) data.
fn check_choices(b: &serde_json::Value) {
    assert_eq!((b["cv_unit"].as_str(), b["cv_folds"].as_u64()), (Some("subject"), Some(3)), "{b}");
    // Every order up to the window's 32 TRs (runs of 200 TRs would allow 98).
    assert_eq!((b["ar_p"]["p_max"].as_u64(), b["ar_p"]["p_max_limit"].as_str()), (Some(32), Some("window")), "{b}");
    assert_eq!(b["ar_p"]["cv_mse"].as_array().unwrap().len(), 32);
    let p = b["ar_p"]["p"].as_u64().unwrap();
    assert!((1..=32).contains(&p), "{b}");
    assert_eq!((b["var1"]["status"].as_str(), b["var1"]["p"].as_u64()), (Some("fitted"), Some(1)), "{b}");
    let grid = [1e2, 1e1, 1.0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8];
    assert!(grid.contains(&b["var1"]["lambda"].as_f64().unwrap()), "{b}");
    assert_eq!(b["var1"]["cv"].as_array().unwrap().len(), 11);
    // 4 parcels x 8 lags are 32 features: VAR(p) is fitted, every order considered.
    assert_eq!((b["var_p"]["status"].as_str(), b["var_p"]["p_max"].as_u64()), (Some("fitted"), Some(8)), "{b}");
    assert_eq!(b["var_p"]["cv"].as_array().unwrap().len(), 8 * 11);
    // The PCA-reduced VAR: ranks 1 and 2 of 4 parcels, orders 1..=8, every penalty.
    let pca = &b["var_pca"];
    assert_eq!((pca["status"].as_str(), pca["p_max"].as_u64()), (Some("fitted"), Some(8)), "{b}");
    assert!([1, 2].contains(&pca["rank"].as_u64().unwrap()), "{b}");
    assert_eq!(pca["cv"].as_array().unwrap().len(), 2 * 8 * 11);
    assert!(b["ar_p"]["p_lowest_cv"].as_u64().is_some_and(|p| (1..=32).contains(&p)), "{b}");
}

/// `r_squared`: a row per row of `rows`; against the same targets, `1 - R^2` is the SSE over
/// the SST, so the ratio of two baselines' `1 - R^2` is the ratio of their MSEs.
fn check_r_squared(e: &serde_json::Value, all: &[&str]) {
    let r2 = e["r_squared"].as_array().unwrap();
    let names: Vec<&str> = r2.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, all);
    let rows = e["rows"].as_array().unwrap();
    let f = |v: &serde_json::Value| v.as_f64().unwrap();
    let zero = r2.iter().find(|r| r["name"] == "zero").unwrap();
    for (r, row) in r2.iter().zip(rows) {
        assert_eq!(r["per_parcel"].as_array().unwrap().len(), 2);
        assert_eq!(r["per_parcel"][0].as_array().unwrap().len(), 4);
        for i in 0..2 {
            let want = f(&row["per_horizon"][i]) / f(&rows[1]["per_horizon"][i]);
            let got = (1.0 - f(&r["per_horizon"][i])) / (1.0 - f(&zero["per_horizon"][i]));
            let tol = if r["name"] == "model" { 1e-4 } else { 1e-9 };
            assert!((got / want - 1.0).abs() < tol, "{}: {got} vs {want}", r["name"]);
        }
    }
    // Predicting zero explains nothing: R^2 at most 0, and near it on standardized data.
    assert!(f(&zero["pooled"]) <= 0.0 && f(&zero["pooled"]) > -0.2, "{zero}");
}

/// `bootstrap`: one held-out subject, so no interval, and the sentence says so.
fn check_bootstrap(e: &serde_json::Value) {
    let b = &e["bootstrap"];
    assert_eq!((b["resamples"].as_u64(), b["seed"].as_u64(), b["subjects"].as_u64()), (Some(2000), Some(28), Some(1)));
    for (i, c) in b["per_horizon"].as_array().unwrap().iter().enumerate() {
        assert_eq!(c["best_baseline"], e["improvement"]["best_baseline"][i]);
        assert!(c["interval"].is_null(), "{c}");
        let rel = c["relative_difference"].as_f64().unwrap();
        assert!((rel + e["improvement"]["relative"][i].as_f64().unwrap()).abs() < 1e-4, "{c}");
    }
    assert!(b["sentence"].as_str().unwrap().contains("no interval can be computed"), "{b}");
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
        // The best baseline's forecast of the same TRs, for the figure.
        let b = &x["best_baselines"][i];
        assert_eq!((&b["horizon"], &b["tr"]), (&f["horizon"], &f["tr"]), "{b}");
        assert_eq!(b["value"].as_array().unwrap().len(), tr.len());
    }
}

/// The table's units, the improvement and the choices, as in the JSON.
fn check_table(table: &str, e: &serde_json::Value) {
    assert!(table.contains("MSE of standardized BOLD (variance units), per horizon h (tokens ahead)"), "{table}");
    // The rows' code names in words, from the one map the figure's legend uses too.
    assert!(table.contains("ar1_iterated = AR(1), iterated; ar_p = AR(p) per parcel"), "{table}");
    let imp = &e["improvement"];
    let line = |start: &str| table.lines().find(|l| l.starts_with(start)).unwrap_or_else(|| panic!("{start}: {table}"));
    for (i, h) in [1, 5].into_iter().enumerate() {
        assert!(line("best baseline").contains(imp["best_baseline"][i].as_str().unwrap()), "{table}");
        assert!(line("best MSE").contains(&format!("{:.6}", imp["best_mse"][i].as_f64().unwrap())), "{table}");
        let words = imp["words"][i].as_str().unwrap();
        let rel = imp["relative"][i].as_f64().unwrap();
        let want = format!(
            "{} than {} by {:.1} %",
            if rel >= 0.0 { "better" } else { "worse" },
            imp["best_baseline"][i].as_str().unwrap(),
            100.0 * rel.abs()
        );
        assert_eq!(words, want);
        assert!(line(&format!("model at h{h}: ")).contains(words), "{table}");
    }
    assert!(!table.contains("improvement"), "no bare signed improvement: {table}");
    assert!(line("paired bootstrap: ").contains(e["bootstrap"]["sentence"].as_str().unwrap()), "{table}");
    let r2 = &e["r_squared"][0];
    let l = line("model");
    assert!(table.contains("R^2 = 1 - SSE / SST"), "{table}");
    let model_r2 = table.lines().filter(|l| l.starts_with("model ")).nth(1).unwrap_or(l);
    assert!(model_r2.contains(&format!("{:.4}", r2["pooled"].as_f64().unwrap())), "{table}");
    let b = &e["baselines"];
    assert!(table.contains(&format!("  ar_p: p = {} (of 1..=32)", b["ar_p"]["p"])), "{table}");
    for name in ["var1", "var_p", "var_pca"] {
        let v = &b[name];
        let rank = v["rank"].as_u64().map_or(String::new(), |r| format!(", rank {r} principal components"));
        let lambda = v["lambda"].as_f64().unwrap();
        let want = format!("  {name}: p = {} (of 1..={}){rank}, lambda = {lambda:e}", v["p"], v["p_max"]);
        assert!(table.contains(&want), "`{want}` not in {table}");
    }
    assert!(table.contains("chosen by 3-fold cross-validation over training subjects (orders p in TRs"), "{table}");
}
