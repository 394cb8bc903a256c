//! The run directory as a whole: one process at a time works in it ([`RunDirLock`], an
//! advisory lock on `<out>/.lock` that dies with its process), a fresh run only starts in a new
//! or empty directory ([`check_fresh`], [`create_fresh`]), and a process that starts in an
//! existing one first removes what killed processes left ([`open_existing`]: temporary files
//! of the atomic writes, unfinished checkpoint directories, half-pruned ones).
//!
//! A run directory always holds `config.resolved.toml` from its first moment on, so a run
//! stopped before its first checkpoint can be started again in place ([`read_resolved`]).

use crate::checkpoint::{CKPT_DIR, PRUNED_PREFIX};
use crate::config::RunConfig;
use crate::error::TrainError;
use boldcast_data::DataError;
use std::fs::{File, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock file under a run directory.
pub const LOCK_FILE: &str = ".lock";
/// The resolved configuration of a run directory.
pub const RESOLVED: &str = "config.resolved.toml";

/// An exclusive advisory lock on a run directory, held until dropped (or the process dies).
/// The file holds the holder's process id, for the message of the one refused.
#[derive(Debug)]
pub struct RunDirLock {
    _file: File,
    path: PathBuf,
}

impl RunDirLock {
    /// Locks the existing directory `out`; [`TrainError::Busy`] naming the holder's pid when
    /// another process holds it.
    pub fn acquire(out: &Path) -> Result<RunDirLock, TrainError> {
        let path = out.join(LOCK_FILE);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(TrainError::io(&path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(TrainError::Busy { dir: out.to_path_buf(), pid: text.trim().parse().ok() });
            }
            Err(TryLockError::Error(e)) => return Err(TrainError::Io { path, source: e }),
        }
        let write = |f: &mut File| -> std::io::Result<()> {
            f.set_len(0)?;
            f.rewind()?;
            writeln!(f, "{}", std::process::id())?;
            f.sync_data()
        };
        write(&mut file).map_err(TrainError::io(&path))?;
        Ok(RunDirLock { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Refuses ([`TrainError::Busy`]) when a process holds the lock of `out`; takes and releases
/// it otherwise. An early answer for a command that reads the directory before it locks it.
pub fn ensure_free(out: &Path) -> Result<(), TrainError> {
    if out.join(LOCK_FILE).is_file() {
        drop(RunDirLock::acquire(out)?);
    }
    Ok(())
}

/// `out` may hold a fresh run: it does not exist, or is an empty directory.
pub fn check_fresh(out: &Path) -> Result<(), TrainError> {
    if out.exists() && !out.is_dir() {
        return Err(DataError::OutputNotADir { path: out.to_path_buf() }.into());
    }
    if out.is_dir() && std::fs::read_dir(out).map_err(TrainError::io(out))?.next().is_some() {
        return Err(DataError::OutputNotEmpty { dir: out.to_path_buf() }.into());
    }
    Ok(())
}

/// Creates the directory of a fresh run of `cfg` ([`check_fresh`] first), locks it and writes
/// its `config.resolved.toml`.
pub fn create_fresh(out: &Path, cfg: &RunConfig) -> Result<RunDirLock, TrainError> {
    check_fresh(out)?;
    std::fs::create_dir_all(out).map_err(TrainError::io(out))?;
    let lock = RunDirLock::acquire(out)?;
    cfg.write_resolved(out)?;
    Ok(lock)
}

/// Locks the existing run directory `out` and removes what killed processes left in it.
pub fn open_existing(out: &Path) -> Result<RunDirLock, TrainError> {
    if !out.is_dir() {
        return Err(TrainError::NotARunDir { dir: out.to_path_buf() });
    }
    let lock = RunDirLock::acquire(out)?;
    remove_leftovers(out)?;
    Ok(lock)
}

/// Whether `name` is a leftover of a killed process: a temporary file of an atomic write
/// (`.<name>.tmp-<pid>`), a checkpoint being written (`.step-NNNNNN.tmp`) or one being pruned
/// (`.pruned-...`).
fn is_leftover(name: &str) -> bool {
    let tmp_file = name.starts_with('.')
        && name.rsplit_once(".tmp-").is_some_and(|(_, pid)| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()));
    let tmp_ckpt = name.starts_with(".step-") && name.ends_with(".tmp");
    tmp_file || tmp_ckpt || name.starts_with(PRUNED_PREFIX)
}

/// Removes the leftovers ([`is_leftover`]) of `out`, `out/figures` and `out/checkpoints`.
/// Only called with the lock held, so no live process owns them.
fn remove_leftovers(out: &Path) -> Result<(), TrainError> {
    for dir in [out.to_path_buf(), out.join("figures"), out.join(CKPT_DIR)] {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries {
            let e = e.map_err(TrainError::io(&dir))?;
            if !is_leftover(&e.file_name().to_string_lossy()) {
                continue;
            }
            let p = e.path();
            let r = if e.file_type().map_err(TrainError::io(&p))?.is_dir() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
            r.map_err(TrainError::io(&p))?;
        }
    }
    Ok(())
}

/// The configuration of the run directory `out` from its `config.resolved.toml`, validated;
/// [`TrainError::NotARunDir`] when it has none.
pub fn read_resolved(out: &Path) -> Result<RunConfig, TrainError> {
    let p = out.join(RESOLVED);
    if !p.is_file() {
        return Err(TrainError::NotARunDir { dir: out.to_path_buf() });
    }
    let text = std::fs::read_to_string(&p).map_err(TrainError::io(&p))?;
    let cfg: RunConfig = toml::from_str(&text)
        .map_err(|e| TrainError::Checkpoint { path: p.clone(), reason: format!("not a run configuration: {e}") })?;
    cfg.validate()?;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_naming_the_holder_and_released_on_drop() {
        let d = tempfile::tempdir().unwrap();
        let first = RunDirLock::acquire(d.path()).unwrap();
        match RunDirLock::acquire(d.path()) {
            Err(TrainError::Busy { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected Busy, got {other:?}"),
        }
        assert!(ensure_free(d.path()).is_err());
        drop(first);
        ensure_free(d.path()).unwrap();
        RunDirLock::acquire(d.path()).unwrap();
    }

    #[test]
    fn leftovers_are_recognised_and_nothing_else() {
        for name in [".loss_log.jsonl.tmp-123", ".latest.tmp-9", ".step-000020.tmp", ".pruned-step-000010"] {
            assert!(is_leftover(name), "{name}");
        }
        for name in ["loss_log.jsonl", ".lock", "step-000020", "step-000020.non-finite", ".tmp-", "a.tmp-12", ".x.tmp-"]
        {
            assert!(!is_leftover(name), "{name}");
        }
    }
}
