//! Writing without leaving half-written output: files through a temporary sibling, a sync and
//! a rename followed by a sync of the directory ([`write_atomic`]), directories built under a
//! temporary name and renamed into place at the end ([`StagedDir`]). The one home of these
//! rules: every file a run writes goes through here or through
//! [`boldcast_data::tensorfile::save_safetensors`], which follows the same steps.

use crate::error::TrainError;
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

/// Writes `bytes` to `path` through a temporary file in the same directory, synced, renamed
/// over `path`, then the directory synced: `path` is either absent, the old file or the whole
/// new file, even after a crash. Creates the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = parent_of(path);
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let res = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
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
    /// [`TrainError::OutputNotADir`], a non-empty directory [`TrainError::OutputNotEmpty`]).
    pub fn new(dest: &Path) -> Result<Self, TrainError> {
        if dest.exists() && !dest.is_dir() {
            return Err(TrainError::OutputNotADir { path: dest.to_path_buf() });
        }
        if dest.exists() {
            let empty = std::fs::read_dir(dest).map_err(TrainError::io(dest))?.next().is_none();
            if !empty {
                return Err(TrainError::OutputNotEmpty { dir: dest.to_path_buf() });
            }
        }
        let parent = parent_of(dest);
        std::fs::create_dir_all(parent).map_err(TrainError::io(parent))?;
        let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
        let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(TrainError::io(&tmp))?;
        }
        std::fs::create_dir(&tmp).map_err(TrainError::io(&tmp))?;
        Ok(Self { tmp, dest: dest.to_path_buf(), done: false })
    }

    /// The temporary directory to write into.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Renames the temporary directory to the destination (replacing an empty directory) and
    /// syncs the parent.
    pub fn commit(mut self) -> Result<PathBuf, TrainError> {
        if self.dest.is_dir() {
            std::fs::remove_dir(&self.dest).map_err(TrainError::io(&self.dest))?;
        }
        std::fs::rename(&self.tmp, &self.dest).map_err(TrainError::io(&self.dest))?;
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
