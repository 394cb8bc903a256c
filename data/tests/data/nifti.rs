//! 4-D NIfTI runs with a labelled atlas against nilearn: `fixtures/nifti/generate.py` wrote
//! NIfTI-1 and NIfTI-2 images (gzip and not, both byte orders, sform and qform-only, float32,
//! float64, scaled int16, uint8 and int32) with nibabel, and `NiftiLabelsMasker(labels_img=atlas,
//! strategy="mean").fit_transform(bold)` for each; a run loaded with `--atlas-image` must hold
//! the same parcel means (in the run's units, the standardization undone).

use boldcast_data::{Dataset, Selection};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nifti").join(name)
}

fn npy(path: &Path) -> (usize, usize, Vec<f64>) {
    let bytes = std::fs::read(path).unwrap();
    let f = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape = f.shape().to_vec();
    (shape[0] as usize, shape[1] as usize, f.into_vec().unwrap())
}

/// A directory holding the case's BOLD image as a run, and the selection with its atlas.
fn run_dir(bold: &str, atlas: &str) -> (tempfile::TempDir, Selection) {
    let d = tempfile::tempdir().unwrap();
    let ext = if bold.ends_with(".gz") { "nii.gz" } else { "nii" };
    std::fs::copy(fixture(bold), d.path().join(format!("sub-01_task-rest_bold.{ext}"))).unwrap();
    (d, Selection { atlas_image: Some(fixture(atlas)), ..Selection::default() })
}

#[test]
fn parcel_means_equal_nilearns_labels_masker() {
    let e: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("expected.json")).unwrap()).unwrap();
    let cases = e["cases"].as_object().unwrap();
    assert_eq!(cases.len(), 3);
    for (case, c) in cases {
        let (d, sel) = run_dir(c["bold"].as_str().unwrap(), c["atlas"].as_str().unwrap());
        let ds = Dataset::load_with(d.path(), &sel).unwrap_or_else(|e| panic!("{case}: {e}"));
        let labels: Vec<String> =
            c["labels"].as_array().unwrap().iter().map(|v| format!("label-{}", v.as_f64().unwrap())).collect();
        assert_eq!(ds.parcel_names, labels, "{case}");
        let (n, p, want) = npy(&fixture(&format!("{case}.npy")));
        let run = &ds.runs[0];
        assert_eq!((run.n_tr, ds.parcels), (n, p), "{case}");
        let z = run.to_vec().unwrap();
        for t in 0..n {
            for q in 0..p {
                let got = run.stats[q].undo(z[t * p + q]);
                let w = want[t * p + q];
                // nilearn averages float32 images in float32: agreement to float32's precision.
                assert!((got - w).abs() <= 1e-6 * w.abs().max(1.0), "{case}, TR {t}, label {q}: {got} vs {w}");
            }
        }
    }
}

#[test]
fn names_come_from_a_label_table_and_bad_inputs_are_errors_in_words() {
    let (d, mut sel) = run_dir("f32_bold.nii.gz", "f32_atlas.nii.gz");
    sel.atlas_labels = Some(fixture("labels.tsv"));
    let ds = Dataset::load_with(d.path(), &sel).unwrap();
    assert_eq!(ds.parcel_names, ["Visual", "Somatomotor", "DorsalAttention", "Limbic"]);
    // Another grid: an error naming both files, and no resampling.
    let shifted = Selection { atlas_image: Some(fixture("shifted_atlas.nii.gz")), ..Selection::default() };
    let e = Dataset::load_with(d.path(), &shifted).unwrap_err().to_string();
    assert!(e.contains("shifted_atlas.nii.gz: on another grid than the BOLD run"), "{e}");
    assert!(e.contains("sub-01_task-rest_bold.nii.gz") && e.contains("nothing is resampled"), "{e}");
    // No atlas: the error says which flag to give.
    let e = Dataset::load(d.path()).unwrap_err().to_string();
    assert!(
        e.contains("sub-01_task-rest_bold.nii.gz: a 4-D NIfTI run is averaged into parcels")
            && e.contains("--atlas-image"),
        "{e}"
    );
    // A label the table lacks.
    let t = d.path().join("few.tsv");
    std::fs::write(&t, "index\tname\n1\tA\n2\tB\n").unwrap();
    let few = Selection { atlas_labels: Some(t), ..sel.clone() };
    let e = Dataset::load_with(d.path(), &few).unwrap_err().to_string();
    assert!(e.contains("few.tsv: no row for label 5 of the atlas"), "{e}");
}

/// Headers that claim more data than the file holds are refused before anything is
/// allocated; truncated and garbled files are errors naming the file.
#[test]
fn lying_headers_and_truncated_files_are_errors() {
    let raw = std::fs::read(fixture("i16_bold.nii")).unwrap();
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("sub-01_task-rest_bold.nii");
    let sel = Selection { atlas_image: Some(fixture("i16_atlas.nii")), ..Selection::default() };
    let load = |bytes: &[u8]| {
        std::fs::write(&run, bytes).unwrap();
        Dataset::load_with(d.path(), &sel).unwrap_err().to_string()
    };
    // dim[4] (time) = i64::MAX / 2: far past the file.
    let mut huge = raw.clone();
    huge[16 + 32..16 + 40].copy_from_slice(&(i64::MAX / 2).to_le_bytes());
    let e = load(&huge);
    assert!(
        e.contains("sub-01_task-rest_bold.nii: the header's shape") && e.contains("needs more bytes than the file"),
        "{e}"
    );
    // One TR short.
    let e = load(&raw[..raw.len() - 10]);
    assert!(e.contains("needs more bytes than the file holds"), "{e}");
    let e = load(&raw[..200]);
    assert!(e.contains("truncated"), "{e}");
    let mut bad = raw.clone();
    bad[12..14].copy_from_slice(&1792i16.to_le_bytes());
    let e = load(&bad);
    assert!(e.contains("datatype 1792 is not read"), "{e}");
    let mut bad = raw.clone();
    bad[16..24].copy_from_slice(&0i64.to_le_bytes());
    let e = load(&bad);
    assert!(e.contains("dim[0] is 0"), "{e}");
    let e = load(b"not a nifti file at all, just text");
    assert!(e.contains("not a NIfTI file") || e.contains("truncated"), "{e}");
    // A gzip stream that claims a huge image: bounded by the compressed size.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &huge).unwrap();
    std::fs::remove_file(&run).unwrap();
    std::fs::write(d.path().join("sub-01_task-rest_bold.nii.gz"), gz.finish().unwrap()).unwrap();
    let e = Dataset::load_with(d.path(), &sel).unwrap_err().to_string();
    assert!(e.contains("needs more bytes than the file can hold"), "{e}");
}

/// Beside parcel series (XCP-D writes both), NIfTI runs without `--atlas-image` are left out
/// with a note; with it, both formats are there and `--format` picks.
#[test]
fn nifti_beside_other_runs_is_left_out_without_an_atlas() {
    let (d, sel) = run_dir("f32_bold.nii.gz", "f32_atlas.nii.gz");
    std::fs::write(d.path().join("sub-01_task-rest_timeseries.tsv"), "a\tb\n1\t2\n3\t1\n2\t2\n").unwrap();
    let ds = Dataset::load(d.path()).unwrap();
    assert_eq!(ds.parcel_names, ["a", "b"]);
    assert!(ds
        .notes()
        .iter()
        .any(|n| n.contains("1 4-D NIfTI run(s) (*_bold.nii, *_bold.nii.gz) left out: give --atlas-image")));
    let e = Dataset::load_with(d.path(), &sel).unwrap_err().to_string();
    assert!(e.contains("comes in several formats") || e.contains("are the same run"), "{e}");
    let pick = Selection { format: Some("nii.gz".into()), ..sel };
    assert_eq!(Dataset::load_with(d.path(), &pick).unwrap().parcels, 4);
}
