//! `--backend cuda` (the native CUDA backend) in a build without the `cuda` feature: every
//! command that takes a backend stops with an error that says what build and machine the
//! backend needs, exits 2, and writes nothing. (On a GPU machine `scripts/gpu-check.sh`
//! runs the backend itself.)

#![cfg(not(feature = "cuda"))]

use crate::common;
use common::*;

fn says_how_to_get_it(stderr: &str) {
    assert!(stderr.contains("--backend cuda"), "{stderr}");
    assert!(stderr.contains("--features cuda") && stderr.contains("GPU"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn train_bench_and_golden_on_the_native_cuda_backend_are_clear_errors() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let o = run(&["train", "--preset", "quick", "--backend", "cuda", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
    says_how_to_get_it(&text(&o).1);
    assert!(!out.exists(), "nothing is written: {}", out.display());

    let o = run(&["bench", "--preset", "quick", "--backend", "cuda", "--steps", "1"]);
    assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
    says_how_to_get_it(&text(&o).1);

    let case = concat!(env!("CARGO_MANIFEST_DIR"), "/../golden/cases/tiny");
    let o = run(&["golden", case, "--backend", "cuda"]);
    assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
    says_how_to_get_it(&text(&o).1);
}

#[test]
fn bf16_off_the_cuda_backend_and_unknown_precisions_are_refused_by_name() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let o = |extra: &[&str]| {
        let mut a = vec!["train", "--preset", "quick", "--out", out.to_str().unwrap()];
        a.extend_from_slice(extra);
        run(&a)
    };
    let r = o(&["--precision", "bf16"]);
    assert_eq!(r.status.code(), Some(2), "{:?}", text(&r));
    let e = text(&r).1;
    assert!(e.contains("train.precision") && e.contains("bf16") && e.contains("cuda"), "{e}");
    let r = o(&["--precision", "fp8"]);
    assert_eq!(r.status.code(), Some(2));
    let e = text(&r).1;
    assert!(e.contains("train.precision") && e.contains("f32") && e.contains("bf16"), "{e}");
    // On the cuda backend bf16 is accepted by the configuration, and this build says what it lacks.
    let r = o(&["--precision", "bf16", "--backend", "cuda"]);
    assert_eq!(r.status.code(), Some(2));
    says_how_to_get_it(&text(&r).1);
    assert!(!out.exists(), "nothing is written: {}", out.display());
    let r = run(&["bench", "--preset", "quick", "--precision", "bf16", "--steps", "1"]);
    assert_eq!(r.status.code(), Some(2));
    let e = text(&r).1;
    assert!(e.contains("--precision bf16") && e.contains("cpu backend"), "{e}");
}
