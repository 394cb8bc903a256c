//! The run directory as a whole: one process at a time works in it ([`RunDirLock`], an
//! advisory lock on `<out>/.lock` that dies with its process, opened without following a
//! symbolic link), each belongs to the command that made it ([`RunKind`], named in
//! `<out>/.run-kind`: `train` continues only its own directories, `overfit` starts again only
//! in its own, neither writes into a non-empty directory of anything else: [`check_start`],
//! [`start`], [`check_continue`]), and a process that starts in an existing one first removes
//! what killed processes left ([`open_existing`]: temporary files of the atomic writes,
//! unfinished checkpoint directories, half-pruned ones).
//!
//! A run directory always holds `config.resolved.toml` from its first moment on, so a run
//! stopped before its first checkpoint can be started again in place ([`read_resolved`]).
//! Directories from before `.run-kind` are told by their files ([`owner`]).

use crate::checkpoint::{CKPT_DIR, PRUNED_PREFIX};
use crate::config::RunConfig;
use crate::error::TrainError;
use boldcast_storage::{io_err, StorageError};
use std::fs::{File, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock file under a run directory.
pub const LOCK_FILE: &str = ".lock";
/// The resolved configuration of a run directory.
pub const RESOLVED: &str = "config.resolved.toml";
/// The file naming the command a run directory belongs to (`train` or `overfit`).
pub const KIND_FILE: &str = ".run-kind";

/// The command a run directory belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunKind {
    /// `bc-cli train`: continued with `--resume`, never started again in place.
    Train,
    /// `bc-cli overfit`: started again from step 0 in its own directory.
    Overfit,
}

impl RunKind {
    /// The command's name, as [`KIND_FILE`] holds it.
    pub fn name(self) -> &'static str {
        match self {
            RunKind::Train => "train",
            RunKind::Overfit => "overfit",
        }
    }

    /// `a` or `an`, for a message.
    pub fn article(self) -> &'static str {
        match self {
            RunKind::Train => "a",
            RunKind::Overfit => "an",
        }
    }

    fn parse(s: &str) -> Option<RunKind> {
        [RunKind::Train, RunKind::Overfit].into_iter().find(|k| k.name() == s.trim())
    }
}

/// Whose a directory is ([`owner`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// Nobody's: absent, or empty (but for a lock file).
    Nobody,
    /// A run directory of this command.
    Run(RunKind),
    /// A run directory that does not say its command: from before [`KIND_FILE`], with
    /// `config.resolved.toml` but nothing only one command writes.
    Unmarked,
    /// A non-empty directory that is no run's.
    Foreign,
}

/// Whose the directory `out` is: [`KIND_FILE`] says it; without it (directories from before
/// it) `summary.json`'s `command`, a `checkpoints` directory (train) or the overfit figure
/// (overfit) do. A path that is not a directory is [`StorageError::OutputNotADir`].
pub fn owner(out: &Path) -> Result<Owner, TrainError> {
    if !out.exists() {
        return Ok(Owner::Nobody);
    }
    if !out.is_dir() {
        return Err(StorageError::OutputNotADir { path: out.to_path_buf() }.into());
    }
    let mut entries = std::fs::read_dir(out).map_err(io_err(out))?;
    if entries.all(|e| e.is_ok_and(|e| e.file_name() == LOCK_FILE)) {
        return Ok(Owner::Nobody);
    }
    if let Ok(text) = std::fs::read_to_string(out.join(KIND_FILE)) {
        return Ok(RunKind::parse(&text).map_or(Owner::Foreign, Owner::Run));
    }
    let summary = std::fs::read_to_string(out.join("summary.json")).ok();
    let command = summary.and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    if let Some(k) = command.as_ref().and_then(|v| v["command"].as_str()).and_then(RunKind::parse) {
        return Ok(Owner::Run(k));
    }
    Ok(if out.join(CKPT_DIR).is_dir() {
        Owner::Run(RunKind::Train)
    } else if out.join("figures/overfit_curve.png").is_file() {
        Owner::Run(RunKind::Overfit)
    } else if out.join(RESOLVED).is_file() {
        Owner::Unmarked
    } else {
        Owner::Foreign
    })
}

/// A run of `kind` may start in `out`: it is new or empty, or (`overfit`, which starts again
/// in place) `kind`'s own. Another command's run directory is [`TrainError::OtherRunDir`],
/// any other non-empty directory [`StorageError::OutputNotEmpty`].
pub fn check_start(out: &Path, kind: RunKind) -> Result<(), TrainError> {
    match owner(out)? {
        Owner::Nobody => Ok(()),
        Owner::Run(k) if k == kind && kind == RunKind::Overfit => Ok(()),
        Owner::Run(k) if k != kind => Err(TrainError::OtherRunDir { dir: out.to_path_buf(), owner: k, command: kind }),
        _ => Err(StorageError::OutputNotEmpty { dir: out.to_path_buf() }.into()),
    }
}

/// A run of `kind` may continue in `out`: it is not another command's run directory
/// ([`TrainError::OtherRunDir`]).
pub fn check_continue(out: &Path, kind: RunKind) -> Result<(), TrainError> {
    match owner(out)? {
        Owner::Run(k) if k != kind => Err(TrainError::OtherRunDir { dir: out.to_path_buf(), owner: k, command: kind }),
        _ => Ok(()),
    }
}

/// Starts a run of `kind` in `out` ([`check_start`]): creates the directory, locks it, checks
/// again under the lock, removes leftovers, and writes [`KIND_FILE`] and
/// `config.resolved.toml`.
pub fn start(out: &Path, kind: RunKind, cfg: &RunConfig) -> Result<RunDirLock, TrainError> {
    check_start(out, kind)?;
    std::fs::create_dir_all(out).map_err(io_err(out))?;
    let lock = RunDirLock::acquire(out)?;
    check_start(out, kind)?;
    remove_leftovers(out)?;
    let marker = out.join(KIND_FILE);
    boldcast_storage::fsutil::write_atomic(&marker, format!("{}\n", kind.name()).as_bytes())
        .map_err(io_err(&marker))?;
    cfg.write_resolved(out)?;
    Ok(lock)
}

/// An exclusive advisory lock on a run directory, held until dropped (or the process dies).
/// The file holds the holder's process id, for the message of the one refused.
#[derive(Debug)]
pub struct RunDirLock {
    _file: File,
    path: PathBuf,
}

impl RunDirLock {
    /// Locks the existing directory `out`; [`TrainError::Busy`] naming the holder's pid when
    /// another process holds it, [`TrainError::LockFile`] when `.lock` is a symbolic link
    /// (never followed) or not a regular file.
    pub fn acquire(out: &Path) -> Result<RunDirLock, TrainError> {
        let (mut file, path) = try_lock(out)?;
        let write = |f: &mut File| -> std::io::Result<()> {
            f.set_len(0)?;
            f.rewind()?;
            writeln!(f, "{}", std::process::id())?;
            f.sync_data()
        };
        write(&mut file).map_err(io_err(&path))?;
        Ok(RunDirLock { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Locks the lock file of `out` without writing to it: the file and its path, or
/// [`TrainError::Busy`] naming the pid it holds.
fn try_lock(out: &Path) -> Result<(File, PathBuf), TrainError> {
    let path = out.join(LOCK_FILE);
    let mut file = open_lock_file(&path).map_err(|e| lock_file_error(&path, e))?;
    match file.try_lock() {
        Ok(()) => Ok((file, path)),
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            Err(TrainError::Busy { dir: out.to_path_buf(), pid: text.trim().parse().ok() })
        }
        Err(TryLockError::Error(e)) => Err(StorageError::Io { path, source: e }.into()),
    }
}

/// Opens the lock file `path` read-write without following a symbolic link (`O_NOFOLLOW`):
/// created exclusively when absent, else the regular file there.
fn open_lock_file(path: &Path) -> std::io::Result<File> {
    let not_regular = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file");
    if std::fs::symlink_metadata(path).is_ok_and(|m| !m.file_type().is_file()) {
        return Err(not_regular());
    }
    let mut o = std::fs::OpenOptions::new();
    o.read(true).write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = match o.clone().create_new(true).open(path) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => o.open(path)?,
        r => r?,
    };
    if !file.metadata()?.is_file() {
        return Err(not_regular());
    }
    Ok(file)
}

/// The error of a lock file that could not be opened: what is there, and the process it
/// names when it can be read.
fn lock_file_error(path: &Path, e: std::io::Error) -> TrainError {
    // Read only a regular file (a FIFO would block): through a link, its target.
    let pid = std::fs::metadata(path)
        .is_ok_and(|m| m.is_file())
        .then(|| std::fs::read_to_string(path).ok()?.trim().parse::<u32>().ok())
        .flatten();
    let names = pid.map_or(String::new(), |p| format!(", which names process {p}"));
    let reason = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            let to = std::fs::read_link(path).map_or("?".into(), |t| t.display().to_string());
            let dangling = if std::fs::metadata(path).is_err() { ", which does not exist" } else { "" };
            format!(
                "is a symbolic link (to {to}{dangling}{names}); a lock file is never followed: remove the link and \
                 start again"
            )
        }
        _ => {
            format!("cannot be opened as a lock file ({e}{names}); if no such process runs, remove it and start again")
        }
    };
    TrainError::LockFile { path: path.to_path_buf(), reason }
}

/// Refuses ([`TrainError::Busy`]) when a process holds the lock of `out`, or
/// ([`TrainError::LockFile`]) when its lock file cannot be locked; takes and releases it
/// otherwise, writing nothing. An early answer for a command that reads the directory before
/// it locks it.
pub fn ensure_free(out: &Path) -> Result<(), TrainError> {
    if std::fs::symlink_metadata(out.join(LOCK_FILE)).is_ok() {
        drop(try_lock(out)?);
    }
    Ok(())
}

/// `out` may hold a fresh training run: it does not exist, or is an empty directory
/// ([`check_start`] of [`RunKind::Train`]).
pub fn check_fresh(out: &Path) -> Result<(), TrainError> {
    check_start(out, RunKind::Train)
}

/// Creates the directory of a fresh training run of `cfg` ([`start`] of [`RunKind::Train`]).
pub fn create_fresh(out: &Path, cfg: &RunConfig) -> Result<RunDirLock, TrainError> {
    start(out, RunKind::Train, cfg)
}

/// Locks the existing training run directory `out` ([`check_continue`], again under the
/// lock) and removes what killed processes left in it.
pub fn open_existing(out: &Path) -> Result<RunDirLock, TrainError> {
    open_existing_listing(out).map(|(lock, _)| lock)
}

/// [`open_existing`], with a line per leftover removed.
fn open_existing_listing(out: &Path) -> Result<(RunDirLock, Vec<String>), TrainError> {
    if !out.is_dir() {
        return Err(TrainError::NotARunDir { dir: out.to_path_buf() });
    }
    check_continue(out, RunKind::Train)?;
    let lock = RunDirLock::acquire(out)?;
    check_continue(out, RunKind::Train)?;
    let removed = remove_leftovers(out)?;
    let marker = out.join(KIND_FILE);
    if !marker.exists() {
        boldcast_storage::fsutil::write_atomic(&marker, b"train\n").map_err(io_err(&marker))?;
    }
    Ok((lock, removed))
}

/// Whether `name` is a leftover of a killed process: a temporary file of an atomic write
/// (`.<name>.tmp-<pid>`, or a figure's `.<name>.tmp-<pid>.png`), a checkpoint being written (`.step-NNNNNN.tmp`) or one being pruned
/// (`.pruned-...`).
fn is_leftover(name: &str) -> bool {
    let tmp_file = boldcast_storage::fsutil::temporary_pid(name, None).is_some();
    let tmp_ckpt = name.starts_with(".step-") && name.ends_with(".tmp");
    tmp_file || tmp_ckpt || name.starts_with(PRUNED_PREFIX)
}

/// What a finished run's directory lacked and was given ([`complete_finished`]), under its lock.
#[derive(Debug)]
pub struct Completed {
    /// The lock, held while the caller draws what is missing.
    pub lock: RunDirLock,
    /// What was done, one line each (`removed ...`); empty when nothing was left over.
    pub done: Vec<String>,
}

/// Finishes what a finished run of `out` (newest checkpoint at `step`) lacks after a kill at
/// its very end: under the lock, the leftovers of killed processes are removed and the
/// checkpoints pruned to the newest [`KEEP`](crate::checkpoint::KEEP). Figures are the
/// caller's to draw (the library draws none).
pub fn complete_finished(out: &Path, step: u64) -> Result<Completed, TrainError> {
    let (lock, mut done) = open_existing_listing(out)?;
    let ck = out.join(CKPT_DIR);
    for d in crate::checkpoint::write::prune_to(&ck, step)? {
        done.push(format!("removed {}, older than the newest {}", d.display(), crate::checkpoint::KEEP));
    }
    Ok(Completed { lock, done })
}

/// Removes the leftovers ([`is_leftover`]) of `out`, `out/figures` and `out/checkpoints`,
/// and returns one line per removed path. Only called with the lock held, so no live process
/// owns them.
fn remove_leftovers(out: &Path) -> Result<Vec<String>, TrainError> {
    let mut removed = Vec::new();
    for dir in [out.to_path_buf(), out.join("figures"), out.join(CKPT_DIR)] {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries {
            let e = e.map_err(io_err(&dir))?;
            if !is_leftover(&e.file_name().to_string_lossy()) {
                continue;
            }
            let p = e.path();
            let r = if e.file_type().map_err(io_err(&p))?.is_dir() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
            r.map_err(io_err(&p))?;
            removed.push(format!("removed {}, left by a killed process", p.display()));
        }
    }
    Ok(removed)
}

/// The configuration of the run directory `out` from its `config.resolved.toml`, validated;
/// [`TrainError::NotARunDir`] when it has none.
pub fn read_resolved(out: &Path) -> Result<RunConfig, TrainError> {
    let p = out.join(RESOLVED);
    if !p.is_file() {
        return Err(TrainError::NotARunDir { dir: out.to_path_buf() });
    }
    let text = std::fs::read_to_string(&p).map_err(io_err(&p))?;
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

    #[cfg(unix)]
    #[test]
    fn a_lock_file_that_is_a_link_is_refused_and_its_target_untouched() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, b"77\n").unwrap();
        let out = d.path().join("run");
        std::fs::create_dir(&out).unwrap();
        std::os::unix::fs::symlink(&victim, out.join(LOCK_FILE)).unwrap();
        let e = RunDirLock::acquire(&out).unwrap_err().to_string();
        assert!(e.contains("symbolic link") && e.contains("process 77") && e.contains(".lock"), "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"77\n");
        std::fs::remove_file(out.join(LOCK_FILE)).unwrap();
        std::os::unix::fs::symlink(d.path().join("gone"), out.join(LOCK_FILE)).unwrap();
        let e = ensure_free(&out).unwrap_err().to_string();
        assert!(e.contains("does not exist") && e.contains("never followed"), "{e}");
        assert!(!d.path().join("gone").exists());
        std::fs::remove_file(out.join(LOCK_FILE)).unwrap();
        std::fs::create_dir(out.join(LOCK_FILE)).unwrap();
        let e = RunDirLock::acquire(&out).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
    }

    #[test]
    fn each_command_starts_only_in_its_own_or_a_new_directory() {
        let d = tempfile::tempdir().unwrap();
        let cfg = crate::presets::preset("quick").unwrap();
        let (t, o) = (d.path().join("t"), d.path().join("o"));
        drop(start(&t, RunKind::Train, &cfg).unwrap());
        assert_eq!(owner(&t).unwrap(), Owner::Run(RunKind::Train));
        assert_eq!(std::fs::read_to_string(t.join(KIND_FILE)).unwrap(), "train\n");
        let e = start(&t, RunKind::Overfit, &cfg).unwrap_err().to_string();
        assert!(e.contains("is a train run directory") && e.contains("bc-cli overfit"), "{e}");
        assert!(matches!(
            check_start(&t, RunKind::Train),
            Err(TrainError::Storage(StorageError::OutputNotEmpty { .. }))
        ));
        check_continue(&t, RunKind::Train).unwrap();
        let lock = start(&o, RunKind::Overfit, &cfg).unwrap();
        // A live overfit holds its directory; a finished one starts again there.
        assert!(matches!(start(&o, RunKind::Overfit, &cfg), Err(TrainError::Busy { .. })));
        drop(lock);
        drop(start(&o, RunKind::Overfit, &cfg).unwrap());
        let e = open_existing(&o).unwrap_err().to_string();
        assert!(e.contains("is an overfit run directory") && e.contains("bc-cli train"), "{e}");
        // Anything else non-empty is nobody's to write into; a directory from before the
        // marker is told by its files.
        let f = d.path().join("f");
        std::fs::create_dir(&f).unwrap();
        std::fs::write(f.join("notes.txt"), b"x").unwrap();
        assert_eq!(owner(&f).unwrap(), Owner::Foreign);
        assert!(matches!(
            check_start(&f, RunKind::Overfit),
            Err(TrainError::Storage(StorageError::OutputNotEmpty { .. }))
        ));
        std::fs::write(f.join(RESOLVED), b"").unwrap();
        assert_eq!(owner(&f).unwrap(), Owner::Unmarked);
        std::fs::write(f.join("summary.json"), br#"{"command": "overfit"}"#).unwrap();
        assert_eq!(owner(&f).unwrap(), Owner::Run(RunKind::Overfit));
    }

    #[test]
    fn leftovers_are_recognised_and_nothing_else() {
        let figure = ".loss_curves.png.tmp-77.png";
        for name in [".loss_log.jsonl.tmp-123", ".latest.tmp-9", ".step-000020.tmp", ".pruned-step-000010", figure] {
            assert!(is_leftover(name), "{name}");
        }
        let not = [
            "loss_log.jsonl",
            ".lock",
            "step-000020",
            "step-000020.non-finite",
            ".tmp-",
            "a.tmp-12",
            ".x.tmp-",
            ".x.tmp-.png",
        ];
        for name in not {
            assert!(!is_leftover(name), "{name}");
        }
    }
}
