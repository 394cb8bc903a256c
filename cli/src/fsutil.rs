//! Writing without leaving half-written output: files through a temporary sibling and a
//! rename, directories built under a temporary name and renamed into place at the end.

use crate::error::CliError;
use std::path::{Path, PathBuf};

pub use boldcast::config::write_atomic;

/// A directory built under a temporary name next to its destination; [`StagedDir::commit`]
/// renames it into place, and dropping it uncommitted removes it.
#[derive(Debug)]
pub struct StagedDir {
    tmp: PathBuf,
    dest: PathBuf,
    done: bool,
}

impl StagedDir {
    /// Stages `dest`, which must not exist or be an empty directory.
    pub fn new(dest: &Path) -> Result<Self, CliError> {
        if dest.exists() {
            let empty = dest.is_dir() && std::fs::read_dir(dest).map_err(CliError::io(dest))?.next().is_none();
            if !empty {
                return Err(CliError::Msg(format!(
                    "output directory {} already exists and is not empty; choose another --out",
                    dest.display()
                )));
            }
        }
        let parent = dest.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(CliError::io(parent))?;
        let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
        let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(CliError::io(&tmp))?;
        }
        std::fs::create_dir(&tmp).map_err(CliError::io(&tmp))?;
        Ok(Self { tmp, dest: dest.to_path_buf(), done: false })
    }

    /// The temporary directory to write into.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Renames the temporary directory to the destination (replacing an empty directory).
    pub fn commit(mut self) -> Result<PathBuf, CliError> {
        if self.dest.is_dir() {
            std::fs::remove_dir(&self.dest).map_err(CliError::io(&self.dest))?;
        }
        std::fs::rename(&self.tmp, &self.dest).map_err(CliError::io(&self.dest))?;
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
