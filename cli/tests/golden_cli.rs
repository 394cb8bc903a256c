//! `bc-cli golden` as a user runs it: every golden case of the repository (and of
//! `../shared/golden` when present) passes with exit status 0 and a line per tensor group; a
//! case whose expected forecast is perturbed fails with exit status 1 naming the tensor; a
//! missing directory is an error (status 2).

use boldcast::data::tensorfile::{load_safetensors, save_safetensors};
use boldcast_testkit::cases::{repo_case, CaseSet};
use std::path::PathBuf;

mod common;
use common::bc;

fn cases() -> Vec<PathBuf> {
    let dirs = CaseSet::repository().all();
    assert!(dirs.len() >= 6, "expected the repository's 6 cases, found {dirs:?}");
    dirs
}

#[test]
fn every_case_passes_on_the_cpu_backend() {
    for dir in cases() {
        let out = bc().arg("golden").arg(&dir).args(["--backend", "cpu"]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{}:\n{text}{}", dir.display(), String::from_utf8_lossy(&out.stderr));
        assert!(text.contains(": PASS"), "{text}");
        for group in ["pred", "embed", "loss", "grad", "opt", "train.loss", "train.grad_norm"] {
            assert!(text.lines().any(|l| l.trim_start().starts_with(group)), "no `{group}` line:\n{text}");
        }
    }
}

#[test]
fn a_perturbed_case_fails_naming_the_tensor() {
    let src = repo_case("tiny");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("tiny-perturbed");
    std::fs::create_dir(&dir).unwrap();
    for f in ["config.json", "weights.safetensors", "inputs.safetensors"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    // Shift one forecast value by far more than its tolerance (1e-4 + 1e-3 |b|).
    let mut expected = load_safetensors::<f64>(src.join("expected.safetensors")).unwrap();
    let pred = expected.iter_mut().find(|t| t.name == "pred").unwrap();
    pred.data[7] += 0.01;
    save_safetensors(dir.join("expected.safetensors"), &expected, None).unwrap();

    let out = bc().arg("golden").arg(&dir).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains(": FAIL"), "{text}");
    assert!(text.contains("pred (pred): ratio"), "the failing tensor is named:\n{text}");
    assert!(text.contains("1 of "), "only pred fails:\n{text}");
}

#[test]
fn a_missing_directory_is_an_error() {
    let out = bc().args(["golden", "/nonexistent/case"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("error:") && err.contains("/nonexistent/case"), "{err}");
}

#[test]
fn every_case_passes_on_the_dfdx_cpu_backend() {
    // Both mixers: the Mamba-2 cases (`tiny-mamba2`, `mamba2-full-k`) included.
    let dirs = cases();
    assert!(dirs.iter().filter(|d| d.to_string_lossy().contains("mamba2")).count() >= 2, "{dirs:?}");
    for dir in dirs {
        let out = bc().arg("golden").arg(&dir).args(["--backend", "dfdx-cpu"]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{}:\n{text}{}", dir.display(), String::from_utf8_lossy(&out.stderr));
        assert!(text.contains(": PASS"), "{text}");
        for group in ["pred", "embed", "loss", "grad", "opt", "train.loss", "train.grad_norm"] {
            assert!(text.lines().any(|l| l.trim_start().starts_with(group)), "no `{group}` line:\n{text}");
        }
    }
}

#[cfg(not(feature = "cuda"))]
#[test]
fn asking_for_cuda_without_the_feature_is_a_clear_error() {
    let out = bc().args(["golden", "--backend", "dfdx-cuda"]).arg(repo_case("tiny")).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no CUDA support") && err.contains("--features cuda"), "{err}");
}
