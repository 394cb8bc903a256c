//! Datasets of BOLD runs: loading a directory, run-wise standardization, windows, tokens and
//! the adjacency (MODEL.md, "Data to tokens").
//!
//! # The directory
//!
//! One file per run, named with BIDS entities:
//! `sub-<label>[_ses-<label>][_<key>-<value>...]_run-<label>[_<anything>].<ext>`, where labels
//! are ASCII letters and digits and `<ext>` is one of
//!
//! - `.npy`: a 2-D float32 or float64 array `(n_tr, P)` (C or Fortran order);
//! - `.tsv` / `.csv`: a header row of parcel names (as XCP-D writes its time series), then one
//!   row per TR, cells separated by a tab (`.tsv`) or a comma (`.csv`). Quotes around header
//!   names are stripped; quoted cells are not otherwise supported. Trailing empty lines are
//!   ignored.
//!
//! Other entities between `ses` and `run` (e.g. `task-rest`) are allowed and part of the run's
//! identity. Files with a data extension whose names do not match the pattern are **ignored and
//! listed** in [`Dataset::ignored`] (the command line prints them as a note); files with other
//! extensions are skipped silently, and so is `parcels.tsv`, which is read on its own:
//! `name x y z` per parcel (a header row `name x y z`, then one row per parcel in the order of
//! the runs' columns). With it, the adjacency is the k nearest parcels by Euclidean distance;
//! without it, the k most correlated parcels on the training runs (both self first, ties
//! broken by the lower index).
//!
//! Every run must have the same parcels: the same count, and for `.tsv`/`.csv` the same names
//! in the same order (the first run read, in file-name order, sets them). Every bad input is a
//! [`DataError`] naming the file and, for a cell, its line (1-based, the header is line 1) or
//! row (0-based, `.npy`) and column (1-based, with the parcel name).
//!
//! # Standardization, windows, tokens
//!
//! Each run is standardized per parcel in f64 (mean 0, population standard deviation 1); a
//! parcel with zero standard deviation becomes zeros and [`Dataset::warnings`] says so once per
//! parcel. Windows of `window` TRs start at `0, stride, 2 stride, ...` while they fit; a window
//! becomes tokens `tokens[t, p, j] = x[start + t D + j, p]`.

use boldcast_core::floor::empirical_floor_per_parcel;
use boldcast_core::{Adjacency, Elem, TokenShape, Tokens};
use boldcast_fixtures::SynthRun;
use std::collections::BTreeMap;
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
    fn config(field: &str, value: impl fmt::Display, reason: impl Into<String>) -> Self {
        DataError::Config { field: field.into(), value: value.to_string(), reason: reason.into() }
    }
}

/// The BIDS entities that identify a run.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId {
    /// `sub-` label.
    pub subject: String,
    /// `ses-` label, if any.
    pub session: Option<String>,
    /// Other `key-value` entities between `ses` and `run`, in file order (e.g. `task-rest`).
    pub other: Vec<String>,
    /// `run-` label.
    pub run: String,
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sub-{}", self.subject)?;
        if let Some(s) = &self.session {
            write!(f, "_ses-{s}")?;
        }
        for o in &self.other {
            write!(f, "_{o}")?;
        }
        write!(f, "_run-{}", self.run)
    }
}

/// The run a file name stands for, or `None` when it does not follow the pattern.
pub fn parse_run_name(file_name: &str) -> Option<(RunId, &'static str)> {
    let (stem, ext) = file_name.rsplit_once('.')?;
    let ext = match ext {
        "npy" => "npy",
        "tsv" => "tsv",
        "csv" => "csv",
        _ => return None,
    };
    let label = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric());
    let mut parts = stem.split('_');
    let subject = parts.next()?.strip_prefix("sub-").filter(|l| label(l))?.to_string();
    let mut session = None;
    let mut other = Vec::new();
    for (i, part) in parts.by_ref().enumerate() {
        if let Some(r) = part.strip_prefix("run-") {
            return label(r).then(|| (RunId { subject, session, other, run: r.to_string() }, ext));
        }
        if let Some(s) = part.strip_prefix("ses-") {
            if i != 0 || !label(s) {
                return None;
            }
            session = Some(s.to_string());
            continue;
        }
        let (k, v) = part.split_once('-')?;
        if !label(k) || !label(v) {
            return None;
        }
        other.push(part.to_string());
    }
    None
}

/// One run, standardized.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    /// Its entities.
    pub id: RunId,
    /// The file it came from (the run's label for in-memory data).
    pub path: PathBuf,
    /// TRs.
    pub n_tr: usize,
    /// Standardized `x[t, p]` at `data[t * parcels + p]`.
    pub data: Vec<f64>,
}

/// Window length, stride and token width.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct WindowSpec {
    /// TRs per window.
    pub window: usize,
    /// TRs between window starts.
    pub stride: usize,
    /// TRs per token (D).
    pub d_in: usize,
}

impl WindowSpec {
    /// Checks the sizes: all at least 1 and `window % d_in == 0`.
    pub fn validate(&self) -> Result<(), DataError> {
        if self.window == 0 {
            return Err(DataError::config("window.window", 0, "must be at least 1"));
        }
        if self.stride == 0 {
            return Err(DataError::config("window.stride", 0, "must be at least 1"));
        }
        if self.d_in == 0 {
            return Err(DataError::config("model.d_in", 0, "must be at least 1"));
        }
        if !self.window.is_multiple_of(self.d_in) {
            return Err(DataError::config(
                "window.window",
                self.window,
                format!("must be a multiple of d_in = {} (tokens are d_in TRs)", self.d_in),
            ));
        }
        Ok(())
    }
    /// Tokens per window, `window / d_in`.
    pub fn tokens(&self) -> usize {
        self.window / self.d_in
    }
}

/// One window: a run and the TR it starts at.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct WindowRef {
    /// Index into [`Dataset::runs`].
    pub run: usize,
    /// First TR.
    pub start: usize,
}

/// A set of standardized runs with the same parcels.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    /// The runs, in file-name order.
    pub runs: Vec<Run>,
    /// P.
    pub parcels: usize,
    /// Parcel names: the header of text files, else `parcels.tsv`'s, else `parcel-000`, ...
    pub parcel_names: Vec<String>,
    /// Centroids from `parcels.tsv`, if present.
    pub centroids: Option<Vec<[f64; 3]>>,
    /// Data files in the directory whose names do not match the run pattern.
    pub ignored: Vec<PathBuf>,
    /// Warnings (zero-variance parcels), one per parcel.
    pub warnings: Vec<String>,
}

/// A run as read, before standardization.
struct RawRun {
    n_tr: usize,
    parcels: usize,
    names: Option<Vec<String>>,
    data: Vec<f64>,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> DataError + '_ {
    move |source| DataError::Io { path: path.to_path_buf(), source }
}

fn read_npy(path: &Path) -> Result<RawRun, DataError> {
    let bytes = std::fs::read(path).map_err(io_err(path))?;
    let npy_err = |reason: String| DataError::Npy { path: path.to_path_buf(), reason };
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(|e| npy_err(format!("not a valid .npy file: {e}")))?;
    let shape: Vec<u64> = npy.shape().to_vec();
    let order = npy.order();
    if shape.len() != 2 {
        return Err(npy_err(format!("expected a 2-D array (n_tr, parcels), found shape {shape:?}")));
    }
    let (n, p) = (shape[0] as usize, shape[1] as usize);
    let dtype = npy.dtype().descr().trim_matches('\'').to_string();
    let data: Vec<f64> = match npy.try_data::<f64>() {
        Ok(r) => r.collect::<Result<_, _>>().map_err(|e| npy_err(format!("truncated data: {e}")))?,
        Err(npy) => match npy.try_data::<f32>() {
            Ok(r) => r
                .map(|v| v.map(f64::from))
                .collect::<Result<_, _>>()
                .map_err(|e| npy_err(format!("truncated data: {e}")))?,
            Err(_) => return Err(npy_err(format!("unsupported dtype {dtype}: only float32 and float64 are read"))),
        },
    };
    let data = if order == npyz::Order::Fortran {
        let mut c = vec![0.0; n * p];
        for t in 0..n {
            for q in 0..p {
                c[t * p + q] = data[q * n + t];
            }
        }
        c
    } else {
        data
    };
    if let Some(i) = data.iter().position(|v| !v.is_finite()) {
        return Err(DataError::Cell {
            path: path.to_path_buf(),
            location: format!("row {}, column {}", i / p, i % p + 1),
            reason: format!("non-finite value {}", data[i]),
        });
    }
    Ok(RawRun { n_tr: n, parcels: p, names: None, data })
}

fn read_text(path: &Path, sep: char) -> Result<RawRun, DataError> {
    let text = std::fs::read_to_string(path).map_err(io_err(path))?;
    let lines: Vec<&str> = text.lines().collect();
    let end = lines.iter().rposition(|l| !l.trim().is_empty()).map_or(0, |i| i + 1);
    let lines = &lines[..end];
    let header = lines
        .first()
        .ok_or_else(|| DataError::Empty { path: path.to_path_buf(), reason: "empty file: no header row".into() })?;
    let names: Vec<String> = header.split(sep).map(|s| s.trim().trim_matches('"').to_string()).collect();
    let p = names.len();
    let mut data = Vec::with_capacity(p * lines.len().saturating_sub(1));
    for (i, line) in lines.iter().enumerate().skip(1) {
        let cells: Vec<&str> = line.split(sep).collect();
        if cells.len() != p {
            return Err(DataError::Ragged { path: path.to_path_buf(), line: i + 1, expected: p, found: cells.len() });
        }
        for (c, cell) in cells.iter().enumerate() {
            let cell = cell.trim();
            let bad = |reason: String| DataError::Cell {
                path: path.to_path_buf(),
                location: format!("line {}, column {} ({})", i + 1, c + 1, names[c]),
                reason,
            };
            let v = match cell {
                "n/a" | "N/A" | "NA" => return Err(bad(format!("missing value `{cell}`"))),
                "" => return Err(bad("empty cell".into())),
                _ => cell.parse::<f64>().map_err(|_| bad(format!("`{cell}` is not a number")))?,
            };
            if !v.is_finite() {
                return Err(bad(format!("non-finite value `{cell}`")));
            }
            data.push(v);
        }
    }
    let n = lines.len() - 1;
    if n == 0 {
        return Err(DataError::Empty { path: path.to_path_buf(), reason: "no data rows after the header".into() });
    }
    Ok(RawRun { n_tr: n, parcels: p, names: Some(names), data })
}

fn read_parcels(path: &Path) -> Result<(Vec<String>, Vec<[f64; 3]>), DataError> {
    let text = std::fs::read_to_string(path).map_err(io_err(path))?;
    let err = |line: Option<usize>, reason: String| DataError::Parcels { path: path.to_path_buf(), line, reason };
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().ok_or_else(|| err(None, "empty file: expected a header `name x y z`".into()))?;
    let cols: Vec<&str> = header.split('\t').map(str::trim).collect();
    if cols != ["name", "x", "y", "z"] {
        return Err(err(Some(1), format!("header must be `name x y z` (tab-separated), found `{}`", cols.join(" "))));
    }
    let (mut names, mut xyz) = (Vec::new(), Vec::new());
    for (i, line) in lines {
        let cells: Vec<&str> = line.split('\t').map(str::trim).collect();
        if cells.len() != 4 {
            return Err(err(Some(i + 1), format!("{} columns, expected 4 (name x y z)", cells.len())));
        }
        let mut c = [0.0; 3];
        for k in 0..3 {
            c[k] = cells[k + 1].parse::<f64>().ok().filter(|v| v.is_finite()).ok_or_else(|| {
                err(Some(i + 1), format!("column {} `{}` is not a finite number", k + 2, cells[k + 1]))
            })?;
        }
        names.push(cells[0].to_string());
        xyz.push(c);
    }
    if names.is_empty() {
        return Err(err(None, "no parcels after the header".into()));
    }
    Ok((names, xyz))
}

/// Standardizes `x[n, p]` per parcel in place (mean 0, population std 1); returns the parcels
/// whose standard deviation is 0 (set to zeros).
pub fn standardize(data: &mut [f64], n: usize, p: usize) -> Vec<usize> {
    let mut constant = Vec::new();
    for q in 0..p {
        let mean = (0..n).map(|t| data[t * p + q]).sum::<f64>() / n as f64;
        let var = (0..n).map(|t| (data[t * p + q] - mean).powi(2)).sum::<f64>() / n as f64;
        let sd = var.sqrt();
        if sd == 0.0 || !sd.is_finite() {
            constant.push(q);
            for t in 0..n {
                data[t * p + q] = 0.0;
            }
        } else {
            for t in 0..n {
                data[t * p + q] = (data[t * p + q] - mean) / sd;
            }
        }
    }
    constant
}

impl Dataset {
    /// Loads every run of `dir` (see the module documentation) and standardizes it.
    pub fn load(dir: impl AsRef<Path>) -> Result<Dataset, DataError> {
        let dir = dir.as_ref();
        if !dir.exists() {
            return Err(DataError::MissingDir { path: dir.to_path_buf() });
        }
        if !dir.is_dir() {
            return Err(DataError::NotADir { path: dir.to_path_buf() });
        }
        let mut files: Vec<(String, PathBuf)> = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
            let entry = entry.map_err(io_err(dir))?;
            let path = entry.path();
            if !path.is_file() {
                continue;
            }
            if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                files.push((name.to_string(), path.clone()));
            }
        }
        files.sort();
        let mut ignored = Vec::new();
        let mut found: Vec<(RunId, &'static str, PathBuf)> = Vec::new();
        let mut seen: BTreeMap<RunId, PathBuf> = BTreeMap::new();
        for (name, path) in files {
            if name == "parcels.tsv" {
                continue;
            }
            match parse_run_name(&name) {
                Some((id, ext)) => {
                    if let Some(other) = seen.get(&id) {
                        return Err(DataError::DuplicateRun { path, other: other.clone(), entities: id.to_string() });
                    }
                    seen.insert(id.clone(), path.clone());
                    found.push((id, ext, path));
                }
                None => {
                    let ext = name.rsplit_once('.').map(|(_, e)| e);
                    if matches!(ext, Some("npy" | "tsv" | "csv")) {
                        ignored.push(path);
                    }
                }
            }
        }
        if found.is_empty() {
            return Err(DataError::NoRuns {
                dir: dir.to_path_buf(),
                ignored: ignored
                    .iter()
                    .filter_map(|p| p.file_name())
                    .map(|n| n.to_string_lossy().into_owned())
                    .collect(),
            });
        }
        let mut raws = Vec::new();
        for (id, ext, path) in found {
            let raw = match ext {
                "npy" => read_npy(&path)?,
                "tsv" => read_text(&path, '\t')?,
                _ => read_text(&path, ',')?,
            };
            raws.push((id, path, raw));
        }
        // Parcel count and names against the first run (and the first named run).
        let (first_path, p) = (raws[0].1.clone(), raws[0].2.parcels);
        let mut named: Option<(PathBuf, Vec<String>)> = None;
        for (_, path, raw) in &raws {
            if raw.parcels != p {
                return Err(DataError::ParcelCount {
                    path: path.clone(),
                    first: first_path.clone(),
                    expected: p,
                    found: raw.parcels,
                });
            }
            if let Some(names) = &raw.names {
                match &named {
                    None => named = Some((path.clone(), names.clone())),
                    Some((first, want)) => {
                        if let Some(c) = (0..p).find(|&c| want[c] != names[c]) {
                            return Err(DataError::ParcelNames {
                                path: path.clone(),
                                first: first.clone(),
                                column: c + 1,
                                expected: want[c].clone(),
                                found: names[c].clone(),
                            });
                        }
                    }
                }
            }
        }
        let parcels_path = dir.join("parcels.tsv");
        let mut centroids = None;
        let mut parcel_names = named.as_ref().map(|(_, n)| n.clone());
        if parcels_path.is_file() {
            let (names, xyz) = read_parcels(&parcels_path)?;
            if names.len() != p {
                return Err(DataError::Parcels {
                    path: parcels_path,
                    line: None,
                    reason: format!("{} parcels, but the runs have {p}", names.len()),
                });
            }
            if let Some((first, want)) = &named {
                if let Some(c) = (0..p).find(|&c| want[c] != names[c]) {
                    return Err(DataError::Parcels {
                        path: parcels_path,
                        line: Some(c + 2),
                        reason: format!(
                            "parcel `{}`, but column {} of {} is `{}`",
                            names[c],
                            c + 1,
                            first.display(),
                            want[c]
                        ),
                    });
                }
            }
            parcel_names.get_or_insert(names);
            centroids = Some(xyz);
        }
        let parcel_names = parcel_names.unwrap_or_else(|| boldcast_fixtures::parcel_names(p));
        let runs = raws.into_iter().map(|(id, path, raw)| (id, path, raw.n_tr, raw.data)).collect();
        let mut ds = Self::from_parts(runs, p, parcel_names, centroids);
        ds.ignored = ignored;
        Ok(ds)
    }

    /// Standardizes raw runs `(id, path, n_tr, x[n_tr, p])` into a dataset.
    fn from_parts(
        runs: Vec<(RunId, PathBuf, usize, Vec<f64>)>,
        parcels: usize,
        parcel_names: Vec<String>,
        centroids: Option<Vec<[f64; 3]>>,
    ) -> Self {
        let mut constant: BTreeMap<usize, (usize, PathBuf)> = BTreeMap::new();
        let runs: Vec<Run> = runs
            .into_iter()
            .map(|(id, path, n_tr, mut data)| {
                for q in standardize(&mut data, n_tr, parcels) {
                    constant.entry(q).or_insert((0, path.clone())).0 += 1;
                }
                Run { id, path, n_tr, data }
            })
            .collect();
        let warnings = constant
            .into_iter()
            .map(|(q, (count, first))| {
                format!(
                    "parcel `{}` (column {}) has zero variance in {count} run(s) (first: {}); it is set to zeros there",
                    parcel_names[q],
                    q + 1,
                    first.display()
                )
            })
            .collect();
        Dataset { runs, parcels, parcel_names, centroids, ignored: Vec::new(), warnings }
    }

    /// A dataset from generated runs (standardized like loaded ones); `centroids`, if given,
    /// play the role of `parcels.tsv`.
    pub fn from_synth(runs: &[SynthRun], centroids: Option<Vec<[f64; 3]>>) -> Result<Dataset, DataError> {
        let first = runs.first().ok_or_else(|| DataError::config("data", "[]", "no runs were generated"))?;
        let p = first.parcels;
        let parts = runs
            .iter()
            .map(|r| {
                let id = RunId { subject: r.subject.clone(), session: None, other: Vec::new(), run: r.run.clone() };
                let path = PathBuf::from(format!("{id} (synthetic)"));
                if r.parcels != p {
                    return Err(DataError::ParcelCount {
                        path: path.clone(),
                        first: PathBuf::from("the first synthetic run"),
                        expected: p,
                        found: r.parcels,
                    });
                }
                Ok((id, path, r.n_tr, r.data.clone()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(c) = &centroids {
            if c.len() != p {
                return Err(DataError::config("centroids", c.len(), format!("the runs have {p} parcels")));
            }
        }
        Ok(Self::from_parts(parts, p, boldcast_fixtures::parcel_names(p), centroids))
    }

    /// Every window of every run, run by run: starts `0, stride, ...` while `start + window <=
    /// n_tr`. A run shorter than one window is an error naming its file.
    pub fn windows(&self, spec: &WindowSpec) -> Result<Vec<WindowRef>, DataError> {
        self.windows_of(spec, &(0..self.runs.len()).collect::<Vec<_>>())
    }

    /// The windows of the runs `runs` (indices into [`Dataset::runs`]).
    pub fn windows_of(&self, spec: &WindowSpec, runs: &[usize]) -> Result<Vec<WindowRef>, DataError> {
        spec.validate()?;
        let mut out = Vec::new();
        for &r in runs {
            let run = &self.runs[r];
            if run.n_tr < spec.window {
                return Err(DataError::TooShort { path: run.path.clone(), n_tr: run.n_tr, window: spec.window });
            }
            let mut start = 0;
            while start + spec.window <= run.n_tr {
                out.push(WindowRef { run: r, start });
                start += spec.stride;
            }
        }
        Ok(out)
    }

    /// Tokens `(B, T, P, D)` of the given windows: `tokens[b, t, p, j] = x[start + t D + j, p]`.
    pub fn tokens<E: Elem>(&self, windows: &[WindowRef], spec: &WindowSpec) -> Result<Tokens<E>, DataError> {
        spec.validate()?;
        let (t_n, d, p) = (spec.tokens(), spec.d_in, self.parcels);
        let mut out = Tokens::<E>::zeros(TokenShape::new(windows.len(), t_n, p, d));
        for (b, w) in windows.iter().enumerate() {
            let run = self.runs.get(w.run).ok_or_else(|| DataError::config("window.run", w.run, "no such run"))?;
            if w.start + spec.window > run.n_tr {
                return Err(DataError::TooShort {
                    path: run.path.clone(),
                    n_tr: run.n_tr,
                    window: w.start + spec.window,
                });
            }
            for t in 0..t_n {
                for q in 0..p {
                    for j in 0..d {
                        let i = out.index(b, t, q, j);
                        out.data_mut()[i] = E::of(run.data[(w.start + t * d + j) * p + q]);
                    }
                }
            }
        }
        Ok(out)
    }

    /// `series[r][p]`: parcel `p` of run `r` as a series (standardized).
    pub fn series(&self) -> Vec<Vec<Vec<f64>>> {
        self.runs
            .iter()
            .map(|r| (0..self.parcels).map(|q| (0..r.n_tr).map(|t| r.data[t * self.parcels + q]).collect()).collect())
            .collect()
    }

    /// The empirical single-lag floor per parcel (MODEL.md, "The loss floor"), from
    /// `boldcast_core::floor::empirical_floor_per_parcel` on the standardized runs.
    pub fn empirical_floor_per_parcel(&self, horizons: &[usize], d_in: usize) -> Result<Vec<f64>, DataError> {
        empirical_floor_per_parcel(&self.series(), horizons, d_in)
            .map_err(|e| DataError::config("floor", "", e.to_string()))
    }

    /// The adjacency with `k` neighbours (self first), or `None` for `k = 0`: the k nearest
    /// centroids when the dataset has them, else the k most correlated parcels over the runs
    /// `train` (Pearson correlation of the standardized series, pooled over those runs). Ties
    /// go to the lower index.
    pub fn adjacency(&self, k: usize, train: &[usize]) -> Result<Option<Adjacency>, DataError> {
        if k == 0 {
            return Ok(None);
        }
        let p = self.parcels;
        if k > p {
            return Err(DataError::config("model.k_neighbors", k, format!("exceeds the {p} parcels of the data")));
        }
        // score[a][b]: larger is nearer.
        let score: Vec<Vec<f64>> = match &self.centroids {
            Some(c) => (0..p)
                .map(|a| (0..p).map(|b| -(0..3).map(|i| (c[a][i] - c[b][i]).powi(2)).sum::<f64>()).collect())
                .collect(),
            None => {
                if train.is_empty() {
                    return Err(DataError::config("train runs", "[]", "need at least one run for the correlation"));
                }
                let mut s = vec![vec![0.0; p]; p];
                for &r in train {
                    let run = &self.runs[r];
                    for t in 0..run.n_tr {
                        let row = &run.data[t * p..(t + 1) * p];
                        for a in 0..p {
                            for b in a..p {
                                s[a][b] += row[a] * row[b];
                            }
                        }
                    }
                }
                // Standardized series: the correlation is sum(x_a x_b) / sqrt(sum x_a^2 sum x_b^2).
                let diag: Vec<f64> = (0..p).map(|a| s[a][a]).collect();
                let mut c = vec![vec![0.0; p]; p];
                for a in 0..p {
                    for b in a..p {
                        let den = (diag[a] * diag[b]).sqrt();
                        let v = if den > 0.0 { s[a][b] / den } else { 0.0 };
                        c[a][b] = v;
                        c[b][a] = v;
                    }
                }
                c
            }
        };
        let mut idx = Vec::with_capacity(p * k);
        for (a, row) in score.iter().enumerate() {
            let mut others: Vec<usize> = (0..p).filter(|&b| b != a).collect();
            others.sort_by(|&x, &y| row[y].partial_cmp(&row[x]).unwrap_or(std::cmp::Ordering::Equal).then(x.cmp(&y)));
            idx.push(a);
            idx.extend_from_slice(&others[..k - 1]);
        }
        Adjacency::new(p, k, idx).map(Some).map_err(|e| DataError::config("adjacency", "", e.to_string()))
    }

    /// Splits the runs by subject: the last `val_subjects` subjects in sorted order are held
    /// out. Returns `(train, val)` run indices; at least one subject must stay for training.
    pub fn split_subjects(&self, val_subjects: usize) -> Result<(Vec<usize>, Vec<usize>), DataError> {
        let subjects = self.subjects();
        if val_subjects >= subjects.len() {
            return Err(DataError::config(
                "data.val_subjects",
                val_subjects,
                format!("must leave at least one of the {} subjects for training", subjects.len()),
            ));
        }
        let val = &subjects[subjects.len() - val_subjects..];
        let (mut tr, mut va) = (Vec::new(), Vec::new());
        for (i, r) in self.runs.iter().enumerate() {
            if val.contains(&r.id.subject) {
                va.push(i);
            } else {
                tr.push(i);
            }
        }
        Ok((tr, va))
    }

    /// The distinct subjects, sorted.
    pub fn subjects(&self) -> Vec<String> {
        let mut s: Vec<String> = self.runs.iter().map(|r| r.id.subject.clone()).collect();
        s.sort();
        s.dedup();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::File::create(&p).unwrap().write_all(text.as_bytes()).unwrap();
        p
    }

    fn tsv(rows: &[&[f64]], names: &[&str]) -> String {
        let mut s = names.join("\t") + "\n";
        for r in rows {
            s += &r.iter().map(|v| v.to_string()).collect::<Vec<_>>().join("\t");
            s += "\n";
        }
        s
    }

    fn ramp(n: usize, p: usize) -> Vec<Vec<f64>> {
        (0..n).map(|t| (0..p).map(|q| (t * (q + 1)) as f64 + (t * t % 7) as f64).collect()).collect()
    }

    fn tsv_run(n: usize, p: usize) -> String {
        let rows = ramp(n, p);
        let refs: Vec<&[f64]> = rows.iter().map(|r| r.as_slice()).collect();
        let names: Vec<String> = (0..p).map(|q| format!("P{q}")).collect();
        let nr: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
        tsv(&refs, &nr)
    }

    fn write_npy_f32(path: &Path, n: usize, p: usize, data: &[f32]) {
        use npyz::WriterBuilder;
        let mut f = std::fs::File::create(path).unwrap();
        let mut w =
            npyz::WriteOptions::new().default_dtype().shape(&[n as u64, p as u64]).writer(&mut f).begin_nd().unwrap();
        w.extend(data.iter().copied()).unwrap();
        w.finish().unwrap();
    }

    #[test]
    fn run_names_follow_bids() {
        let (id, ext) = parse_run_name("sub-01_ses-A_task-rest_run-2_space-MNI_timeseries.tsv").unwrap();
        assert_eq!(ext, "tsv");
        assert_eq!(id.subject, "01");
        assert_eq!(id.session.as_deref(), Some("A"));
        assert_eq!(id.other, vec!["task-rest".to_string()]);
        assert_eq!(id.run, "2");
        assert_eq!(id.to_string(), "sub-01_ses-A_task-rest_run-2");
        assert!(parse_run_name("sub-01_run-1.npy").is_some());
        assert!(parse_run_name("sub-01_bold.npy").is_none(), "no run entity");
        assert!(parse_run_name("sub-01_run-1.txt").is_none());
        assert!(parse_run_name("sub-0_1_run-1.npy").is_none());
        assert!(parse_run_name("ses-1_sub-01_run-1.npy").is_none());
        assert!(parse_run_name("sub-01_run-.npy").is_none());
    }

    #[test]
    fn loads_tsv_and_npy_standardized() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "sub-01_run-1_bold.tsv", &tsv_run(20, 3));
        let raw: Vec<f32> = (0..60).map(|i| ((i * 7) % 11) as f32).collect();
        write_npy_f32(&d.path().join("sub-02_run-1_bold.npy"), 20, 3, &raw);
        write(d.path(), "notes.tsv", "x\n1\n");
        write(d.path(), "README.md", "hello");
        let ds = Dataset::load(d.path()).unwrap();
        assert_eq!(ds.runs.len(), 2);
        assert_eq!(ds.parcels, 3);
        assert_eq!(ds.parcel_names, vec!["P0", "P1", "P2"]);
        assert_eq!(ds.ignored, vec![d.path().join("notes.tsv")]);
        for run in &ds.runs {
            for q in 0..3 {
                let x: Vec<f64> = (0..run.n_tr).map(|t| run.data[t * 3 + q]).collect();
                let m = x.iter().sum::<f64>() / 20.0;
                let v = x.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / 20.0;
                assert!(m.abs() < 1e-12 && (v - 1.0).abs() < 1e-12);
            }
        }
        // The npy values, standardized in f64 by hand.
        let col0: Vec<f64> = (0..20).map(|t| raw[t * 3] as f64).collect();
        let m = col0.iter().sum::<f64>() / 20.0;
        let sd = (col0.iter().map(|a| (a - m).powi(2)).sum::<f64>() / 20.0).sqrt();
        assert!((ds.runs[1].data[3] - (col0[1] - m) / sd).abs() < 1e-12);
    }

    #[test]
    fn windows_and_tokens_follow_model_md() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "sub-01_run-1.tsv", &tsv_run(11, 2));
        let ds = Dataset::load(d.path()).unwrap();
        let spec = WindowSpec { window: 4, stride: 3, d_in: 2 };
        let w = ds.windows(&spec).unwrap();
        assert_eq!(w.iter().map(|w| w.start).collect::<Vec<_>>(), vec![0, 3, 6]);
        let tok = ds.tokens::<f64>(&w, &spec).unwrap();
        assert_eq!(tok.shape(), TokenShape::new(3, 2, 2, 2));
        let x = &ds.runs[0].data;
        // tokens[b=1, t=1, p=1, j=0] = x[3 + 2 + 0, 1]
        assert_eq!(tok.at(1, 1, 1, 0), x[5 * 2 + 1]);
        assert_eq!(tok.at(2, 0, 0, 1), x[7 * 2]);
        let e = ds.windows(&WindowSpec { window: 5, stride: 1, d_in: 2 }).unwrap_err();
        assert!(e.to_string().contains("window.window = 5") && e.to_string().contains("multiple of d_in = 2"), "{e}");
        let e = ds.windows(&WindowSpec { window: 12, stride: 1, d_in: 1 }).unwrap_err();
        assert!(e.to_string().contains("sub-01_run-1.tsv: 11 TRs, shorter than one window of 12"), "{e}");
    }

    fn load_err(files: &[(&str, &str)]) -> String {
        let d = tempfile::tempdir().unwrap();
        for (n, t) in files {
            write(d.path(), n, t);
        }
        Dataset::load(d.path()).unwrap_err().to_string()
    }

    #[test]
    fn bad_inputs_name_file_line_and_column() {
        let e = load_err(&[("sub-01_run-1.tsv", "a\tb\n1\t2\n3\tn/a\n")]);
        assert!(e.contains("sub-01_run-1.tsv, line 3, column 2 (b): missing value `n/a`"), "{e}");
        let e = load_err(&[("sub-01_run-1.tsv", "a\tb\n1\tx1\n")]);
        assert!(e.contains("line 2, column 2 (b): `x1` is not a number"), "{e}");
        let e = load_err(&[("sub-01_run-1.csv", "a,b\n1,2\ninf,2\n")]);
        assert!(e.contains("sub-01_run-1.csv, line 3, column 1 (a): non-finite value `inf`"), "{e}");
        let e = load_err(&[("sub-01_run-1.tsv", "a\tb\n1\tNaN\n")]);
        assert!(e.contains("non-finite value `NaN`"), "{e}");
        let e = load_err(&[("sub-01_run-1.tsv", "a\tb\n1\t2\n1\t2\t3\n")]);
        assert!(e.contains("sub-01_run-1.tsv, line 3: 3 columns, but the header has 2"), "{e}");
        let e = load_err(&[("sub-01_run-1.tsv", "a\tb\n1\t2\n"), ("sub-02_run-1.tsv", "a\tb\tc\n1\t2\t3\n")]);
        assert!(e.contains("sub-02_run-1.tsv: 3 parcels, but") && e.contains("sub-01_run-1.tsv has 2"), "{e}");
        let e = load_err(&[("sub-01_run-1.tsv", "a\tb\n1\t2\n"), ("sub-02_run-1.tsv", "a\tc\n1\t2\n")]);
        assert!(e.contains("sub-02_run-1.tsv: column 2 is `c`, but") && e.contains("names it `b`"), "{e}");
        let e = load_err(&[("sub-01_run-1.tsv", "a\tb\n")]);
        assert!(e.contains("no data rows"), "{e}");
        let e = load_err(&[("bold.tsv", "a\n1\n")]);
        assert!(e.contains("no runs found") && e.contains("bold.tsv"), "{e}");
        let e = load_err(&[("sub-01_run-1_bold.tsv", "a\n1\n"), ("sub-01_run-1_bold.npy", "junk")]);
        assert!(e.contains("are the same run (sub-01_run-1)"), "{e}");
        let e = load_err(&[("sub-01_run-1.npy", "junk")]);
        assert!(e.contains("sub-01_run-1.npy: not a valid .npy file"), "{e}");
        let e = load_err(&[
            ("sub-01_run-1.tsv", "a\tb\n1\t2\n"),
            ("parcels.tsv", "name\tx\ty\tz\na\t0\t0\t0\nb\t1\tq\t0\n"),
        ]);
        assert!(e.contains("parcels.tsv, line 3: column 3 `q` is not a finite number"), "{e}");
        let e = load_err(&[
            ("sub-01_run-1.tsv", "a\tb\n1\t2\n"),
            ("parcels.tsv", "name\tx\ty\tz\nb\t0\t0\t0\na\t1\t1\t0\n"),
        ]);
        assert!(e.contains("parcels.tsv, line 2: parcel `b`, but column 1"), "{e}");
        let missing = std::env::temp_dir().join("boldcast-no-such-dir-xyz");
        let e = Dataset::load(&missing).unwrap_err().to_string();
        assert!(e.contains("does not exist") && e.contains("boldcast-no-such-dir-xyz"), "{e}");
    }

    #[test]
    fn npy_nan_and_shape_are_errors() {
        let d = tempfile::tempdir().unwrap();
        let mut v = vec![0.5f32; 12];
        v[7] = f32::NAN;
        write_npy_f32(&d.path().join("sub-01_run-1.npy"), 4, 3, &v);
        let e = Dataset::load(d.path()).unwrap_err().to_string();
        assert!(e.contains("sub-01_run-1.npy, row 2, column 2: non-finite value NaN"), "{e}");
        let d = tempfile::tempdir().unwrap();
        use npyz::WriterBuilder;
        let mut f = std::fs::File::create(d.path().join("sub-01_run-1.npy")).unwrap();
        let mut w = npyz::WriteOptions::new().default_dtype().shape(&[4]).writer(&mut f).begin_nd().unwrap();
        w.extend([1.0f64, 2.0, 3.0, 4.0]).unwrap();
        w.finish().unwrap();
        let e = Dataset::load(d.path()).unwrap_err().to_string();
        assert!(e.contains("expected a 2-D array (n_tr, parcels), found shape [4]"), "{e}");
        let d = tempfile::tempdir().unwrap();
        let mut f = std::fs::File::create(d.path().join("sub-01_run-1.npy")).unwrap();
        let mut w = npyz::WriteOptions::new().default_dtype().shape(&[2, 1]).writer(&mut f).begin_nd().unwrap();
        w.extend([1i32, 2]).unwrap();
        w.finish().unwrap();
        let e = Dataset::load(d.path()).unwrap_err().to_string();
        assert!(e.contains("unsupported dtype <i4"), "{e}");
    }

    #[test]
    fn npy_fortran_order_and_csv_quotes() {
        use npyz::WriterBuilder;
        let d = tempfile::tempdir().unwrap();
        // x[t, p] = 10 t + p, stored column-major.
        let (n, p) = (4usize, 3usize);
        let col_major: Vec<f64> = (0..p).flat_map(|q| (0..n).map(move |t| (10 * t + q) as f64)).collect();
        let mut f = std::fs::File::create(d.path().join("sub-01_run-1.npy")).unwrap();
        let mut w = npyz::WriteOptions::new()
            .default_dtype()
            .order(npyz::Order::Fortran)
            .shape(&[n as u64, p as u64])
            .writer(&mut f)
            .begin_nd()
            .unwrap();
        w.extend(col_major).unwrap();
        w.finish().unwrap();
        write(d.path(), "sub-02_run-1.csv", "\"a\",\"b\",\"c\"\n0,1,2\n10,11,12\n20,21,22\n30,31,32\n");
        let ds = Dataset::load(d.path()).unwrap();
        assert_eq!(ds.parcel_names, ["a", "b", "c"]);
        // Both runs hold the same values, so they standardize to the same matrix.
        assert_eq!(ds.runs[0].data, ds.runs[1].data);
        assert!(ds.runs[0].data[3] < ds.runs[0].data[6], "row-major after reading");
    }

    #[test]
    fn constant_parcel_warns_once() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "sub-01_run-1.tsv", "a\tb\n1\t5\n2\t5\n3\t5\n");
        write(d.path(), "sub-02_run-1.tsv", "a\tb\n1\t4\n2\t4\n4\t4\n");
        let ds = Dataset::load(d.path()).unwrap();
        assert_eq!(ds.warnings.len(), 1, "{:?}", ds.warnings);
        assert!(ds.warnings[0].contains("parcel `b` (column 2) has zero variance in 2 run(s)"), "{}", ds.warnings[0]);
        assert!(ds.runs.iter().all(|r| (0..r.n_tr).all(|t| r.data[t * 2 + 1] == 0.0)));
    }

    #[test]
    fn adjacency_from_centroids_and_correlation() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "sub-01_run-1.tsv", &tsv_run(30, 4));
        write(d.path(), "parcels.tsv", "name\tx\ty\tz\nP0\t0\t0\t0\nP1\t10\t0\t0\nP2\t1\t0\t0\nP3\t2\t0\t0\n");
        let ds = Dataset::load(d.path()).unwrap();
        let a = ds.adjacency(3, &[0]).unwrap().unwrap();
        assert_eq!(a.row(0), &[0, 2, 3]);
        assert_eq!(a.row(1), &[1, 3, 2]);
        // P2 is at distance 1 from both P0 and P3: the tie goes to the lower index.
        assert_eq!(a.row(2), &[2, 0, 3]);
        assert!(ds.adjacency(0, &[0]).unwrap().is_none());
        assert!(ds.adjacency(5, &[0]).unwrap_err().to_string().contains("model.k_neighbors = 5"));

        // Correlation: parcels 0 and 2 identical, 1 = -0, 3 independent-ish.
        let runs = vec![SynthRun {
            subject: "01".into(),
            run: "1".into(),
            n_tr: 8,
            parcels: 4,
            data: vec![
                1., -1., 1., 0., //
                2., -2., 2., 1., //
                0., 0., 0.1, 0., //
                -1., 1., -1., 1., //
                3., -3., 3., 0., //
                1., -1., 1., 1., //
                0., 0., 0., 0., //
                -2., 2., -2., 1.,
            ],
        }];
        let ds = Dataset::from_synth(&runs, None).unwrap();
        let a = ds.adjacency(2, &[0]).unwrap().unwrap();
        assert_eq!(a.row(0), &[0, 2]);
        assert_eq!(a.row(2), &[2, 0]);
        // Parcel 1 is perfectly anti-correlated with 0: top-k is by signed correlation.
        assert_ne!(a.row(1)[1], 0);
    }

    #[test]
    fn subjects_split_keeps_runs_together() {
        use boldcast_fixtures::{Ar1Spec, Layout};
        let spec = Ar1Spec::new(Layout { subjects: 3, runs: 2, trs: 10, parcels: 2, seed: 1 }, 0.5);
        let ds = Dataset::from_synth(&spec.generate().unwrap(), None).unwrap();
        assert_eq!(ds.subjects(), ["01", "02", "03"]);
        assert_eq!(ds.split_subjects(1).unwrap(), (vec![0, 1, 2, 3], vec![4, 5]));
        assert_eq!(ds.split_subjects(0).unwrap(), (vec![0, 1, 2, 3, 4, 5], vec![]));
        let e = ds.split_subjects(3).unwrap_err().to_string();
        assert!(e.contains("invalid data.val_subjects = 3: must leave at least one of the 3 subjects"), "{e}");
    }

    #[test]
    fn empirical_floor_of_long_ar1_is_near_exact() {
        use boldcast_fixtures::{Ar1Spec, Layout, RhoSpec};
        let spec = Ar1Spec {
            layout: Layout { subjects: 4, runs: 2, trs: 5000, parcels: 3, seed: 11 },
            rho: RhoSpec::List(vec![0.9, 0.7, 0.5]),
            innovation_mix: 0.5,
            mix_k: 3,
        };
        let ds = Dataset::from_synth(&spec.generate().unwrap(), None).unwrap();
        let emp = ds.empirical_floor_per_parcel(&[1, 5], 1).unwrap();
        let exact = spec.floor(&[1, 5], 1).unwrap();
        for (e, x) in emp.iter().zip(&exact.per_parcel) {
            assert!((e - x).abs() < 0.02, "{e} vs {x}");
        }
    }
}
