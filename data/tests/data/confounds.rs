//! Confound regression against nilearn: `fixtures/confounds/generate.py` wrote a run, an
//! fMRIPrep confounds table (`n/a` in the first row of the derivatives) and, per strategy,
//! `nilearn.signal.clean(bold, confounds=load_confounds(...), detrend=True,
//! standardize=False)`; the library's cleaning must give the same values, and a dataset
//! loaded with `--confounds` the same values standardized.

use boldcast_data::confounds::{clean, read_confounds, ConfoundStrategy};
use boldcast_data::{Dataset, Selection};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/confounds")
}

/// A float64 `.npy` as `(rows, cols, values)`.
fn npy(path: &Path) -> (usize, usize, Vec<f64>) {
    let bytes = std::fs::read(path).unwrap();
    let f = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape = f.shape().to_vec();
    let v: Vec<f64> = f.into_vec().unwrap();
    (shape[0] as usize, shape[1] as usize, v)
}

/// The run's values, `(n, p, x)` row-major.
fn bold() -> (usize, usize, Vec<f64>) {
    let text = std::fs::read_to_string(fixtures().join("data/sub-01_task-rest_bold.tsv")).unwrap();
    let rows: Vec<Vec<f64>> =
        text.lines().skip(1).map(|l| l.split('\t').map(|c| c.parse().unwrap()).collect()).collect();
    (rows.len(), rows[0].len(), rows.concat())
}

/// `(strategy, expected file)` from `strategies.json`.
fn strategies() -> Vec<(String, PathBuf)> {
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("strategies.json")).unwrap()).unwrap();
    let mut out = Vec::new();
    for (name, _) in j["strategies"].as_object().unwrap() {
        let file = name.split(':').next().unwrap().replace(':', "-");
        let file = if name.starts_with("acompcor") || name.starts_with("columns") { file } else { name.clone() };
        out.push((name.clone(), fixtures().join(format!("{file}.npy"))));
    }
    assert_eq!(out.len(), 7, "{out:?}");
    out
}

#[test]
fn cleaning_equals_nilearn_signal_clean_for_every_strategy() {
    let (n, p, x) = bold();
    let table = fixtures().join("data/sub-01_task-rest_desc-confounds_timeseries.tsv");
    for (name, file) in strategies() {
        let strategy: ConfoundStrategy = name.parse().unwrap();
        let c = read_confounds(&table, &strategy).unwrap();
        let mut got = x.clone();
        clean(&mut got, n, p, c.data, c.names.len());
        let (en, ep, want) = npy(&file);
        assert_eq!((en, ep), (n, p), "{name}");
        let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(worst <= 1e-10 * scale, "{name}: worst difference {worst:e} (scale {scale})");
        // Not the raw values: the confounds took something out.
        let mut detrended = x.clone();
        boldcast_data::confounds::detrend(&mut detrended, n, p);
        let moved = detrended.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(moved > 1e3 * worst.max(1e-12), "{name}: the cleaning changed nothing ({moved})");
    }
}

#[test]
fn a_dataset_loaded_with_confounds_is_nilearns_cleaning_standardized() {
    let d = tempfile::tempdir().unwrap();
    for f in ["sub-01_task-rest_bold.tsv", "sub-01_task-rest_desc-confounds_timeseries.tsv"] {
        std::fs::copy(fixtures().join("data").join(f), d.path().join(f)).unwrap();
    }
    let sel = Selection { confounds: Some("motion24+wm_csf".parse().unwrap()), ..Selection::default() };
    let ds = Dataset::load_with(d.path(), &sel).unwrap();
    let (n, p, want) = npy(&fixtures().join("motion24+wm_csf.npy"));
    let got = ds.runs[0].to_vec().unwrap();
    for q in 0..p {
        let col: Vec<f64> = (0..n).map(|t| want[t * p + q]).collect();
        let m = col.iter().sum::<f64>() / n as f64;
        let sd = (col.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n as f64).sqrt();
        for t in 0..n {
            let z = (col[t] - m) / sd;
            assert!((got[t * p + q] - z).abs() < 1e-9, "parcel {q}, TR {t}: {} vs {z}", got[t * p + q]);
        }
    }
    assert!(ds
        .notes()
        .iter()
        .any(|n| n.contains("confounds `motion24+wm_csf` (26 column(s)) regressed out of 1 run(s)")));
    // Without its table, the run is an error naming the table it looked for.
    std::fs::remove_file(d.path().join("sub-01_task-rest_desc-confounds_timeseries.tsv")).unwrap();
    let e = Dataset::load_with(d.path(), &sel).unwrap_err().to_string();
    assert!(
        e.contains("sub-01_task-rest_bold.tsv: --confounds motion24+wm_csf needs the run's confounds table"),
        "{e}"
    );
    assert!(e.contains("*_desc-confounds_timeseries.tsv or XCP-D's *_motion.tsv"), "{e}");
    // A table of another length is refused.
    std::fs::write(d.path().join("sub-01_task-rest_desc-confounds_timeseries.tsv"), "white_matter\tcsf\n1\t2\n2\t3\n")
        .unwrap();
    let sel = Selection { confounds: Some("wm_csf".parse().unwrap()), ..Selection::default() };
    let e = Dataset::load_with(d.path(), &sel).unwrap_err().to_string();
    assert!(e.contains("2 rows, but") && e.contains("has 80 TRs"), "{e}");
}
