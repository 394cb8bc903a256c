//! CIFTI-2 files (`.ptseries.nii`, `.dtseries.nii`, `.dlabel.nii`): a NIfTI-2 container
//! ([`nifti2`]) whose header extension 32 holds the CIFTI-2 XML ([`xml`]) that says what the
//! rows and columns of the 2-D matrix are; [`CiftiFile`] reads and checks both, and its values
//! as nibabel's `get_fdata()` gives them. `parcellate` turns a dense series and a label file
//! into parcel means.
//!
//! # What is read
//!
//! - a single-file NIfTI-2 (`sizeof_hdr` 540, magic `n+2`), little- or big-endian (told by
//!   `sizeof_hdr`), with `dim = (6, 1, 1, 1, 1, rows, columns)`: CIFTI-2 puts matrix dimension
//!   0 in `dim[5]` and dimension 1 in `dim[6]`, and stores the values with the row index
//!   varying fastest (column after column, as NIfTI stores `dim[5]` before `dim[6]`);
//! - values stored as uint8, int16, float32 or float64, scaled as nibabel scales them: when
//!   `scl_slope` is neither 0 nor NaN nor infinite, `x * scl_slope + scl_inter` in float64
//!   (the product skipped when the slope is 1, the sum when the intercept is 0), else as
//!   stored; so the values equal nibabel's float64 `get_fdata()` to the bit;
//! - the header extensions up to `vox_offset`, of which exactly one has code 32;
//! - an intent code of the CIFTI-2 range (3000 to 3012), and an XML whose maps agree with the
//!   dims (a series' `NumberOfSeriesPoints`, the parcels, grayordinates or label maps);
//! - for a run, the intent of its kind (3004, 3002, 3007), or 3000 (ConnUnknown, what nibabel
//!   writes when the intent is not set, as for most files made with `Cifti2Image`) when the
//!   XML's maps are those of the kind (series x parcels, series x brain models, labels x brain
//!   models), with a note; nibabel and Workbench read files by their maps too. Another intent,
//!   or 3000 with other maps, is refused.
//!
//! # What is refused, and why
//!
//! Each with a [`DataError::Cifti`] naming the file: gzip-compressed files (CIFTI files are
//! not compressed by the tools that write them); NIfTI-1 (CIFTI-2 is defined on NIfTI-2 only);
//! other datatypes (none of the BOLD tools writes them); a file shorter than its header, its
//! extensions or its data, or with bytes after the data (the dims would not describe the file);
//! a `vox_offset` inside the header or past the end; three-dimensional CIFTI matrices.
//! Every size is checked, with checked arithmetic, against the file's length before anything
//! of that size is allocated, so the reader holds at most the file's bytes (the header and
//! XML) plus its values as f64.

pub mod nifti2;
mod parcellate;
pub mod xml;

pub(crate) use parcellate::read_dtseries_parcellated;

use super::RawRun;
use crate::error::{io_err, DataError};
use nifti2::{Datatype, Nifti2Header, Scaling, HEADER_BYTES};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use xml::{CiftiXml, IndexMap};

/// `NIFTI_INTENT_CONNECTIVITY_DENSE_SERIES`: a `.dtseries.nii`.
pub const INTENT_DENSE_SERIES: i32 = 3002;
/// `NIFTI_INTENT_CONNECTIVITY_PARCELLATED_SERIES`: a `.ptseries.nii`.
pub const INTENT_PARCEL_SERIES: i32 = 3004;
/// `NIFTI_INTENT_CONNECTIVITY_DENSE_LABELS`: a `.dlabel.nii`.
pub const INTENT_DENSE_LABELS: i32 = 3007;

/// The `intent_name` and file extension of a CIFTI-2 intent code (3000 to 3012).
pub fn intent_info(code: i32) -> Option<(&'static str, &'static str)> {
    Some(match code {
        3000 => ("ConnUnknown", ".nii"),
        3001 => ("ConnDense", ".dconn.nii"),
        3002 => ("ConnDenseSeries", ".dtseries.nii"),
        3003 => ("ConnParcels", ".pconn.nii"),
        3004 => ("ConnParcelSries", ".ptseries.nii"),
        3005 => ("ConnDenseTrajectory", ".dtraj.nii"),
        3006 => ("ConnDenseScalar", ".dscalar.nii"),
        3007 => ("ConnDenseLabel", ".dlabel.nii"),
        3008 => ("ConnParcelScalr", ".pscalar.nii"),
        3009 => ("ConnParcelDense", ".pdconn.nii"),
        3010 => ("ConnDenseParcel", ".dpconn.nii"),
        3011 => ("ConnPPSr", ".pconnseries.nii"),
        3012 => ("ConnPPSc", ".pconnscalar.nii"),
        _ => return None,
    })
}

/// A run read from a CIFTI file: values `(n_tr, parcels)` row-major as f64, parcel names, TR.
pub(crate) struct CiftiRun {
    /// The values, with `names: Some(parcel names)`.
    pub raw: RawRun,
    /// `SeriesStep` in seconds.
    pub tr_seconds: Option<f64>,
    /// What the reader left out and why (labels without grayordinates), one sentence each.
    pub notes: Vec<String>,
}

/// An open CIFTI-2 file: its header and XML, checked against each other and the file's
/// length; the values are read on demand ([`CiftiFile::values`]).
#[derive(Clone, Debug)]
pub struct CiftiFile {
    path: PathBuf,
    header: Nifti2Header,
    xml: CiftiXml,
    scaling: Option<Scaling>,
    rows: usize,
    columns: usize,
}

impl CiftiFile {
    /// Reads and checks the header, the extensions and the XML of `path` (not the values).
    pub fn open(path: &Path) -> Result<Self, DataError> {
        let err = |reason: String| cifti_err(path, reason);
        let mut f = std::fs::File::open(path).map_err(io_err(path))?;
        let len = f.metadata().map_err(io_err(path))?.len();
        let mut head = Vec::with_capacity(HEADER_BYTES);
        (&mut f).take(HEADER_BYTES as u64).read_to_end(&mut head).map_err(io_err(path))?;
        let header = Nifti2Header::parse(&head).map_err(err)?;
        let start = HEADER_BYTES as u64;
        if header.vox_offset < start || header.vox_offset > len {
            return Err(err(format!(
                "vox_offset {} is not between the end of the 540-byte header and the end of the file ({len} bytes)",
                header.vox_offset
            )));
        }
        // At most the file's length: vox_offset was checked against it.
        let mut tail = Vec::new();
        (&mut f).take(header.vox_offset - start).read_to_end(&mut tail).map_err(io_err(path))?;
        let exts = nifti2::extensions(&tail, header.big_endian).map_err(err)?;
        let scaling = header.scaling().map_err(err)?;
        let xml = cifti_xml(&exts).map_err(err)?;
        let (rows, columns) = matrix_shape(&header, &xml).map_err(err)?;
        check_data_len(&header, rows, columns, len).map_err(err)?;
        Ok(CiftiFile { path: path.to_path_buf(), header, xml, scaling, rows, columns })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The NIfTI-2 header.
    pub fn header(&self) -> &Nifti2Header {
        &self.header
    }

    /// The CIFTI-2 XML.
    pub fn xml(&self) -> &CiftiXml {
        &self.xml
    }

    /// `intent_code` (3000 to 3012).
    pub fn intent(&self) -> i32 {
        self.header.intent_code
    }

    /// `(rows, columns)`: matrix dimensions 0 and 1 (`dim[5]`, `dim[6]`).
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.columns)
    }

    /// The scaling applied to the stored values (`None`: none).
    pub fn scaling(&self) -> Option<Scaling> {
        self.scaling
    }

    /// Every value, `(rows, columns)` row-major, scaled: nibabel's `get_fdata()`, bit for bit.
    pub fn values(&self) -> Result<Vec<f64>, DataError> {
        let (n, p) = (self.rows, self.columns);
        // rows * columns values of at least one byte each fit in the file: checked at open.
        let mut out = vec![0.0; n * p];
        self.for_each_column(|g, col| {
            for (t, &v) in col.iter().enumerate() {
                out[t * p + g] = v;
            }
        })?;
        Ok(out)
    }

    /// Calls `f(column, values)` for each column in order, with the column's `rows` scaled
    /// values (the file's order: a column's values are contiguous), holding one column at once.
    pub fn for_each_column(&self, mut f: impl FnMut(usize, &[f64])) -> Result<(), DataError> {
        let path = &self.path;
        let mut file = std::fs::File::open(path).map_err(io_err(path))?;
        file.seek(SeekFrom::Start(self.header.vox_offset)).map_err(io_err(path))?;
        let mut r = std::io::BufReader::new(file);
        let size = self.header.datatype.size();
        let mut raw = vec![0u8; self.rows * size];
        let mut col = vec![0.0; self.rows];
        for g in 0..self.columns {
            r.read_exact(&mut raw).map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => {
                    cifti_err(path, format!("truncated: the file ends inside column {g} of the data"))
                }
                _ => DataError::Io { path: path.clone(), source: e },
            })?;
            for (v, b) in col.iter_mut().zip(raw.chunks_exact(size)) {
                let x = decode(self.header.datatype, self.header.big_endian, b);
                *v = self.scaling.map_or(x, |s| s.apply(x));
            }
            f(g, &col);
        }
        Ok(())
    }
}

/// One stored value as f64 (exact for all four datatypes).
fn decode(t: Datatype, big_endian: bool, b: &[u8]) -> f64 {
    let mut a = [0u8; 8];
    a[..b.len()].copy_from_slice(b);
    if big_endian {
        a[..b.len()].reverse();
    }
    match t {
        Datatype::U8 => f64::from(a[0]),
        Datatype::I16 => f64::from(i16::from_le_bytes([a[0], a[1]])),
        Datatype::F32 => f64::from(f32::from_le_bytes([a[0], a[1], a[2], a[3]])),
        Datatype::F64 => f64::from_le_bytes(a),
    }
}

/// The XML of the one extension of code 32, parsed.
fn cifti_xml(exts: &[nifti2::Extension]) -> Result<CiftiXml, String> {
    let mut cifti = exts.iter().filter(|e| e.code == 32);
    let ext = cifti.next().ok_or_else(|| match exts.len() {
        0 => "no CIFTI-2 XML: the file has no header extension (CIFTI-2 keeps its XML in one of code 32)".to_string(),
        n => {
            let codes: Vec<String> = exts.iter().map(|e| e.code.to_string()).collect();
            format!("no CIFTI-2 XML: none of its {n} header extensions has code 32 (codes: {})", codes.join(", "))
        }
    })?;
    if cifti.next().is_some() {
        return Err("two header extensions have code 32 (CIFTI-2 XML); a file holds one".into());
    }
    let end = ext.content.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
    let text = std::str::from_utf8(&ext.content[..end])
        .map_err(|e| format!("the CIFTI-2 XML is not UTF-8 (byte {} of the extension)", e.valid_up_to()))?;
    xml::parse(text)
}

/// The matrix's `(rows, columns)`: the dims, which must be `(6, 1, 1, 1, 1, rows, columns)`
/// and agree with the XML's maps, under a CIFTI-2 intent code.
fn matrix_shape(h: &Nifti2Header, x: &CiftiXml) -> Result<(usize, usize), String> {
    let code = h.intent_code;
    if intent_info(code).is_none() {
        return Err(format!("intent code {code} is not a CIFTI-2 intent (3000 to 3012)"));
    }
    let d = &h.dim;
    if d[0] != 6 || d[1..5] != [1, 1, 1, 1] {
        return Err(format!(
            "dims {:?}: a 2-D CIFTI-2 matrix has dim[0] = 6 and dim[1..5] = 1 (only 2-D matrices are read)",
            &d[..(d[0].clamp(0, 7) as usize + 1)]
        ));
    }
    let mut shape = [0usize; 2];
    for (i, map) in [&x.rows, &x.columns].into_iter().enumerate() {
        let dim = d[5 + i];
        let n = usize::try_from(dim).ok().filter(|&n| n > 0);
        let n = n.ok_or_else(|| format!("dim[{}] is {dim}: matrix dimension {i} must have at least 1 index", 5 + i))?;
        if map.len() != n {
            return Err(format!(
                "the XML's matrix dimension {i} ({}) has {} indices, but dim[{}] is {n}",
                map.kind(),
                map.len(),
                5 + i
            ));
        }
        shape[i] = n;
    }
    Ok((shape[0], shape[1]))
}

/// The data after `vox_offset` must be exactly `rows * columns` values.
fn check_data_len(h: &Nifti2Header, rows: usize, columns: usize, len: u64) -> Result<(), String> {
    let held = len - h.vox_offset;
    let size = h.datatype.size() as u64;
    let needs = (rows as u64).checked_mul(columns as u64).and_then(|n| n.checked_mul(size));
    let what = match needs {
        Some(n) if n == held => return Ok(()),
        Some(n) if n < held => "bytes after the data",
        _ => "truncated",
    };
    let needs = needs.map_or_else(|| "more than 2^64 bytes".to_string(), |n| format!("{n} bytes"));
    Err(format!(
        "{what}: {rows} x {columns} values of {size} bytes need {needs} after vox_offset {}, the file holds {held}",
        h.vox_offset
    ))
}

/// [`DataError::Cifti`] of `path`.
pub(crate) fn cifti_err(path: &Path, reason: impl Into<String>) -> DataError {
    DataError::Cifti { path: path.to_path_buf(), reason: reason.into() }
}

/// The intent's name for messages: `3002 (ConnDenseSeries, a .dtseries.nii)`.
fn describe_intent(code: i32) -> String {
    match intent_info(code) {
        Some((name, ext)) => format!("{code} ({name}, a {ext})"),
        None => code.to_string(),
    }
}

/// `NIFTI_INTENT_CONNECTIVITY_UNKNOWN`: what nibabel writes when the intent is not set.
pub const INTENT_UNKNOWN: i32 = 3000;

/// The note of a file of intent [`INTENT_UNKNOWN`] read by its maps (one sentence for all such
/// files, so a data set of them gets one note).
pub const UNKNOWN_INTENT_NOTE: &str = "CIFTI files with intent 3000 (ConnUnknown, what nibabel writes when the intent \
                                       is not set) were read by their index maps";

/// The index map kinds `(dimension 0, dimension 1)` of the files of intent `code` read here.
fn maps_of(code: i32) -> Option<(&'static str, &'static str)> {
    let (series, parcels, grays, labels) = (
        "CIFTI_INDEX_TYPE_SERIES",
        "CIFTI_INDEX_TYPE_PARCELS",
        "CIFTI_INDEX_TYPE_BRAIN_MODELS",
        "CIFTI_INDEX_TYPE_LABELS",
    );
    match code {
        INTENT_PARCEL_SERIES => Some((series, parcels)),
        INTENT_DENSE_SERIES => Some((series, grays)),
        INTENT_DENSE_LABELS => Some((labels, grays)),
        _ => None,
    }
}

/// Checks that `f` has intent `code` (named for a message), or intent 3000 (ConnUnknown) with
/// the index maps of `code`'s files (nibabel and Workbench read such files by their maps): then
/// [`UNKNOWN_INTENT_NOTE`] is the note to give.
fn expect_intent(f: &CiftiFile, code: i32) -> Result<Option<&'static str>, DataError> {
    if f.intent() == code {
        return Ok(None);
    }
    let maps = (f.xml.rows.kind(), f.xml.columns.kind());
    match maps_of(code) {
        Some(want) if f.intent() == INTENT_UNKNOWN && maps == want => Ok(Some(UNKNOWN_INTENT_NOTE)),
        Some(want) if f.intent() == INTENT_UNKNOWN => Err(cifti_err(
            &f.path,
            format!(
                "intent {}, and its maps are {} x {}, not the {} x {} of a {}",
                describe_intent(f.intent()),
                maps.0,
                maps.1,
                want.0,
                want.1,
                describe_intent(code)
            ),
        )),
        _ => Err(cifti_err(
            &f.path,
            format!("intent {}, but a {} is read here", describe_intent(f.intent()), describe_intent(code)),
        )),
    }
}

/// The TR of a series map: `SeriesStep` in seconds, finite and positive.
fn tr_of(path: &Path, map: &IndexMap) -> Result<f64, DataError> {
    let IndexMap::Series(s) = map else {
        return Err(cifti_err(path, format!("matrix dimension 0 is {}, not a series of TRs", map.kind())));
    };
    if s.unit != "SECOND" {
        return Err(cifti_err(path, format!("SeriesUnit is {}: a BOLD series is in SECOND", s.unit)));
    }
    if !(s.step.is_finite() && s.step > 0.0) {
        let step = nifti2::short(s.step);
        return Err(cifti_err(path, format!("SeriesStep is {step} s: a TR is a positive number of seconds")));
    }
    Ok(s.step)
}

/// Fails on the first non-finite value of `data` (`(n_tr, names.len())` row-major).
fn check_finite(path: &Path, data: &[f64], names: &[String]) -> Result<(), DataError> {
    let Some(i) = data.iter().position(|v| !v.is_finite()) else { return Ok(()) };
    let p = names.len();
    Err(DataError::Cell {
        path: path.to_path_buf(),
        location: format!("row {}, column {} ({})", i / p, i % p + 1, names[i % p]),
        reason: format!("non-finite value {}", data[i]),
    })
}

/// Reads a `.ptseries.nii`: intent 3004, a series of TRs (seconds) by parcels, every value
/// finite.
pub(crate) fn read_ptseries(path: &Path) -> Result<CiftiRun, DataError> {
    let f = CiftiFile::open(path)?;
    let note = expect_intent(&f, INTENT_PARCEL_SERIES)?;
    let tr = tr_of(path, &f.xml.rows)?;
    let IndexMap::Parcels(names) = &f.xml.columns else {
        return Err(cifti_err(path, format!("matrix dimension 1 is {}, not parcels", f.xml.columns.kind())));
    };
    let data = f.values()?;
    check_finite(path, &data, names)?;
    let raw = RawRun { n_tr: f.rows, parcels: f.columns, names: Some(names.clone()), data };
    Ok(CiftiRun { raw, tr_seconds: Some(tr), notes: note.into_iter().map(String::from).collect() })
}

/// A parcel series as the loader reads it ([`ptseries`], [`parcellate_dtseries`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ParcelSeries {
    /// TRs.
    pub n_tr: usize,
    /// The parcels' names, in column order.
    pub names: Vec<String>,
    /// `x[t, p]` at `data[t * names.len() + p]`, every value finite.
    pub data: Vec<f64>,
    /// The TR (`SeriesStep`, in seconds).
    pub tr_seconds: f64,
    /// What was left out, one sentence each (labels without grayordinates).
    pub notes: Vec<String>,
}

impl From<CiftiRun> for ParcelSeries {
    fn from(r: CiftiRun) -> Self {
        ParcelSeries {
            n_tr: r.raw.n_tr,
            names: r.raw.names.unwrap_or_default(),
            data: r.raw.data,
            // Both readers set it.
            tr_seconds: r.tr_seconds.unwrap_or(f64::NAN),
            notes: r.notes,
        }
    }
}

/// Reads a `.ptseries.nii` (intent 3004): a series of TRs by parcels, every value finite.
pub fn ptseries(path: &Path) -> Result<ParcelSeries, DataError> {
    read_ptseries(path).map(ParcelSeries::from)
}

/// Reads a `.dtseries.nii` (intent 3002) averaged over the labels of a `.dlabel.nii` (intent
/// 3007) on the same grayordinates (see `parcellate` for the order and the arithmetic).
pub fn parcellate_dtseries(path: &Path, dlabel: &Path) -> Result<ParcelSeries, DataError> {
    read_dtseries_parcellated(path, dlabel).map(ParcelSeries::from)
}
