//! Experiment tracking: `metrics.csv` (one row per training step and per validation, always)
//! and TensorBoard event files under `tensorboard/` (`train.tensorboard`, `--tensorboard`),
//! written by the run beside its log as each step and validation ends.
//!
//! Unlike `loss_log.jsonl` they hold the wall-clock step time, so they are not part of the
//! run's state: a resumed run keeps their rows and scalars up to the checkpoint (the steps and
//! validations its truncated log still holds) and drops the rest, so nothing appears twice.
//!
//! Scalars: `train/loss`, `train/lr`, `train/grad_norm`, `train/step_seconds` at the steps
//! done (1 for the first step, as the log counts), and `validation/loss`,
//! `validation/loss_h<h>` per horizon, `validation/floor` at the steps done before each
//! validation.

use crate::error::TrainError;
use crate::observer::{StepRecord, ValRecord};
use boldcast_storage::io_err;
use boldcast_storage::tfevents::{self, Scalar};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The flat table of a run's metrics.
pub const METRICS_CSV: &str = "metrics.csv";
/// The directory of the TensorBoard event files.
pub const TENSORBOARD_DIR: &str = "tensorboard";

/// Where a resumed run continues: the training steps and validations to keep.
#[derive(Clone, Debug, Default)]
pub struct Kept {
    /// Training rows up to this step are kept.
    pub last_step: u64,
    /// Validation rows at these steps are kept.
    pub validations: BTreeSet<u64>,
}

impl Kept {
    /// What the log at `log` holds (already truncated to the checkpoint).
    pub fn from_log(log: &Path, last_step: u64) -> Result<Self, TrainError> {
        let val = crate::log::read_kind_field(log, "validation", "val_loss")?;
        Ok(Self { last_step, validations: val.into_iter().map(|(s, _)| s).collect() })
    }

    fn keeps(&self, kind: &str, step: u64) -> bool {
        match kind {
            "train" => step <= self.last_step,
            _ => self.validations.contains(&step),
        }
    }
}

/// Writes `metrics.csv` and, when asked, a TensorBoard event file.
pub struct Tracker {
    csv: std::fs::File,
    csv_path: PathBuf,
    events: Option<(std::fs::File, PathBuf)>,
    horizons: Vec<usize>,
}

impl Tracker {
    /// Opens the files in `out` for a run of `horizons`: new ones, or for a resumed run the
    /// ones there with only what `kept` names.
    pub fn open(out: &Path, horizons: &[usize], tensorboard: bool, kept: Option<&Kept>) -> Result<Self, TrainError> {
        let csv_path = out.join(METRICS_CSV);
        let header = csv_header(horizons);
        let kept_rows = match kept {
            Some(k) => kept_csv_rows(&csv_path, &header, k)?,
            None => String::new(),
        };
        boldcast_storage::fsutil::write_atomic(&csv_path, format!("{header}\n{kept_rows}").as_bytes())
            .map_err(io_err(&csv_path))?;
        let csv = append(&csv_path)?;
        let events = if tensorboard { Some(open_events(&out.join(TENSORBOARD_DIR), kept)?) } else { None };
        Ok(Self { csv, csv_path, events, horizons: horizons.to_vec() })
    }

    /// One training step (`rec.step` 0-based, as the trainer counts) that took `seconds`.
    pub fn step(&mut self, rec: &StepRecord, seconds: f64) -> Result<(), TrainError> {
        let step = rec.step + 1;
        let empty = ",".repeat(self.horizons.len() + 2);
        let row = format!("train,{step},{},{},{},{seconds}{empty}\n", rec.loss, rec.lr, rec.grad_norm);
        self.write_row(&row)?;
        let values = [("loss", rec.loss), ("lr", rec.lr), ("grad_norm", rec.grad_norm), ("step_seconds", seconds)];
        self.scalars(step, values.iter().map(|(t, v)| (format!("train/{t}"), *v)))
    }

    /// One validation.
    pub fn validation(&mut self, v: &ValRecord) -> Result<(), TrainError> {
        let per: Vec<String> = v.val_per_horizon.iter().map(f64::to_string).collect();
        let row = format!("validation,{},,,,,{},{},{}\n", v.step, v.val_loss, per.join(","), v.floor);
        self.write_row(&row)?;
        let per_h = self.horizons.iter().zip(&v.val_per_horizon).map(|(h, l)| (format!("validation/loss_h{h}"), *l));
        let all = [("validation/loss".to_string(), v.val_loss), ("validation/floor".to_string(), v.floor)];
        let tags: Vec<(String, f64)> = all.into_iter().chain(per_h).collect();
        self.scalars(v.step, tags.into_iter())
    }

    fn write_row(&mut self, row: &str) -> Result<(), TrainError> {
        self.csv.write_all(row.as_bytes()).and_then(|()| self.csv.flush()).map_err(io_err(&self.csv_path))?;
        Ok(())
    }

    fn scalars(&mut self, step: u64, values: impl Iterator<Item = (String, f64)>) -> Result<(), TrainError> {
        let Some((file, path)) = &mut self.events else { return Ok(()) };
        let wall_time = now();
        let mut bytes = Vec::new();
        for (tag, v) in values {
            bytes.extend(tfevents::encode_scalar(&Scalar { wall_time, step: step as i64, tag, value: v as f32 }));
        }
        file.write_all(&bytes).and_then(|()| file.flush()).map_err(io_err(path))?;
        Ok(())
    }
}

fn csv_header(horizons: &[usize]) -> String {
    let per: Vec<String> = horizons.iter().map(|h| format!("val_loss_h{h}")).collect();
    format!("kind,step,loss,lr,grad_norm,step_seconds,val_loss,{},floor", per.join(","))
}

/// The rows of an earlier `metrics.csv` that `kept` keeps; none when its header differs.
fn kept_csv_rows(path: &Path, header: &str, kept: &Kept) -> Result<String, TrainError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(String::new()),
        Err(e) => return Err(io_err(path)(e).into()),
    };
    let mut lines = text.lines();
    if lines.next() != Some(header) {
        return Ok(String::new());
    }
    let keep = |l: &&str| {
        let mut cells = l.split(',');
        let (kind, step) = (cells.next().unwrap_or(""), cells.next().and_then(|s| s.parse().ok()));
        step.is_some_and(|s| kept.keeps(kind, s))
    };
    Ok(lines.filter(keep).map(|l| format!("{l}\n")).collect())
}

/// The event file in `dir`: a new one, or for a resumed run the existing one rewritten with
/// the scalars `kept` keeps.
fn open_events(dir: &Path, kept: Option<&Kept>) -> Result<(std::fs::File, PathBuf), TrainError> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let existing = match kept {
        Some(_) => existing_event_file(dir)?,
        None => None,
    };
    let path = existing.clone().unwrap_or_else(|| dir.join(format!("events.out.tfevents.{}.boldcast", now() as u64)));
    let mut bytes = tfevents::encode_version(now());
    if let (Some(old), Some(k)) = (&existing, kept) {
        let old_bytes = std::fs::read(old).map_err(io_err(old))?;
        let scalars =
            tfevents::read_scalars(&old_bytes).map_err(|reason| TrainError::Log { path: old.clone(), reason })?;
        let kind = |tag: &str| if tag.starts_with("train/") { "train" } else { "validation" };
        for s in scalars.iter().filter(|s| k.keeps(kind(&s.tag), s.step as u64)) {
            bytes.extend(tfevents::encode_scalar(s));
        }
    }
    boldcast_storage::fsutil::write_atomic(&path, &bytes).map_err(io_err(&path))?;
    Ok((append(&path)?, path))
}

fn existing_event_file(dir: &Path) -> Result<Option<PathBuf>, TrainError> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io_err(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("events.out.tfevents.")))
        .collect();
    found.sort();
    Ok(found.pop())
}

fn append(path: &Path) -> Result<std::fs::File, TrainError> {
    Ok(std::fs::OpenOptions::new().append(true).open(path).map_err(io_err(path))?)
}

fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(k: u64) -> StepRecord {
        StepRecord { step: k, loss: 1.0 / (k + 1) as f64, lr: 1e-3, grad_norm: 0.5 }
    }

    fn val(step: u64) -> ValRecord {
        ValRecord {
            step,
            val_loss: 0.75,
            val_per_horizon: vec![0.5, 1.0],
            floor: 0.25,
            floor_per_horizon: vec![0.2, 0.3],
            val_over_train: None,
            train_loss: None,
            best_val_loss: 0.75,
            best_step: step,
            bad_validations: 0,
        }
    }

    fn six_steps(out: &Path, kept: Option<&Kept>, from: u64) {
        let mut t = Tracker::open(out, &[1, 5], true, kept).unwrap();
        for k in from..6 {
            t.step(&step(k), 0.125).unwrap();
            if (k + 1) % 3 == 0 {
                t.validation(&val(k + 1)).unwrap();
            }
        }
    }

    fn csv_keys(out: &Path) -> Vec<String> {
        let text = std::fs::read_to_string(out.join(METRICS_CSV)).unwrap();
        text.lines().skip(1).map(|l| l.split(',').take(2).collect::<Vec<_>>().join(" ")).collect()
    }

    fn scalars(out: &Path) -> Vec<(String, i64)> {
        let dir = out.join(TENSORBOARD_DIR);
        let file = existing_event_file(&dir).unwrap().unwrap();
        let s = tfevents::read_scalars(&std::fs::read(file).unwrap()).unwrap();
        s.into_iter().map(|s| (s.tag, s.step)).collect()
    }

    #[test]
    fn rows_and_scalars_follow_the_log_and_a_resume_keeps_what_its_checkpoint_kept() {
        let d = tempfile::tempdir().unwrap();
        six_steps(d.path(), None, 0);
        let text = std::fs::read_to_string(d.path().join(METRICS_CSV)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "kind,step,loss,lr,grad_norm,step_seconds,val_loss,val_loss_h1,val_loss_h5,floor");
        assert_eq!(lines[1], "train,1,1,0.001,0.5,0.125,,,,");
        assert_eq!(lines[4], "validation,3,,,,,0.75,0.5,1,0.25");
        assert!(lines.iter().all(|l| l.split(',').count() == 10), "{text}");
        let full = (csv_keys(d.path()), scalars(d.path()));
        assert_eq!(full.1.len(), 6 * 4 + 2 * 4);
        assert_eq!(full.1[0], ("train/loss".to_string(), 1));
        assert!(full.1.contains(&("validation/loss_h5".to_string(), 6)));

        // Killed after step 5 with the checkpoint of step 3: the resumed part writes 4 to 6 again.
        let r = tempfile::tempdir().unwrap();
        six_steps(r.path(), None, 0);
        let kept = Kept { last_step: 3, validations: [3].into() };
        six_steps(r.path(), Some(&kept), 3);
        assert_eq!((csv_keys(r.path()), scalars(r.path())), full);
    }
}
