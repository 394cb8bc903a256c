//! Helpers shared by the binary's tests: the binary with a fixed thread count, its output as
//! text, the files it reads and writes, and checkpoint readers.
#![allow(dead_code)]

use boldcast::core::model::NamedTensor;
use boldcast::storage::tensorfile::{load_safetensors, save_safetensors_hashed, SafetensorsFile};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Output, Stdio};

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

/// A path as an argument.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// A JSON file's value.
pub fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Writes `text` to `dir/name` (a configuration, a subject list) and returns its path.
pub fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The names in a directory, sorted.
pub fn ls(dir: &Path) -> Vec<String> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut v: Vec<String> = entries.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// A child stopped at the pause hook.
pub struct Paused {
    /// The process.
    pub child: Child,
    /// Its standard error, read up to the hook's line. Dropping it closes the pipe, and a
    /// child that writes to it then gets `SIGPIPE`.
    pub err: BufReader<ChildStderr>,
    /// What was read.
    pub seen: String,
}

/// Spawns `cmd` with the pause hook at step `step` and reads its standard error until a line
/// holds `needle`, panicking with what it read if the child ends first.
pub fn spawn_paused(mut cmd: Command, step: &str, needle: &str) -> Paused {
    let mut child = cmd
        .env(bc_cli::train::PAUSE_HOOK_ENV, step)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the child starts");
    let mut err = BufReader::new(child.stderr.take().expect("a piped standard error"));
    let mut seen = String::new();
    if read_until(&mut err, needle, &mut seen) {
        return Paused { child, err, seen };
    }
    let status = child.wait().expect("the child is waited for");
    panic!("the child ended ({status}) before `{needle}`:\n{seen}");
}

/// Reads lines into `seen` until one holds `needle` (true) or the stream ends (false).
fn read_until(err: &mut impl BufRead, needle: &str, seen: &mut String) -> bool {
    loop {
        let start = seen.len();
        if err.read_line(seen).map_or(true, |n| n == 0) {
            return false;
        }
        if seen[start..].contains(needle) {
            return true;
        }
    }
}

/// Writes four subjects' runs of `trs` TRs and no parcels to `dir/data` (named
/// `sub-XX_run-1_bold.npy`) and returns the folder.
pub fn zero_parcel_data(dir: &Path, trs: usize) -> PathBuf {
    let data = dir.join("data");
    std::fs::create_dir(&data).unwrap();
    for sub in ["01", "02", "03", "04"] {
        npy_zeros(&data.join(format!("sub-{sub}_run-1_bold.npy")), trs, 0);
    }
    data
}

/// A `.npy` file of `f8` zeros of shape `(rows, cols)`, written by hand.
fn npy_zeros(path: &Path, rows: usize, cols: usize) {
    let mut header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.resize(bytes.len() + rows * cols * 8, 0);
    std::fs::write(path, bytes).unwrap();
}

/// Flips one bit near the end of a safetensors file, in the data of its last tensor.
pub fn flip_tensor_bit(p: &Path) {
    let mut bytes = std::fs::read(p).unwrap();
    let n = bytes.len();
    bytes[n - 3] ^= 0x04;
    std::fs::write(p, bytes).unwrap();
}

/// Writes `src`'s tensors, `edit`ed, with its metadata and a fresh `tensors_hash` to `dst`
/// (so that what a reader refuses is the edit, not an altered file).
pub fn edited_copy(src: &Path, dst: &Path, edit: impl Fn(&mut NamedTensor<f32>)) {
    let f = SafetensorsFile::open(src).unwrap();
    let mut ts = f.all::<f32>().unwrap();
    ts.iter_mut().for_each(edit);
    save_safetensors_hashed(dst, &ts, f.metadata().unwrap()).unwrap();
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
    json(&dir.join("state.json"))
}

#[allow(unused_imports)]
pub use boldcast_plot::inspect::{dark_pixels, png_pixels, svg_texts};

/// Runs `bc-cli CMD --preset quick --out OUT EXTRA...`.
pub fn quick(cmd: &str, out: &Path, extra: &[&str]) -> Output {
    run(&[&[cmd, "--preset", "quick", "--out", s(out)][..], extra].concat())
}

/// Asserts that `o` ended with a verdict, 0 (pass) or 1 (fail), not an error (2) or a panic.
pub fn assert_verdict(o: &Output) {
    assert!(matches!(o.status.code(), Some(0 | 1)), "{:?}", text(o));
}

/// Runs `bc-cli train --preset quick --out OUT EXTRA...`, which must end with a verdict.
pub fn quick_run(out: &Path, extra: &[&str]) {
    assert_verdict(&quick("train", out, extra));
}

/// Runs `bc-cli synth --out OUT FLAGS...` (`flags` split at white space).
pub fn synth(out: &Path, flags: &str) -> Output {
    run(&[&["synth", "--out", s(out)][..], &flags.split_whitespace().collect::<Vec<_>>()].concat())
}

/// Runs `bc-cli synth --out OUT FLAGS...`, which must succeed, and returns its `synth.json`.
pub fn synth_ok(out: &Path, flags: &str) -> serde_json::Value {
    let o = synth(out, flags);
    assert!(o.status.success(), "{}", stderr(&o));
    json(&out.join("synth.json"))
}
