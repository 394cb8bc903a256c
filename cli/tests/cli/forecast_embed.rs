//! `bc-cli forecast` and `bc-cli embed` end to end on the CPU and dfdx-cpu backends: a tiny
//! run with d_in 2 is trained, its forecasts and embeddings read back from the `.npy` files
//! and checked against the model's own `forward` and `embed` on windows made here (each
//! token with the context the stride rule gave it), the units against `ParcelStats::undo`, the MSEs of `forecast.json` against a
//! recomputation, `--pool mean` against the per-token mean, `--pool corr` against the
//! per-token correlation of the parcels; and bad inputs.

use crate::common;
use boldcast::core::Model;
use boldcast::cpu::CpuModel;
use boldcast::data::{Dataset, WindowRef, WindowSpec};
use boldcast_analysis::eval::Weights;
use boldcast_train::linear_path::LinearPathModel;
use common::*;
use std::path::Path;

/// An `.npy` file's shape and values.
fn npy<T: npyz::Deserialize>(path: &Path) -> (Vec<u64>, Vec<T>) {
    let f =
        npyz::NpyFile::new(std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap();
    (f.shape().to_vec(), f.into_vec::<T>().unwrap())
}

fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {:?}", text(&o));
    stdout(&o)
}

/// 3 subjects x 71 TRs x 4 parcels (35 tokens of 2 TRs, the last TR a target only) in
/// `format`, and a run trained on them for 4 steps with d_in 2, horizons 1 and 3 (training
/// window 32 TRs = 16 tokens; subject 03 held out).
fn trained(d: &Path, csv: bool) -> (std::path::PathBuf, std::path::PathBuf) {
    let data = d.join("data");
    let fmt = if csv { "tsv" } else { "npy" };
    ok(&["synth", "--out", s(&data), "--subjects", "3", "--trs", "71", "--parcels", "4", "--format", fmt]);
    if csv {
        for e in std::fs::read_dir(&data).unwrap() {
            let p = e.unwrap().path();
            if p.to_string_lossy().ends_with("_bold.tsv") {
                std::fs::write(p.with_extension("csv"), std::fs::read_to_string(&p).unwrap().replace('\t', ","))
                    .unwrap();
                std::fs::remove_file(&p).unwrap();
            }
        }
    }
    let cfg = write_file(d, "cfg.toml", "[model]\nd_in = 2\nhorizons = [1, 3]\n");
    let out = d.join("run");
    let flags = ["--config", s(&cfg), "--data", s(&data), "--max-steps", "4", "--val-every", "2", "--ckpt-every", "4"];
    quick_run(&out, &flags);
    (data, out)
}

/// The reference: the CPU model with the run's weights, and the data loaded here.
fn reference(run_dir: &Path, data: &Path) -> (LinearPathModel<CpuModel<f32>>, Dataset) {
    let w = Weights::open(run_dir).unwrap();
    let cfg = w.stored_config().unwrap().unwrap();
    let ds = Dataset::load(data).unwrap();
    let train: Vec<usize> = vec![0, 1];
    (w.build_model(&cfg, &ds, Some(&train), CpuModel::<f32>::new).unwrap(), ds)
}

/// The output of token `t` of run `r` with the last `k` tokens as context (`None`: all),
/// computed on its own window: `(P, width)` values at the window's last position.
fn at_token(
    ds: &Dataset,
    r: usize,
    t: usize,
    k: Option<usize>,
    f: impl Fn(&boldcast::core::Tokens<f32>) -> Vec<f32>,
) -> Vec<f32> {
    let s = k.map_or(0, |k| (t + 1).saturating_sub(k));
    // The models take at least max(horizons) + 1 = 4 tokens: a window from token 0 is made
    // that long (the model is causal, so the later tokens change nothing at t).
    let len = if s == 0 { (t + 1).max(4) } else { t + 1 - s };
    let spec = WindowSpec { window: len * 2, stride: 1, d_in: 2 };
    let tok = ds.tokens::<f32>(&[WindowRef { run: r, start: s * 2 }], &spec).unwrap();
    let out = f(&tok);
    let row = out.len() / len;
    out[(t - s) * row..(t - s + 1) * row].to_vec()
}

fn close(a: f32, b: f32, tol: f32, what: &str) {
    assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{what}: {a} vs {b}");
}

/// `--pool corr` of one run against its per-token embeddings `e` (35 tokens, 4 parcels, `m`
/// features): `r_pq` is the correlation of parcels `p` and `q` over every token and feature,
/// each feature centred over the tokens.
fn check_corr(e: &[f32], m: usize, r: &[f32], id: &str) {
    let at = |t: usize, p: usize, k: usize| e[(t * 4 + p) * m + k] as f64;
    let centred: Vec<Vec<f64>> = (0..4)
        .map(|p| {
            let mean: Vec<f64> = (0..m).map(|k| (0..35).map(|t| at(t, p, k)).sum::<f64>() / 35.0).collect();
            (0..35).flat_map(|t| (0..m).map(move |k| (t, k))).map(|(t, k)| at(t, p, k) - mean[k]).collect()
        })
        .collect();
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    for p in 0..4 {
        for q in 0..4 {
            let (a, b) = (&centred[p], &centred[q]);
            let want = dot(a, b) / (dot(a, a) * dot(b, b)).sqrt();
            close(r[p * 4 + q], want as f32, 1e-5, &format!("{id} corr [{p}, {q}]"));
        }
    }
}

/// The tokens each output saw under a context of `k` tokens with windows `s` apart on `n`
/// tokens (`--context-stride`): all up to it in the first window, then the last `s`
/// positions of windows ending `s` apart, then a window ending at the last token.
fn seen_tokens(n: usize, k: usize, s: usize) -> Vec<usize> {
    let mut seen: Vec<usize> = (1..=k.min(n)).collect();
    let mut end = k - 1;
    while end + s < n {
        end += s;
        seen.extend(k + 1 - s..=k);
    }
    seen.extend(k + end + 2 - n..=k);
    seen
}

/// The standardized forecasts of run `r` against the reference, token `t` with the last
/// `k(t)` tokens as context (`None`: all).
fn check_forecasts(
    fc: &Path,
    ds: &Dataset,
    model: &impl Model<f32>,
    r: usize,
    k: &dyn Fn(usize) -> Option<usize>,
    tol: f32,
) {
    let id = ds.runs[r].id.to_string();
    let (shape, std) = npy::<f32>(&fc.join(format!("{id}_forecast_std.npy")));
    assert_eq!(shape, [35, 2, 2, 4]);
    for t in 0..35 {
        let want = at_token(ds, r, t, k(t), |tok| model.forward(tok).unwrap().into_data()); // (P, H, D)
        for (h, j, p) in (0..2).flat_map(|h| (0..2).flat_map(move |j| (0..4).map(move |p| (h, j, p)))) {
            let got = std[((t * 2 + h) * 2 + j) * 4 + p];
            // Horizons 1 and 3: the target TR, and NaN past the run's 71 TRs.
            if t * 2 + 1 + [0, 4][h] + j + 1 >= 71 {
                assert!(got.is_nan(), "{id} t{t} h{h} j{j} p{p}: {got} past the end");
                continue;
            }
            close(got, want[(p * 2 + h) * 2 + j], tol, &format!("{id} t{t} h{h} j{j} p{p}"));
        }
    }
}

/// The MSEs of `forecast.json` against a recomputation from the files and the data.
fn check_mse(fc: &Path, ds: &Dataset, report: &serde_json::Value) {
    let horizons = [1usize, 3];
    let (mut all_sq, mut all_n) = (0.0, 0u64);
    for (r, entry) in report["runs"].as_array().unwrap().iter().enumerate() {
        let run = &ds.runs[r];
        let (_, std) = npy::<f32>(&fc.join(entry["forecast_std"].as_str().unwrap()));
        let (mut sq_h, mut n_h, mut sq_p, mut n_p) = ([0.0f64; 2], [0u64; 2], [0.0f64; 4], [0u64; 4]);
        let x = run.to_vec().unwrap();
        for (t, h, j, p) in
            (0..35).flat_map(|t| (0..2).flat_map(move |h| (0..2).flat_map(move |j| (0..4).map(move |p| (t, h, j, p)))))
        {
            let tr = t * 2 + 1 + (horizons[h] - 1) * 2 + j + 1;
            if tr < run.n_tr {
                let e = (std[((t * 2 + h) * 2 + j) * 4 + p] as f64 - x[tr * 4 + p]).powi(2);
                sq_h[h] += e;
                n_h[h] += 1;
                sq_p[p] += e;
                n_p[p] += 1;
            }
        }
        let m = &entry["mse"];
        // Targets inside the 71 TRs: h1 from every token but the last one's second element
        // (TR 71), h3 (TR 2t + 6 + j) from 33 tokens for j = 0 and 32 for j = 1.
        assert_eq!(n_h, [(35 * 2 - 1) * 4, (33 + 32) * 4], "{}", entry["id"]);
        assert_eq!(m["targets"], n_h[0] + n_h[1]);
        let near = |a: &serde_json::Value, b: f64| assert!((a.as_f64().unwrap() - b).abs() < 1e-9 * b, "{a} vs {b}");
        near(&m["mse"], (sq_h[0] + sq_h[1]) / (n_h[0] + n_h[1]) as f64);
        for h in 0..2 {
            near(&m["per_horizon"][h], sq_h[h] / n_h[h] as f64);
        }
        for p in 0..4 {
            near(&m["per_parcel"][p], sq_p[p] / n_p[p] as f64);
        }
        (all_sq, all_n) = (all_sq + sq_h[0] + sq_h[1], all_n + n_h[0] + n_h[1]);
    }
    let total = &report["totals"][0];
    assert_eq!((total["runs"].as_str(), total["n_runs"].as_u64()), (Some("all"), Some(3)));
    assert!((total["mse"]["mse"].as_f64().unwrap() - all_sq / all_n as f64).abs() < 1e-9);
}

/// forecast (default and full context) and embed (per token and pooled) on `backend`,
/// against the CPU reference within `tol`.
fn end_to_end(backend: &str, csv: bool, tol: f32) {
    let d = tempfile::tempdir().unwrap();
    let (data, run_dir) = trained(d.path(), csv);
    let (model, ds) = reference(&run_dir, &data);
    // `cmd` of the trained run on its data into `out`, on `backend`.
    let job = |cmd: &str, out: &Path, extra: &[&str]| {
        let args = [cmd, "--checkpoint", s(&run_dir), "--data", s(&data), "--out", s(out), "--backend", backend];
        ok(&[&args[..], extra].concat())
    };
    let fc = d.path().join("fc");
    let out = job("forecast", &fc, &["--json"]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report, json(&fc.join("forecast.json")), "--json prints forecast.json");
    assert_eq!((report["context"].as_u64(), report["d_in"].as_u64()), (Some(16), Some(2)));
    // The default stride, a quarter of the context: tokens 16.. saw 13 to 16 tokens.
    assert_eq!(report["context_stride"].as_u64(), Some(4));
    let seen = seen_tokens(35, 16, 4);
    assert_eq!(seen[15..22], [16, 13, 14, 15, 16, 13, 14]);
    assert_eq!(seen[31..], [16, 14, 15, 16]);
    let sides: Vec<&str> = report["runs"].as_array().unwrap().iter().map(|e| e["side"].as_str().unwrap()).collect();
    assert_eq!(sides, ["train", "train", "heldout"]);
    let heldout = report["totals"].as_array().unwrap().iter().find(|t| t["runs"] == "heldout").unwrap();
    assert_eq!(heldout["mse"], report["runs"][2]["mse"], "one held-out run: its pooled MSE is its own");
    for run in 0..3 {
        check_forecasts(&fc, &ds, &model, run, &|t| Some(seen[t]), tol);
        let id = ds.runs[run].id.to_string();
        let ((shape, units), (_, std)) = (
            npy::<f32>(&fc.join(format!("{id}_forecast.npy"))),
            npy::<f32>(&fc.join(format!("{id}_forecast_std.npy"))),
        );
        assert_eq!(shape, [35, 2, 2, 4]);
        for (k, (&u, &z)) in units.iter().zip(&std).enumerate() {
            let want = ds.runs[run].stats[k % 4].undo(z as f64) as f32;
            assert!(if z.is_nan() { u.is_nan() } else { u == want }, "{id} [{k}]: {u} vs {want}");
        }
        // Past the end, per parcel: h1's second element of token 34, h3's of tokens 32 (j = 1),
        // 33 and 34 (both).
        assert_eq!(std.iter().filter(|z| z.is_nan()).count(), (1 + 5) * 4, "{id}");
        let (shape, last) = npy::<i64>(&fc.join(format!("{id}_last_tr.npy")));
        assert_eq!((shape, last), (vec![35], (0..35).map(|i| 2 * i + 1).collect::<Vec<i64>>()));
    }
    check_mse(&fc, &ds, &report);
    // --context full: each output has seen the whole run up to it.
    let full = d.path().join("full");
    job("forecast", &full, &["--context", "full", "--subjects", "02"]);
    assert_eq!(json(&full.join("forecast.json"))["runs"].as_array().unwrap().len(), 1);
    check_forecasts(&full, &ds, &model, 1, &|_| None, tol);
    // Embeddings per token, then pooled.
    let em = d.path().join("em");
    job("embed", &em, &[]);
    let mean = d.path().join("mean");
    job("embed", &mean, &["--pool", "mean"]);
    let corr = d.path().join("corr");
    job("embed", &corr, &["--pool", "corr"]);
    let m = model.config().d_model;
    for run in 0..3 {
        let id = ds.runs[run].id.to_string();
        let (shape, e) = npy::<f32>(&em.join(format!("{id}_embed.npy")));
        assert_eq!(shape, [35, 4, m as u64]);
        for t in [0, 7, 15, 16, 34] {
            let want = at_token(&ds, run, t, Some(seen[t]), |tok| model.embed(tok).unwrap().into_data());
            for (k, &w) in want.iter().enumerate() {
                close(e[t * 4 * m + k], w, tol, &format!("{id} embed t{t} [{k}]"));
            }
        }
        let (shape, pooled) = npy::<f32>(&mean.join(format!("{id}_embed_mean.npy")));
        assert_eq!(shape, [4, m as u64]);
        for (k, &v) in pooled.iter().enumerate() {
            let avg = (0..35).map(|t| e[t * 4 * m + k] as f64).sum::<f64>() / 35.0;
            close(v, avg as f32, 1e-6, &format!("{id} pooled [{k}]"));
        }
        let (shape, r) = npy::<f32>(&corr.join(format!("{id}_embed_corr.npy")));
        assert_eq!(shape, [4, 4]);
        check_corr(&e, m, &r, &id);
    }
    assert_eq!(json(&mean.join("embed.json"))["pool"], "mean");
    assert_eq!(json(&corr.join("embed.json"))["pool"], "corr");
}

#[test]
fn forecast_and_embed_on_the_cpu_backend_npy_data() {
    end_to_end("cpu", false, 1e-5);
}

#[test]
fn forecast_and_embed_on_the_dfdx_cpu_backend_csv_data() {
    end_to_end("dfdx-cpu", true, 1e-4);
}

#[test]
fn bad_inputs_are_named_and_write_nothing() {
    let d = tempfile::tempdir().unwrap();
    let run_dir = d.path().join("run");
    quick_run(&run_dir, &["--max-steps", "2", "--val-every", "2", "--ckpt-every", "2"]);
    let r = s(&run_dir);
    // Without --data: the stored configuration's synthetic fixture; one subject.
    let one = d.path().join("one");
    let out = ok(&["forecast", "--checkpoint", r, "--out", one.to_str().unwrap(), "--subjects", "sub-04"]);
    assert!(out.contains("sub-04_run-1") && out.contains("heldout (1 runs)"), "{out}");
    // New data (other subjects, the same parcels): forecast, no run labelled by the split.
    let (new, newfc) = (d.path().join("new"), d.path().join("newfc"));
    ok(&["synth", "--out", new.to_str().unwrap(), "--subjects", "2", "--trs", "40", "--parcels", "4"]);
    let o = run(&["forecast", "--checkpoint", r, "--data", s(&new), "--out", s(&newfc), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert!(stderr(&o).contains("not the data the weights were trained on"), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(report["runs"].as_array().unwrap().iter().all(|e| e["side"].is_null()), "{report}");
    assert_eq!(report["totals"].as_array().unwrap().len(), 1, "only `all`");
    let fail = |args: &[&str], want: &str| {
        let o = run(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    };
    let out = d.path().join("out");
    let o = out.to_str().unwrap();
    let nope = d.path().join("nope");
    for cmd in ["forecast", "embed"] {
        fail(
            &[cmd, "--checkpoint", nope.to_str().unwrap(), "--out", o],
            &format!("--checkpoint {}: no such file", nope.display()),
        );
        fail(
            &[cmd, "--checkpoint", r, "--out", o, "--subjects", "09"],
            "--subjects: subject `sub-09` is not in the data (subjects: sub-01, sub-02, sub-03, sub-04)",
        );
        fail(&[cmd, "--checkpoint", r, "--out", o, "--context", "0"], "`0`: must be at least 1");
        fail(&[cmd, "--checkpoint", r, "--out", o, "--data", nope.to_str().unwrap()], "nope");
    }
    // Other parcels than the weights were trained on: refused, with the way out.
    let other = d.path().join("other");
    ok(&["synth", "--out", other.to_str().unwrap(), "--subjects", "2", "--trs", "40", "--parcels", "5"]);
    fail(&["forecast", "--checkpoint", r, "--out", o, "--data", other.to_str().unwrap()], "give --allow-other-data");
    std::fs::remove_dir_all(&other).unwrap();
    assert!(!out.exists(), "nothing written");
    std::fs::write(&out, b"x").unwrap();
    fail(&["forecast", "--checkpoint", r, "--out", o], "is not a directory");
    assert_eq!(std::fs::read(&out).unwrap(), b"x");
    std::fs::remove_file(&out).unwrap();
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("keep"), b"y").unwrap();
    fail(&["embed", "--checkpoint", r, "--out", o], "not empty");
    let mut left: Vec<String> =
        std::fs::read_dir(d.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    left.sort();
    assert_eq!(left, ["new", "newfc", "one", "out", "run"], "no temporary directory left");
}

/// `eval` reports the held-out runs' head motion from the tables beside them (XCP-D's
/// `*_motion.tsv` here), in its table and its JSON; without tables it says nothing of motion.
#[test]
fn eval_reports_head_motion_from_the_tables_beside_the_runs() {
    let d = tempfile::tempdir().unwrap();
    let (data, run_dir) = trained(d.path(), false);
    let r = run_dir.to_str().unwrap();
    assert!(!ok(&["eval", "--checkpoint", r]).contains("head motion"));
    for s in ["01", "02", "03"] {
        let table = "framewise_displacement\trmsd\n0.1\t0\n0.7\t0\n0.1\t0\n0.3\t0\n";
        std::fs::write(data.join(format!("sub-{s}_run-1_motion.tsv")), table).unwrap();
    }
    let table = ok(&["eval", "--checkpoint", r]);
    assert!(table.contains("mean framewise displacement 0.300 mm"), "{table}");
    assert!(table.contains("TRs above 0.5 mm"), "{table}");
    let json: serde_json::Value = serde_json::from_str(&ok(&["eval", "--checkpoint", r, "--json"])).unwrap();
    let motion = json["motion"].as_array().unwrap();
    assert!(!motion.is_empty(), "{json}");
    for m in motion {
        assert_eq!((m["trs"].as_u64(), m["high_trs"].as_u64(), m["max_fd"].as_f64()), (Some(4), Some(1), Some(0.7)));
        assert!((m["mean_fd"].as_f64().unwrap() - 0.3).abs() < 1e-12, "{m}");
    }
}

/// `train --fd-max` leaves out the windows over a high-motion TR (a spike in the held-out
/// subject's XCP-D table) and says how many; a value that is not a positive number of
/// millimetres is refused, naming the key.
#[test]
fn train_leaves_out_high_motion_windows() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    let s = data.to_str().unwrap();
    ok(&["synth", "--out", s, "--subjects", "3", "--trs", "71", "--parcels", "4", "--format", "npy"]);
    for sub in ["01", "02", "03"] {
        let fd: Vec<&str> = (0..71).map(|t| if sub == "03" && t == 40 { "1.2" } else { "0.1" }).collect();
        std::fs::write(
            data.join(format!("sub-{sub}_run-1_motion.tsv")),
            format!("framewise_displacement\n{}\n", fd.join("\n")),
        )
        .unwrap();
    }
    let out = d.path().join("run");
    let args = ["train", "--preset", "quick", "--data", s, "--out", out.to_str().unwrap(), "--max-steps", "2"];
    let o = run(&[&args[..], &["--fd-max", "0.5"]].concat());
    let se = stderr(&o);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{se}");
    assert!(se.contains("data.fd_max = 0.5 mm: left out 0 of"), "{se}");
    let val = se.lines().find(|l| l.contains("validation windows")).unwrap_or_else(|| panic!("{se}"));
    assert!(!val.contains("left out 0 of"), "{val}");
    let bad = d.path().join("bad");
    let o = run(&["train", "--preset", "quick", "--data", s, "--out", bad.to_str().unwrap(), "--fd-max=-1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("data.fd_max") && !bad.exists(), "{}", stderr(&o));
}
