//! Writing without leaving half-written output, the one home of these rules: a file is
//! written to a temporary sibling, synced, renamed over its destination and the directory
//! synced ([`replace_with`], [`write_atomic`]), so that after a crash the destination is absent,
//! the old file or the whole new one; a directory is built under a temporary name and renamed
//! into place at the end ([`StagedDir`]). Run files, `parcels.tsv`, safetensors files,
//! checkpoints, logs, summaries and resolved configurations are all written through here.

use crate::error::DataError;
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
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    } else {
        sync_dir(dir);
    }
    res
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
    /// [`DataError::OutputNotADir`], a non-empty directory [`DataError::OutputNotEmpty`]).
    pub fn new(dest: &Path) -> Result<Self, DataError> {
        if dest.exists() && !dest.is_dir() {
            return Err(DataError::OutputNotADir { path: dest.to_path_buf() });
        }
        if dest.exists() {
            let empty = std::fs::read_dir(dest).map_err(crate::error::io_err(dest))?.next().is_none();
            if !empty {
                return Err(DataError::OutputNotEmpty { dir: dest.to_path_buf() });
            }
        }
        let parent = parent_of(dest);
        std::fs::create_dir_all(parent).map_err(crate::error::io_err(parent))?;
        let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
        let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(crate::error::io_err(&tmp))?;
        }
        std::fs::create_dir(&tmp).map_err(crate::error::io_err(&tmp))?;
        Ok(Self { tmp, dest: dest.to_path_buf(), done: false })
    }

    /// The temporary directory to write into.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Renames the temporary directory to the destination (replacing an empty directory) and
    /// syncs the parent.
    pub fn commit(mut self) -> Result<PathBuf, DataError> {
        if self.dest.is_dir() {
            std::fs::remove_dir(&self.dest).map_err(crate::error::io_err(&self.dest))?;
        }
        std::fs::rename(&self.tmp, &self.dest).map_err(crate::error::io_err(&self.dest))?;
        sync_dir(parent_of(&self.dest));
        self.done = true;
        Ok(self.dest.clone())
    }
}

impl Drop for StagedDir {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
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
