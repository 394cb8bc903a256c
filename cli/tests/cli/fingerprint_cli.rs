//! `bc-cli fingerprint` end to end on the CPU and dfdx-cpu backends: a model trained on
//! synthetic subjects with planted identities (each its own VAR coupling), the report of its
//! correlation-pooled embeddings beside the functional-connectivity fingerprint (both must
//! find the subjects), the figure, chance on identical subjects, and the mean pooling.

use crate::common;

use boldcast::data::write::{write_run, RunFormat};
use boldcast::fixtures::{parcel_names, IdentitySpec, Layout};
use common::*;
use std::path::Path;

fn write_dataset(dir: &Path, spec: &IdentitySpec) {
    std::fs::create_dir_all(dir).unwrap();
    for r in spec.generate().unwrap() {
        let name = format!("sub-{}_run-{}_bold.npy", r.subject, r.run);
        write_run(&dir.join(name), &r, &parcel_names(r.parcels), RunFormat::Npy).unwrap();
    }
}

fn train(data: &Path, out: &Path, backend: &str) {
    quick_run(out, &["--max-steps", "20", "--backend", backend, "--data", s(data)]);
}

/// Runs `bc-cli fingerprint` of `run_dir` on `data` with `extra` flags.
fn fingerprint_run(run_dir: &Path, data: &Path, backend: &str, extra: &[&str]) -> std::process::Output {
    run(&[&["fingerprint", "--checkpoint", s(run_dir), "--data", s(data), "--backend", backend][..], extra].concat())
}

fn fingerprint(run_dir: &Path, data: &Path, backend: &str, extra: &[&str]) -> serde_json::Value {
    let o = fingerprint_run(run_dir, data, backend, &[&["--json"][..], extra].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

#[test]
fn planted_identities_are_found_and_identical_subjects_give_chance() {
    let d = tempfile::tempdir().unwrap();
    let layout = Layout { subjects: 10, runs: 2, trs: 300, parcels: 12, seed: 4 };
    let (planted, same) = (d.path().join("planted"), d.path().join("identical"));
    write_dataset(&planted, &IdentitySpec::planted(layout.clone()));
    write_dataset(&same, &IdentitySpec::identical(layout));
    for backend in ["cpu", "dfdx-cpu"] {
        let out = d.path().join(format!("run-{backend}"));
        train(&planted, &out, backend);
        let fig = d.path().join(format!("fp-{backend}.png"));
        let r = fingerprint(&out, &planted, backend, &["--figure", fig.to_str().unwrap()]);
        assert_eq!(r["halves"], false);
        let methods = r["methods"].as_array().unwrap();
        assert_eq!(methods.iter().map(|m| m["name"].as_str().unwrap()).collect::<Vec<_>>(), ["embedding", "fc"]);
        for m in methods {
            assert_eq!((m["n_queries"].as_u64(), m["n_subjects"].as_u64()), (Some(20), Some(10)), "{backend}");
            let top1 = &m["top1"];
            let (lo, v, hi) = (
                top1["clopper_pearson"]["lo"].as_f64().unwrap(),
                top1["value"].as_f64().unwrap(),
                top1["clopper_pearson"]["hi"].as_f64().unwrap(),
            );
            assert!(lo <= v && v <= hi, "{m}");
            assert!((top1["chance"].as_f64().unwrap() - 1.0 / 19.0).abs() < 1e-12);
        }
        // Both find the planted identities: the embeddings pooled by their parcel-by-parcel
        // correlation (the default), compared by Pearson correlation, and FC.
        let (e, fc) = (&methods[0], &methods[1]);
        assert_eq!((e["pooling"].as_str(), e["similarity"].as_str()), (Some("corr"), Some("pearson")), "{backend}");
        assert!(e["features"].as_str().unwrap().contains("correlation of the final-norm embeddings"), "{e}");
        assert_eq!(fc["pooling"], serde_json::Value::Null);
        for m in [e, fc] {
            let top1 = m["top1"]["value"].as_f64().unwrap();
            assert!(top1 >= 0.9, "{backend}: {} finds the planted identities (top-1 {top1})", m["name"]);
        }
        let t = &r["mcnemar"];
        let cells: u64 = ["both", "only_first", "only_second", "neither"].iter().map(|k| t[k].as_u64().unwrap()).sum();
        assert_eq!(cells, 20);
        assert!(fig.is_file() && fig.with_extension("svg").is_file());
        // The text table says the same.
        let o = fingerprint_run(&out, &planted, backend, &[]);
        assert!(o.status.success(), "{}", stderr(&o));
        let text = stdout(&o);
        assert!(text.contains("leave-one-run-out") && text.contains("McNemar (top-1, embedding vs fc)"), "{text}");
        assert!(text.contains("embedding (pooling corr): the parcel-by-parcel Pearson correlation"), "{text}");
        // Identical subjects: both at chance (within the 99 % interval of 1/19 over 20
        // queries).
        let r = fingerprint(&out, &same, backend, &["--allow-other-data"]);
        for m in r["methods"].as_array().unwrap() {
            let k = m["top1"]["correct"].as_u64().unwrap();
            assert!(k <= 4, "{backend}: identical subjects are not identified by {} ({k} of 20)", m["name"]);
        }
    }
    // The mean pooling is there to compare with, and the report says it is the one used.
    let r = fingerprint(&d.path().join("run-cpu"), &planted, "cpu", &["--pool", "mean"]);
    let e = &r["methods"][0];
    assert_eq!((e["pooling"].as_str(), e["similarity"].as_str()), (Some("mean"), Some("cosine")), "{e}");
    // Bad input: an unknown subject names the flag.
    let o = fingerprint_run(&d.path().join("run-cpu"), &planted, "cpu", &["--subjects", "99"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--subjects") && stderr(&o).contains("99"), "{}", stderr(&o));
}

#[test]
fn segments_of_runs_are_fingerprinted_and_bad_lengths_refused() {
    let d = tempfile::tempdir().unwrap();
    let layout = Layout { subjects: 6, runs: 2, trs: 300, parcels: 12, seed: 4 };
    let (planted, out) = (d.path().join("planted"), d.path().join("run"));
    write_dataset(&planted, &IdentitySpec::planted(layout));
    train(&planted, &out, "cpu");
    let r = fingerprint(&out, &planted, "cpu", &["--segment", "100"]);
    assert_eq!((r["segment_trs"].as_u64(), r["halves"].as_bool()), (Some(100), Some(false)));
    assert_eq!(r["samples"], "the first 100 TRs of each run");
    for m in r["methods"].as_array().unwrap() {
        assert_eq!(m["labels"][0], "sub-01_run-1 (first 100 TRs)");
        assert_eq!(m["n_queries"].as_u64(), Some(12));
        let s = &m["separation"];
        assert_eq!((s["same_pairs"].as_u64(), s["other_pairs"].as_u64()), (Some(6), Some(60)), "{s}");
        let (same, other, idiff) =
            (s["same_mean"].as_f64().unwrap(), s["other_mean"].as_f64().unwrap(), s["idiff"].as_f64().unwrap());
        assert!((idiff - 100.0 * (same - other)).abs() < 1e-9 && idiff > 0.0, "{s}");
        let margins: Vec<f64> =
            m["queries"].as_array().unwrap().iter().map(|q| q["margin"].as_f64().unwrap()).collect();
        let mean = margins.iter().sum::<f64>() / 12.0;
        assert!((s["margin_mean"].as_f64().unwrap() - mean).abs() < 1e-12, "{s}");
        let lo = s["idiff_bootstrap"]["lo"].as_f64().unwrap();
        assert!(lo <= idiff && idiff <= s["idiff_bootstrap"]["hi"].as_f64().unwrap(), "{s}");
    }
    let args = |n: &str| fingerprint_run(&out, &planted, "cpu", &["--segment", n]);
    let o = args("60");
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("first 60 TRs of each run") && text.contains("Idiff [95% bootstrap]"), "{text}");
    // The quick preset's d_in is 1: 3 tokens are 3 TRs. The runs have 300 TRs.
    let o = args("2");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--segment 2: the model needs at least 3 TRs (3 tokens of d_in = 1"), "{}", stderr(&o));
    let o = args("301");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--segment 301: longer than the shortest run, sub-01_run-1 (300 TRs)"),
        "{}",
        stderr(&o)
    );
    relatives_are_not_compared(&out, &planted);
}

/// `--group-column`: three families of two subjects, whole runs. Each run's gallery loses its
/// relative's 2 runs (11 - 2 = 9 runs, one of its own subject: chance 1/9), and I_diff's
/// other-subject pairs lose the 3 x 4 related ones (66 pairs - 6 same-subject - 12 = 48).
fn relatives_are_not_compared(out: &Path, data: &Path) {
    let table = "participant_id\tfamily_id\nsub-01\tF1\nsub-02\tF1\nsub-03\tF2\nsub-04\tF2\nsub-05\tF3\n";
    std::fs::write(data.join("participants.tsv"), table).unwrap();
    let o = fingerprint_run(out, data, "cpu", &["--group-column", "family_id"]);
    assert_eq!(o.status.code(), Some(2), "sub-06 has no row");
    assert!(stderr(&o).contains("no row for subject `sub-06`"), "{}", stderr(&o));
    std::fs::write(data.join("participants.tsv"), format!("{table}sub-06\tF3\n")).unwrap();
    let r = fingerprint(out, data, "cpu", &["--group-column", "family_id"]);
    assert_eq!((r["group_column"].as_str(), r["related_pairs"].as_u64()), (Some("family_id"), Some(12)));
    assert!(r["note"].as_str().unwrap().ends_with("not compared: 12 pairs"), "{}", r["note"]);
    for m in r["methods"].as_array().unwrap() {
        let s = &m["separation"];
        assert_eq!((s["same_pairs"].as_u64(), s["other_pairs"].as_u64()), (Some(6), Some(48)), "{s}");
        assert!((m["top1"]["chance"].as_f64().unwrap() - 1.0 / 9.0).abs() < 1e-12, "{}", m["top1"]);
        for q in m["queries"].as_array().unwrap() {
            let (own, best) = (q["sample"].as_u64().unwrap() / 4, q["best_match"].as_u64().unwrap() / 4);
            assert!(own != best || q["top1"].as_bool().unwrap(), "a relative's run matched: {q}");
        }
    }
    let o = fingerprint_run(out, data, "cpu", &["--group-column", "family"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no column `family`"), "{}", stderr(&o));
    let r = fingerprint(out, data, "cpu", &[]);
    assert_eq!((r["group_column"].as_str(), r["related_pairs"].as_u64()), (None, Some(0)));
}
