//! `bc-cli floor` through the binary: the exact AR(1) floor (text and JSON) equals the core's,
//! the empirical floor of a long AR(1) dataset is near the exact one, and every bad dataset is
//! an `error:` line naming the file, line and column, with exit status 2 and no panic.

use crate::common;
use boldcast::core::floor::{ar1_floor, ar1_floor_per_horizon};
use common::*;
use std::path::Path;

#[test]
fn exact_floor_text_and_json_match_the_core() {
    for (rho, h, d) in [("0.9", "1,5", "1"), ("0.7", "1,2,3", "2"), ("-0.5", "4", "3")] {
        let r: f64 = rho.parse().unwrap();
        let hs: Vec<usize> = h.split(',').map(|x| x.parse().unwrap()).collect();
        let dd: usize = d.parse().unwrap();
        let per = ar1_floor_per_horizon(r, &hs, dd).unwrap();
        let all = ar1_floor(r, &hs, dd).unwrap();
        let o = run(&["floor", "--rho", rho, "--horizons", h, "--d-in", d, "--json"]);
        assert!(o.status.success(), "{}", text(&o).1);
        let j: serde_json::Value = serde_json::from_str(&text(&o).0).unwrap();
        assert_eq!(j["kind"], "ar1");
        assert_eq!(j["overall"].as_f64().unwrap(), all);
        let got: Vec<f64> = j["per_horizon"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(got, per);
        let o = run(&["floor", "--rho", rho, "--horizons", h, "--d-in", d]);
        let text = text(&o).0;
        assert!(text.contains(&format!("overall: {all:.6}")), "{text}");
        for (hh, v) in hs.iter().zip(&per) {
            assert!(text.contains(&format!("horizon {hh}: {v:.6}")), "{text}");
        }
    }
    // The familiar numbers: rho 0.9, horizons 1 and 5, D 1.
    let text = stdout(&run(&["floor", "--rho", "0.9"]));
    assert!(text.contains("horizon 1: 0.190000") && text.contains("overall: 0.420661"), "{text}");
}

#[test]
fn floor_argument_errors_are_clean() {
    let o = run(&["floor", "--rho", "1.0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.starts_with("error: invalid rho = 1: must lie in (-1, 1)"), "{}", text(&o).1);
    let o = run(&["floor", "--rho", "0.9", "--horizons", "0"]);
    assert!(text(&o).1.contains("invalid horizons = 0"), "{}", text(&o).1);
    let o = run(&["floor"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["floor", "--rho", "0.9", "--data", "x"]);
    assert_eq!(o.status.code(), Some(2), "--rho and --data exclude each other");
}

#[test]
fn empirical_floor_of_a_long_ar1_dataset_is_near_the_exact_floor() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("ds");
    let meta = synth_ok(&out, "--subjects 4 --runs 2 --trs 4000 --parcels 3 --rho 0.9,0.7,0.5 --mix 0.5 --seed 3");
    let exact = meta["floor"]["overall"].as_f64().unwrap();
    let o = run(&["floor", "--data", out.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", text(&o).1);
    let j: serde_json::Value = serde_json::from_str(&text(&o).0).unwrap();
    assert_eq!(j["kind"], "empirical");
    assert_eq!((j["runs"].as_u64(), j["parcels"].as_u64()), (Some(8), Some(3)));
    let emp = j["overall"].as_f64().unwrap();
    assert!((emp - exact).abs() < 0.02, "empirical {emp} vs exact {exact}");
    for (p, want) in j["per_parcel"].as_array().unwrap().iter().zip(meta["floor"]["per_parcel"].as_array().unwrap()) {
        let (e, w) = (p["floor"].as_f64().unwrap(), want.as_f64().unwrap());
        assert!((e - w).abs() < 0.03, "{p} vs {w}");
    }
    assert_eq!(j["per_parcel"][2]["name"], "parcel-002");
    assert_eq!(j["input_spectrum"]["verdict"], "not_filtered", "{}", j["input_spectrum"]);
    let (shown, err) = text(&run(&["floor", "--data", out.to_str().unwrap()]));
    assert!(shown.contains(&format!("overall: {emp:.6}")) && shown.contains("parcel-001"), "{shown}");
    assert!(shown.contains("input spectrum: 99.9 % of the power below") && shown.contains("not filtered"), "{shown}");
    assert!(!err.contains("looks low-pass"), "{err}");
}

#[test]
fn slow_runs_are_measured_as_filtered_with_one_warning() {
    let d = tempfile::tempdir().unwrap();
    for s in 1..=2usize {
        let mut body = "a\tb\n".to_string();
        for t in 0..200 {
            // Below 0.04 cycles per TR: 0.08 of Nyquist.
            let x = |p: usize| {
                (1..=4)
                    .map(|j| (0.01 * j as f64 * t as f64 * std::f64::consts::TAU + (p * s + j) as f64).sin())
                    .sum::<f64>()
            };
            body += &format!("{:.6}\t{:.6}\n", x(0), x(1));
        }
        write(d.path(), &format!("sub-0{s}_run-1_bold.tsv"), &body);
    }
    write(d.path(), "bold.json", "{\"RepetitionTime\": 2.0}");
    let o = run(&["floor", "--data", d.path().to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", text(&o).1);
    let err = text(&o).1;
    assert_eq!(err.matches("warning: the input looks low-pass or band-pass filtered").count(), 1, "{err}");
    assert!(err.contains("(0.0") && err.contains("Nyquist 0.250 Hz") && err.contains("leaks the future"), "{err}");
    let j: serde_json::Value = serde_json::from_str(&text(&o).0).unwrap();
    let s = &j["input_spectrum"];
    assert_eq!((s["verdict"].as_str(), s["runs"].as_array().map(Vec::len)), (Some("looks_filtered"), Some(2)));
    let (c, hz) = (s["median_cutoff_nyquist"].as_f64().unwrap(), s["median_cutoff_hz"].as_f64().unwrap());
    assert!(c < 0.12 && (hz - c * 0.25).abs() < 1e-12, "{s}");
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

/// Each bad dataset: the message, exit status 2, no panic, and no file created.
#[test]
fn bad_datasets_name_file_line_and_column() {
    let good = "a\tb\n1\t2\n2\t1\n3\t5\n";
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (
            vec![("sub-01_run-1_bold.tsv", "a\tb\n1\t2\n3\tn/a\n")],
            "sub-01_run-1_bold.tsv, line 3, column 2 (b): missing value `n/a`",
        ),
        (
            vec![("sub-01_run-1_bold.tsv", "a\tb\n1\tabc\n")],
            "sub-01_run-1_bold.tsv, line 2, column 2 (b): `abc` is not a number",
        ),
        (
            vec![("sub-01_run-1_bold.csv", "a,b\n1,2\nNaN,2\n")],
            "sub-01_run-1_bold.csv, line 3, column 1 (a): non-finite value `NaN`",
        ),
        (
            vec![("sub-01_run-1_bold.tsv", "a\tb\n1\t2\n1\n")],
            "sub-01_run-1_bold.tsv, line 3: 1 columns, but the header has 2",
        ),
        (
            vec![("sub-01_run-1_bold.tsv", good), ("sub-02_run-1_bold.tsv", "a\tb\tc\n1\t2\t3\n")],
            "sub-02_run-1_bold.tsv: 3 parcels, but",
        ),
        (
            vec![("sub-01_run-1_bold.tsv", good), ("sub-02_run-1_bold.tsv", "a\tB\n1\t2\n2\t3\n")],
            "sub-02_run-1_bold.tsv: column 2 is `B`",
        ),
        (vec![("bold.tsv", good), ("sub01_bold.tsv", good)], "no runs found in"),
        (vec![("sub-01_run-1_bold.npy", "not numpy")], "sub-01_run-1_bold.npy: not a valid .npy file"),
    ];
    for (files, msg) in cases {
        let d = tempfile::tempdir().unwrap();
        for (n, t) in &files {
            write(d.path(), n, t);
        }
        let before = std::fs::read_dir(d.path()).unwrap().count();
        let o = run(&["floor", "--data", d.path().to_str().unwrap()]);
        let e = text(&o).1;
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert!(e.starts_with("error: ") && e.contains(msg), "want {msg:?} in {e}");
        assert!(!e.contains("panicked"), "{e}");
        assert!(text(&o).0.is_empty());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), before);
    }
    let o = run(&["floor", "--data", "/no/such/boldcast/dir"]);
    assert_eq!(text(&o).1, "error: data directory /no/such/boldcast/dir does not exist\n");
}

#[test]
fn ignored_files_and_constant_parcels_are_reported() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "sub-01_run-1_bold.tsv", "a\tb\n1\t5\n2\t5\n4\t5\n3\t5\n");
    write(d.path(), "sub-02_run-1_bold.tsv", "a\tb\n1\t5\n3\t5\n2\t5\n4\t5\n");
    write(d.path(), "atlas.tsv", "x\n1\n");
    let o = run(&["floor", "--data", d.path().to_str().unwrap(), "--horizons", "1"]);
    assert!(o.status.success(), "{}", text(&o).1);
    let e = text(&o).1;
    assert!(e.contains("warning: parcel `b` (column 2) has zero variance in 2 run(s)"), "{e}");
    assert!(e.contains("note: ignored 1 file(s) not named like runs") && e.contains("atlas.tsv"), "{e}");
    // A constant parcel has no linear predictability: floor 1.
    let j: serde_json::Value = serde_json::from_str(&stdout(&run(&[
        "floor",
        "--data",
        d.path().to_str().unwrap(),
        "--horizons",
        "1",
        "--json",
    ])))
    .unwrap();
    assert_eq!(j["per_parcel"][1]["floor"].as_f64(), Some(1.0));
}

#[test]
fn a_horizon_past_i32_lags_has_the_floor_of_an_unpredictable_target() {
    // 2L = 2^31 used to wrap an i32 exponent and print -inf.
    let o = run(&["floor", "--rho", "0.9", "--horizons", "1073741824", "--json"]);
    assert!(o.status.success(), "{}", text(&o).1);
    let j: serde_json::Value = serde_json::from_str(&text(&o).0).unwrap();
    assert_eq!(j["overall"].as_f64(), Some(1.0), "{j}");
    assert_eq!(j["per_horizon"][0].as_f64(), Some(1.0), "{j}");
    let t = stdout(&run(&["floor", "--rho", "0.9", "--horizons", "1,1073741824"]));
    assert!(t.contains("horizon 1073741824: 1.000000") && t.contains("overall: 0.595000"), "{t}");
    assert!(!t.contains("inf") && !t.contains("NaN"), "{t}");
    let t = stdout(&run(&["floor", "--rho", "0.9", "--horizons", &usize::MAX.to_string(), "--d-in", "2"]));
    assert!(t.contains("overall: 1.000000"), "{t}");
}
