//! Helpers shared by the binary's tests: the binary with a fixed thread count, its output as
//! text, and checkpoint readers.
#![allow(dead_code)]

use boldcast::core::model::NamedTensor;
use boldcast::storage::tensorfile::load_safetensors;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary, with two rayon threads (a fixed load on the shared machine; the CPU backend's
/// bits do not depend on it, README.md, "Determinism").
pub fn bc() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bc-cli"));
    c.env("RAYON_NUM_THREADS", "2").env_remove(bc_cli::train::PAUSE_HOOK_ENV);
    c
}

/// Runs `bc-cli args...` and returns its output.
pub fn run(args: &[&str]) -> Output {
    bc().args(args).output().expect("the binary runs")
}

/// Text of standard output and error.
pub fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Standard output as text.
pub fn stdout(o: &Output) -> String {
    text(o).0
}

/// Standard error as text.
pub fn stderr(o: &Output) -> String {
    text(o).1
}

/// The tensors of a safetensors file, sorted by name.
pub fn tensors(path: &Path) -> Vec<NamedTensor<f32>> {
    let mut v = load_safetensors::<f32>(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// Asserts two weight files hold the same tensors bit for bit.
pub fn assert_same_tensors(a: &Path, b: &Path) {
    let (ta, tb) = (tensors(a), tensors(b));
    assert_eq!(ta.len(), tb.len(), "{} vs {}", a.display(), b.display());
    for (x, y) in ta.iter().zip(&tb) {
        assert_eq!((&x.name, &x.shape), (&y.name, &y.shape));
        let bx: Vec<u32> = x.data.iter().map(|v| v.to_bits()).collect();
        let by: Vec<u32> = y.data.iter().map(|v| v.to_bits()).collect();
        assert!(bx == by, "tensor {} differs between {} and {}", x.name, a.display(), b.display());
    }
}

/// The JSON lines of a log.
pub fn log_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The checkpoint `latest` names.
pub fn latest(out: &Path) -> PathBuf {
    let ck = out.join("checkpoints");
    ck.join(std::fs::read_to_string(ck.join("latest")).unwrap().trim())
}

/// The `step` of a checkpoint's state.json.
pub fn state(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("state.json")).unwrap()).unwrap()
}

#[allow(unused_imports)]
pub use boldcast_plot::inspect::{dark_pixels, png_pixels, svg_texts};

/// Runs `bc-cli CMD --preset quick --out OUT EXTRA...`.
pub fn quick(cmd: &str, out: &Path, extra: &[&str]) -> Output {
    let out = out.to_str().expect("a UTF-8 path");
    run(&[&[cmd, "--preset", "quick", "--out", out][..], extra].concat())
}

/// Runs `bc-cli synth --out OUT FLAGS...` (`flags` split at white space).
pub fn synth(out: &Path, flags: &str) -> Output {
    let out = out.to_str().expect("a UTF-8 path");
    run(&[&["synth", "--out", out][..], &flags.split_whitespace().collect::<Vec<_>>()].concat())
}
