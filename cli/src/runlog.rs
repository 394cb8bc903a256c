//! The JSON-lines log of a run (`loss_log.jsonl`), shared by `overfit` and `train`.
//!
//! One line per optimizer step, `{"step","loss","lr","grad_norm"}` in
//! [`StepRecord`](boldcast::core::StepRecord) field order, written with one `write` call and
//! flushed, so a killed run keeps every finished line; `train` adds validation and event lines
//! through [`JsonlLogger::write_value`]. [`JsonlLogger::open_at`] reopens a log truncated to a
//! checkpoint's byte length, so a resumed run's log equals an uninterrupted one.

use crate::error::CliError;
use boldcast::core::{Logger, StepRecord};
use indicatif::ProgressBar;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Appends one JSON line per step to `loss_log.jsonl`, flushed per line, keeps the losses, and
/// prints every `log_every` steps (through the progress bar when there is one). A
/// [`JsonlLogger::silent`] one (the ranks other than 0 of a data-parallel run) keeps the
/// losses and writes and prints nothing.
pub struct JsonlLogger {
    file: Option<std::fs::File>,
    path: PathBuf,
    bytes: u64,
    /// Every loss logged by this process.
    pub losses: Vec<f64>,
    log_every: u64,
    bar: Option<ProgressBar>,
}

impl JsonlLogger {
    /// Creates (truncates) the log at `path`.
    pub fn create(path: &Path, log_every: u64, bar: Option<ProgressBar>) -> Result<Self, CliError> {
        let file = Some(std::fs::File::create(path).map_err(CliError::io(path))?);
        Ok(Self { file, path: path.to_path_buf(), bytes: 0, losses: Vec::new(), log_every: log_every.max(1), bar })
    }

    /// Reopens the log at `path` keeping only its first `bytes` bytes (a checkpoint's length):
    /// the kept prefix is written to a temporary file, synced and renamed over the log, so a
    /// kill during the truncation leaves the old log. A log shorter than `bytes` is an error.
    pub fn open_at(path: &Path, bytes: u64, log_every: u64, bar: Option<ProgressBar>) -> Result<Self, CliError> {
        let mut prefix = Vec::new();
        let f = std::fs::File::open(path).map_err(CliError::io(path))?;
        f.take(bytes).read_to_end(&mut prefix).map_err(CliError::io(path))?;
        if (prefix.len() as u64) < bytes {
            return Err(CliError::Msg(format!(
                "{}: {} bytes, but the checkpoint was written when it had {bytes}: the log is not the one of \
                 this run",
                path.display(),
                prefix.len()
            )));
        }
        if bytes > 0 && prefix.last() != Some(&b'\n') {
            return Err(CliError::Msg(format!(
                "{}: the checkpoint's length {bytes} does not end a line: the log is not the one of this run",
                path.display()
            )));
        }
        crate::fsutil::write_atomic(path, &prefix).map_err(CliError::io(path))?;
        let file = Some(std::fs::OpenOptions::new().append(true).open(path).map_err(CliError::io(path))?);
        Ok(Self { file, path: path.to_path_buf(), bytes, losses: Vec::new(), log_every: log_every.max(1), bar })
    }

    /// A logger that writes and prints nothing (a data-parallel rank other than 0); `path` is
    /// only named in messages.
    pub fn silent(path: &Path) -> Self {
        Self { file: None, path: path.to_path_buf(), bytes: 0, losses: Vec::new(), log_every: 1, bar: None }
    }

    /// Bytes in the log so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Forces the log to disk (before a checkpoint records its length).
    pub fn sync(&self) -> Result<(), CliError> {
        match &self.file {
            Some(f) => f.sync_data().map_err(CliError::io(&self.path)),
            None => Ok(()),
        }
    }

    /// Appends one line holding `v` (a struct keeps its field order; a `json!` map is sorted).
    pub fn write_value<T: serde::Serialize + ?Sized>(&mut self, v: &T) -> Result<(), CliError> {
        let line = serde_json::to_string(v).expect("JSON serializes") + "\n";
        self.write_line(&line).map_err(CliError::io(&self.path))
    }

    /// Prints a line, through the progress bar when there is one.
    pub fn println(&self, msg: &str) {
        if self.file.is_none() {
            return;
        }
        match &self.bar {
            Some(b) => b.println(msg),
            None => println!("{msg}"),
        }
    }

    fn write_line(&mut self, line: &str) -> std::io::Result<()> {
        let Some(file) = &mut self.file else { return Ok(()) };
        file.write_all(line.as_bytes())?;
        file.flush()?;
        self.bytes += line.len() as u64;
        Ok(())
    }
}

impl Logger for JsonlLogger {
    fn log_step(&mut self, rec: &StepRecord) -> boldcast::core::error::Result<()> {
        // StepRecord serializes its fields in order: step, loss, lr, grad_norm.
        let line = serde_json::to_string(rec)
            .map_err(|e| boldcast::core::Error::Backend(format!("{}: {e}", self.path.display())))?;
        self.write_line(&format!("{line}\n"))
            .map_err(|e| boldcast::core::Error::Backend(format!("{}: {e}", self.path.display())))?;
        self.losses.push(rec.loss);
        if self.file.is_none() {
            return Ok(());
        }
        if rec.step == 0 || (rec.step + 1).is_multiple_of(self.log_every) {
            let msg = format!(
                "step {:>6}  loss {:.6}  lr {:.3e}  grad_norm {:.4}",
                rec.step + 1,
                rec.loss,
                rec.lr,
                rec.grad_norm
            );
            self.println(&msg);
        }
        if let Some(b) = &self.bar {
            b.inc(1);
        }
        Ok(())
    }
}

/// `(step, loss)` points of a curve.
pub type Curve = Vec<(u64, f64)>;

/// The records of a log file: `(step, loss)` of every step line and `(step, val_loss)` of
/// every validation line, in file order (for the loss-curve figure).
pub fn read_curves(path: &Path) -> Result<(Curve, Curve), CliError> {
    let text = std::fs::read_to_string(path).map_err(CliError::io(path))?;
    let (mut train, mut val) = (Vec::new(), Vec::new());
    for (i, line) in text.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| CliError::Msg(format!("{}, line {}: not JSON: {e}", path.display(), i + 1)))?;
        let step = v.get("step").and_then(|s| s.as_u64());
        match (step, v.get("loss").and_then(|x| x.as_f64()), v.get("val_loss").and_then(|x| x.as_f64())) {
            (Some(s), Some(l), _) => train.push((s, l)),
            (Some(s), None, Some(l)) => val.push((s, l)),
            _ => {}
        }
    }
    Ok((train, val))
}
