//! [`DataError`]: everything that can be wrong with a dataset or a data setting, each variant
//! naming the file, line, column or field.

use std::fmt;
use std::path::{Path, PathBuf};

/// Everything that can be wrong with a dataset; each variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The data directory does not exist.
    #[error("data directory {} does not exist", path.display())]
    MissingDir {
        /// The directory.
        path: PathBuf,
    },
    /// The data path is not a directory.
    #[error("{} is not a directory", path.display())]
    NotADir {
        /// The path.
        path: PathBuf,
    },
    /// No file matched the run pattern.
    #[error(
        "no runs found in {}: expected files named sub-<label>[_ses-<label>]_run-<label>[_<anything>].npy|.tsv|.csv{}",
        dir.display(),
        if ignored.is_empty() { String::new() } else { format!(" (ignored: {})", ignored.join(", ")) }
    )]
    NoRuns {
        /// The directory.
        dir: PathBuf,
        /// Data files whose names did not match.
        ignored: Vec<String>,
    },
    /// Reading a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A `.npy` file is malformed or of an unsupported type or shape.
    #[error("{}: {reason}", path.display())]
    Npy {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A file has no data rows (or no header).
    #[error("{}: {reason}", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
        /// What is missing.
        reason: String,
    },
    /// A row has a different number of cells than the header.
    #[error("{}, line {line}: {found} columns, but the header has {expected}", path.display())]
    Ragged {
        /// The file.
        path: PathBuf,
        /// 1-based line (the header is line 1).
        line: usize,
        /// Columns of the header.
        expected: usize,
        /// Columns of this line.
        found: usize,
    },
    /// A cell is missing, not a number, NaN or infinite.
    #[error("{}, {location}: {reason}", path.display())]
    Cell {
        /// The file.
        path: PathBuf,
        /// `line L, column C (name)` for text files, `row R, column C` for `.npy`.
        location: String,
        /// What is wrong with the cell.
        reason: String,
    },
    /// A run is shorter than one window.
    #[error("{}: {n_tr} TRs, shorter than one window of {window} TRs", path.display())]
    TooShort {
        /// The file.
        path: PathBuf,
        /// TRs in the run.
        n_tr: usize,
        /// The window.
        window: usize,
    },
    /// A run has another number of parcels than the first run.
    #[error("{}: {found} parcels, but {} has {expected}", path.display(), first.display())]
    ParcelCount {
        /// The file.
        path: PathBuf,
        /// The file that set the count.
        first: PathBuf,
        /// Parcels of the first run.
        expected: usize,
        /// Parcels of this run.
        found: usize,
    },
    /// A run names a parcel differently from the first run.
    #[error("{}: column {column} is `{found}`, but {} names it `{expected}`", path.display(), first.display())]
    ParcelNames {
        /// The file.
        path: PathBuf,
        /// The file that set the names.
        first: PathBuf,
        /// 1-based column.
        column: usize,
        /// The name in the first run.
        expected: String,
        /// The name here.
        found: String,
    },
    /// Two files are the same run.
    #[error("{} and {} are the same run ({entities})", path.display(), other.display())]
    DuplicateRun {
        /// One file.
        path: PathBuf,
        /// The other.
        other: PathBuf,
        /// The shared entities.
        entities: String,
    },
    /// `parcels.tsv` is malformed or disagrees with the runs.
    #[error("{}{}: {reason}", path.display(), line.map(|l| format!(", line {l}")).unwrap_or_default())]
    Parcels {
        /// The file.
        path: PathBuf,
        /// 1-based line, where one applies.
        line: Option<usize>,
        /// What is wrong.
        reason: String,
    },
    /// An invalid window or adjacency setting.
    #[error("invalid {field} = {value}: {reason}")]
    Config {
        /// The setting, e.g. `window.window`.
        field: String,
        /// Its value.
        value: String,
        /// Why.
        reason: String,
    },
}

impl DataError {
    pub(crate) fn config(field: &str, value: impl fmt::Display, reason: impl Into<String>) -> Self {
        DataError::Config { field: field.into(), value: value.to_string(), reason: reason.into() }
    }
}

/// Maps an I/O error on `path` to [`DataError::Io`].
pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> DataError + '_ {
    move |source| DataError::Io { path: path.to_path_buf(), source }
}
