//! Head motion of each run, from the tables fMRIPrep and XCP-D write beside the series: the
//! `framewise_displacement` column (FD, millimetres per TR) of fMRIPrep's
//! `*_desc-confounds_timeseries.tsv` (`n/a` in its first row, where FD is undefined) or of
//! XCP-D's `*_motion.tsv`. A table belongs to the run whose entities it repeats (subject,
//! session, task and the other acquisition entities, run); the derivative entities (`desc`,
//! `space`, ...) are ignored, as for the runs themselves.
//!
//! Motion inflates the BOLD signal's variance in ways no forecaster should learn from, so an
//! evaluation reports it per run: a reviewer sees at once whether the held-out subjects moved.
//!
//! ```
//! use boldcast_data::motion::fd_column;
//! let text = "trans_x\tframewise_displacement\n0.1\tn/a\n0.2\t0.25\n0.1\t0.75\n";
//! let fd = fd_column("sub-01_task-rest_desc-confounds_timeseries.tsv".as_ref(), text).unwrap();
//! assert_eq!(fd, vec![None, Some(0.25), Some(0.75)]);
//! ```

use crate::error::{io_err, DataError};
use crate::names::parse_bids_name;
use crate::{Dataset, WindowRef, WindowSpec};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The column of framewise displacement in both tools' tables.
pub const FD_COLUMN: &str = "framewise_displacement";

/// FD above this (millimetres) marks a TR as high-motion in the report (Power et al. 2014's
/// 0.5 mm).
pub const FD_HIGH_MM: f64 = 0.5;

/// A motion table larger than this is refused rather than read (tables are a few hundred
/// kilobytes).
const MAX_TABLE_BYTES: u64 = 64 << 20;

/// The head motion of one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunMotion {
    /// The run (its entities).
    pub run: String,
    /// The table it came from.
    pub table: PathBuf,
    /// TRs with a defined FD (the table's rows less its `n/a` cells).
    pub trs: usize,
    /// Mean FD over those TRs, millimetres.
    pub mean_fd: f64,
    /// Largest FD, millimetres.
    pub max_fd: f64,
    /// TRs with FD above [`FD_HIGH_MM`].
    pub high_trs: usize,
}

/// The motion of each run of `runs` (indices into `ds.runs`) that has a motion table beside it
/// among `ds.tables`, in run order; a run without one is left out. A table whose FD column is
/// missing or holds a value that is not a non-negative number is an error naming the file and
/// cell.
pub fn run_motion(ds: &Dataset, runs: &[usize]) -> Result<Vec<RunMotion>, DataError> {
    let tables = motion_tables(ds);
    let mut out = Vec::new();
    for &i in runs {
        let run = &ds.runs[i];
        let Some(table) = table_of(&tables, run) else { continue };
        let fd: Vec<f64> = read_fd(table)?.into_iter().flatten().collect();
        let n = fd.len();
        out.push(RunMotion {
            run: run.id.to_string(),
            table: table.clone(),
            trs: n,
            mean_fd: if n > 0 { fd.iter().sum::<f64>() / n as f64 } else { f64::NAN },
            max_fd: fd.iter().copied().fold(f64::NAN, f64::max),
            high_trs: fd.iter().filter(|&&v| v > FD_HIGH_MM).count(),
        });
    }
    Ok(out)
}

/// The motion tables among `ds.tables`, each with the run it belongs to.
fn motion_tables(ds: &Dataset) -> Vec<(PathBuf, crate::RunId)> {
    let motion = |t: &PathBuf| {
        let name = parse_bids_name(&t.file_name()?.to_string_lossy())?;
        let is =
            name.suffix.as_deref() == Some("motion") || name.get("desc").is_some_and(|d| d.starts_with("confounds"));
        is.then(|| (t.clone(), name.run_id().normalized()))
    };
    ds.tables.iter().filter_map(motion).collect()
}

/// The motion table of `run`, if it has one.
fn table_of<'a>(tables: &'a [(PathBuf, crate::RunId)], run: &crate::Run) -> Option<&'a PathBuf> {
    let id = run.id.normalized();
    tables.iter().find(|(_, t)| *t == id).map(|(p, _)| p)
}

/// The windows of `windows` (of `spec`) none of whose TRs moves more than `fd_max` mm, and
/// how many were left out. A window of a run without a motion table is kept (an `n/a` FD
/// counts as still); a table whose rows are not the run's TRs is an error naming both.
pub fn low_motion_windows(
    ds: &Dataset,
    windows: &[WindowRef],
    spec: &WindowSpec,
    fd_max: f64,
) -> Result<(Vec<WindowRef>, usize), DataError> {
    let tables = motion_tables(ds);
    let mut high: Vec<Option<Vec<bool>>> = vec![None; ds.runs.len()];
    let mut kept = Vec::with_capacity(windows.len());
    for w in windows {
        if high[w.run].is_none() {
            let run = &ds.runs[w.run];
            let flags = match table_of(&tables, run) {
                Some(t) => {
                    let fd = read_fd(t)?;
                    if fd.len() != run.n_tr {
                        let reason = format!(
                            "{} rows of framewise displacement, but {} has {} TRs",
                            fd.len(),
                            run.path.display(),
                            run.n_tr
                        );
                        return Err(DataError::MotionTable { path: t.clone(), reason });
                    }
                    fd.iter().map(|v| v.is_some_and(|x| x > fd_max)).collect()
                }
                None => vec![false; run.n_tr],
            };
            high[w.run] = Some(flags);
        }
        let flags = high[w.run].as_deref().unwrap_or(&[]);
        let span = flags.get(w.start..(w.start + spec.window).min(flags.len())).unwrap_or(&[]);
        if !span.iter().any(|&h| h) {
            kept.push(*w);
        }
    }
    let dropped = windows.len() - kept.len();
    Ok((kept, dropped))
}

/// The FD column of the table at `path`.
pub fn read_fd(path: &Path) -> Result<Vec<Option<f64>>, DataError> {
    let size = std::fs::metadata(path).map_err(io_err(path))?.len();
    if size > MAX_TABLE_BYTES {
        let reason = format!("{size} bytes, more than a motion table's limit of {MAX_TABLE_BYTES}");
        return Err(DataError::MotionTable { path: path.to_path_buf(), reason });
    }
    let text = std::fs::read_to_string(path).map_err(io_err(path))?;
    fd_column(path, &text)
}

/// The FD column of a tab-separated table's `text` (from `path`, for errors): `None` for an
/// `n/a` or empty cell.
pub fn fd_column(path: &Path, text: &str) -> Result<Vec<Option<f64>>, DataError> {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or("");
    let Some(col) = header.split('\t').position(|h| h.trim() == FD_COLUMN) else {
        let reason = format!("no `{FD_COLUMN}` column in the header");
        return Err(DataError::MotionTable { path: path.to_path_buf(), reason });
    };
    let mut fd = Vec::new();
    for (k, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let cell = line.split('\t').nth(col).unwrap_or("").trim();
        let bad = |reason: String| DataError::Cell {
            path: path.to_path_buf(),
            location: format!("line {}, column {} ({FD_COLUMN})", k + 2, col + 1),
            reason,
        };
        fd.push(match cell {
            "" | "n/a" => None,
            v => match v.parse::<f64>() {
                Ok(x) if x.is_finite() && x >= 0.0 => Some(x),
                Ok(x) => return Err(bad(format!("`{x}` is not a displacement (finite, non-negative)"))),
                Err(_) => return Err(bad(format!("`{v}` is not a number"))),
            },
        });
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{tsv_run, write};

    /// A tree as fMRIPrep and XCP-D leave it: subject 01 with fMRIPrep's confounds (`n/a`
    /// first), subject 02 with XCP-D's motion table, subject 03 with none.
    #[test]
    fn each_run_gets_its_own_table() {
        let d = tempfile::tempdir().unwrap();
        for s in ["01", "02", "03"] {
            write(d.path(), &format!("sub-{s}_task-rest_run-1_bold.tsv"), &tsv_run(20, 3));
        }
        let confounds = "global_signal\tframewise_displacement\n1\tn/a\n2\t0.1\n3\t0.3\n4\t0.8\n";
        write(d.path(), "sub-01_task-rest_run-1_desc-confounds_timeseries.tsv", confounds);
        write(d.path(), "sub-02_task-rest_run-1_motion.tsv", "framewise_displacement\trmsd\n0\t0\n0.2\t0.1\n");
        // Another run's table is not this run's.
        write(d.path(), "sub-03_task-rest_run-2_motion.tsv", "framewise_displacement\n9\n");
        let ds = Dataset::load(d.path()).unwrap();
        let m = run_motion(&ds, &[0, 1, 2]).unwrap();
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!((m[0].run.as_str(), m[0].trs, m[0].high_trs), ("sub-01_task-rest_run-1", 3, 1));
        assert!((m[0].mean_fd - 0.4).abs() < 1e-12 && m[0].max_fd == 0.8, "{:?}", m[0]);
        assert_eq!((m[1].trs, m[1].mean_fd, m[1].max_fd, m[1].high_trs), (2, 0.1, 0.2, 0));
        assert!(m[1].table.ends_with("sub-02_task-rest_run-1_motion.tsv"));
        // Only the runs asked for.
        assert_eq!(run_motion(&ds, &[1]).unwrap().len(), 1);
    }

    /// A spike of 0.9 mm at TR 10 of subject 01 leaves out exactly the windows that hold TR
    /// 10; subject 02 has no table and keeps all; a table of another length is refused.
    #[test]
    fn windows_over_a_high_motion_tr_are_left_out() {
        let d = tempfile::tempdir().unwrap();
        for s in ["01", "02"] {
            write(d.path(), &format!("sub-{s}_task-rest_run-1_bold.tsv"), &tsv_run(20, 3));
        }
        let rows: Vec<&str> = (0..20)
            .map(|t| {
                if t == 0 {
                    "n/a"
                } else if t == 10 {
                    "0.9"
                } else {
                    "0.1"
                }
            })
            .collect();
        let table = format!("framewise_displacement\n{}\n", rows.join("\n"));
        write(d.path(), "sub-01_task-rest_run-1_desc-confounds_timeseries.tsv", &table);
        let ds = Dataset::load(d.path()).unwrap();
        let spec = WindowSpec { window: 8, stride: 2, d_in: 1 };
        let all = ds.windows_of(&spec, &[0, 1]).unwrap();
        let (kept, dropped) = low_motion_windows(&ds, &all, &spec, 0.5).unwrap();
        let spans_10 = |w: &WindowRef| w.run == 0 && (w.start..w.start + 8).contains(&10);
        assert!(all.iter().filter(|w| spans_10(w)).count() >= 2);
        assert_eq!(dropped, all.iter().filter(|w| spans_10(w)).count());
        assert!(kept.iter().all(|w| !spans_10(w)) && kept.len() + dropped == all.len());
        assert!(kept.iter().any(|w| w.run == 0), "the still windows of subject 01 stay");
        // Above the spike, nothing is left out.
        assert_eq!(low_motion_windows(&ds, &all, &spec, 1.0).unwrap().1, 0);
        write(d.path(), "sub-01_task-rest_run-1_desc-confounds_timeseries.tsv", "framewise_displacement\n0.1\n");
        let e = low_motion_windows(&ds, &all, &spec, 0.5).unwrap_err().to_string();
        assert!(e.contains("1 rows of framewise displacement") && e.contains("has 20 TRs"), "{e}");
    }

    #[test]
    fn the_column_is_found_by_name_and_bad_cells_are_named() {
        let p = Path::new("m.tsv");
        let fd = fd_column(p, "framewise_displacement\trmsd\n0.5\t1\n\n0\t2\n").unwrap();
        assert_eq!(fd, vec![Some(0.5), Some(0.0)]);
        let e = fd_column(p, "trans_x\n0.1\n").unwrap_err().to_string();
        assert!(e.contains("no `framewise_displacement` column"), "{e}");
        let e = fd_column(p, "a\tframewise_displacement\n1\t-0.2\n").unwrap_err().to_string();
        assert_eq!(
            e,
            "m.tsv, line 2, column 2 (framewise_displacement): `-0.2` is not a displacement (finite, non-negative)"
        );
        let e = fd_column(p, "framewise_displacement\nx\n").unwrap_err().to_string();
        assert!(e.contains("line 2, column 1") && e.contains("`x` is not a number"), "{e}");
    }
}
