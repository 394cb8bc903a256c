//! Text run files (`.tsv`, `.csv`): an optional UTF-8 byte-order mark, a header row of distinct,
//! non-empty parcel names, then one row per TR; every cell a finite number, errors naming the
//! line and column. A missing cell (`n/a`, `N/A`, `NA`, empty, `NaN`) is an error naming the
//! fix, or NaN under [`Missing::DropParcel`] (`crate::missing`).

use super::RawRun;
use crate::error::{io_err, DataError};
use crate::missing::{Missing, MISSING_FIX};
use std::path::Path;

/// Every parcel needs a name of its own: an empty or repeated name is an error naming the
/// column (1-based) and the name.
fn check_names(path: &Path, names: &[String]) -> Result<(), DataError> {
    let bad = |c: usize, name: &str, reason: String| DataError::Header {
        path: path.to_path_buf(),
        column: c + 1,
        name: name.to_string(),
        reason,
    };
    for (c, name) in names.iter().enumerate() {
        if name.trim().is_empty() {
            return Err(bad(c, name, "empty parcel name".into()));
        }
        if let Some(first) = names[..c].iter().position(|n| n == name) {
            return Err(bad(c, name, format!("duplicate parcel name `{name}` (also column {})", first + 1)));
        }
    }
    Ok(())
}

/// Reads a text run with cells separated by `sep`; `missing` says what a missing cell does.
pub(crate) fn read_text(path: &Path, sep: char, missing: Missing) -> Result<RawRun, DataError> {
    let text = std::fs::read_to_string(path).map_err(io_err(path))?;
    // A UTF-8 byte-order mark (spreadsheet exports write one) is not part of the first name.
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let lines: Vec<&str> = text.lines().collect();
    let end = lines.iter().rposition(|l| !l.trim().is_empty()).map_or(0, |i| i + 1);
    let lines = &lines[..end];
    let header = lines
        .first()
        .ok_or_else(|| DataError::Empty { path: path.to_path_buf(), reason: "empty file: no header row".into() })?;
    let names: Vec<String> = header.split(sep).map(|s| s.trim().trim_matches('"').to_string()).collect();
    check_names(path, &names)?;
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
                "n/a" | "N/A" | "NA" | "" | "NaN" | "nan" | "NAN" if missing == Missing::DropParcel => f64::NAN,
                "n/a" | "N/A" | "NA" => return Err(bad(format!("missing value `{cell}`; {MISSING_FIX}"))),
                "" => return Err(bad(format!("empty cell; {MISSING_FIX}"))),
                _ => cell.parse::<f64>().map_err(|_| bad(format!("`{cell}` is not a number")))?,
            };
            if v.is_nan() && missing != Missing::DropParcel {
                return Err(bad(format!("non-finite value `{cell}`; {MISSING_FIX}")));
            }
            if v.is_infinite() {
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

#[cfg(test)]
mod tests {
    use crate::testutil::*;
    use crate::Dataset;

    #[test]
    fn a_byte_order_mark_is_not_part_of_the_first_name() {
        for (ext, sep) in [("tsv", "\t"), ("csv", ",")] {
            let body = format!("a{sep}b\n1{sep}2\n3{sep}5\n4{sep}4\n");
            let plain = tempfile::tempdir().unwrap();
            write(plain.path(), &format!("sub-01_run-1.{ext}"), &body);
            let bom = tempfile::tempdir().unwrap();
            write(bom.path(), &format!("sub-01_run-1.{ext}"), &format!("\u{feff}{body}"));
            // The same, quoted.
            write(
                bom.path(),
                &format!("sub-02_run-1.{ext}"),
                &format!("\u{feff}\"a\"{sep}\"b\"\n1{sep}2\n3{sep}5\n4{sep}4\n"),
            );
            let (a, b) = (Dataset::load(plain.path()).unwrap(), Dataset::load(bom.path()).unwrap());
            assert_eq!(a.parcel_names, ["a", "b"]);
            assert_eq!(b.parcel_names, a.parcel_names, "{ext}");
            assert_eq!(b.runs[0].to_vec().unwrap(), a.runs[0].to_vec().unwrap());
        }
    }

    #[test]
    fn duplicate_and_empty_parcel_names_are_errors_naming_them() {
        let e = load_err(&[("sub-01_run-1.tsv", "V1\tV2\tV1\n1\t2\t3\n4\t5\t7\n")]);
        assert!(e.contains("sub-01_run-1.tsv") && e.contains("column 3") && e.contains("`V1`"), "{e}");
        assert!(e.contains("column 1"), "names the first use too: {e}");
        let e = load_err(&[("sub-01_run-1.csv", "\"a\",a\n1,2\n4,5\n")]);
        assert!(e.contains("sub-01_run-1.csv") && e.contains("column 2") && e.contains("`a`"), "{e}");
        let e = load_err(&[("sub-01_run-1.tsv", "V1\t\tV3\n1\t2\t3\n4\t5\t7\n")]);
        assert!(e.contains("sub-01_run-1.tsv") && e.contains("column 2") && e.contains("empty parcel name"), "{e}");
        let e = load_err(&[("sub-01_run-1.csv", "a,\" \"\n1,2\n4,5\n")]);
        assert!(e.contains("column 2") && e.contains("empty parcel name"), "{e}");
        // An empty header line: one empty name.
        let e = load_err(&[("sub-01_run-1.tsv", "\n1\n2\n")]);
        assert!(e.contains("sub-01_run-1.tsv") && e.contains("column 1") && e.contains("empty parcel name"), "{e}");
    }
}
