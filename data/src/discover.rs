//! Finding the run files of a dataset: a flat directory, or the root of a BIDS derivatives
//! tree (`sub-*/[ses-*/]func/`), with each file's name parsed ([`discover`]). What is found is
//! sorted into runs, recognised tables that sit beside the series and are not runs (coverage,
//! design, motion, outliers, connectivity matrices, ...), JSON sidecars (for the TR), data
//! files not named like runs (ignored, and listed) and entries that cannot be read (skipped,
//! and listed: run files, sidecars and `parcels.tsv` that are not readable files, and
//! gzip-compressed run files, `*.ptseries.nii.gz`, which are not read).

use crate::error::{io_err, DataError};
use crate::names::{parse_bids_name, parse_sidecar_name, BidsName, RunId, RUN_EXTENSIONS};
use std::path::{Path, PathBuf};

/// Suffixes of the tables that XCP-D, fMRIPrep and BIDS write beside the series and that are
/// not runs.
pub const TABLE_SUFFIXES: [&str; 15] = [
    "motion",
    "outliers",
    "design",
    "relmat",
    "qc",
    "morph",
    "confounds",
    "regressors",
    "boldmap",
    "dseg",
    "probseg",
    "coverage",
    "mask",
    "scans",
    "sessions",
];

/// Directories deeper than this under the root are not searched (`sub/ses/func` is 3).
const MAX_DEPTH: usize = 3;

/// A run file.
#[derive(Clone, Debug)]
pub(crate) struct RunFile {
    /// Its identity.
    pub id: RunId,
    /// Its parsed name.
    pub name: BidsName,
    /// Its data extension (one of [`RUN_EXTENSIONS`]).
    pub ext: &'static str,
    /// Where it is.
    pub path: PathBuf,
}

/// What a directory holds.
#[derive(Debug, Default)]
pub(crate) struct Discovery {
    /// The run files, sorted by path.
    pub runs: Vec<RunFile>,
    /// Recognised tables beside the series (not runs).
    pub tables: Vec<PathBuf>,
    /// JSON sidecars: `(path, its parsed name)`.
    pub sidecars: Vec<(PathBuf, BidsName)>,
    /// Data files not named like runs.
    pub ignored: Vec<PathBuf>,
    /// Entries named like runs that cannot be read, with why.
    pub skipped: Vec<(PathBuf, String)>,
    /// `parcels.tsv` at the root, if a readable file.
    pub parcels: Option<PathBuf>,
}

/// The data extension of a file name in any case, and whether it is in lowercase (the only
/// case run names have).
pub(crate) fn data_extension(name: &str) -> Option<(&'static str, bool)> {
    let lower = name.to_ascii_lowercase();
    let known = RUN_EXTENSIONS.into_iter().find(|k| lower.ends_with(&format!(".{k}")))?;
    Some((known, name.ends_with(known)))
}

/// Whether a name is one of the tables beside the series rather than a run.
pub(crate) fn is_table(name: &BidsName) -> bool {
    let suffix = name.suffix.as_deref().unwrap_or("");
    TABLE_SUFFIXES.contains(&suffix)
        || name.get("stat").is_some_and(|s| s != "mean")
        || name.get("desc").is_some_and(|d| d.starts_with("confound"))
}

/// `Ok` for a regular file (through symbolic links), else why it cannot be read as one.
pub(crate) fn readable_file(path: &Path) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(m) if m.is_dir() => Err("a directory".into()),
        Ok(_) => Err("not a regular file".into()),
        Err(e) => {
            let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
            Err(match (link, e.kind()) {
                (true, std::io::ErrorKind::NotFound) => "a dangling symbolic link".into(),
                (true, _) => format!("a symbolic link that cannot be followed: {e}"),
                (false, _) => format!("cannot be read: {e}"),
            })
        }
    }
}

/// Whether `dir` (at `depth` below the root, 1 for the root's children) is searched: `sub-*`
/// under the root, `ses-*` or `func` under a subject, `func` under a session.
fn searched(name: &str, depth: usize, parent: Option<&str>) -> bool {
    let entity = |key: &str| {
        name.strip_prefix(key).is_some_and(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric()))
    };
    match depth {
        1 => entity("sub-"),
        2 => entity("ses-") || name == "func",
        3 => name == "func" && parent.is_some_and(|p| p.starts_with("ses-")),
        _ => false,
    }
}

/// Everything under `root` (see the module documentation), or an error for a root that is
/// missing or not a directory, or a file whose subject or session differs from its `sub-*` or
/// `ses-*` directory's.
pub(crate) fn discover(root: &Path) -> Result<Discovery, DataError> {
    if !root.exists() {
        return Err(DataError::MissingDir { path: root.to_path_buf() });
    }
    if !root.is_dir() {
        return Err(DataError::NotADir { path: root.to_path_buf() });
    }
    let mut out = Discovery::default();
    visit(root, 0, None, Scope::default(), &mut out)?;
    out.runs.sort_by(|a, b| a.path.cmp(&b.path));
    for v in [&mut out.tables, &mut out.ignored] {
        v.sort();
    }
    out.skipped.sort();
    out.sidecars.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The labels of the `sub-*` and `ses-*` directories above a file, if any: the file's name
/// must agree with them.
#[derive(Copy, Clone, Default)]
struct Scope<'a> {
    subject: Option<&'a str>,
    session: Option<&'a str>,
}

/// One directory: its files, then the searched subdirectories.
fn visit(
    dir: &Path,
    depth: usize,
    parent: Option<&str>,
    scope: Scope<'_>,
    out: &mut Discovery,
) -> Result<(), DataError> {
    let mut subdirs = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            if data_extension(&entry.file_name().to_string_lossy()).is_some() {
                out.ignored.push(path);
            }
            continue;
        };
        // Through symbolic links (datalad and friends link directories); the depth bound stops
        // a loop.
        let is_dir = std::fs::metadata(&path).is_ok_and(|m| m.is_dir());
        if is_dir && depth < MAX_DEPTH && searched(&name, depth + 1, parent) {
            subdirs.push((name, path));
            continue;
        }
        file(&name, path, depth, scope, out)?;
    }
    subdirs.sort();
    for (name, path) in subdirs {
        let inner = Scope {
            subject: name.strip_prefix("sub-").or(scope.subject),
            session: name.strip_prefix("ses-").or(scope.session),
        };
        visit(&path, depth + 1, Some(&name), inner, out)?;
    }
    Ok(())
}

/// Sorts one directory entry into `out`.
fn file(name: &str, path: PathBuf, depth: usize, scope: Scope<'_>, out: &mut Discovery) -> Result<(), DataError> {
    if depth == 0 && name == "parcels.tsv" {
        match readable_file(&path) {
            Ok(()) => out.parcels = Some(path),
            Err(why) => out.skipped.push((path, why)),
        }
        return Ok(());
    }
    if let Some(b) = parse_sidecar_name(name) {
        // One that cannot be read is listed: the runs it would have given a TR have none.
        match readable_file(&path) {
            Ok(()) => out.sidecars.push((path, b)),
            Err(why) => out.skipped.push((path, why)),
        }
        return Ok(());
    }
    if name.strip_suffix(".gz").and_then(crate::names::parse_run_name).is_some_and(|(_, ext)| ext != "nii") {
        out.skipped.push((path, "gzip-compressed: gunzip it to read it".into()));
        return Ok(());
    }
    let parsed = parse_bids_name(name);
    let run = parsed.and_then(|b| RUN_EXTENSIONS.into_iter().find(|e| *e == b.ext).map(|e| (b, e)));
    let Some((b, ext)) = run else {
        if data_extension(name).is_some() {
            out.ignored.push(path);
        }
        return Ok(());
    };
    // fMRIPrep writes masks, references and segmentations as NIfTI beside the BOLD runs: only
    // `*_bold.nii[.gz]` is a run.
    if ext.starts_with("nii") && b.suffix.as_deref() != Some("bold") {
        return Ok(());
    }
    if let Err(why) = readable_file(&path) {
        out.skipped.push((path, why));
        return Ok(());
    }
    let id = b.run_id();
    if let Some(s) = scope.subject.filter(|s| *s != id.subject) {
        return Err(DataError::Select {
            reason: format!("{}: names subject {}, but lies in the directory of sub-{s}", path.display(), id.subject),
        });
    }
    if let (Some(s), Some(named)) = (scope.session, id.session.as_deref().filter(|n| Some(*n) != scope.session)) {
        return Err(DataError::Select {
            reason: format!("{}: names session {named}, but lies in the directory of ses-{s}", path.display()),
        });
    }
    if is_table(&b) {
        out.tables.push(path);
    } else {
        out.runs.push(RunFile { id, name: b, ext, path });
    }
    Ok(())
}
