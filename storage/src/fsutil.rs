//! Writing without leaving half-written output, the one home of these rules: a file is
//! written to a temporary sibling, synced, renamed over its destination and the directory
//! synced ([`replace_with`], [`write_atomic`]), so that after a crash the destination is absent,
//! the old file or the whole new one; a directory is built under a temporary name and renamed
//! into place at the end ([`StagedDir`]). Run files, `parcels.tsv`, safetensors files,
//! checkpoints, logs, summaries, resolved configurations and figures are all written through
//! here. Only a regular file is ever replaced ([`replace_by`]): a device, a FIFO, a directory
//! or a symbolic link at an output's path stays as it is, and the write is an error.

use crate::error::{io_err, StorageError};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Syncs a directory, so that a rename inside it is durable; best effort (not every platform
/// can open a directory).
pub fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

fn parent_of(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// Replaces `path` by what `fill` writes: into `.<name>.tmp-<pid>` beside it, which is synced
/// and renamed over `path`, then the directory is synced. On error the temporary file is
/// removed and `path` is as it was. The directory must exist.
pub fn replace_with(
    path: &Path,
    fill: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let dir = parent_of(path);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let res = (|| {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        fill(&mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()
    })();
    match res {
        Ok(()) => replace_by(&tmp, path),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Renames the finished file `tmp` over `path` and syncs the directory. Only a regular file is
/// ever replaced: anything else at `path` (a device, a FIFO, a directory, a symbolic link) is
/// an error and stays as it was. On error `tmp` is removed.
pub fn replace_by(tmp: &Path, path: &Path) -> std::io::Result<()> {
    let res = match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() => Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("exists and is not a regular file ({}): it is never replaced", file_kind(&m.file_type())),
        )),
        _ => std::fs::rename(tmp, path),
    };
    if res.is_err() {
        let _ = std::fs::remove_file(tmp);
    } else {
        sync_dir(parent_of(path));
    }
    res
}

/// What a non-regular file is, in words.
fn file_kind(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// Whether an output file may be written at `path`: nothing is there, or a regular file and
/// `overwrite` is asked. Anything else is [`StorageError::OutputNotAFile`], a regular file
/// without `overwrite` [`StorageError::OutputExists`]. [`replace_by`] checks the first again
/// when it renames.
pub fn check_replaceable(path: &Path, overwrite: bool) -> Result<(), StorageError> {
    let m = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        other => other.map_err(io_err(path))?,
    };
    match (m.file_type().is_file(), overwrite) {
        (true, true) => Ok(()),
        (true, false) => Err(StorageError::OutputExists { path: path.to_path_buf() }),
        (false, _) => Err(StorageError::OutputNotAFile { path: path.to_path_buf(), kind: file_kind(&m.file_type()) }),
    }
}

/// Writes `bytes` to `path` as [`replace_with`] does, creating the directory first.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(parent_of(path))?;
    replace_with(path, |w| w.write_all(bytes))
}

/// A directory built under a temporary name next to its destination; [`StagedDir::commit`]
/// renames it into place, and dropping it uncommitted removes it.
#[derive(Debug)]
pub struct StagedDir {
    tmp: PathBuf,
    dest: PathBuf,
    done: bool,
}

impl StagedDir {
    /// Stages `dest`, which must not exist or be an empty directory (a file there is
    /// [`StorageError::OutputNotADir`], a non-empty directory [`StorageError::OutputNotEmpty`]).
    pub fn new(dest: &Path) -> Result<Self, StorageError> {
        if dest.exists() && !dest.is_dir() {
            return Err(StorageError::OutputNotADir { path: dest.to_path_buf() });
        }
        if dest.exists() {
            let empty = std::fs::read_dir(dest).map_err(io_err(dest))?.next().is_none();
            if !empty {
                return Err(StorageError::OutputNotEmpty { dir: dest.to_path_buf() });
            }
        }
        let parent = parent_of(dest);
        std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
        remove_stale_stages(parent, &name)?;
        let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(io_err(&tmp))?;
        }
        std::fs::create_dir(&tmp).map_err(io_err(&tmp))?;
        staged_set(|s| s.push(tmp.clone()));
        Ok(Self { tmp, dest: dest.to_path_buf(), done: false })
    }

    /// The temporary directory to write into.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Renames the temporary directory to the destination (replacing an empty directory) and
    /// syncs the parent.
    /// A destination filled meanwhile (another process committed first) is
    /// [`StorageError::OutputNotEmpty`], and this stage is removed.
    pub fn commit(mut self) -> Result<PathBuf, StorageError> {
        let taken = || StorageError::OutputNotEmpty { dir: self.dest.clone() };
        if self.dest.is_dir() {
            if let Err(e) = std::fs::remove_dir(&self.dest) {
                return Err(if is_not_empty(&e) { taken() } else { io_err(&self.dest)(e) });
            }
        } else if self.dest.exists() {
            return Err(StorageError::OutputNotADir { path: self.dest.clone() });
        }
        if let Err(e) = std::fs::rename(&self.tmp, &self.dest) {
            return Err(if is_not_empty(&e) { taken() } else { io_err(&self.dest)(e) });
        }
        sync_dir(parent_of(&self.dest));
        self.done = true;
        staged_set(|s| s.retain(|p| *p != self.tmp));
        Ok(self.dest.clone())
    }
}

impl Drop for StagedDir {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.tmp);
            staged_set(|s| s.retain(|p| *p != self.tmp));
        }
    }
}

/// Whether a rename or removal failed because a directory is not empty (`ENOTEMPTY`, or
/// `EEXIST` where the platform reports that instead).
fn is_not_empty(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::DirectoryNotEmpty || e.kind() == std::io::ErrorKind::AlreadyExists
}

/// The temporary directories of the live [`StagedDir`]s of this process, removed by
/// [`remove_stages_on_signals`] when a signal ends it.
static STAGED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn staged_set(f: impl FnOnce(&mut Vec<PathBuf>)) {
    f(&mut STAGED.lock().unwrap_or_else(|e| e.into_inner()));
}

/// The process id of a temporary name `.<name>.tmp-<pid>` (with or without an extension
/// after the pid), if `file` is one for `name` (`None`: any name).
pub fn temporary_pid(file: &str, name: Option<&str>) -> Option<u32> {
    let rest = file.strip_prefix('.')?;
    let (stem, tail) = rest.rsplit_once(".tmp-")?;
    if name.is_some_and(|n| n != stem) {
        return None;
    }
    let digits = tail.split_once('.').map_or(tail, |(d, _)| d);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Whether the process `pid` is alive (on platforms other than Linux: assumed alive, so
/// nothing of another process is ever removed).
pub fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    !cfg!(target_os = "linux") || Path::new("/proc").join(pid.to_string()).exists()
}

/// Removes the stages of `name` under `parent` (`.<name>.tmp-<pid>`) whose process is gone:
/// what a process killed while it staged there left behind.
fn remove_stale_stages(parent: &Path, name: &str) -> Result<(), StorageError> {
    let Ok(entries) = std::fs::read_dir(parent) else { return Ok(()) };
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        match temporary_pid(&file, Some(name)) {
            Some(pid) if pid != std::process::id() && !process_alive(pid) => {
                let p = e.path();
                std::fs::remove_dir_all(&p).map_err(io_err(&p))?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// On SIGINT, SIGTERM and SIGHUP, removes the temporary directories of the live
/// [`StagedDir`]s, then exits with status 128 + the signal's number (what the shell reports
/// for a process the signal killed). Call it before any other thread starts: the signals are
/// blocked in the calling thread (and so in every thread it starts) and taken by a thread of
/// their own. Unix only; elsewhere it does nothing.
pub fn remove_stages_on_signals() {
    #[cfg(unix)]
    signal_thread();
}

#[cfg(unix)]
fn signal_thread() {
    // SAFETY: the signal set is zeroed, then initialised by sigemptyset before any use;
    // pthread_sigmask and sigwait only read it and write the plain integers given.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return;
        }
        set
    };
    std::thread::spawn(move || {
        let mut sig: libc::c_int = 0;
        // SAFETY: as above.
        if unsafe { libc::sigwait(&set, &mut sig) } == 0 {
            staged_set(|s| s.iter().for_each(|p| drop(std::fs::remove_dir_all(p))));
            std::process::exit(128 + sig);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_writes_replace_and_leave_no_temporary_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub/a.txt");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(d.path().join("sub")).unwrap().count(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn only_a_regular_file_is_replaced_and_only_when_asked() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let e = write_atomic(&fifo, b"x").unwrap_err().to_string();
        assert!(e.contains("not a regular file (a FIFO)"), "{e}");
        let link = d.path().join("link");
        std::os::unix::fs::symlink(d.path().join("victim"), &link).unwrap();
        let e = write_atomic(&link, b"x").unwrap_err().to_string();
        assert!(e.contains("a symbolic link"), "{e}");
        assert!(!d.path().join("victim").exists());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 2, "no temporary file left");
        let e = check_replaceable(&fifo, true).unwrap_err().to_string();
        assert!(e.contains("fifo") && e.contains("a FIFO"), "{e}");
        let f = d.path().join("f");
        check_replaceable(&f, false).unwrap();
        std::fs::write(&f, b"old").unwrap();
        let e = check_replaceable(&f, false).unwrap_err().to_string();
        assert!(e.contains("already exists") && e.contains("--overwrite"), "{e}");
        check_replaceable(&f, true).unwrap();
    }

    #[test]
    fn a_staged_directory_appears_only_when_committed() {
        let d = tempfile::tempdir().unwrap();
        let dest = d.path().join("out");
        let s = StagedDir::new(&dest).unwrap();
        std::fs::write(s.path().join("f"), b"x").unwrap();
        assert!(!dest.exists());
        s.commit().unwrap();
        assert!(dest.join("f").is_file());
        let e = StagedDir::new(&dest).unwrap_err().to_string();
        assert!(e.contains("already exists and is not empty"), "{e}");
        drop(StagedDir::new(&d.path().join("other")).unwrap());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1, "an uncommitted stage is removed");
        // Another process fills the destination after the stage was made: the commit names it.
        let late = d.path().join("late");
        let s = StagedDir::new(&late).unwrap();
        std::fs::write(s.path().join("mine"), b"x").unwrap();
        std::fs::create_dir(&late).unwrap();
        std::fs::write(late.join("theirs"), b"y").unwrap();
        let e = s.commit().unwrap_err().to_string();
        assert!(e.contains("already exists and is not empty") && e.contains("late"), "{e}");
        assert!(!e.contains("os error"), "{e}");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 2, "the loser's stage is removed");
        assert!(late.join("theirs").is_file());
    }

    #[test]
    fn a_file_in_the_way_is_not_a_directory() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("out");
        std::fs::write(&f, b"x").unwrap();
        let e = StagedDir::new(&f).unwrap_err().to_string();
        assert!(e.contains("is not a directory") && e.contains("out"), "{e}");
        assert!(!e.contains("not empty"), "{e}");
        assert_eq!(std::fs::read(&f).unwrap(), b"x");
    }
}
