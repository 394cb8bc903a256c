//! The line figures' SVG text: the overfit curve on a logarithmic loss axis (round tick values,
//! no float noise, none twice) with its note on the floor, and the training figure zoomed to
//! the trained steps with its per-horizon panel.

use boldcast_plot::inspect::svg_texts;
use boldcast_plot::{loss_curves, overfit_curve, HorizonCurve, RunCurves, LOSS_AXIS, OVERFIT_NOTE};

#[test]
fn the_overfit_figure_on_a_log_axis_has_round_ticks_and_says_why_it_goes_below_the_floor() {
    let d = tempfile::tempdir().unwrap();
    let losses: Vec<f64> = (0..400).map(|i| 2.0 * (-(i as f64) / 40.0).exp() + 0.08).collect();
    let lrs = vec![1e-3; 400];
    let svg = overfit_curve(&d.path().join("o.png"), (&losses, &lrs), (1.5, 0.081, 50), Some(0.4207)).unwrap();
    let texts: Vec<String> = svg_texts(&svg).into_iter().filter(|t| !t.is_empty()).collect();
    for want in [OVERFIT_NOTE, "loss floor = 0.4207 (the process, on unseen data)", "0.1", "0.2", "0.5", "1", "2"] {
        assert!(texts.iter().any(|t| t == want), "`{want}` not among {texts:?}");
    }
    // The loss panel's y ticks come first after the axis title: each once, short.
    let start = texts.iter().position(|t| t == LOSS_AXIS).unwrap();
    let ticks: Vec<&String> = texts[start + 1..].iter().take_while(|t| t.parse::<f64>().is_ok()).collect();
    assert!(ticks.len() >= 4, "{texts:?}");
    let distinct: std::collections::HashSet<&&String> = ticks.iter().collect();
    assert_eq!(distinct.len(), ticks.len(), "a tick label twice: {ticks:?}");
    assert!(ticks.iter().all(|t| t.len() <= 4), "{ticks:?}");
    assert!(!texts.iter().any(|t| t.contains("0000") || t == "0.0e0"), "{texts:?}");
}

#[test]
fn the_training_figure_is_zoomed_to_the_trained_steps_and_has_a_panel_per_horizon() {
    let d = tempfile::tempdir().unwrap();
    let train: Vec<(u64, f64)> = (0..200).map(|i| (i, 0.9 + 1.6 * (-(i as f64) / 10.0).exp())).collect();
    let val: Vec<(u64, f64)> = (0..=10).map(|k| (20 * k, 0.93 + 1.5 * (-(k as f64)).exp())).collect();
    let lr: Vec<(u64, f64)> = (0..200).map(|i| (i, 3e-4 * (1.0 - i as f64 / 200.0))).collect();
    let h = |label: &str, f: f64| HorizonCurve { label: label.into(), val: val.clone(), floor: Some(f) };
    let per_horizon = [h("h = 1 (1 TR ahead)", 0.2), h("h = 5 (5 TRs ahead)", 0.65)];
    let c = RunCurves { train: &train, val: &val, lr: &lr, floor: Some(0.85), per_horizon: &per_horizon };
    let texts: Vec<String> =
        svg_texts(&loss_curves(&d.path().join("t.png"), &c).unwrap()).into_iter().filter(|t| !t.is_empty()).collect();
    let note =
        "Loss axis zoomed to the trained steps: the untrained start (up to 2.5 at step 0) is drawn at its top edge";
    for want in [
        note,
        "validation, h = 1 (1 TR ahead)",
        "floor, h = 5 (5 TRs ahead) = 0.65",
        "loss floor = 0.8500",
        "0",
        "2e-4",
    ] {
        assert!(texts.iter().any(|t| t == want), "`{want}` not among {texts:?}");
    }
    // The loss axis' ticks span the trained part only (about 0.85 to 1.1), not the start's 2.5.
    let start = texts.iter().position(|t| t == LOSS_AXIS).unwrap();
    // (Its ticks rise; the x axis' start again from 0.)
    let numbers: Vec<f64> = texts[start + 1..].iter().map_while(|t| t.parse::<f64>().ok()).collect();
    let rising = numbers.windows(2).take_while(|w| w[1] > w[0]).count() + 1;
    let ticks = &numbers[..rising];
    assert!(ticks.len() >= 3 && ticks.iter().all(|&v| (0.8..1.3).contains(&v)), "{ticks:?}");
}
