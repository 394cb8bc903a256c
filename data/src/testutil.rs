//! Helpers of the unit tests: run files written by hand.

use crate::Dataset;
use std::io::Write;
use std::path::{Path, PathBuf};

pub(crate) fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::File::create(&p).unwrap().write_all(text.as_bytes()).unwrap();
    p
}

pub(crate) fn tsv(rows: &[&[f64]], names: &[&str]) -> String {
    let mut s = names.join("\t") + "\n";
    for r in rows {
        s += &r.iter().map(|v| v.to_string()).collect::<Vec<_>>().join("\t");
        s += "\n";
    }
    s
}

pub(crate) fn ramp(n: usize, p: usize) -> Vec<Vec<f64>> {
    (0..n).map(|t| (0..p).map(|q| (t * (q + 1)) as f64 + (t * t % 7) as f64).collect()).collect()
}

pub(crate) fn tsv_run(n: usize, p: usize) -> String {
    let rows = ramp(n, p);
    let refs: Vec<&[f64]> = rows.iter().map(|r| r.as_slice()).collect();
    let names: Vec<String> = (0..p).map(|q| format!("P{q}")).collect();
    let nr: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    tsv(&refs, &nr)
}

/// Writes an `(n, p)` `.npy` file of `data` in its own element type, with npyz (not the
/// crate's encoder, so that the reader is checked against another writer).
pub(crate) fn npy_file<T: npyz::AutoSerialize + Copy>(path: &Path, n: usize, p: usize, data: &[T]) {
    use npyz::WriterBuilder;
    let mut f = std::fs::File::create(path).unwrap();
    let mut w =
        npyz::WriteOptions::new().default_dtype().shape(&[n as u64, p as u64]).writer(&mut f).begin_nd().unwrap();
    w.extend(data.iter().copied()).unwrap();
    w.finish().unwrap();
}

pub(crate) fn load_err(files: &[(&str, &str)]) -> String {
    let d = tempfile::tempdir().unwrap();
    for (n, t) in files {
        write(d.path(), n, t);
    }
    Dataset::load(d.path()).unwrap_err().to_string()
}

/// Writes a `.npy` file by hand: NPY magic, version 1.0, the header length, the header dict
/// `dict` padded with spaces and a newline to a multiple of 64 bytes, then `data` as is; the
/// header may claim any shape, whatever `data` holds.
pub(crate) fn write_npy_raw(path: &Path, dict: &str, data: &[u8]) {
    let mut header = dict.to_string();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    std::fs::write(path, bytes).unwrap();
}

/// `n` little-endian doubles `0.0, 1.0, ...`.
pub(crate) fn f8_bytes(n: usize) -> Vec<u8> {
    (0..n).flat_map(|i| (i as f64).to_le_bytes()).collect()
}
