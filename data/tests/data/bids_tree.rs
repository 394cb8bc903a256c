//! BIDS derivatives trees: runs found under `sub-*/[ses-*/]func/`, the tables beside them left
//! out, the picks (`task`, `space`, `seg`/`atlas`, `format`), the TR from sidecars, and the
//! errors that list what a tree holds.

use boldcast_data::write::{write_run, RunFormat};
use boldcast_data::{Dataset, Selection};
use boldcast_fixtures::SynthRun;
use std::path::Path;

/// A run of `n` TRs and `p` parcels with values depending on `seed`.
fn run(subject: &str, seed: usize, n: usize, p: usize) -> SynthRun {
    let data = (0..n * p).map(|i| ((i * 7 + seed * 13) % 23) as f64 * 0.5 - 3.0 + (i % p) as f64).collect();
    SynthRun { subject: subject.into(), run: "1".into(), n_tr: n, parcels: p, data }
}

fn put(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Writes `r` as TSV to `path` (through the crate's writer).
fn put_run(path: &Path, r: &SynthRun) {
    let names: Vec<String> = (0..r.parcels).map(|q| format!("P{q}")).collect();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    write_run(path, r, &names, RunFormat::Tsv).unwrap();
}

/// Two subjects' runs in their `func` folders, without sidecars (so without a TR).
fn two_subjects(root: &Path) {
    for (sub, seed) in [("01", 1), ("02", 2)] {
        put_run(&root.join(format!("sub-{sub}/func/sub-{sub}_task-rest_run-1_bold.tsv")), &run(sub, seed, 30, 2));
    }
}

/// An XCP-D-shaped tree: sub-01 with a session, sub-02 without one (and without a run entity,
/// in the older `atlas-` spelling), two parcellations, and the tables XCP-D writes beside them.
fn xcpd_tree(root: &Path) {
    let f1 = root.join("sub-01/ses-1/func");
    let s1 = "sub-01_ses-1_task-rest_run-1_space-fsLR";
    put_run(&f1.join(format!("{s1}_seg-4S156Parcels_stat-mean_timeseries.tsv")), &run("01", 1, 40, 3));
    put_run(&f1.join(format!("{s1}_seg-Glasser_stat-mean_timeseries.tsv")), &run("01", 2, 40, 3));
    put(&f1.join(format!("{s1}_seg-4S156Parcels_stat-coverage_bold.tsv")), "P0\tP1\tP2\n1\t1\t0.9\n");
    put(&f1.join(format!("{s1}_seg-4S156Parcels_stat-pearsoncorrelation_relmat.tsv")), "x\n1\n");
    put(&f1.join("sub-01_ses-1_task-rest_run-1_motion.tsv"), "framewise_displacement\n0.1\n");
    put(&f1.join("sub-01_ses-1_task-rest_run-1_outliers.tsv"), "framewise_displacement\n0\n");
    put(&f1.join("sub-01_ses-1_task-rest_run-1_desc-preproc_design.tsv"), "a\n1\n");
    let f2 = root.join("sub-02/func");
    put_run(&f2.join("sub-02_task-rest_space-fsLR_atlas-4S156Parcels_timeseries.tsv"), &run("02", 3, 40, 3));
    put_run(&f2.join("sub-02_task-rest_space-fsLR_atlas-Glasser_timeseries.tsv"), &run("02", 4, 40, 3));
    // Not searched: anatomy, figures, and a file at a depth runs never are.
    put(&root.join("sub-02/anat/sub-02_desc-preproc_T1w.tsv"), "a\n1\n");
    put(&root.join("sub-02/func/extra/sub-02_run-9_bold.tsv"), "a\n1\n");
    put(&root.join("dataset_description.json"), "{\"Name\": \"xcp_d\"}");
    // The TR, inherited from the root (a task-level sidecar).
    put(&root.join("task-rest_bold.json"), "{\"RepetitionTime\": 0.8}");
}

fn pick_seg(seg: &str) -> Selection {
    Selection { seg: Some(seg.into()), ..Selection::default() }
}

#[test]
fn an_xcpd_tree_loads_the_picked_parcellation_and_leaves_the_tables_out() {
    let d = tempfile::tempdir().unwrap();
    xcpd_tree(d.path());
    let e = Dataset::load(d.path()).unwrap_err().to_string();
    assert!(
        e.contains("holds runs of several parcellations (seg- or atlas-): 4S156Parcels (2 runs), Glasser (2 runs); pick one with --seg"),
        "{e}"
    );
    let ds = Dataset::load_with(d.path(), &pick_seg("4S156Parcels")).unwrap();
    let ids: Vec<String> = ds.runs.iter().map(|r| r.id.to_string()).collect();
    assert_eq!(ids, ["sub-01_ses-1_task-rest_run-1", "sub-02_task-rest_run-1"]);
    assert_eq!(ds.parcel_names, ["P0", "P1", "P2"]);
    // The values are those written (standardized), run by run.
    let want = Dataset::from_synth(&[run("01", 1, 40, 3), run("02", 3, 40, 3)], None).unwrap();
    assert_eq!(ds.runs[0].to_vec().unwrap(), want.runs[0].to_vec().unwrap());
    assert_eq!(ds.runs[1].to_vec().unwrap(), want.runs[1].to_vec().unwrap());
    // Coverage, connectivity, motion, outliers and design (both parcellations' tables).
    assert_eq!(ds.tables.len(), 5, "{:?}", ds.tables);
    let notes = ds.notes();
    assert!(
        notes.iter().any(|n| n == "note: 5 table(s) beside the series are not runs and were left out (coverage, design, motion, outliers, pearsoncorrelation)"),
        "{notes:?}"
    );
    assert_eq!(ds.tr, Some(0.8));
    let tr = ds.runs[0].tr.as_ref().unwrap();
    assert_eq!(tr.seconds, 0.8);
    assert!(tr.source.ends_with("task-rest_bold.json"), "{}", tr.source);
    let other = Dataset::load_with(d.path(), &pick_seg("Glasser")).unwrap();
    assert_ne!(other.runs[0].to_vec().unwrap(), ds.runs[0].to_vec().unwrap());
}

#[test]
fn picks_that_match_nothing_and_several_tasks_are_errors_listing_what_is_there() {
    let d = tempfile::tempdir().unwrap();
    xcpd_tree(d.path());
    let e = Dataset::load_with(d.path(), &pick_seg("Schaefer400")).unwrap_err().to_string();
    assert!(
        e.contains("--seg Schaefer400 matches no run under") && e.contains("4S156Parcels (2 runs), Glasser (2 runs)"),
        "{e}"
    );
    put_run(
        &d.path().join("sub-02/func/sub-02_task-motor_space-fsLR_atlas-4S156Parcels_timeseries.tsv"),
        &run("02", 5, 40, 3),
    );
    let e = Dataset::load_with(d.path(), &pick_seg("4S156Parcels")).unwrap_err().to_string();
    assert!(e.contains("several tasks: motor (1 run), rest (4 runs); pick one with --task"), "{e}");
    let sel = Selection { task: Some("motor".into()), ..pick_seg("4S156Parcels") };
    let ds = Dataset::load_with(d.path(), &sel).unwrap();
    assert_eq!(ds.runs.len(), 1);
    assert_eq!(ds.runs[0].id.to_string(), "sub-02_task-motor_run-1");
}

#[test]
fn a_run_in_two_formats_takes_the_picked_one() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("sub-01/func");
    put_run(&f.join("sub-01_task-rest_run-1_bold.tsv"), &run("01", 1, 30, 2));
    std::fs::write(f.join("sub-01_task-rest_run-1_bold.csv"), "P0,P1\n1,2\n3,5\n").unwrap();
    let e = Dataset::load(d.path()).unwrap_err().to_string();
    assert!(e.contains("run sub-01_task-rest_run-1 comes in several formats (csv, tsv)"), "{e}");
    let ds = Dataset::load_with(d.path(), &Selection { format: Some("tsv".into()), ..Selection::default() }).unwrap();
    assert_eq!(ds.runs[0].n_tr, 30);
    let e = Dataset::load_with(d.path(), &Selection { format: Some("npy".into()), ..Selection::default() })
        .unwrap_err()
        .to_string();
    assert!(e.contains("--format npy matches no run under") && e.contains("csv (1 run), tsv (1 run)"), "{e}");
}

/// An unknown `--format` is an error naming the formats read; a known one that matches no
/// file is an error listing what the tree holds, never a silent load of the other format.
#[test]
fn a_format_must_be_known_and_match_a_file() {
    let d = tempfile::tempdir().unwrap();
    put_run(&d.path().join("sub-01_run-1_bold.tsv"), &run("01", 1, 30, 2));
    put_run(&d.path().join("sub-02_run-1_bold.tsv"), &run("02", 2, 30, 2));
    let format = |f: &str| Selection { format: Some(f.into()), ..Selection::default() };
    let e = Dataset::load_with(d.path(), &format("xlsx")).unwrap_err().to_string();
    assert!(
        e.contains("--format xlsx is not a format read here: ptseries.nii, dtseries.nii, nii.gz, nii, npy, tsv, csv"),
        "{e}"
    );
    let e = Dataset::load_with(d.path(), &format("npy")).unwrap_err().to_string();
    assert!(e.contains("--format npy matches no run under") && e.ends_with("it holds tsv (2 runs)"), "{e}");
    assert_eq!(Dataset::load_with(d.path(), &format("tsv")).unwrap().runs.len(), 2);
}

/// Compressed run files are listed with what to do about them, and the error of a tree with
/// nothing else names every format read.
#[test]
fn compressed_runs_are_listed_and_every_format_is_named() {
    let d = tempfile::tempdir().unwrap();
    put_run(&d.path().join("sub-01_run-1_bold.tsv"), &run("01", 1, 30, 2));
    put(&d.path().join("sub-02_run-1_bold.ptseries.nii.gz"), "gz");
    put(&d.path().join("sub-03_run-1_bold.tsv.gz"), "gz");
    let ds = Dataset::load(d.path()).unwrap();
    assert_eq!(ds.runs.len(), 1);
    let notes = ds.notes().join("\n");
    let gz = |name: &str| format!("{} (gzip-compressed: gunzip it to read it)", d.path().join(name).display());
    assert!(notes.contains(&gz("sub-02_run-1_bold.ptseries.nii.gz")), "{notes}");
    assert!(notes.contains(&gz("sub-03_run-1_bold.tsv.gz")), "{notes}");
    std::fs::remove_file(d.path().join("sub-01_run-1_bold.tsv")).unwrap();
    let e = Dataset::load(d.path()).unwrap_err().to_string();
    assert!(
        e.contains("].npy|.tsv|.csv|.ptseries.nii|.dtseries.nii, or _bold.nii|_bold.nii.gz (cannot be read: "),
        "{e}"
    );
    assert!(e.contains("sub-02_run-1_bold.ptseries.nii.gz, gzip-compressed: gunzip it to read it"), "{e}");
}

/// A sidecar that cannot be read is listed; a run without a TR among runs with one is the
/// mixed-TR error naming it, unless `--tr` gives it; a sidecar that is not a JSON object names
/// itself; a byte-order mark is read past.
#[cfg(unix)]
#[test]
fn runs_without_a_tr_are_named() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    two_subjects(root);
    put(&root.join("sub-01/func/sub-01_task-rest_run-1_bold.json"), "\u{feff}{\"RepetitionTime\": 2.0}");
    let e = Dataset::load(root).unwrap_err().to_string();
    assert!(e.contains("runs with and without a TR"), "{e}");
    assert!(e.contains("sub-02_task-rest_run-1_bold.tsv has none (no CIFTI series step, sidecar or --tr)"), "{e}");
    assert!(e.contains("sub-01_task-rest_run-1_bold.tsv has 2 s"), "{e}");
    let ds = Dataset::load_with(root, &Selection { tr: Some(2.0), ..Selection::default() }).unwrap();
    assert_eq!(ds.tr, Some(2.0));
    let ds = Dataset::load_with(root, &Selection { allow_mixed_tr: true, ..Selection::default() }).unwrap();
    assert_eq!(ds.tr, None);
    let notes = ds.notes().join("\n");
    assert!(notes.contains("note: 1 run(s) have no TR: "), "{notes}");
    // A sidecar that is a directory: listed, and the run has no TR.
    std::fs::create_dir_all(root.join("sub-02/func/sub-02_task-rest_run-1_bold.json")).unwrap();
    let e = Dataset::load(root).unwrap_err().to_string();
    assert!(e.contains("sub-02_task-rest_run-1_bold.tsv has none"), "{e}");
    let ds = Dataset::load_with(root, &Selection { tr: Some(2.0), ..Selection::default() }).unwrap();
    let notes = ds.notes().join("\n");
    assert!(notes.contains("sub-02_task-rest_run-1_bold.json (a directory)"), "{notes}");
    std::fs::remove_dir(root.join("sub-02/func/sub-02_task-rest_run-1_bold.json")).unwrap();
    // A link to a device, and a JSON array.
    std::os::unix::fs::symlink("/dev/zero", root.join("sub-02/func/sub-02_task-rest_run-1_bold.json")).unwrap();
    let ds = Dataset::load_with(root, &Selection { tr: Some(2.0), ..Selection::default() }).unwrap();
    let notes = ds.notes().join("\n");
    assert!(notes.contains("sub-02_task-rest_run-1_bold.json (not a regular file)"), "{notes}");
    std::fs::remove_file(root.join("sub-02/func/sub-02_task-rest_run-1_bold.json")).unwrap();
    put(&root.join("sub-02/func/sub-02_task-rest_run-1_bold.json"), "[2.0]");
    let e = Dataset::load(root).unwrap_err().to_string();
    assert!(e.contains("sub-02_task-rest_run-1_bold.json: not a JSON object"), "{e}");
}

/// A file naming another session than its `ses-*` folder is an error; `run-01` and `run-1`
/// are one run; a run label that is not a number is not a run name (ignored, and listed).
#[test]
fn sessions_and_run_labels_follow_bids() {
    let d = tempfile::tempdir().unwrap();
    put_run(&d.path().join("sub-01/ses-1/func/sub-01_ses-2_task-rest_run-1_bold.tsv"), &run("01", 1, 30, 2));
    let e = Dataset::load(d.path()).unwrap_err().to_string();
    assert!(e.contains("names session 2, but lies in the directory of ses-1"), "{e}");
    let d = tempfile::tempdir().unwrap();
    put_run(&d.path().join("sub-01_run-01_bold.tsv"), &run("01", 1, 30, 2));
    put_run(&d.path().join("sub-01_run-1_bold.tsv"), &run("01", 2, 30, 2));
    let e = Dataset::load(d.path()).unwrap_err().to_string();
    assert!(e.contains("are the same run (sub-01_run-1)"), "{e}");
    let d = tempfile::tempdir().unwrap();
    put_run(&d.path().join("sub-01_run-1_bold.tsv"), &run("01", 1, 30, 2));
    put_run(&d.path().join("sub-02_run-x_bold.tsv"), &run("02", 2, 30, 2));
    let ds = Dataset::load(d.path()).unwrap();
    assert_eq!(ds.runs.len(), 1);
    assert_eq!(ds.ignored, [d.path().join("sub-02_run-x_bold.tsv")]);
}

#[test]
fn trs_come_from_the_nearest_sidecar_and_must_agree() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    two_subjects(root);
    // Without sidecars: no TR, unless given.
    let ds = Dataset::load(root).unwrap();
    assert_eq!((ds.tr, ds.runs[0].tr.as_ref()), (None, None));
    let ds = Dataset::load_with(root, &Selection { tr: Some(2.0), ..Selection::default() }).unwrap();
    assert_eq!(ds.tr, Some(2.0));
    assert_eq!(ds.runs[1].tr.as_ref().unwrap().source, "data.tr");
    // A root sidecar, and a more specific one for sub-02 that disagrees.
    put(&root.join("task-rest_bold.json"), "{\"RepetitionTime\": 0.72}");
    put(&root.join("sub-02/func/sub-02_task-rest_run-1_bold.json"), "{\"RepetitionTime\": 2.0}");
    let e = Dataset::load(root).unwrap_err().to_string();
    assert!(e.contains("runs with different TRs") && e.contains("has 0.72 s") && e.contains("has 2 s"), "{e}");
    assert!(e.contains("--allow-mixed-tr"), "{e}");
    let ds = Dataset::load_with(root, &Selection { allow_mixed_tr: true, ..Selection::default() }).unwrap();
    assert_eq!(ds.tr, None);
    assert_eq!(ds.runs.iter().map(|r| r.tr.as_ref().unwrap().seconds).collect::<Vec<_>>(), [0.72, 2.0]);
    let e = Dataset::load_with(root, &Selection { tr: Some(0.72), allow_mixed_tr: true, ..Selection::default() })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sub-02_task-rest_run-1_bold.tsv: its TR is 2 s") && e.contains("data.tr (--tr) is 0.72 s"),
        "{e}"
    );
    // A malformed sidecar names itself.
    put(&root.join("sub-02/func/sub-02_task-rest_run-1_bold.json"), "{\"RepetitionTime\": -1}");
    let e = Dataset::load(root).unwrap_err().to_string();
    assert!(e.contains("sub-02_task-rest_run-1_bold.json: RepetitionTime -1 is not a positive number"), "{e}");
    put(&root.join("sub-02/func/sub-02_task-rest_run-1_bold.json"), "{not json");
    let e = Dataset::load(root).unwrap_err().to_string();
    assert!(e.contains("sub-02_task-rest_run-1_bold.json: not JSON"), "{e}");
    let e = Dataset::load_with(root, &Selection { tr: Some(-2.0), ..Selection::default() }).unwrap_err().to_string();
    assert!(e.contains("data.tr") && e.contains("positive"), "{e}");
}

#[test]
fn a_file_in_another_subjects_folder_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    put_run(&d.path().join("sub-01/func/sub-02_task-rest_run-1_bold.tsv"), &run("02", 1, 30, 2));
    let e = Dataset::load(d.path()).unwrap_err().to_string();
    assert!(e.contains("names subject 02, but lies in the directory of sub-01"), "{e}");
}

/// TRs no BOLD acquisition has are refused with the value in exponent form (never hundreds of
/// digits, never an infinite horizon); a TR outside the usual range is read with a warning.
#[test]
fn trs_outside_what_bold_acquires_are_refused_or_warned() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    put_run(&root.join("sub-01_task-rest_run-1_bold.tsv"), &run("01", 1, 30, 2));
    let tr = |t: f64| Selection { tr: Some(t), ..Selection::default() };
    let e = Dataset::load_with(root, &tr(1e308)).unwrap_err().to_string();
    assert!(e.contains("data.tr") && e.contains("1e308") && e.contains("must lie within 0.001-3600 s"), "{e}");
    assert!(e.len() < 200, "{e}");
    let e = Dataset::load_with(root, &tr(1e-300)).unwrap_err().to_string();
    assert!(e.contains("1e-300") && e.contains("must lie within"), "{e}");
    let ds = Dataset::load_with(root, &tr(800.0)).unwrap();
    assert_eq!(ds.tr, Some(800.0));
    assert_eq!(
        ds.warnings,
        ["a TR of 800 s (data.tr) is unusual for BOLD (0.1-10 s): check its unit (seconds)".to_string()]
    );
    assert_eq!(boldcast_data::horizon_seconds_text(2, 1, 3600.0), "7200 s");
    put(&root.join("task-rest_bold.json"), "{\"RepetitionTime\": 1e308}");
    let e = Dataset::load(root).unwrap_err().to_string();
    assert!(e.contains("task-rest_bold.json: RepetitionTime 1e308: must lie within"), "{e}");
    put(&root.join("task-rest_bold.json"), "{\"RepetitionTime\": 0.8}");
    assert!(Dataset::load(root).unwrap().warnings.is_empty());
}
