//! `bc-cli golden` as a user runs it: every golden case of the repository (and of
//! `../shared/golden` when present) passes with exit status 0 and a line per tensor group; a
//! case whose expected forecast is perturbed fails with exit status 1 naming the tensor; a
//! missing directory is an error (status 2).

use boldcast::storage::tensorfile::{load_safetensors, save_safetensors};
use boldcast_testkit::cases::{repo_case, CaseSet};
use std::path::PathBuf;

use crate::common;
use common::bc;

fn cases() -> Vec<PathBuf> {
    let dirs = CaseSet::repository().all();
    assert!(dirs.len() >= 6, "expected the repository's 6 cases, found {dirs:?}");
    dirs
}

/// Every case of `dirs` passes on `backend`, with a line per tensor group.
fn all_pass(dirs: &[PathBuf], backend: &str) {
    for dir in dirs {
        let out = bc().arg("golden").arg(dir).args(["--backend", backend]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{}:\n{text}{}", dir.display(), String::from_utf8_lossy(&out.stderr));
        assert!(text.contains(": PASS"), "{text}");
        for group in ["pred", "embed", "loss", "grad", "opt", "train.loss", "train.grad_norm"] {
            assert!(text.lines().any(|l| l.trim_start().starts_with(group)), "no `{group}` line:\n{text}");
        }
    }
}

#[test]
fn every_case_passes_on_the_cpu_backend() {
    all_pass(&cases(), "cpu");
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

/// A copy of the repository's case `name` in a fresh directory, for a test to alter.
fn copy_case(name: &str) -> (tempfile::TempDir, PathBuf) {
    let src = repo_case(name);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(format!("{name}-altered"));
    std::fs::create_dir(&dir).unwrap();
    for f in ["config.json", "weights.safetensors", "inputs.safetensors", "expected.safetensors"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    (tmp, dir)
}

/// Issue 17: a case with `lr: -1` ran and reported FAIL; an out-of-range value is an input
/// error (status 2) naming the file and the key, and nothing is checked.
#[test]
fn an_out_of_range_configuration_value_is_an_input_error_naming_file_and_key() {
    for (from, to, why) in [
        ("\"lr\": 0.001", "\"lr\": -1", "key `lr` = -1: must be finite and > 0"),
        ("\"steps\": 6", "\"steps\": 0", "key `steps` = 0: must be at least 1"),
        ("\"weight_decay\": 0.05", "\"weight_decay\": -0.5", "key `weight_decay` = -0.5: must be finite and >= 0"),
    ] {
        let (_tmp, dir) = copy_case("tiny");
        let text = std::fs::read_to_string(dir.join("config.json")).unwrap();
        assert!(text.contains(from), "{text}");
        std::fs::write(dir.join("config.json"), text.replace(from, to)).unwrap();
        let out = bc().arg("golden").arg(&dir).output().unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
        assert!(!stdout.contains("FAIL") && !stdout.contains("PASS"), "no report: {stdout}");
        let want = format!("error: {}: {why}", dir.join("config.json").display());
        assert!(stderr.contains(&want), "{stderr}\nwanted: {want}");
    }
}

/// Issue 17: NaN tokens gave an error that named no file; a non-finite token is an input error
/// naming `inputs.safetensors` and the tensor.
#[test]
fn non_finite_tokens_are_an_input_error_naming_file_and_tensor() {
    // flat-d3 has no adjacency: its inputs are the f32 tokens alone.
    let (_tmp, dir) = copy_case("flat-d3");
    let mut inputs = load_safetensors::<f32>(dir.join("inputs.safetensors")).unwrap();
    assert_eq!(inputs.len(), 1, "tokens only");
    inputs[0].data[4] = f32::NAN;
    save_safetensors(dir.join("inputs.safetensors"), &inputs, None).unwrap();
    let out = bc().arg("golden").arg(&dir).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    let want = format!(
        "error: {}: tensor `tokens` holds a non-finite value NaN at flat index 4",
        dir.join("inputs.safetensors").display()
    );
    assert!(stderr.contains(&want), "{stderr}\nwanted: {want}");
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
    all_pass(&dirs, "dfdx-cpu");
}

#[cfg(not(feature = "cuda"))]
#[test]
fn asking_for_cuda_without_the_feature_is_a_clear_error() {
    let out = bc().args(["golden", "--backend", "dfdx-cuda"]).arg(repo_case("tiny")).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no CUDA support") && err.contains("--features cuda"), "{err}");
}
