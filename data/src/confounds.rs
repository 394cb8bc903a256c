//! Confound regression ([`ConfoundStrategy`], `data.confounds`, `--confounds`): the columns a
//! strategy names are read from the confounds table beside each run (fMRIPrep's
//! `*_desc-confounds_timeseries.tsv`, else XCP-D's `*_motion.tsv`) and regressed out of the
//! run with linear detrending, as `nilearn.signal.clean(signals, confounds=C, detrend=True,
//! standardize=False)` does ([`clean`]); the run is then standardized as every run is.
//!
//! Strategies, in words (join several with `+`, e.g. `motion24+wm_csf`):
//!
//! - `motion6`: `trans_x trans_y trans_z rot_x rot_y rot_z`;
//! - `motion24`: those, their `_derivative1`, `_power2` and `_derivative1_power2` columns as
//!   fMRIPrep writes them (nilearn's `load_confounds(strategy=["motion"], motion="full")`);
//! - `wm_csf`: `white_matter csf` (nilearn's `wm_csf="basic"`);
//! - `global_signal`: `global_signal`;
//! - `acompcor` or `acompcor:N`: the first N (default 5) `a_comp_cor_NN` columns by number;
//! - `columns:a,b,c`: those columns.
//!
//! A missing value (`n/a`, empty) in the **first row** of a column (fMRIPrep's derivatives)
//! takes the second row's value, as nilearn's `load_confounds` fills it
//! (`nilearn/interfaces/fmriprep/load_confounds_utils.py`, `prepare_output`); anywhere else it
//! is an error naming the cell (nilearn would fail on it too).
//!
//! ```
//! use boldcast_data::confounds::ConfoundStrategy;
//! let s: ConfoundStrategy = "motion6+columns:csf".parse().unwrap();
//! let header = ["trans_x", "trans_y", "trans_z", "rot_x", "rot_y", "rot_z", "csf"].map(String::from);
//! assert_eq!(s.columns(&header).unwrap().len(), 7);
//! assert!("motion12".parse::<ConfoundStrategy>().is_err());
//! ```

use crate::error::{io_err, DataError};
use crate::names::{parse_bids_name, RunId};
use std::path::{Path, PathBuf};

/// A confounds table larger than this is refused rather than read.
const MAX_TABLE_BYTES: u64 = 256 << 20;

/// The six rigid-body motion parameters, as fMRIPrep names them.
pub const MOTION6: [&str; 6] = ["trans_x", "trans_y", "trans_z", "rot_x", "rot_y", "rot_z"];

/// Components `acompcor` takes without a count.
const ACOMPCOR_DEFAULT: usize = 5;

/// One named part of a strategy.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Motion6,
    Motion24,
    WmCsf,
    GlobalSignal,
    Acompcor(usize),
    Columns(Vec<String>),
}

/// Which confound columns are regressed out of every run: parts in words joined by `+`
/// (module documentation). Parsed with [`str::parse`], written back as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfoundStrategy {
    parts: Vec<Part>,
    text: String,
}

/// The strategies, for messages.
const KNOWN: &str = "motion6, motion24, wm_csf, global_signal, acompcor[:N], columns:A,B,... (join several with +)";

impl std::str::FromStr for ConfoundStrategy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        for word in s.split('+').map(str::trim) {
            parts.push(match word {
                "motion6" => Part::Motion6,
                "motion24" => Part::Motion24,
                "wm_csf" => Part::WmCsf,
                "global_signal" => Part::GlobalSignal,
                "acompcor" => Part::Acompcor(ACOMPCOR_DEFAULT),
                w if w.starts_with("acompcor:") => match w["acompcor:".len()..].parse::<usize>() {
                    Ok(n) if (1..=1000).contains(&n) => Part::Acompcor(n),
                    _ => return Err(format!("`{w}`: acompcor:N takes a count of components from 1 to 1000")),
                },
                w if w.starts_with("columns:") => {
                    let cols: Vec<String> = w["columns:".len()..].split(',').map(|c| c.trim().to_string()).collect();
                    if cols.iter().any(String::is_empty) {
                        return Err(format!("`{w}`: columns:A,B,... names one or more columns, none empty"));
                    }
                    Part::Columns(cols)
                }
                w => return Err(format!("`{w}` is not a confound strategy: {KNOWN}")),
            });
        }
        Ok(ConfoundStrategy { parts, text: s.trim().to_string() })
    }
}

impl std::fmt::Display for ConfoundStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl serde::Serialize for ConfoundStrategy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for ConfoundStrategy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl ConfoundStrategy {
    /// The columns of a table with `header` that this strategy regresses out, each once, in
    /// the strategy's order; an error naming the columns it lacks.
    pub fn columns(&self, header: &[String]) -> Result<Vec<String>, String> {
        let mut want: Vec<String> = Vec::new();
        for part in &self.parts {
            match part {
                Part::Motion6 => want.extend(MOTION6.map(String::from)),
                Part::Motion24 => {
                    for m in MOTION6 {
                        for tail in ["", "_derivative1", "_power2", "_derivative1_power2"] {
                            want.push(format!("{m}{tail}"));
                        }
                    }
                }
                Part::WmCsf => want.extend(["white_matter", "csf"].map(String::from)),
                Part::GlobalSignal => want.push("global_signal".into()),
                Part::Acompcor(n) => {
                    let mut comps: Vec<(u64, &String)> = header
                        .iter()
                        .filter_map(|h| h.strip_prefix("a_comp_cor_")?.parse::<u64>().ok().map(|k| (k, h)))
                        .collect();
                    comps.sort();
                    if comps.len() < *n {
                        return Err(format!(
                            "acompcor:{n} needs {n} a_comp_cor_NN columns, the table has {}",
                            comps.len()
                        ));
                    }
                    want.extend(comps.iter().take(*n).map(|(_, h)| (*h).clone()));
                }
                Part::Columns(c) => want.extend(c.iter().cloned()),
            }
        }
        let mut seen = Vec::new();
        want.retain(|c| {
            let new = !seen.contains(c);
            seen.push(c.clone());
            new
        });
        let lacking: Vec<&str> = want.iter().filter(|c| !header.contains(c)).map(String::as_str).collect();
        if !lacking.is_empty() {
            return Err(format!("no column {} for confounds `{}`", lacking.join(", "), self.text));
        }
        Ok(want)
    }
}

/// A run's confounds: `(n_tr, k)` row-major, and the table and columns they came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Confounds {
    /// The table.
    pub path: PathBuf,
    /// The columns, in the strategy's order.
    pub names: Vec<String>,
    /// Rows (TRs).
    pub n_tr: usize,
    /// `c[t, j]` at `[t * names.len() + j]`.
    pub data: Vec<f64>,
}

/// The confounds table of the run `id` among `tables` (the tables found beside the series):
/// fMRIPrep's `desc-confounds*` first, else XCP-D's `*_motion.tsv`.
pub(crate) fn table_of_run(tables: &[PathBuf], id: &RunId) -> Option<PathBuf> {
    let id = id.normalized();
    let rank = |t: &PathBuf| {
        let name = parse_bids_name(&t.file_name()?.to_string_lossy())?;
        if name.ext != "tsv" || name.run_id().normalized() != id {
            return None;
        }
        if name.get("desc").is_some_and(|d| d.starts_with("confounds")) {
            Some(0)
        } else if name.suffix.as_deref() == Some("motion") {
            Some(1)
        } else {
            None
        }
    };
    tables.iter().filter_map(|t| rank(t).map(|r| (r, t))).min().map(|(_, t)| t.clone())
}

/// Reads the columns of `strategy` from the table at `path` (size-checked first).
pub fn read_confounds(path: &Path, strategy: &ConfoundStrategy) -> Result<Confounds, DataError> {
    let size = std::fs::metadata(path).map_err(io_err(path))?.len();
    let bad = |reason: String| DataError::Confounds { path: path.to_path_buf(), reason };
    if size > MAX_TABLE_BYTES {
        return Err(bad(format!("{size} bytes, more than a confounds table's limit of {MAX_TABLE_BYTES}")));
    }
    let text = std::fs::read_to_string(path).map_err(io_err(path))?;
    parse_confounds(path, &text, strategy)
}

/// [`read_confounds`] on the table's `text`.
pub fn parse_confounds(path: &Path, text: &str, strategy: &ConfoundStrategy) -> Result<Confounds, DataError> {
    let bad = |reason: String| DataError::Confounds { path: path.to_path_buf(), reason };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let header: Vec<String> = match lines.next() {
        Some((_, h)) => h.split('\t').map(|c| c.trim().trim_matches('"').to_string()).collect(),
        None => return Err(bad("empty file: no header row".into())),
    };
    let names = strategy.columns(&header).map_err(&bad)?;
    let cols: Vec<usize> = names.iter().map(|n| header.iter().position(|h| h == n).unwrap_or(0)).collect();
    let k = names.len();
    let mut data: Vec<f64> = Vec::new();
    let mut first_missing: Vec<bool> = vec![false; k];
    let mut n_tr = 0;
    for (i, line) in lines {
        let cells: Vec<&str> = line.split('\t').collect();
        if cells.len() != header.len() {
            return Err(bad(format!("line {}: {} columns, but the header has {}", i + 1, cells.len(), header.len())));
        }
        for (j, &c) in cols.iter().enumerate() {
            let cell = cells[c].trim();
            let at = || format!("line {}, column {} ({})", i + 1, c + 1, names[j]);
            let v = match cell {
                "n/a" | "N/A" | "NA" | "" | "NaN" | "nan" if n_tr == 0 => {
                    first_missing[j] = true;
                    f64::NAN
                }
                "n/a" | "N/A" | "NA" | "" | "NaN" | "nan" => {
                    return Err(bad(format!(
                        "{}: missing value `{cell}` past the first row (only a first row's are filled, from the second, as nilearn fills them)",
                        at()
                    )))
                }
                _ => match cell.parse::<f64>() {
                    Ok(v) if v.is_finite() => v,
                    _ => return Err(bad(format!("{}: `{cell}` is not a finite number", at()))),
                },
            };
            data.push(v);
        }
        n_tr += 1;
    }
    if n_tr < 2 {
        return Err(bad(format!("{n_tr} data row(s): confounds need at least 2")));
    }
    for j in (0..k).filter(|&j| first_missing[j]) {
        if data[k + j].is_nan() {
            return Err(bad(format!("column {}: missing in both of its first two rows", names[j])));
        }
        data[j] = data[k + j];
    }
    Ok(Confounds { path: path.to_path_buf(), names, n_tr, data })
}

/// Removes each column's mean and linear trend in place, as nilearn's `signal._detrend`
/// (`type="linear"`) does: `x -= mean(x)`, then `x -= (r . x) r` with `r` the centred time
/// index scaled to unit norm. A single row is left as it is (nilearn does too).
pub fn detrend(x: &mut [f64], n: usize, p: usize) {
    if n < 2 || p == 0 {
        return;
    }
    let mid = (n - 1) as f64 / 2.0;
    let norm = (0..n).map(|t| (t as f64 - mid).powi(2)).sum::<f64>().sqrt();
    let r: Vec<f64> = (0..n).map(|t| (t as f64 - mid) / norm).collect();
    for q in 0..p {
        let mean = (0..n).map(|t| x[t * p + q]).sum::<f64>() / n as f64;
        let mut dot = 0.0;
        for t in 0..n {
            x[t * p + q] -= mean;
            dot += r[t] * x[t * p + q];
        }
        for t in 0..n {
            x[t * p + q] -= dot * r[t];
        }
    }
}

/// An orthonormal basis of the columns of the `(n, k)` row-major `c` (as columns of `n`
/// values each), chosen as a column-pivoted QR chooses them: each step takes the remaining
/// column with the largest residual norm and stops once that norm is at most `100 eps`,
/// nilearn's rank cut on `|R_ii|` of its z-scored confounds. Gram-Schmidt, orthogonalized
/// twice for accuracy.
fn basis(c: &[f64], n: usize, k: usize) -> Vec<Vec<f64>> {
    let mut cols: Vec<Vec<f64>> = (0..k).map(|j| (0..n).map(|t| c[t * k + j]).collect()).collect();
    let mut q: Vec<Vec<f64>> = Vec::new();
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    while !cols.is_empty() {
        let (best, norm) = cols
            .iter()
            .enumerate()
            .map(|(i, v)| (i, dot(v, v).sqrt()))
            .fold((0, -1.0), |acc, (i, nv)| if nv > acc.1 { (i, nv) } else { acc });
        if norm <= 100.0 * f64::EPSILON {
            break;
        }
        let mut v = cols.swap_remove(best);
        for b in &q {
            let d = dot(b, &v);
            v.iter_mut().zip(b).for_each(|(x, y)| *x -= d * y);
        }
        let nv = dot(&v, &v).sqrt();
        if nv <= 100.0 * f64::EPSILON {
            continue;
        }
        v.iter_mut().for_each(|x| *x /= nv);
        for w in cols.iter_mut() {
            let d = dot(&v, w);
            w.iter_mut().zip(&v).for_each(|(x, y)| *x -= d * y);
        }
        q.push(v);
    }
    q
}

/// `nilearn.signal.clean(x, confounds=c, detrend=True, standardize=False)` in place: `x`
/// `(n, p)` and `c` `(n, k)` row-major are detrended (linear), `c`'s columns z-scored
/// (population standard deviation; a constant column is left at zero), and `x`'s projection
/// on their span removed. `c` is consumed.
pub fn clean(x: &mut [f64], n: usize, p: usize, mut c: Vec<f64>, k: usize) {
    detrend(x, n, p);
    if k == 0 {
        return;
    }
    detrend(&mut c, n, k);
    for j in 0..k {
        let mean = (0..n).map(|t| c[t * k + j]).sum::<f64>() / n as f64;
        let sd = ((0..n).map(|t| (c[t * k + j] - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        let sd = if sd < f64::EPSILON { 1.0 } else { sd };
        for t in 0..n {
            c[t * k + j] = (c[t * k + j] - mean) / sd;
        }
    }
    let q = basis(&c, n, k);
    let mut coef = vec![0.0; p];
    for b in &q {
        coef.iter_mut().for_each(|v| *v = 0.0);
        for t in 0..n {
            for (v, x) in coef.iter_mut().zip(&x[t * p..(t + 1) * p]) {
                *v += b[t] * x;
            }
        }
        for t in 0..n {
            for (x, v) in x[t * p..(t + 1) * p].iter_mut().zip(&coef) {
                *x -= b[t] * v;
            }
        }
    }
}

/// The confounds of the run `id` at `path` (`n_tr` TRs) under `strategy`, from its table among
/// `tables`: an error when it has none or its rows are not the run's TRs.
pub(crate) fn confounds_of_run(
    tables: &[PathBuf],
    id: &RunId,
    path: &Path,
    n_tr: usize,
    strategy: &ConfoundStrategy,
) -> Result<Confounds, DataError> {
    let Some(table) = table_of_run(tables, id) else {
        return Err(DataError::Select {
            reason: format!(
                "{}: --confounds {strategy} needs the run's confounds table beside it, fMRIPrep's \
                 *_desc-confounds_timeseries.tsv or XCP-D's *_motion.tsv with the run's entities ({id}); none \
                 was found",
                path.display()
            ),
        });
    };
    let c = read_confounds(&table, strategy)?;
    if c.n_tr != n_tr {
        return Err(DataError::Confounds {
            path: table,
            reason: format!("{} rows, but {} has {n_tr} TRs", c.n_tr, path.display()),
        });
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(text: &str) -> ConfoundStrategy {
        text.parse().unwrap()
    }

    #[test]
    fn strategies_name_their_columns_and_refuse_unknown_words() {
        let mut header: Vec<String> = Vec::new();
        for m in MOTION6 {
            for tail in ["", "_derivative1", "_power2", "_derivative1_power2"] {
                header.push(format!("{m}{tail}"));
            }
        }
        header.extend(
            ["csf", "white_matter", "a_comp_cor_10", "a_comp_cor_02", "a_comp_cor_00", "a_comp_cor_01"]
                .map(String::from),
        );
        assert_eq!(s("motion6").columns(&header).unwrap(), MOTION6);
        let m24 = s("motion24").columns(&header).unwrap();
        assert_eq!(m24.len(), 24);
        assert_eq!(&m24[..4], ["trans_x", "trans_x_derivative1", "trans_x_power2", "trans_x_derivative1_power2"]);
        let mut both = s("motion6+motion24").columns(&header).unwrap();
        assert_eq!((both.len(), &both[..6]), (24, &MOTION6.map(String::from)[..]), "each column once");
        both.sort();
        let mut sorted = m24.clone();
        sorted.sort();
        assert_eq!(both, sorted);
        assert_eq!(s("wm_csf").columns(&header).unwrap(), ["white_matter", "csf"]);
        assert_eq!(s("acompcor:3").columns(&header).unwrap(), ["a_comp_cor_00", "a_comp_cor_01", "a_comp_cor_02"]);
        let e = s("acompcor").columns(&header).unwrap_err();
        assert_eq!(e, "acompcor:5 needs 5 a_comp_cor_NN columns, the table has 4");
        assert_eq!(s("columns:csf,rot_z").columns(&header).unwrap(), ["csf", "rot_z"]);
        let e = s("global_signal+columns:csf,nope").columns(&header).unwrap_err();
        assert_eq!(e, "no column global_signal, nope for confounds `global_signal+columns:csf,nope`");
        for bad in ["motion12", "", "columns:", "columns:a,,b", "acompcor:0", "acompcor:x", "motion6+"] {
            let e = bad.parse::<ConfoundStrategy>().unwrap_err();
            assert!(e.contains('`'), "{bad}: {e}");
        }
        assert_eq!(s(" motion6+wm_csf ").to_string(), "motion6+wm_csf");
    }

    #[test]
    fn first_row_gaps_take_the_second_row_and_later_gaps_are_errors() {
        let p = Path::new("c.tsv");
        let t = "csf\trot_x_derivative1\tx\n1\tn/a\ta\n2\t0.5\tb\n3\t0.25\tc\n";
        let c = parse_confounds(p, t, &s("columns:rot_x_derivative1,csf")).unwrap();
        assert_eq!((c.n_tr, c.names.clone()), (3, vec!["rot_x_derivative1".to_string(), "csf".into()]));
        assert_eq!(c.data, [0.5, 1.0, 0.5, 2.0, 0.25, 3.0]);
        let e = parse_confounds(p, "csf\n1\nn/a\n3\n", &s("columns:csf")).unwrap_err().to_string();
        assert!(e.starts_with("c.tsv: line 3, column 1 (csf): missing value `n/a` past the first row"), "{e}");
        let e = parse_confounds(p, "csf\nn/a\n\t\n", &s("columns:csf")).unwrap_err().to_string();
        assert!(e.contains("line 3, column 1 (csf): missing value ``") || e.contains("data row"), "{e}");
        let e = parse_confounds(p, "csf\tb\n1\t2\n1\n", &s("columns:csf")).unwrap_err().to_string();
        assert_eq!(e, "c.tsv: line 3: 1 columns, but the header has 2");
        let e = parse_confounds(p, "csf\n1\ninf\n", &s("columns:csf")).unwrap_err().to_string();
        assert_eq!(e, "c.tsv: line 3, column 1 (csf): `inf` is not a finite number");
        let e = parse_confounds(p, "a\n1\n2\n", &s("wm_csf")).unwrap_err().to_string();
        assert_eq!(e, "c.tsv: no column white_matter, csf for confounds `wm_csf`");
    }

    /// Regressing out a confound that is a signal's own component leaves the rest: `x = 2 c +
    /// u` with `u` orthogonal to `c` and to a line gives `u` back; a duplicated confound
    /// column (rank 1) gives the same.
    #[test]
    fn clean_removes_the_span_of_the_confounds_after_detrending() {
        let n = 40;
        let mid = (n - 1) as f64 / 2.0;
        let c: Vec<f64> = (0..n).map(|t| ((t * 7 % 5) as f64 - 2.0) * 0.3 + (t as f64).sin()).collect();
        let mut cd = c.clone();
        detrend(&mut cd, n, 1);
        // u: a cosine, detrended, then made orthogonal to cd.
        let mut u: Vec<f64> = (0..n).map(|t| (t as f64 * 0.9).cos()).collect();
        detrend(&mut u, n, 1);
        let k = u.iter().zip(&cd).map(|(a, b)| a * b).sum::<f64>() / cd.iter().map(|b| b * b).sum::<f64>();
        u.iter_mut().zip(&cd).for_each(|(a, b)| *a -= k * b);
        let x0: Vec<f64> = (0..n).map(|t| 5.0 + 0.1 * (t as f64 - mid) + 2.0 * c[t] + u[t]).collect();
        let mut x = x0.clone();
        clean(&mut x, n, 1, c.clone(), 1);
        for t in 0..n {
            assert!((x[t] - u[t]).abs() < 1e-12, "t {t}: {} vs {}", x[t], u[t]);
        }
        let mut x2 = x0;
        let twice: Vec<f64> = c.iter().flat_map(|v| [*v, *v * 3.0]).collect();
        clean(&mut x2, n, 1, twice, 2);
        assert!(x.iter().zip(&x2).all(|(a, b)| (a - b).abs() < 1e-12));
    }
}
