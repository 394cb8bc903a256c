//! The issue's acceptance run: on the synthetic AR(1) fixture with two held-out subjects, a
//! small model trained by `bc-cli train` ends within 10 % of the exact floor, below every
//! baseline of `bc-cli eval` except the fitted AR(1), and within 5 % of that one.

use crate::common;
use common::*;

/// The quick model on 6 subjects x 400 TRs (2 held out), lr 3e-3, 400 steps: small enough
/// for a test to train in seconds.
const CONFIG: &str = r#"
preset = "quick"
[data]
val_subjects = 2
[data.synthetic]
subjects = 6
runs = 1
trs = 400
parcels = 4
[window]
window = 32
stride = 8
[train]
lr = 3e-3
warmup_steps = 20
max_steps = 400
val_every = 50
ckpt_every = 200
patience = 0
"#;

#[test]
fn a_small_run_reaches_the_floor_and_beats_the_baselines() {
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("acceptance.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let out = d.path().join("run");
    let o = run(&["train", "--config", cfg.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "the held-out rule passes: {stdout}{stderr}");
    assert!(stdout.contains("verdict: PASS  mean(last 3 val)"), "{stdout}");
    let summary = json(&out.join("summary.json"));
    assert_eq!(summary["split"]["heldout_subjects"], serde_json::json!(["05", "06"]));
    assert_eq!(summary["passed"], true);
    let floor = summary["floor"]["value"].as_f64().unwrap();
    assert!((floor - (0.19 + (1.0 - 0.9f64.powi(10))) / 2.0).abs() < 1e-12, "exact floor {floor}");
    let last = summary["final_val_loss"].as_f64().unwrap();
    assert!(last <= 1.10 * floor, "final validation loss {last} within 10 % of the floor {floor}");
    assert!(out.join("figures/loss_curves.png").is_file());

    // eval on the final checkpoint: the same held-out windows, beside the baselines.
    let o = run(&["eval", "--checkpoint", out.join("checkpoints/step-000400").to_str().unwrap(), "--json"]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
    let e: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let mean = |name: &str| {
        let rows = e["rows"].as_array().unwrap().iter().chain(e["floors"].as_array().unwrap());
        rows.into_iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("no row {name}"))["mean"]
            .as_f64()
            .unwrap()
    };
    let model = mean("model");
    assert_eq!(model, last, "eval's model row is the run's last validation loss");
    for b in ["zero", "last_token", "window_mean"] {
        assert!(model < mean(b), "model {model} below {b} {}", mean(b));
    }
    let ar1 = mean("ar1_iterated");
    assert!(model <= 1.05 * ar1, "model {model} within 5 % of the fitted AR(1) {ar1}");
    assert_eq!(mean("floor_exact"), floor);
    println!("acceptance: model {model:.6}, exact floor {floor:.6} ({:.4}x), AR(1) {ar1:.6}, zero {:.6}, last token {:.6}, window mean {:.6}, empirical floor {:.6}",
        model / floor, mean("zero"), mean("last_token"), mean("window_mean"), mean("floor_empirical"));
    println!(
        "fitted: ar_p {:.6}, var1 {:.6}, var_p {:.6}; improvement over the best baseline {}",
        mean("ar_p"),
        mean("var1"),
        mean("var_p"),
        e["improvement"]
    );
}
