//! Missing values in the runs ([`Missing`]): XCP-D writes `n/a` for a parcel its coverage
//! threshold rejects in a run. By default a missing cell is an error naming the file, line,
//! column and parcel and this policy's flag; with [`Missing::DropParcel`] a parcel with a
//! missing value (`n/a`, `N/A`, `NA`, an empty cell or `NaN`) in any run is dropped from every
//! run, since every run must have the same parcels. The parcels dropped are reported
//! ([`DroppedParcel`], [`crate::Dataset::dropped_parcels`]) and named in one warning.

use crate::error::DataError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What a missing value in a run does (`data.missing`, `--missing`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Missing {
    /// A missing cell is an error naming the file, line, column and parcel.
    #[default]
    Error,
    /// A parcel with a missing cell in any run is dropped from every run.
    DropParcel,
}

impl Missing {
    /// Whether this is the default ([`Missing::Error`]); a configuration leaves it out then.
    pub fn is_error(&self) -> bool {
        *self == Missing::Error
    }
}

/// The fix a missing-value error names.
pub(crate) const MISSING_FIX: &str =
    "pass --missing drop-parcel (data.missing = \"drop-parcel\") to drop the parcels with missing values from every run";

/// Why a non-finite value in a file is refused: a NaN is a missing value, with the fix.
pub(crate) fn non_finite_reason(v: f64) -> String {
    if v.is_nan() {
        format!("non-finite value NaN; {MISSING_FIX}")
    } else {
        format!("non-finite value {v}")
    }
}

/// A parcel dropped for its missing values ([`Missing::DropParcel`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DroppedParcel {
    /// Its name.
    pub name: String,
    /// Its 1-based column in the run files.
    pub column: usize,
    /// Runs in which it has a missing value.
    pub runs: usize,
    /// The first of them (in file-name order).
    pub first: PathBuf,
    /// Where in that file: `line L` (text) or `row R` (`.npy`).
    pub location: String,
}

/// A run's values as read with missing values as NaN: the file, whether it is text (for the
/// location), `(n_tr, parcels)` and `x[t, p]` row-major.
pub(crate) struct MissingScan<'a> {
    pub(crate) path: &'a Path,
    pub(crate) text: bool,
    pub(crate) parcels: usize,
    pub(crate) data: &'a [f64],
}

/// The parcels (columns) with a NaN in any of `runs`, each with where it is first missing,
/// in column order; `names` are the parcels' names.
pub(crate) fn missing_parcels(runs: &[MissingScan<'_>], names: &[String]) -> Vec<DroppedParcel> {
    let p = names.len();
    let mut out: Vec<Option<DroppedParcel>> = vec![None; p];
    for r in runs {
        let mut seen = vec![false; p];
        for (i, _) in r.data.iter().enumerate().filter(|(_, v)| v.is_nan()) {
            let (t, q) = (i / r.parcels, i % r.parcels);
            if q >= p || seen[q] {
                continue;
            }
            seen[q] = true;
            let slot = out[q].get_or_insert_with(|| DroppedParcel {
                name: names[q].clone(),
                column: q + 1,
                runs: 0,
                first: r.path.to_path_buf(),
                location: if r.text { format!("line {}", t + 2) } else { format!("row {t}") },
            });
            slot.runs += 1;
        }
    }
    out.into_iter().flatten().collect()
}

/// Keeps the columns `keep` (sorted indices) of the row-major `data` of `parcels` columns.
pub(crate) fn keep_columns(data: &[f64], parcels: usize, keep: &[usize]) -> Vec<f64> {
    data.chunks_exact(parcels.max(1)).flat_map(|row| keep.iter().map(move |&q| row[q])).collect()
}

/// The one warning that names the dropped parcels.
pub(crate) fn dropped_warning(dropped: &[DroppedParcel], total: usize) -> String {
    let each: Vec<String> = dropped
        .iter()
        .map(|d| {
            format!(
                "`{}` (column {}; {} run(s), first {}, {})",
                d.name,
                d.column,
                d.runs,
                d.first.display(),
                d.location
            )
        })
        .collect();
    format!(
        "dropped {} of {total} parcel(s) with missing values from every run (--missing drop-parcel): {}",
        dropped.len(),
        each.join(", ")
    )
}

/// The error when every parcel has a missing value somewhere.
pub(crate) fn all_dropped(dropped: &[DroppedParcel]) -> DataError {
    let first = &dropped[0];
    DataError::Select {
        reason: format!(
            "every one of the {} parcels has a missing value in some run (e.g. `{}` in {}, {}): --missing \
             drop-parcel would leave none",
            dropped.len(),
            first.name,
            first.first.display(),
            first.location
        ),
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::*;
    use crate::{Dataset, Selection};

    fn drop() -> Selection {
        Selection { missing: Some(super::Missing::DropParcel), ..Selection::default() }
    }

    #[test]
    fn a_missing_cell_is_an_error_naming_the_cell_and_the_fix() {
        let e = load_err(&[("sub-01_run-1_bold.tsv", "AAL2_001\tAAL2_004\n1\t2\n3\tn/a\n")]);
        assert!(e.contains("sub-01_run-1_bold.tsv, line 3, column 2 (AAL2_004): missing value `n/a`"), "{e}");
        assert!(e.contains("--missing drop-parcel") && e.contains("data.missing"), "{e}");
        let e = load_err(&[("sub-01_run-1_bold.tsv", "a\tb\n1\t\n3\t4\n")]);
        assert!(e.contains("line 2, column 2 (b): empty cell; pass --missing drop-parcel"), "{e}");
        let e = load_err(&[("sub-01_run-1_bold.tsv", "a\tb\nNaN\t1\n3\t4\n")]);
        assert!(e.contains("line 2, column 1 (a): non-finite value `NaN`; pass --missing drop-parcel"), "{e}");
    }

    /// XCP-D's `n/a` in one run, an empty cell in another: both parcels leave every run, the
    /// rest keep their values (and their centroids), and the warning names both.
    #[test]
    fn drop_parcel_drops_a_parcel_missing_in_any_run_from_every_run() {
        let d = tempfile::tempdir().unwrap();
        let rows = |bad: usize, cell: &str| -> String {
            let mut s = "a\tb\tc\td\n".to_string();
            for t in 0..6 {
                let mut r: Vec<String> = (0..4).map(|q| ((t * (q + 2)) % 5 + q).to_string()).collect();
                if t == 1 {
                    r[bad] = cell.into();
                }
                s += &(r.join("\t") + "\n");
            }
            s
        };
        write(d.path(), "sub-01_run-1_bold.tsv", &rows(1, "n/a"));
        write(d.path(), "sub-02_run-1_bold.tsv", &rows(2, ""));
        write(d.path(), "sub-03_run-1_bold.tsv", &rows(1, "NaN"));
        write(d.path(), "parcels.tsv", "name\tx\ty\tz\na\t0\t0\t0\nb\t1\t0\t0\nc\t2\t0\t0\nd\t3\t0\t0\n");
        let ds = Dataset::load_with(d.path(), &drop()).unwrap();
        assert_eq!(ds.parcel_names, ["a", "d"]);
        assert_eq!(ds.parcels, 2);
        assert_eq!(ds.centroids, Some(vec![[0.0, 0.0, 0.0], [3.0, 0.0, 0.0]]));
        let dropped: Vec<(&str, usize, usize, &str)> =
            ds.dropped_parcels.iter().map(|p| (p.name.as_str(), p.column, p.runs, p.location.as_str())).collect();
        assert_eq!(dropped, [("b", 2, 2, "line 3"), ("c", 3, 1, "line 3")]);
        assert!(ds.dropped_parcels[0].first.ends_with("sub-01_run-1_bold.tsv"));
        assert!(ds.dropped_parcels[1].first.ends_with("sub-02_run-1_bold.tsv"));
        let w = ds.notes().into_iter().find(|n| n.contains("dropped")).unwrap();
        assert!(w.starts_with("warning: dropped 2 of 4 parcel(s) with missing values from every run"), "{w}");
        assert!(w.contains("`b` (column 2; 2 run(s), first ") && w.contains("`c` (column 3; 1 run(s)"), "{w}");
        // The kept parcels hold what a file without the dropped columns gives.
        let clean = tempfile::tempdir().unwrap();
        for (s, bad) in [("01", 1), ("02", 2), ("03", 1)] {
            let text = rows(bad, "0");
            let kept: String = text
                .lines()
                .map(|l| {
                    let c: Vec<&str> = l.split('\t').collect();
                    format!("{}\t{}\n", c[0], c[3])
                })
                .collect();
            write(clean.path(), &format!("sub-{s}_run-1_bold.tsv"), &kept);
        }
        let want = Dataset::load(clean.path()).unwrap();
        for (a, b) in ds.runs.iter().zip(&want.runs) {
            assert_eq!(a.to_vec().unwrap(), b.to_vec().unwrap());
        }
        // Nothing missing: nothing dropped, no warning.
        let ds = Dataset::load_with(clean.path(), &drop()).unwrap();
        assert!(
            ds.dropped_parcels.is_empty() && !ds.warnings.iter().any(|w| w.contains("dropped")),
            "{:?}",
            ds.warnings
        );
    }

    #[test]
    fn drop_parcel_refuses_to_drop_every_parcel_and_keeps_other_errors() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "sub-01_run-1.tsv", "a\tb\nn/a\t1\n2\t3\n");
        write(d.path(), "sub-02_run-1.tsv", "a\tb\n1\t\n2\t3\n");
        let e = Dataset::load_with(d.path(), &drop()).unwrap_err().to_string();
        assert!(e.contains("every one of the 2 parcels has a missing value") && e.contains("would leave none"), "{e}");
        // Not a number, or infinite, stays an error.
        write(d.path(), "sub-02_run-1.tsv", "a\tb\n1\tx\n2\t3\n");
        let e = Dataset::load_with(d.path(), &drop()).unwrap_err().to_string();
        assert!(e.contains("`x` is not a number"), "{e}");
        write(d.path(), "sub-02_run-1.tsv", "a\tb\n1\tinf\n2\t3\n");
        let e = Dataset::load_with(d.path(), &drop()).unwrap_err().to_string();
        assert!(e.contains("non-finite value `inf`"), "{e}");
    }

    /// A NaN in a `.npy` run drops its parcel too; the run is read into memory.
    #[test]
    fn drop_parcel_reads_npy_nan_and_bypasses_the_disk() {
        let d = tempfile::tempdir().unwrap();
        let mut x: Vec<f64> = (0..30).map(|i| ((i * 7) % 11) as f64).collect();
        x[4] = f64::NAN;
        npy_file(&d.path().join("sub-01_run-1.npy"), 10, 3, &x);
        let ds = Dataset::load_with(d.path(), &drop()).unwrap();
        assert_eq!(ds.parcel_names, ["parcel-000", "parcel-002"]);
        assert_eq!(ds.dropped_parcels[0].location, "row 1");
        assert!(!ds.runs[0].on_disk());
        let e = Dataset::load(d.path()).unwrap_err().to_string();
        assert!(e.contains("row 1, column 2: non-finite value NaN; pass --missing drop-parcel"), "{e}");
    }
}
