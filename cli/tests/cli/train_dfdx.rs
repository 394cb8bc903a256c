//! `bc-cli train` and `eval` on the dfdx backend: the run follows the CPU backend's step for
//! step, its checkpoints carry the device-held Adam moments, `--resume` continues it exactly,
//! and weights trained on one backend evaluate identically on the other.

use crate::common;
use common::*;
use std::path::Path;

const FLAGS: &[&str] = &["--max-steps", "30", "--val-every", "10", "--ckpt-every", "10"];

fn train(backend: &str, out: &Path, extra: &[&str]) -> std::process::Output {
    quick("train", out, &[&["--backend", backend][..], FLAGS, extra].concat())
}

/// `(step, loss)` of every training line.
fn losses(out: &Path) -> Vec<(u64, f64)> {
    log_lines(&out.join("loss_log.jsonl"))
        .iter()
        .filter_map(|v| Some((v.get("step")?.as_u64()?, v.get("loss")?.as_f64()?)))
        .collect()
}

#[test]
fn dfdx_training_follows_the_cpu_backend_and_resumes_exactly() {
    let d = tempfile::tempdir().unwrap();
    let (cpu, dfdx, split) = (d.path().join("cpu"), d.path().join("dfdx"), d.path().join("split"));
    for (b, out) in [("cpu", &cpu), ("dfdx-cpu", &dfdx)] {
        let o = train(b, out, &[]);
        assert!(matches!(o.status.code(), Some(0 | 1)), "{b}: {:?}", text(&o));
    }
    // The resolved configuration records the backend.
    let resolved = std::fs::read_to_string(dfdx.join("config.resolved.toml")).unwrap();
    assert!(resolved.contains("backend = \"dfdx-cpu\""), "{resolved}");

    // Step for step the same losses as the CPU backend, to f32 rounding of two independent
    // implementations (the differences start near 1e-7 and grow slowly with the steps).
    let (lc, ld) = (losses(&cpu), losses(&dfdx));
    assert_eq!(lc.len(), 30);
    assert_eq!(lc.iter().map(|p| p.0).collect::<Vec<_>>(), ld.iter().map(|p| p.0).collect::<Vec<_>>());
    for ((s, a), (_, b)) in lc.iter().zip(&ld) {
        assert!((a - b).abs() <= 1e-4 * a.abs(), "step {s}: cpu {a} vs dfdx {b}");
    }

    // The optimizer checkpoint holds the device moments: every tensor's m and v, equal to the
    // host Adam's of the CPU run to f32 rounding (not empty, not zero).
    let ck = "checkpoints/step-000030/optimizer.safetensors";
    let (mc, md) = (tensors(&cpu.join(ck)), tensors(&dfdx.join(ck)));
    assert_eq!(mc.iter().map(|t| &t.name).collect::<Vec<_>>(), md.iter().map(|t| &t.name).collect::<Vec<_>>());
    assert!(!md.is_empty());
    let max_abs = |v: &[f32]| v.iter().fold(0f32, |m, x| m.max(x.abs()));
    for (a, b) in mc.iter().zip(&md) {
        assert_eq!(a.shape, b.shape, "{}", a.name);
        let (scale, worst) =
            (max_abs(&a.data), a.data.iter().zip(&b.data).fold(0f32, |m, (x, y)| m.max((x - y).abs())));
        if a.name.ends_with("kproj.bias") {
            // The key bias shifts every score of a query by the same amount, which the softmax
            // ignores: its gradient is zero in exact arithmetic, so both backends' moments are
            // rounding noise, only required to be tiny.
            let kind = mc.iter().filter(|t| t.name[..2] == a.name[..2]).fold(0f32, |m, t| m.max(max_abs(&t.data)));
            assert!(scale.max(max_abs(&b.data)) <= 1e-6 * kind, "{}: {scale} vs {kind}", a.name);
            continue;
        }
        assert!(scale > 0.0, "{}: all zero", a.name);
        assert!(worst <= 2e-3 * scale, "{}: max |cpu - dfdx| {worst} vs max |cpu| {scale}", a.name);
    }
    assert_eq!(state(&dfdx.join("checkpoints/step-000030"))["optimizer_t"], 30);

    // Stopped after 15 steps and resumed (the device moments come back from the checkpoint):
    // the same run, bit for bit.
    let o = train("dfdx-cpu", &split, &["--stop-after", "15"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let o = run(&["train", "--resume", split.to_str().unwrap()]);
    assert_verdict(&o);
    assert!(text(&o).0.contains("resuming from"), "{:?}", text(&o));
    assert!(
        std::fs::read(dfdx.join("loss_log.jsonl")).unwrap() == std::fs::read(split.join("loss_log.jsonl")).unwrap(),
        "loss_log.jsonl of the resumed dfdx run differs"
    );
    for f in ["model.safetensors", "optimizer.safetensors"] {
        let p = Path::new("checkpoints/step-000030").join(f);
        assert_same_tensors(&dfdx.join(&p), &split.join(&p));
    }

    // Weights trained on the CPU backend evaluate the same on dfdx (and the other way round).
    for run_dir in [&cpu, &dfdx] {
        let model_row = |backend: &str| {
            let o = run(&["eval", "--checkpoint", run_dir.to_str().unwrap(), "--backend", backend, "--json"]);
            let (out, err) = text(&o);
            assert_eq!(o.status.code(), Some(0), "{out}{err}");
            let e: serde_json::Value = serde_json::from_str(&out).unwrap();
            let row = e["rows"].as_array().unwrap().iter().find(|r| r["name"] == "model").unwrap().clone();
            row["mean"].as_f64().unwrap()
        };
        let (a, b) = (model_row("cpu"), model_row("dfdx-cpu"));
        assert!((a - b).abs() <= 1e-5 * a, "{}: eval cpu {a} vs dfdx-cpu {b}", run_dir.display());
    }
}

#[cfg(not(feature = "cuda"))]
#[test]
fn dfdx_cuda_without_the_feature_is_a_clear_error_that_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let o = train("dfdx-cuda", &out, &[]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("cuda"), "{stderr}");
    assert!(!out.exists(), "nothing is written: {}", out.display());
    let o = run(&["train", "--backend", "tpu", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("train.backend = tpu"), "{:?}", text(&o));
    assert!(!out.exists());
}
