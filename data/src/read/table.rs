//! Text run files (`.tsv`, `.csv`): a header row of parcel names, then one row per TR; every
//! cell a finite number, errors naming the line and column.

use super::RawRun;
use crate::error::{io_err, DataError};
use std::path::Path;

/// Reads a text run with cells separated by `sep`.
pub(crate) fn read_text(path: &Path, sep: char) -> Result<RawRun, DataError> {
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
