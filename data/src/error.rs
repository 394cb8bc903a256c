//! [`DataError`]: everything that can be wrong with a dataset or a data setting, each variant
//! naming the file, line, column or field.

use std::fmt;
use std::path::{Path, PathBuf};

/// Everything that can be wrong with a dataset; each variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The data directory does not exist.
    #[error("data directory {} does not exist{}", path.display(), looked_in(path))]
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
        "no runs found in {} or its sub-*/[ses-*/]func/ folders: expected files named sub-<label>[_ses-<label>][_<key>-<value>...][_<suffix>].npy|.tsv|.csv|.ptseries.nii|.dtseries.nii, or _bold.nii|_bold.nii.gz{}{}",
        dir.display(),
        if ignored.is_empty() { String::new() } else { format!(" (ignored: {})", ignored.join(", ")) },
        if skipped.is_empty() { String::new() } else { format!(" (cannot be read: {})", skipped.join("; ")) }
    )]
    NoRuns {
        /// The directory.
        dir: PathBuf,
        /// Data files whose names did not match.
        ignored: Vec<String>,
        /// Entries named like runs that are not readable files: `name, why`.
        skipped: Vec<String>,
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
    /// An output could not be written ([`boldcast_storage::StorageError`]).
    #[error(transparent)]
    Storage(#[from] boldcast_storage::StorageError),
    /// What a dataset would need exceeds the machine's memory.
    #[error(transparent)]
    Memory(#[from] boldcast_storage::memory::OutOfMemory),
    /// A synthetic generator's parameters are invalid.
    #[error(transparent)]
    Fixture(#[from] boldcast_fixtures::FixtureError),
    /// Writing a file failed.
    #[error("{}: {source}", path.display())]
    Write {
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
    /// A motion table beside the runs cannot be used (no displacement column, too large, or
    /// not as long as its run).
    #[error("{}: {reason}", path.display())]
    MotionTable {
        /// The table.
        path: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// A confounds table beside a run cannot be used (a strategy's column missing, a bad
    /// cell, too large, or not as long as its run).
    #[error("{}: {reason}", path.display())]
    Confounds {
        /// The table.
        path: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// A NIfTI run, atlas image or label table is malformed, of an unsupported kind, or on
    /// another grid than its run.
    #[error("{}: {reason}", path.display())]
    Nifti {
        /// The file.
        path: PathBuf,
        /// What is wrong, in a sentence.
        reason: String,
    },
    /// A header names a parcel with an empty or repeated name.
    #[error("{}, line 1, column {column}: {reason}", path.display())]
    Header {
        /// The file.
        path: PathBuf,
        /// 1-based column.
        column: usize,
        /// The name in that column (empty for an empty name).
        name: String,
        /// What is wrong with it, in words that quote the name.
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
    /// The runs that cannot stay on disk (text, CIFTI) would fill the machine's memory: the
    /// load stops before they do.
    #[error(
        "{}: the runs read into memory so far ({read} of {total}) hold {held}, more than 3/4 of this \
         machine's {machine}; give --cache DIR (data.cache) to convert the .tsv, .csv and CIFTI runs once \
         into .npy files that are read from disk",
        dir.display()
    )]
    InMemoryTooLarge {
        /// The dataset.
        dir: PathBuf,
        /// Runs read when the load stopped.
        read: usize,
        /// Runs to read.
        total: usize,
        /// The bytes they hold, in words (`12.0 GiB`).
        held: String,
        /// The machine's memory, in words.
        machine: String,
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
    /// The runs of a tree cannot be picked as asked (several versions without a pick, a pick
    /// that matches nothing, TRs that disagree).
    #[error("{reason}")]
    Select {
        /// What is there and what to do.
        reason: String,
    },
    /// A JSON sidecar is malformed.
    #[error("{}: {reason}", path.display())]
    Sidecar {
        /// The sidecar.
        path: PathBuf,
        /// What is wrong.
        reason: String,
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
    /// A CIFTI-2 file (`.ptseries.nii`, `.dtseries.nii`, `.dlabel.nii`) is malformed, of an
    /// unsupported kind, or disagrees with its label file.
    #[error("{}: {reason}", path.display())]
    Cifti {
        /// The file.
        path: PathBuf,
        /// What is wrong, in a sentence.
        reason: String,
    },
}

impl DataError {
    pub(crate) fn config(field: &str, value: impl fmt::Display, reason: impl Into<String>) -> Self {
        DataError::Config { field: field.into(), value: value.to_string(), reason: reason.into() }
    }
}

/// Where a relative path was looked for (` (looked for /abs/path)`); empty for an absolute one.
fn looked_in(path: &Path) -> String {
    match std::path::absolute(path) {
        Ok(abs) if path.is_relative() => format!(" (looked for {}, from the working directory)", abs.display()),
        _ => String::new(),
    }
}

/// Maps an I/O error on `path` to [`DataError::Io`].
pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> DataError + '_ {
    move |source| DataError::Io { path: path.to_path_buf(), source }
}

/// Why the subjects cannot be split as `[data]` says ([`crate::split()`]) or a subject list
/// cannot be read ([`crate::parse_subject_list`]); each variant names the field or the label.
#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    /// A subject list file (`@FILE`) could not be read.
    #[error("{}: {source}", path.display())]
    ListFile {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A subject list holds something that is not a subject label.
    #[error("subject list `{list}`: `{token}` is not a subject label (letters and digits, optionally after sub-)")]
    NotALabel {
        /// The list as given.
        list: String,
        /// The offending entry.
        token: String,
    },
    /// A subject list names no subject.
    #[error("subject list `{list}` names no subject")]
    EmptyList {
        /// The list as given.
        list: String,
    },
    /// A listed subject is not in the data.
    #[error("{field}: subject `sub-{subject}` is not in the data (subjects: {})", labels(subjects))]
    UnknownSubject {
        /// `data.subjects_train` or `data.subjects_heldout`.
        field: &'static str,
        /// The label, without `sub-`.
        subject: String,
        /// The subjects of the data.
        subjects: Vec<String>,
    },
    /// A subject is listed twice in one list.
    #[error("{field}: subject `sub-{subject}` is listed twice")]
    ListedTwice {
        /// `data.subjects_train` or `data.subjects_heldout`.
        field: &'static str,
        /// The label, without `sub-`.
        subject: String,
    },
    /// A subject is in both lists.
    #[error(
        "subject `sub-{subject}` is in both data.subjects_train and data.subjects_heldout: a subject is either \
         trained on or held out"
    )]
    InBothLists {
        /// The label, without `sub-`.
        subject: String,
    },
    /// `data.heldout_fraction` is set, but the data has fewer than two subjects.
    #[error(
        "data.heldout_fraction = {heldout_fraction}: the data has {subjects} subject, and a split needs at least 2"
    )]
    TooFewSubjects {
        /// The fraction.
        heldout_fraction: f64,
        /// Subjects in the data.
        subjects: usize,
    },
    /// `data.val_subjects` holds out no subject, or every subject.
    #[error(
        "data.val_subjects = {val_subjects}: must hold out at least one of the {subjects} subjects and leave one for \
         training (or set data.subjects_heldout / data.heldout_fraction)"
    )]
    ValSubjects {
        /// The setting.
        val_subjects: usize,
        /// Subjects in the data.
        subjects: usize,
    },
    /// The lists leave no subject for training.
    #[error("the split leaves no subject for training (subjects: {})", labels(subjects))]
    NoTrainSubject {
        /// The subjects of the data.
        subjects: Vec<String>,
    },
    /// The lists hold out no subject.
    #[error("the split holds out no subject for validation (subjects: {})", labels(subjects))]
    NoHeldoutSubject {
        /// The subjects of the data.
        subjects: Vec<String>,
    },
    /// `data.group_column` is set, but the data has no directory to hold `participants.tsv`.
    #[error("data.group_column = `{column}`: the synthetic data has no participants.tsv (give --data DIR)")]
    GroupsNeedDir {
        /// The column.
        column: String,
    },
    /// `participants.tsv` could not be read.
    #[error("{}: {source} (data.group_column needs the data's participants.tsv)", path.display())]
    Participants {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// `participants.tsv` lacks a column.
    #[error("{}: no column `{column}` (columns: {})", path.display(), columns.join(", "))]
    NoColumn {
        /// The file.
        path: PathBuf,
        /// The column asked for.
        column: String,
        /// The header's columns.
        columns: Vec<String>,
    },
    /// A row of `participants.tsv` has no `participant_id`.
    #[error("{}: line {line} has no participant_id", path.display())]
    NoParticipant {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
    },
    /// A subject of the data has no row in `participants.tsv`.
    #[error("{}: no row for subject `sub-{subject}`, so its group is unknown", path.display())]
    NoParticipantRow {
        /// The file.
        path: PathBuf,
        /// The label, without `sub-`.
        subject: String,
    },
    /// Explicit subject lists split a group.
    #[error(
        "{column} `{group}` would straddle the split: {} trained on, {} held out; related subjects must be on one \
         side (move them to one list)",
        labels(train),
        labels(held)
    )]
    GroupSplit {
        /// `data.group_column`.
        column: String,
        /// The group's value.
        group: String,
        /// Its subjects among the training ones.
        train: Vec<String>,
        /// Its subjects among the held-out ones.
        held: Vec<String>,
    },
}

/// `sub-01, sub-02, ...`.
fn labels(subjects: &[String]) -> String {
    subjects.iter().map(|s| format!("sub-{s}")).collect::<Vec<_>>().join(", ")
}
