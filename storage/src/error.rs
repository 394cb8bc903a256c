//! [`StorageError`]: an output path that cannot be written, an I/O failure, or a tensor
//! file's error ([`crate::tensorfile::CheckpointError`]), each naming the path.

use std::path::{Path, PathBuf};

/// What keeping things on disk can fail with; each variant names the path.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// An output directory's path is taken by something that is not a directory.
    #[error("output {} exists and is not a directory; choose another --out", path.display())]
    OutputNotADir {
        /// The path.
        path: PathBuf,
    },
    /// An output directory that must be new or empty is neither.
    #[error("output directory {} already exists and is not empty; choose another --out", dir.display())]
    OutputNotEmpty {
        /// The directory.
        dir: PathBuf,
    },
    /// An output file's path holds something other than a regular file (a device, a FIFO, a
    /// directory, a symbolic link): an output never replaces it.
    #[error("{} exists and is not a regular file ({kind}): it is never replaced; choose another path", path.display())]
    OutputNotAFile {
        /// The path.
        path: PathBuf,
        /// What is there, in words.
        kind: &'static str,
    },
    /// An output file exists and replacing it was not asked for.
    #[error("{} already exists; give --overwrite to replace it", path.display())]
    OutputExists {
        /// The path.
        path: PathBuf,
    },
    /// A safetensors file could not be written or read.
    #[error(transparent)]
    TensorFile(#[from] crate::tensorfile::CheckpointError),
}

/// Maps an I/O error on `path` to [`StorageError::Io`].
pub fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StorageError + '_ {
    move |source| StorageError::Io { path: path.to_path_buf(), source }
}
