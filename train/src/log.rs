//! The JSON-lines log of a run (`loss_log.jsonl`).
//!
//! Every line starts with its `kind` ([`LineKind`]: `train`, `validation`, `event`). A
//! training line is `{"kind","step","loss","lr","grad_norm"}`, where `step` counts the
//! optimizer steps done with this one (1 for the first: the number stdout prints), so it joins
//! with a validation line's `step`, the steps done before that validation. Each line is
//! written with one `write` call and flushed, so a killed run keeps every finished line;
//! validation and event lines go through [`RunLog::write_value`].
//! [`RunLog::open_at`] reopens a log truncated to a checkpoint's byte length, so a resumed
//! run's log equals an uninterrupted one; [`RunLog::hash`] is the hash of what it holds, which
//! a checkpoint records beside the length. The log prints nothing: what is shown of a run is
//! its observers' business ([`crate::observer`]).

use crate::error::TrainError;
use boldcast_core::{Logger, StepRecord};
use boldcast_storage::hash::Fnv64;
use boldcast_storage::io_err;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Appends one JSON line per step to the log, flushed per line, and keeps the losses. A
/// [`RunLog::silent`] one (the ranks other than 0 of a data-parallel run) keeps the losses and
/// writes nothing.
pub struct RunLog {
    file: Option<std::fs::File>,
    path: PathBuf,
    bytes: u64,
    hash: Fnv64,
    /// Every loss logged by this process.
    pub losses: Vec<f64>,
}

impl RunLog {
    /// Creates (truncates) the log at `path`.
    pub fn create(path: &Path) -> Result<Self, TrainError> {
        let file = Some(std::fs::File::create(path).map_err(io_err(path))?);
        Ok(Self { file, path: path.to_path_buf(), bytes: 0, hash: Fnv64::default(), losses: Vec::new() })
    }

    /// Reopens the log at `path` keeping only its first `bytes` bytes (a checkpoint's length):
    /// the kept prefix is written to a temporary file, synced and renamed over the log, so a
    /// kill during the truncation leaves the old log. A log shorter than `bytes` is an error.
    pub fn open_at(path: &Path, bytes: u64) -> Result<Self, TrainError> {
        let mut prefix = Vec::new();
        let f = std::fs::File::open(path).map_err(io_err(path))?;
        f.take(bytes).read_to_end(&mut prefix).map_err(io_err(path))?;
        let bad = |reason: String| TrainError::Log { path: path.to_path_buf(), reason };
        if (prefix.len() as u64) < bytes {
            return Err(bad(format!(
                "{} bytes, but the checkpoint was written when it had {bytes}: the log is not the one of this run",
                prefix.len()
            )));
        }
        if bytes > 0 && prefix.last() != Some(&b'\n') {
            return Err(bad(format!(
                "the checkpoint's length {bytes} does not end a line: the log is not the one of this run"
            )));
        }
        boldcast_storage::fsutil::write_atomic(path, &prefix).map_err(io_err(path))?;
        let file = Some(std::fs::OpenOptions::new().append(true).open(path).map_err(io_err(path))?);
        let mut hash = Fnv64::default();
        hash.update(&prefix);
        Ok(Self { file, path: path.to_path_buf(), bytes, hash, losses: Vec::new() })
    }

    /// A log that writes nothing (a data-parallel rank other than 0); `path` is only named in
    /// messages.
    pub fn silent(path: &Path) -> Self {
        Self { file: None, path: path.to_path_buf(), bytes: 0, hash: Fnv64::default(), losses: Vec::new() }
    }

    /// Bytes in the log so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The FNV-1a 64 hash of the log's [`RunLog::bytes`] bytes, hex (a checkpoint's
    /// `log_hash`).
    pub fn hash(&self) -> String {
        self.hash.hex()
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Forces the log to disk (before a checkpoint records its length).
    pub fn sync(&self) -> Result<(), TrainError> {
        match &self.file {
            Some(f) => Ok(f.sync_data().map_err(io_err(&self.path))?),
            None => Ok(()),
        }
    }

    /// Appends one line holding `kind` then the fields of `v` (a struct keeps its field order;
    /// a `json!` map is sorted).
    pub fn write_value<T: serde::Serialize + ?Sized>(&mut self, kind: LineKind, v: &T) -> Result<(), TrainError> {
        let line = serde_json::to_string(&Tagged { kind, v }).expect("JSON serializes") + "\n";
        Ok(self.write_line(&line).map_err(io_err(&self.path))?)
    }

    fn write_line(&mut self, line: &str) -> std::io::Result<()> {
        let Some(file) = &mut self.file else { return Ok(()) };
        file.write_all(line.as_bytes())?;
        file.flush()?;
        self.bytes += line.len() as u64;
        self.hash.update(line.as_bytes());
        Ok(())
    }
}

impl Logger for RunLog {
    fn log_step(&mut self, rec: &StepRecord) -> boldcast_core::error::Result<()> {
        // The record counts from 0; the log counts the steps done, as stdout does.
        let done = StepRecord { step: rec.step + 1, ..*rec };
        let line = serde_json::to_string(&Tagged { kind: LineKind::Train, v: &done })
            .map_err(|e| boldcast_core::Error::Backend(format!("{}: {e}", self.path.display())))?;
        self.write_line(&format!("{line}\n"))
            .map_err(|e| boldcast_core::Error::Backend(format!("{}: {e}", self.path.display())))?;
        self.losses.push(rec.loss);
        Ok(())
    }
}

/// What a line of the log is: its `kind` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LineKind {
    /// One optimizer step.
    Train,
    /// One validation ([`crate::observer::ValRecord`]).
    Validation,
    /// The run started, stopped or finished.
    Event,
}

/// A line: its kind first, then the record's own fields.
#[derive(serde::Serialize)]
struct Tagged<'a, T: ?Sized> {
    kind: LineKind,
    #[serde(flatten)]
    v: &'a T,
}

/// `(step, value)` points of a curve.
pub type Curve = Vec<(u64, f64)>;

/// The records of a log file: `(step, loss)` of every training line and `(step, val_loss)` of
/// every validation line, in file order (for the loss-curve figure).
pub fn read_curves(path: &Path) -> Result<(Curve, Curve), TrainError> {
    Ok((read_step_field(path, "loss")?, read_kind_field(path, "validation", "val_loss")?))
}

/// `(step, grad_norm)` of every step line of a log file, in file order.
pub fn read_grad_norms(path: &Path) -> Result<Curve, TrainError> {
    read_step_field(path, "grad_norm")
}

/// `(step, field)` of every training line of a log file that has the number `field` (`lr`,
/// `grad_norm`, `loss`), in file order.
pub fn read_step_field(path: &Path, field: &str) -> Result<Curve, TrainError> {
    read_kind_field(path, "train", field)
}

/// `(step, field)` of every line of `kind` that has the number `field`, in file order.
pub fn read_kind_field(path: &Path, kind: &str, field: &str) -> Result<Curve, TrainError> {
    let lines = read_lines(path)?;
    let point = |v: &serde_json::Value| {
        (v.get("kind")?.as_str()? == kind).then_some(())?;
        Some((v.get("step")?.as_u64()?, v.get(field)?.as_f64()?))
    };
    Ok(lines.iter().filter_map(point).collect())
}

fn read_lines(path: &Path) -> Result<Vec<serde_json::Value>, TrainError> {
    let text = std::fs::read_to_string(path).map_err(io_err(path))?;
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|e| TrainError::Log {
                path: path.to_path_buf(),
                reason: format!("line {}: not JSON: {e}", i + 1),
            })
        })
        .collect()
}
