//! `scripts/gpu-check.sh run` with stand-ins for the GPU (a `nvidia-smi` that lists one
//! device) and for the two checks' binaries (scripts printing what each prints): the merged
//! line carries the native check's per-step counters and passes; a check that prints nothing
//! is reported as such and fails the run. What the counters hold is tested in the CUDA crate
//! (`tests/cuda/traffic.rs`, through the function the native check calls).

use std::path::Path;
use std::process::Command;

/// A native check's line as `examples/gpu_check.rs` prints it (one precision shown).
const CUDA_LINE: &str = r#"{"backend":"cuda","device":"stand-in","golden":{},"demo":{"bf16":{"median_step_s":0.2,"per_step":{"launches":900,"products":300,"staged":0,"staged_bytes":0,"syncs":2.0,"uploaded_bytes":4194304,"pool_allocations":0.0},"predicted_peak_bytes":4173964448}},"passed":true}"#;

fn executable(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    let mut perm = std::fs::metadata(path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(path, perm).unwrap();
}

/// Runs the script's `run` against stand-ins, the native check's body `cuda`: (exit status,
/// the merged JSON).
fn run(cuda: &str) -> (i32, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let (dist, bin) = (dir.path().join("dist"), dir.path().join("bin"));
    std::fs::create_dir_all(&dist).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    executable(&bin.join("nvidia-smi"), "echo 'GPU 0: Stand-in GPU (UUID: GPU-0)'");
    executable(&dist.join("gpu_check_cuda"), cuda);
    executable(&dist.join("gpu_check"), r#"echo '{"gpu_check":"ok"}'"#);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new("bash")
        .arg(root.join("scripts/gpu-check.sh"))
        .arg("run")
        .env("GPU_CHECK_DIST", &dist)
        .env("GPU_CHECK_TOOLKIT", dir.path().join("no-toolkit"))
        .env("PATH", path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let v = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn the_merged_line_carries_the_native_checks_counters() {
    let (code, v) = run(&format!("echo '{CUDA_LINE}'"));
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["passed"], true);
    let step = &v["cuda"]["demo"]["bf16"]["per_step"];
    assert_eq!((step["staged_bytes"].as_u64(), step["syncs"].as_f64()), (Some(0), Some(2.0)), "{v}");
    assert_eq!(step["pool_allocations"].as_f64(), Some(0.0));
    assert_eq!(v["dfdx"]["gpu_check"], "ok");
    assert!(v["scaling"]["skipped"].as_str().is_some_and(|s| s.contains("one GPU")), "{v}");
}

#[test]
fn a_check_that_prints_no_json_fails_the_run() {
    let (code, v) = run("echo 'device lost' >&2; exit 3");
    assert_eq!(code, 1);
    assert_eq!(v["passed"], false);
    assert_eq!(v["exit_codes"]["cuda"], 3);
    let e = v["cuda"]["error"].as_str().unwrap();
    assert!(e.contains("status 3") && e.contains("no JSON"), "{e}");
    assert!(v["cuda"]["stderr_tail"].to_string().contains("device lost"));
}
