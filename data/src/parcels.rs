//! `parcels.tsv`: a header `name x y z`, then one row per parcel (in the runs' column order)
//! with its centroid, read into names and coordinates.

use crate::error::{io_err, DataError};
use std::path::Path;

/// Reads `parcels.tsv`: the parcel names and their centroids.
pub(crate) fn read_parcels(path: &Path) -> Result<(Vec<String>, Vec<[f64; 3]>), DataError> {
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
