//! `bc-cli synth` through the binary: file names, shapes, contents, the floor in synth.json,
//! and nothing left behind on error.

use crate::common;
use boldcast::core::floor::ar1_floor_parcels;
use boldcast::data::Dataset;
use boldcast::fixtures::{Layout, Var1Spec};
use common::*;
use std::path::Path;

/// The shape, the values (widened to f64) and the bytes per value of a `.npy` run.
fn read_npy(path: &Path) -> (Vec<u64>, Vec<f64>, u64) {
    let bytes = std::fs::read(path).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape = npy.shape().to_vec();
    let size = match npy.dtype() {
        npyz::DType::Plain(t) => t.size_field(),
        other => panic!("{other:?}"),
    };
    let data = match size {
        4 => npy.into_vec::<f32>().unwrap().into_iter().map(f64::from).collect(),
        _ => npy.into_vec::<f64>().unwrap(),
    };
    (shape, data, size)
}

#[test]
fn synth_npy_writes_runs_parcels_and_exact_floor() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("ds");
    let meta = synth_ok(&out, "--subjects 3 --runs 2 --trs 40 --parcels 5 --rho 0.5:0.9 --seed 7");
    assert_eq!(
        ls(&out),
        [
            "parcels.tsv",
            "sub-01_run-1_bold.npy",
            "sub-01_run-2_bold.npy",
            "sub-02_run-1_bold.npy",
            "sub-02_run-2_bold.npy",
            "sub-03_run-1_bold.npy",
            "sub-03_run-2_bold.npy",
            "synth.json"
        ]
    );
    let (shape, data, size) = read_npy(&out.join("sub-02_run-1_bold.npy"));
    assert_eq!((shape.as_slice(), size), ([40, 5].as_slice(), 4), "float32 by default");
    assert!(data.iter().all(|v| v.is_finite()) && data.iter().any(|&v| v != 0.0));
    assert_eq!(meta["generator"], "ar1");
    let rhos: Vec<f64> = meta["rho"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(rhos.len(), 5);
    for (r, want) in rhos.iter().zip([0.5, 0.6, 0.7, 0.8, 0.9]) {
        assert!((r - want).abs() < 1e-12);
    }
    assert_eq!(meta["floor"]["horizons"], serde_json::json!([1, 5]));
    assert_eq!(meta["floor"]["d_in"], 1);
    let want = ar1_floor_parcels(&rhos, &[1, 5], 1).unwrap();
    assert!((meta["floor"]["overall"].as_f64().unwrap() - want).abs() < 1e-15);
    assert!(meta["floor_note"].as_str().unwrap().contains("1 - rho_p^(2L)"));
    // parcels.tsv: header and 5 centroids on a circle of radius 50.
    let parcels = std::fs::read_to_string(out.join("parcels.tsv")).unwrap();
    let lines: Vec<&str> = parcels.lines().collect();
    assert_eq!(lines[0], "name\tx\ty\tz");
    assert_eq!(lines.len(), 6);
    let c: Vec<f64> = lines[2].split('\t').skip(1).map(|v| v.parse().unwrap()).collect();
    assert!(((c[0] * c[0] + c[1] * c[1]).sqrt() - 50.0).abs() < 1e-9 && c[2] == 0.0);
    // The loader reads it back: 6 runs, the centroid adjacency is the ring.
    let ds = Dataset::load(&out).unwrap();
    assert_eq!((ds.runs.len(), ds.parcels, ds.runs[0].n_tr), (6, 5, 40));
    let a = ds.adjacency(3, &[0]).unwrap().unwrap();
    let mut row = a.row(0).to_vec();
    row.sort();
    assert_eq!(row, [0, 1, 4]);
    // The same seed gives the same bytes (synth.json the same but for what made it: the
    // command line names the other directory).
    let out2 = d.path().join("ds2");
    let o = synth(&out2, "--subjects 3 --runs 2 --trs 40 --parcels 5 --rho 0.5:0.9 --seed 7");
    assert!(o.status.success());
    for f in ls(&out).into_iter().filter(|f| f != "synth.json") {
        assert_eq!(std::fs::read(out.join(&f)).unwrap(), std::fs::read(out2.join(&f)).unwrap(), "{f}");
    }
    let meta = |dir: &Path| {
        let mut v = json(&dir.join("synth.json"));
        v.as_object_mut().unwrap().remove("made_by");
        v
    };
    assert_eq!(meta(&out), meta(&out2));
}

#[test]
fn synth_tsv_has_a_header_of_parcel_names() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("ds");
    let o = run(&["synth", "--out", out.to_str().unwrap(), "--format", "tsv", "--trs", "30", "--parcels", "3"]);
    assert!(o.status.success(), "{}", text(&o).1);
    assert_eq!(ls(&out).len(), 4 + 2, "4 subjects x 1 run, parcels.tsv, synth.json");
    let text = std::fs::read_to_string(out.join("sub-04_run-1_bold.tsv")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "parcel-000\tparcel-001\tparcel-002");
    assert_eq!(lines.len(), 31);
    assert!(lines[1..].iter().all(|l| l.split('\t').count() == 3 && l.split('\t').all(|v| v.parse::<f64>().is_ok())));
    let ds = Dataset::load(&out).unwrap();
    assert_eq!(ds.parcel_names, ["parcel-000", "parcel-001", "parcel-002"]);
}

#[test]
fn synth_var1_records_its_lyapunov_floor() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("ds");
    let meta = synth_ok(&out, "--var1 --parcels 6 --k 3 --self-coef 0.5 --neighbor-coef 0.4 --trs 20 --dtype f64");
    assert_eq!(meta["generator"], "var1");
    let spec = Var1Spec {
        layout: Layout { subjects: 4, runs: 1, trs: 20, parcels: 6, seed: 0 },
        self_coef: 0.5,
        neighbor_coef: 0.4,
        k: 3,
    };
    let f = spec.floor(&[1, 5], 1).unwrap();
    assert!((meta["floor"]["overall"].as_f64().unwrap() - f.overall).abs() < 1e-15);
    assert!(meta["spectral_radius_bound"].as_f64().unwrap() < 1.0);
    let (shape, data, size) = read_npy(&out.join("sub-01_run-1_bold.npy"));
    assert_eq!((shape.as_slice(), size), ([20, 6].as_slice(), 8), "--dtype f64");
    assert_eq!(data, spec.generate().unwrap()[0].data, "the generator's values");
    assert_eq!(meta["dtype"], "float64");
}

#[test]
fn synth_errors_leave_nothing_behind() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("ds");
    for (args, msg) in [
        (vec!["--rho", "1.5"], "invalid rho = 1.5: must lie in (-1, 1)"),
        (vec!["--rho", "0.9,0.8", "--parcels", "3"], "2 values for 3 parcels"),
        (vec!["--var1", "--self-coef", "0.8", "--neighbor-coef", "0.3"], "must be below 1"),
        (vec!["--subjects", "0"], "invalid subjects = 0"),
    ] {
        let mut a = vec!["synth", "--out", out.to_str().unwrap()];
        a.extend(args);
        let o = run(&a);
        assert_eq!(o.status.code(), Some(2));
        let e = text(&o).1;
        assert!(e.starts_with("error: ") && e.contains(msg), "{e}");
        assert!(!e.contains("panicked"), "{e}");
        assert!(ls(d.path()).is_empty(), "nothing written: {:?}", ls(d.path()));
    }
    // An existing non-empty directory is refused and left as it was.
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("keep.txt"), "x").unwrap();
    let o = run(&["synth", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("already exists and is not empty"), "{}", text(&o).1);
    assert_eq!(ls(&out), ["keep.txt"]);
    assert_eq!(ls(d.path()), ["ds"]);
    // An existing empty directory is filled.
    std::fs::remove_file(out.join("keep.txt")).unwrap();
    let o = run(&["synth", "--out", out.to_str().unwrap(), "--trs", "10"]);
    assert!(o.status.success(), "{}", text(&o).1);
    assert_eq!(ls(&out).len(), 6);
}

#[test]
fn synth_into_an_existing_file_says_it_is_not_a_directory() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("ds.txt");
    std::fs::write(&out, "x").unwrap();
    let o = run(&["synth", "--out", out.to_str().unwrap(), "--trs", "10"]);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o).1;
    assert!(e.starts_with("error: ") && e.contains("is not a directory") && e.contains("ds.txt"), "{e}");
    assert!(!e.contains("not empty"), "{e}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "x", "the file is left as it was");
    assert_eq!(ls(d.path()), ["ds.txt"]);
}
