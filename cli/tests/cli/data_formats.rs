//! The same numbers in other shapes give the same results: a flat folder of `.npy` runs and an
//! XCP-D-shaped BIDS derivatives tree of TSVs (two parcellations, tables beside the series, the
//! TR in sidecars) give the same floor and the same training loss series, and a run records
//! what it trained on.

use crate::common;

use boldcast::data::write::{write_run, RunFormat};
use boldcast::fixtures::{parcel_names, Ar1Spec, Layout, SynthRun};
use common::*;
use std::path::Path;

fn runs(seed: u64) -> Vec<SynthRun> {
    Ar1Spec::new(Layout { subjects: 4, runs: 1, trs: 200, parcels: 4, seed }, 0.9).generate().unwrap()
}

fn flat(dir: &Path, runs: &[SynthRun]) {
    std::fs::create_dir_all(dir).unwrap();
    for r in runs {
        let name = format!("sub-{}_run-{}_bold.npy", r.subject, r.run);
        write_run(&dir.join(name), r, &parcel_names(r.parcels), RunFormat::Npy).unwrap();
    }
}

/// The XCP-D layout: `sub-X/ses-1/func/..._seg-<S>_stat-mean_timeseries.tsv` for `runs` (seg
/// `4S156Parcels`) and `other` (seg `Glasser`), a coverage table beside each, a sidecar per run.
fn xcpd(root: &Path, runs: &[SynthRun], other: &[SynthRun]) {
    for (seg, set) in [("4S156Parcels", runs), ("Glasser", other)] {
        for r in set {
            let func = root.join(format!("sub-{}/ses-1/func", r.subject));
            std::fs::create_dir_all(&func).unwrap();
            let stem = format!("sub-{}_ses-1_task-rest_space-fsLR_seg-{seg}", r.subject);
            let tsv = func.join(format!("{stem}_stat-mean_timeseries.tsv"));
            write_run(&tsv, r, &parcel_names(r.parcels), RunFormat::Tsv).unwrap();
            std::fs::write(func.join(format!("{stem}_stat-coverage_bold.tsv")), "a\n1\n").unwrap();
            std::fs::write(func.join(format!("{stem}_stat-mean_timeseries.json")), "{\"RepetitionTime\": 0.72}")
                .unwrap();
        }
    }
    std::fs::write(root.join("dataset_description.json"), "{\"Name\": \"xcp_d\"}").unwrap();
}

fn json_of(args: &[&str]) -> serde_json::Value {
    let o = run(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

fn losses(out: &Path) -> Vec<(u64, u64)> {
    log_lines(&out.join("loss_log.jsonl"))
        .iter()
        .filter(|l| l.get("loss").is_some() && l.get("event").is_none())
        .map(|l| (l["step"].as_u64().unwrap(), l["loss"].as_f64().unwrap().to_bits()))
        .collect()
}

#[test]
fn an_xcpd_tree_gives_the_floor_and_loss_series_of_the_same_numbers_as_npy() {
    let d = tempfile::tempdir().unwrap();
    let (a, tree) = (d.path().join("flat"), d.path().join("xcp_d"));
    flat(&a, &runs(5));
    xcpd(&tree, &runs(5), &runs(6));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let fa = json_of(&["floor", "--data", &s(&a), "--json"]);
    // Two parcellations: the error lists them and says how to pick.
    let o = run(&["floor", "--data", &s(&tree)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("4S156Parcels (4 runs), Glasser (4 runs); pick one with --seg"), "{}", stderr(&o));
    let o = run(&["floor", "--data", &s(&tree), "--atlas", "4S156Parcels"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("horizon 5 (3.6 s):"), "{}", stdout(&o));
    assert!(stderr(&o).contains("8 table(s) beside the series are not runs"), "{}", stderr(&o));
    let fb = json_of(&["floor", "--data", &s(&tree), "--seg", "4S156Parcels", "--json"]);
    assert_eq!(fa["per_horizon"], fb["per_horizon"]);
    assert_eq!(fa["per_parcel"], fb["per_parcel"]);
    assert_eq!((fa["tr_seconds"].clone(), fb["tr_seconds"].as_f64()), (serde_json::Value::Null, Some(0.72)));
    assert_eq!(fb["horizon_seconds"], serde_json::json!([[0.72, 0.72], [3.6, 3.6]]));

    let (oa, ob) = (d.path().join("run-a"), d.path().join("run-b"));
    let train = |data: &Path, out: &Path, extra: &[&str]| {
        let mut args = vec!["train", "--preset", "quick", "--max-steps", "20", "--data", data.to_str().unwrap()];
        args.extend_from_slice(&["--out", out.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let o = run(&args);
        assert!(o.status.code().is_some_and(|c| c < 2), "{}", stderr(&o));
    };
    train(&a, &oa, &[]);
    train(&tree, &ob, &["--seg", "4S156Parcels"]);
    let (la, lb) = (losses(&oa), losses(&ob));
    assert_eq!(la.len(), 20);
    // The steps' times and the fraction spent waiting for data (the next batch is made while a
    // step runs), in a file of their own.
    let timing = json(&ob.join("timing.json"));
    assert_eq!(timing["steps"], 20);
    let (wait, step) = (timing["data_wait_s"].as_f64().unwrap(), timing["step_s"].as_f64().unwrap());
    assert!(step > 0.0 && (0.0..=step).contains(&wait), "{timing}");
    assert_eq!(timing["data_wait_fraction"].as_f64(), Some(wait / step));
    let median = timing["median_step_s"].as_f64().unwrap();
    assert!(median > 0.0 && median <= step, "{timing}");
    assert_eq!(la, lb, "the same numbers train the same");
    // Through the conversion cache: the text runs are converted once into .npy files, read from
    // disk, and train the same; a second run reuses them.
    let cache = d.path().join("cache");
    let with_cache = |out: &Path| {
        let args = ["train", "--preset", "quick", "--max-steps", "20", "--data", &s(&tree), "--seg", "4S156Parcels"];
        let o = run(&[&args[..], &["--cache", &s(&cache), "--out", &s(out)]].concat());
        assert!(o.status.code().is_some_and(|c| c < 2), "{}", stderr(&o));
        stderr(&o)
    };
    let (oc, oc2) = (d.path().join("run-c"), d.path().join("run-c2"));
    let e = with_cache(&oc);
    assert!(e.contains(&format!("cache {}: 4 run(s) converted to .npy, 0 reused", s(&cache))), "{e}");
    let e = with_cache(&oc2);
    assert!(e.contains(&format!("cache {}: 0 run(s) converted to .npy, 4 reused", s(&cache))), "{e}");
    assert_eq!(losses(&oc), la, "the cache changes no number");
    assert_eq!(losses(&oc2), la);
    let resolved = std::fs::read_to_string(oc.join("config.resolved.toml")).unwrap();
    assert!(resolved.contains(&format!("cache = \"{}\"", s(&cache))), "{resolved}");

    // What the run trained on, in summary.json and in every checkpoint's weights.
    let summary = json(&ob.join("summary.json"));
    let p = &summary["provenance"];
    assert_eq!(p["root"].as_str(), Some(s(&tree).as_str()));
    assert_eq!(p["tr_seconds"].as_f64(), Some(0.72));
    assert_eq!(p["parcels"], serde_json::json!(parcel_names(4)));
    assert_eq!(p["heldout_subjects"], serde_json::json!(["04"]));
    let recs = p["runs"].as_array().unwrap();
    assert_eq!(recs.len(), 4);
    let first = &recs[0];
    assert_eq!(first["id"], "sub-01_ses-1_task-rest_run-1");
    assert_eq!(first["split"], "train");
    let path = first["path"].as_str().unwrap();
    assert!(path.ends_with("sub-01_ses-1_task-rest_space-fsLR_seg-4S156Parcels_stat-mean_timeseries.tsv"), "{path}");
    assert_eq!(first["file"]["size"].as_u64(), Some(std::fs::metadata(path).unwrap().len()));
    assert_eq!(first["stats_hash"].as_str().map(str::len), Some(16));
    assert_eq!(recs[3]["split"], "heldout");
    assert_eq!(summary["horizon_seconds"], serde_json::json!([[0.72, 0.72], [3.6, 3.6]]));
    let meta = boldcast::storage::tensorfile::SafetensorsFile::open(ob.join("best.safetensors")).unwrap().metadata();
    let stored: serde_json::Value = serde_json::from_str(&meta.unwrap()["provenance"]).unwrap();
    assert_eq!(&stored, p);
}

/// The committed CIFTI datasets (`fixtures/cifti_datasets/make.py`, nibabel) and the same
/// numbers as `.npy`.
fn cifti_dir(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cifti_datasets").join(name)
}

fn floor_json(data: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["floor", "--data", data.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    json_of(&args)
}

#[test]
fn cifti_runs_give_the_floor_loss_series_and_eval_of_the_same_numbers_as_npy() {
    let d = tempfile::tempdir().unwrap();
    let labels = cifti_dir("dtseries/atlas.dlabel.nii");
    let labels = labels.to_str().unwrap();
    for (cifti, npy, extra) in
        [("ptseries", "ptseries-npy", vec![]), ("dtseries", "dtseries-npy", vec!["--parcellation", labels])]
    {
        let (c, n) = (cifti_dir(cifti), cifti_dir(npy));
        let (fc, fn_) = (floor_json(&c, &extra), floor_json(&n, &[]));
        assert_eq!(fc["per_horizon"], fn_["per_horizon"], "{cifti}");
        assert_eq!(
            (fc["tr_seconds"].as_f64(), fn_["tr_seconds"].as_f64()),
            (Some(0.8), None),
            "{cifti}: the series step"
        );
        let names: Vec<&str> =
            fc["per_parcel"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
        let want: &[&str] =
            if cifti == "ptseries" { &["V1", "M1", "DMN", "SAL"] } else { &["Vis", "Mot", "DMN", "Sal"] };
        assert_eq!(names, want, "parcel names from the CIFTI file");
        let (oc, on) = (d.path().join(format!("{cifti}-run")), d.path().join(format!("{npy}-run")));
        for (data, out, extra) in [(&c, &oc, &extra[..]), (&n, &on, &[][..])] {
            let mut args = vec!["train", "--preset", "quick", "--max-steps", "20", "--data", data.to_str().unwrap()];
            args.extend_from_slice(&["--out", out.to_str().unwrap()]);
            args.extend_from_slice(extra);
            let o = run(&args);
            assert!(o.status.code().is_some_and(|c| c < 2), "{cifti}: {}", stderr(&o));
        }
        assert_eq!(losses(&oc), losses(&on), "{cifti}: the same numbers train the same");
        let eval = |out: &Path| {
            let mut rows = json_of(&["eval", "--checkpoint", out.to_str().unwrap(), "--json"])["rows"].clone();
            rows.as_array_mut().unwrap().retain(|r| r["name"] != "floor_exact");
            rows
        };
        assert_eq!(eval(&oc), eval(&on), "{cifti}: eval");
        // The CIFTI series step gives the horizons in seconds (d_in 1: one lag each).
        let ev = json_of(&["eval", "--checkpoint", oc.to_str().unwrap(), "--json"]);
        assert_eq!(
            (ev["tr_seconds"].as_f64(), ev["horizon_seconds"].clone()),
            (Some(0.8), serde_json::json!([[0.8, 0.8], [4.0, 4.0]]))
        );
        let text = stdout(&run(&["eval", "--checkpoint", oc.to_str().unwrap()]));
        assert!(text.contains("horizons in seconds (TR 0.8 s): h1 0.8 s, h5 4 s"), "{text}");
        if cifti == "dtseries" {
            forecasts_on_cifti_with_picks(d.path(), &on, &n, &c, labels);
        }
    }
    // A dense series needs its parcellation.
    let o = run(&["floor", "--data", cifti_dir("dtseries").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("give the parcellation with --parcellation FILE.dlabel.nii"), "{}", stderr(&o));
}

/// `forecast` with the loader's flags: weights trained on the `.npy` twin forecast the dense
/// series given `--parcellation` (and `--allow-other-data`: the labels' names are not the
/// twin's), the same numbers as on the twin; without the flag, the error says to give it.
fn forecasts_on_cifti_with_picks(d: &Path, run_dir: &Path, npy: &Path, dense: &Path, labels: &str) {
    let forecast = |data: &Path, out: &Path, extra: &[&str]| {
        let (r, s, o) = (run_dir.to_str().unwrap(), data.to_str().unwrap(), out.to_str().unwrap());
        run(&[&["forecast", "--checkpoint", r, "--data", s, "--out", o][..], extra].concat())
    };
    let (a, b) = (d.join("fc-npy"), d.join("fc-dense"));
    assert!(forecast(npy, &a, &[]).status.success());
    let o = forecast(dense, &b, &["--allow-other-data"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--parcellation FILE.dlabel.nii"), "{}", stderr(&o));
    let o = forecast(dense, &b, &["--allow-other-data", "--parcellation", labels]);
    assert!(o.status.success(), "{}", stderr(&o));
    let read = |dir: &Path, id: &str| std::fs::read(dir.join(format!("{id}_forecast_std.npy"))).unwrap();
    for s in ["01", "02", "03", "04"] {
        let (x, y) = (read(&a, &format!("sub-{s}_run-1")), read(&b, &format!("sub-{s}_task-rest_run-1")));
        assert_eq!(x, y, "sub-{s}: the same numbers forecast the same");
    }
}

/// XCP-D writes `n/a` for a parcel under its coverage threshold in a run: without a policy
/// the load stops naming the cell and the fix; with `--missing drop-parcel` the parcel leaves
/// every run, training runs on the others and the run's provenance names what was dropped.
#[test]
fn an_xcpd_tree_with_missing_cells_trains_with_drop_parcel() {
    let d = tempfile::tempdir().unwrap();
    let tree = d.path().join("xcp_d");
    let set = runs(5);
    xcpd(&tree, &set, &runs(6));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let sub = &set[1].subject;
    let tsv = tree.join(format!(
        "sub-{sub}/ses-1/func/sub-{sub}_ses-1_task-rest_space-fsLR_seg-4S156Parcels_stat-mean_timeseries.tsv"
    ));
    let text = std::fs::read_to_string(&tsv).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut cells: Vec<String> = lines[3].split('\t').map(str::to_string).collect();
    cells[2] = "n/a".into();
    lines[3] = cells.join("\t");
    std::fs::write(&tsv, lines.join("\n") + "\n").unwrap();
    let base = ["train", "--preset", "quick", "--max-steps", "10", "--data", &s(&tree), "--seg", "4S156Parcels"];
    let out = d.path().join("run");
    let o = run(&[&base[..], &["--out", &s(&out)]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains(&format!("{}, line 4, column 3 (parcel-002): missing value `n/a`", tsv.display())), "{e}");
    assert!(e.contains("pass --missing drop-parcel"), "{e}");
    let o = run(&[&base[..], &["--out", &s(&out), "--missing", "drop-parcel"]].concat());
    assert!(o.status.code().is_some_and(|c| c < 2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning: dropped 1 of 4 parcel(s) with missing values from every run (--missing drop-parcel): `parcel-002` (column 3; 1 run(s)"),
        "{}",
        stderr(&o)
    );
    assert_eq!(losses(&out).len(), 10);
    let summary = json(&out.join("summary.json"));
    let prov = &summary["provenance"];
    assert_eq!(prov["parcels"], serde_json::json!(["parcel-000", "parcel-001", "parcel-003"]));
    assert_eq!(prov["dropped_parcels"][0]["name"], "parcel-002");
    assert_eq!(prov["dropped_parcels"][0]["location"], "line 4");
    let resolved = std::fs::read_to_string(out.join("config.resolved.toml")).unwrap();
    assert!(resolved.contains("missing = \"drop-parcel\""), "{resolved}");
}

/// fMRIPrep-shaped runs: a 4-D NIfTI per subject with its confounds table beside it; without
/// `--atlas-image` the error names the flag; with it (and `--confounds`), `floor` reads the
/// labels' means with the motion regressed out.
#[test]
fn nifti_runs_with_an_atlas_and_confounds_load_through_the_flags() {
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/tests/fixtures/nifti");
    let d = tempfile::tempdir().unwrap();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let motion: String =
        (0..12).map(|t| format!("{}\t{}\n", (t * 7 % 5) as f64 * 0.01, (t * 3 % 4) as f64 * 0.02)).collect();
    for sub in ["01", "02"] {
        let func = d.path().join(format!("sub-{sub}/func"));
        std::fs::create_dir_all(&func).unwrap();
        std::fs::copy(fx.join("f32_bold.nii.gz"), func.join(format!("sub-{sub}_task-rest_desc-preproc_bold.nii.gz")))
            .unwrap();
        std::fs::write(
            func.join(format!("sub-{sub}_task-rest_desc-confounds_timeseries.tsv")),
            format!("trans_x\trot_z\n{motion}"),
        )
        .unwrap();
    }
    let o = run(&["floor", "--data", &s(d.path()), "--json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("a 4-D NIfTI run is averaged into parcels") && stderr(&o).contains("--atlas-image"),
        "{}",
        stderr(&o)
    );
    let atlas = ["--atlas-image", &s(&fx.join("f32_atlas.nii.gz")), "--atlas-labels", &s(&fx.join("labels.tsv"))];
    let root = s(d.path());
    let args = [&["floor", "--data", &root, "--horizons", "1", "--json"][..], &atlas[..]].concat();
    let plain = json_of(&args);
    let cleaned = json_of(&[&args[..], &["--confounds", "columns:trans_x,rot_z"]].concat());
    assert_eq!(plain["per_parcel"].as_array().unwrap().len(), 4);
    assert_ne!(plain["per_parcel"], cleaned["per_parcel"], "the confounds changed the runs");
    let o = run(&[&args[..], &["--confounds", "motion6"]].concat());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no column trans_y, trans_z, rot_x, rot_y for confounds `motion6`"), "{}", stderr(&o));
    let o = run(&[&args[..], &["--confounds", "motion12"]].concat());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("`motion12` is not a confound strategy"), "{}", stderr(&o));
}
