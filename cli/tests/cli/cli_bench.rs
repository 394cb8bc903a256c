//! `bc-cli bench` through the binary: one JSON line with the documented keys, whose numbers
//! agree with each other, for either temporal mixer.

use crate::common;
use common::*;

#[test]
fn bench_prints_consistent_figures_for_both_mixers() {
    let mut flops = Vec::new();
    for temporal in ["mamba", "mamba2"] {
        let o = run(&["bench", "--preset", "quick", "--temporal", temporal, "--steps", "2", "--warmup", "1"]);
        assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
        let j: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
        for k in [
            "backend",
            "preset",
            "threads",
            "median_step_s",
            "min_step_s",
            "tokens_per_s",
            "flops_per_step",
            "gflops",
            "peak_gflops",
            "fraction_of_peak",
            "peak_rss_bytes",
        ] {
            assert!(j.get(k).is_some(), "{temporal}: key {k} missing: {j}");
        }
        assert_eq!(
            (j["backend"].as_str(), j["preset"].as_str(), j["temporal"].as_str()),
            (Some("cpu"), Some("quick"), Some(temporal))
        );
        let f = |k: &str| j[k].as_f64().unwrap();
        let tokens = f("batch") * f("time") * f("parcels");
        assert!(f("min_step_s") > 0.0 && f("min_step_s") <= f("median_step_s"), "{j}");
        assert!((f("tokens_per_s") - tokens / f("median_step_s")).abs() <= 1e-9 * f("tokens_per_s"), "{j}");
        assert!((f("gflops") - f("flops_per_step") / f("median_step_s") / 1e9).abs() <= 1e-9 * f("gflops"), "{j}");
        assert!((f("fraction_of_peak") - f("gflops") / f("peak_gflops")).abs() <= 1e-9, "{j}");
        flops.push(f("flops_per_step"));
    }
    // The FLOP model counts each mixer's own work: the two differ.
    assert!(flops[0] > 0.0 && flops[1] > 0.0 && flops[0] != flops[1], "{flops:?}");
    let o = run(&["bench", "--preset", "quick", "--temporal", "mamba3"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("`mamba3` is not a temporal mixer"), "{}", stderr(&o));
}

#[test]
fn zero_timed_steps_are_an_error_naming_steps() {
    let o = run(&["bench", "--preset", "quick", "--steps", "0", "--warmup", "0"]);
    assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
    let e = stderr(&o);
    assert!(e.contains("--steps") && e.contains("at least 1"), "{e}");
    assert!(stdout(&o).is_empty(), "no report: {}", stdout(&o));
}
