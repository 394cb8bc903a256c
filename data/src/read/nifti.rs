//! 4-D NIfTI BOLD runs (`*_bold.nii`, `*_bold.nii.gz`, NIfTI-1 or NIfTI-2, either byte
//! order) averaged into parcels over a labelled 3-D atlas image on the same grid, as nilearn's
//! `NiftiLabelsMasker(labels_img=atlas, strategy="mean")` does: the labels are the atlas's
//! distinct values other than 0 (background), in ascending order; each parcel at each TR is
//! the mean of its voxels; a non-finite voxel value counts as 0 (nilearn's `ensure_finite`).
//! Parcel names come from a label table (`index` and `name` columns, BIDS `dseg.tsv`) when one
//! is given, else `label-<n>`. An atlas on another grid (shape or affine) is an error: nothing
//! is resampled.
//!
//! Values are scaled by `scl_slope` and `scl_inter` in f64 as nibabel's `get_fdata` does. The
//! data's size (dimensions times bytes per value, in checked arithmetic) is checked against the
//! file's length before anything is allocated; a gzip file may hold at most 1032 times its
//! compressed length (deflate's largest ratio).

use super::RawRun;
use crate::error::{io_err, DataError};
use std::io::Read;
use std::path::Path;

/// deflate's largest expansion: no gzip file decompresses to more than this times its size.
const MAX_DEFLATE_RATIO: u64 = 1032;

/// The header fields this reader uses, of either NIfTI version.
#[derive(Clone, Debug, PartialEq)]
struct Header {
    big_endian: bool,
    datatype: i16,
    dim: [i64; 8],
    pixdim: [f64; 8],
    vox_offset: u64,
    scl_slope: f64,
    scl_inter: f64,
    qform_code: i32,
    sform_code: i32,
    quatern: [f64; 3],
    qoffset: [f64; 3],
    srow: [[f64; 4]; 3],
}

/// Reads fixed-offset fields in a byte order.
struct Fields<'a>(&'a [u8], bool);

impl Fields<'_> {
    fn bytes<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut b: [u8; N] = std::array::from_fn(|i| self.0[at + i]);
        if self.1 {
            b.reverse();
        }
        b
    }
    fn i16(&self, at: usize) -> i16 {
        i16::from_le_bytes(self.bytes(at))
    }
    fn i32(&self, at: usize) -> i32 {
        i32::from_le_bytes(self.bytes(at))
    }
    fn i64(&self, at: usize) -> i64 {
        i64::from_le_bytes(self.bytes(at))
    }
    fn f32(&self, at: usize) -> f64 {
        f64::from(f32::from_le_bytes(self.bytes(at)))
    }
    fn f64(&self, at: usize) -> f64 {
        f64::from_le_bytes(self.bytes(at))
    }
}

impl Header {
    /// Parses a NIfTI-1 (348-byte) or NIfTI-2 (540-byte) header at the start of `h`.
    fn parse(h: &[u8]) -> Result<Header, String> {
        let size = |be: bool| h.get(..4).map(|b| Fields(b, be).i32(0));
        let (v2, be) = match (size(false), size(true)) {
            (Some(348), _) => (false, false),
            (_, Some(348)) => (false, true),
            (Some(540), _) => (true, false),
            (_, Some(540)) => (true, true),
            (Some(s), _) => return Err(format!("not a NIfTI file: sizeof_hdr is {s}, not 348 or 540")),
            _ => return Err(format!("truncated: {} bytes, no NIfTI header", h.len())),
        };
        let need = if v2 { 540 } else { 348 };
        if h.len() < need {
            return Err(format!("truncated: {} bytes, inside the {need}-byte NIfTI header", h.len()));
        }
        let r = Fields(h, be);
        let hd = if v2 {
            let magic = &h[4..8];
            if magic != b"n+2\0" {
                return Err(format!("the NIfTI-2 magic is `{}`, not n+2 (a single-file .nii)", magic.escape_ascii()));
            }
            let vox = r.i64(168);
            Header {
                big_endian: be,
                datatype: r.i16(12),
                dim: std::array::from_fn(|i| r.i64(16 + 8 * i)),
                pixdim: std::array::from_fn(|i| r.f64(104 + 8 * i)),
                vox_offset: u64::try_from(vox).map_err(|_| format!("vox_offset is negative ({vox})"))?,
                scl_slope: r.f64(176),
                scl_inter: r.f64(184),
                qform_code: r.i32(344),
                sform_code: r.i32(348),
                quatern: std::array::from_fn(|i| r.f64(352 + 8 * i)),
                qoffset: std::array::from_fn(|i| r.f64(376 + 8 * i)),
                srow: std::array::from_fn(|row| std::array::from_fn(|c| r.f64(400 + 32 * row + 8 * c))),
            }
        } else {
            let magic = &h[344..348];
            if magic != b"n+1\0" {
                return Err(format!(
                    "the NIfTI-1 magic is `{}`, not n+1 (a single-file .nii; .hdr/.img pairs are not read)",
                    magic.escape_ascii()
                ));
            }
            let vox = r.f32(108);
            if !(0.0..1e15).contains(&vox) {
                return Err(format!("vox_offset {vox} is not a byte offset"));
            }
            Header {
                big_endian: be,
                datatype: r.i16(70),
                dim: std::array::from_fn(|i| i64::from(r.i16(40 + 2 * i))),
                pixdim: std::array::from_fn(|i| r.f32(76 + 4 * i)),
                vox_offset: vox as u64,
                scl_slope: r.f32(112),
                scl_inter: r.f32(116),
                qform_code: i32::from(r.i16(252)),
                sform_code: i32::from(r.i16(254)),
                quatern: std::array::from_fn(|i| r.f32(256 + 4 * i)),
                qoffset: std::array::from_fn(|i| r.f32(268 + 4 * i)),
                srow: std::array::from_fn(|row| std::array::from_fn(|c| r.f32(280 + 16 * row + 4 * c))),
            }
        };
        if hd.vox_offset < need as u64 {
            return Err(format!("vox_offset {} lies inside the {need}-byte header", hd.vox_offset));
        }
        Ok(hd)
    }

    /// The dimensions `dim[1..=dim[0]]`, each at least 1 (trailing 1s beyond `dim[0]` aside).
    fn dims(&self) -> Result<Vec<usize>, String> {
        let n = self.dim[0];
        if !(1..=7).contains(&n) {
            return Err(format!("dim[0] is {n}, not a dimension count from 1 to 7"));
        }
        (1..=n as usize)
            .map(|i| match usize::try_from(self.dim[i]) {
                Ok(d) if d >= 1 => Ok(d),
                _ => Err(format!("dim[{i}] is {}, not a size of at least 1", self.dim[i])),
            })
            .collect()
    }

    /// The voxel-to-world affine's top three rows, as nibabel gives `img.affine`: the sform
    /// when its code is set, else the qform when its code is set, else the pixdim scaling
    /// nibabel falls back on.
    fn affine(&self, dims: &[usize]) -> [[f64; 4]; 3] {
        if self.sform_code > 0 {
            return self.srow;
        }
        let zooms = [1, 2, 3].map(|i| if self.pixdim[i] == 0.0 { 1.0 } else { self.pixdim[i] });
        if self.qform_code > 0 {
            let [b, c, d] = self.quatern;
            let a2 = 1.0 - (b * b + c * c + d * d);
            let (a, b, c, d) = if a2 < 1e-7 {
                let n = (b * b + c * c + d * d).sqrt();
                (0.0, b / n, c / n, d / n)
            } else {
                (a2.sqrt(), b, c, d)
            };
            let r = [
                [a * a + b * b - c * c - d * d, 2.0 * (b * c - a * d), 2.0 * (b * d + a * c)],
                [2.0 * (b * c + a * d), a * a + c * c - b * b - d * d, 2.0 * (c * d - a * b)],
                [2.0 * (b * d - a * c), 2.0 * (c * d + a * b), a * a + d * d - c * c - b * b],
            ];
            let qfac = if self.pixdim[0] < 0.0 { -1.0 } else { 1.0 };
            let z = [zooms[0], zooms[1], zooms[2] * qfac];
            return std::array::from_fn(|i| [r[i][0] * z[0], r[i][1] * z[1], r[i][2] * z[2], self.qoffset[i]]);
        }
        let size = |i: usize| dims.get(i).copied().unwrap_or(1) as f64;
        [
            [-zooms[0], 0.0, 0.0, (size(0) - 1.0) / 2.0 * zooms[0]],
            [0.0, zooms[1], 0.0, -(size(1) - 1.0) / 2.0 * zooms[1]],
            [0.0, 0.0, zooms[2], -(size(2) - 1.0) / 2.0 * zooms[2]],
        ]
    }
}

/// Decodes one stored value from its bytes (`true`: big-endian).
type Decode = fn(&[u8], bool) -> f64;

/// Bytes per value and the decoder of one value, for the datatypes read here.
fn datatype(code: i16) -> Result<(usize, Decode), String> {
    fn le<const N: usize>(b: &[u8], be: bool) -> [u8; N] {
        let mut a: [u8; N] = std::array::from_fn(|i| b[i]);
        if be {
            a.reverse();
        }
        a
    }
    Ok(match code {
        2 => (1, |b, _| f64::from(b[0])),
        256 => (1, |b, _| f64::from(b[0] as i8)),
        4 => (2, |b, be| f64::from(i16::from_le_bytes(le(b, be)))),
        512 => (2, |b, be| f64::from(u16::from_le_bytes(le(b, be)))),
        8 => (4, |b, be| f64::from(i32::from_le_bytes(le(b, be)))),
        768 => (4, |b, be| f64::from(u32::from_le_bytes(le(b, be)))),
        1024 => (8, |b, be| i64::from_le_bytes(le(b, be)) as f64),
        1280 => (8, |b, be| u64::from_le_bytes(le(b, be)) as f64),
        16 => (4, |b, be| f64::from(f32::from_le_bytes(le(b, be)))),
        64 => (8, |b, be| f64::from_le_bytes(le(b, be))),
        _ => {
            return Err(format!(
                "datatype {code} is not read: uint8 (2), int8 (256), int16 (4), uint16 (512), int32 (8), uint32 \
                 (768), int64 (1024), uint64 (1280), float32 (16) and float64 (64) are"
            ))
        }
    })
}

/// A NIfTI image as read: its header, dimensions, affine and data bytes (from `vox_offset`).
pub(crate) struct Image {
    header: Header,
    /// `dim[1..=dim[0]]`.
    pub(crate) dims: Vec<usize>,
    /// The voxel-to-world affine (three rows).
    pub(crate) affine: [[f64; 4]; 3],
    bytes: Vec<u8>,
    size: usize,
    decode: Decode,
}

impl Image {
    /// The scaled value at flat index `i` (x fastest, then y, z, t).
    pub(crate) fn value(&self, i: usize) -> f64 {
        let x = (self.decode)(&self.bytes[i * self.size..(i + 1) * self.size], self.header.big_endian);
        let (s, c) = (self.header.scl_slope, self.header.scl_inter);
        if s == 0.0 || !s.is_finite() || !c.is_finite() {
            return x;
        }
        let x = if s != 1.0 { x * s } else { x };
        if c != 0.0 {
            x + c
        } else {
            x
        }
    }
}

/// Reads the NIfTI image at `path` (`.nii`, or gzip-compressed `.nii.gz`).
pub(crate) fn read_image(path: &Path) -> Result<Image, DataError> {
    let bad = |reason: String| DataError::Nifti { path: path.to_path_buf(), reason };
    let file_len = std::fs::metadata(path).map_err(io_err(path))?.len();
    let mut file = std::fs::File::open(path).map_err(io_err(path))?;
    let mut magic = [0u8; 2];
    let got = file.read(&mut magic).map_err(io_err(path))?;
    let gz = got == 2 && magic == [0x1f, 0x8b];
    drop(file);
    let file = std::fs::File::open(path).map_err(io_err(path))?;
    let (mut reader, limit): (Box<dyn Read>, u64) = if gz {
        (Box::new(flate2::read::MultiGzDecoder::new(file)), file_len.saturating_mul(MAX_DEFLATE_RATIO))
    } else {
        (Box::new(file), file_len)
    };
    let mut head = Vec::with_capacity(540);
    (&mut reader).take(540).read_to_end(&mut head).map_err(|e| bad(format!("cannot be read: {e}")))?;
    let header = Header::parse(&head).map_err(&bad)?;
    let dims = header.dims().map_err(&bad)?;
    let (size, decode) = datatype(header.datatype).map_err(&bad)?;
    let count = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let need = count
        .and_then(|c| c.checked_mul(size))
        .and_then(|b| u64::try_from(b).ok())
        .and_then(|b| b.checked_add(header.vox_offset));
    let shape = dims.iter().map(usize::to_string).collect::<Vec<_>>().join(" x ");
    let Some(need) = need.filter(|&n| n <= limit) else {
        return Err(bad(format!(
            "the header's shape {shape} of {size}-byte values from byte {} needs more bytes than the file {}",
            header.vox_offset,
            if gz { format!("can hold ({file_len} compressed bytes)") } else { format!("holds ({file_len})") }
        )));
    };
    let data_bytes = (need - header.vox_offset) as usize;
    let mut all = head;
    all.reserve_exact((need as usize).saturating_sub(all.len()));
    reader
        .take(need - all.len().min(need as usize) as u64)
        .read_to_end(&mut all)
        .map_err(|e| bad(format!("cannot be read: {e}")))?;
    if (all.len() as u64) < need {
        return Err(bad(format!(
            "truncated: the shape {shape} of {size}-byte values from byte {} needs {need} bytes, the {} holds {}",
            header.vox_offset,
            if gz { "decompressed file" } else { "file" },
            all.len()
        )));
    }
    // The header read may have taken bytes past the data of a short image.
    all.truncate(need as usize);
    let bytes = all.split_off(header.vox_offset as usize);
    debug_assert_eq!(bytes.len(), data_bytes);
    let affine = header.affine(&dims);
    Ok(Image { header, dims, affine, bytes, size, decode })
}

/// A label table: `index` and `name` columns (BIDS `dseg.tsv`, nilearn's lookup tables).
pub(crate) fn read_label_table(path: &Path) -> Result<Vec<(f64, String)>, DataError> {
    let bad = |reason: String| DataError::Nifti { path: path.to_path_buf(), reason };
    let size = std::fs::metadata(path).map_err(io_err(path))?.len();
    if size > 64 << 20 {
        return Err(bad(format!("{size} bytes, more than a label table's limit of 64 MiB")));
    }
    let text = std::fs::read_to_string(path).map_err(io_err(path))?;
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let header: Vec<&str> = lines.next().map(|(_, h)| h.split('\t').map(str::trim).collect()).unwrap_or_default();
    let col = |n: &str| header.iter().position(|h| *h == n);
    let (Some(ic), Some(nc)) = (col("index"), col("name")) else {
        return Err(bad(format!(
            "line 1: a label table needs `index` and `name` columns, found {}",
            header.join(", ")
        )));
    };
    let mut out = Vec::new();
    for (i, line) in lines {
        let cells: Vec<&str> = line.split('\t').map(str::trim).collect();
        let (Some(ix), Some(name)) = (cells.get(ic), cells.get(nc)) else {
            return Err(bad(format!("line {}: fewer cells than the header's {}", i + 1, header.len())));
        };
        let v: f64 = ix
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| bad(format!("line {}: index `{ix}` is not a number", i + 1)))?;
        if name.is_empty() {
            return Err(bad(format!("line {}: label {ix} has an empty name", i + 1)));
        }
        out.push((v, (*name).to_string()));
    }
    Ok(out)
}

/// The name of label `v` without a table: `label-<n>`.
fn label_name(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("label-{}", v as i64)
    } else {
        format!("label-{v}")
    }
}

/// The atlas and its optional label table: what [`parcellate`] averages over.
pub(crate) struct Atlas<'a> {
    /// The labelled 3-D image.
    pub(crate) image: &'a Path,
    /// Its label table, if any.
    pub(crate) labels: Option<&'a Path>,
}

/// Checks that `bold` is 4-D, `lab` 3-D and both on one grid (shape and affine); gives the
/// voxels per volume.
fn check_grid(bold: &Image, lab: &Image, path: &Path, atlas: &Path) -> Result<usize, DataError> {
    let err = |p: &Path, reason: String| DataError::Nifti { path: p.to_path_buf(), reason };
    let spatial = |d: &[usize]| -> Vec<usize> { (0..3).map(|i| d.get(i).copied().unwrap_or(1)).collect() };
    if bold.dims.len() < 4 || bold.dims[4..].iter().any(|&d| d != 1) {
        let reason = format!("a BOLD run is a 4-D image, this one has shape {:?}", bold.dims);
        return Err(err(path, reason));
    }
    if lab.dims.len() > 3 && lab.dims[3..].iter().any(|&d| d != 1) {
        return Err(err(atlas, format!("an atlas is a 3-D image of labels, this one has shape {:?}", lab.dims)));
    }
    let (bs, ls) = (spatial(&bold.dims), spatial(&lab.dims));
    let same = |a: &f64, b: &f64| (a - b).abs() <= 1e-4 * (1.0 + a.abs());
    if bs != ls || !bold.affine.iter().flatten().zip(lab.affine.iter().flatten()).all(|(a, b)| same(a, b)) {
        return Err(err(
            atlas,
            format!(
                "on another grid than the BOLD run {} (atlas shape {ls:?}, affine {:?}; run shape {bs:?}, affine \
                 {:?}): resample the atlas onto the run first (e.g. nilearn.image.resample_to_img(atlas, bold, \
                 interpolation=\"nearest\")); nothing is resampled here",
                path.display(),
                lab.affine,
                bold.affine
            ),
        ));
    }
    Ok(bs.iter().product())
}

/// The atlas's labels (distinct values other than 0, ascending) and each voxel's parcel.
fn label_index(lab: &Image, nvox: usize, atlas: &Path) -> Result<(Vec<f64>, Vec<Option<usize>>), DataError> {
    let mut values: Vec<f64> = (0..nvox).map(|i| lab.value(i)).filter(|v| *v != 0.0 && !v.is_nan()).collect();
    values.sort_by(f64::total_cmp);
    values.dedup();
    if values.is_empty() {
        let reason = "no labelled voxel: every value is 0 (background)".into();
        return Err(DataError::Nifti { path: atlas.to_path_buf(), reason });
    }
    let of_voxel = (0..nvox)
        .map(|i| {
            let v = lab.value(i);
            values.binary_search_by(|x| x.total_cmp(&v)).ok()
        })
        .collect();
    Ok((values, of_voxel))
}

/// The names of the labels `values`: from the label table when there is one, else `label-<n>`.
fn label_names(values: &[f64], atlas: &Atlas<'_>) -> Result<Vec<String>, DataError> {
    let Some(table) = atlas.labels else { return Ok(values.iter().map(|v| label_name(*v)).collect()) };
    let rows = read_label_table(table)?;
    values
        .iter()
        .map(|v| {
            rows.iter().find(|(i, _)| i == v).map(|(_, n)| n.clone()).ok_or_else(|| DataError::Nifti {
                path: table.to_path_buf(),
                reason: format!(
                    "no row for label {} of the atlas {}",
                    label_name(*v).trim_start_matches("label-"),
                    atlas.image.display()
                ),
            })
        })
        .collect()
}

/// The BOLD run at `path` averaged into the parcels of `atlas` (module documentation), and a
/// note when non-finite values were counted as 0.
pub(crate) fn parcellate(path: &Path, atlas: &Atlas<'_>) -> Result<(RawRun, Vec<String>), DataError> {
    let bold = read_image(path)?;
    let lab = read_image(atlas.image)?;
    let nvox = check_grid(&bold, &lab, path, atlas.image)?;
    let n_tr = bold.dims[3];
    let (values, of_voxel) = label_index(&lab, nvox, atlas.image)?;
    let names = label_names(&values, atlas)?;
    let p = values.len();
    let mut counts = vec![0usize; p];
    for l in of_voxel.iter().flatten() {
        counts[*l] += 1;
    }
    let mut data = vec![0.0; n_tr * p];
    let mut non_finite = 0usize;
    for t in 0..n_tr {
        let row = &mut data[t * p..(t + 1) * p];
        for (i, l) in of_voxel.iter().enumerate() {
            let Some(l) = l else { continue };
            let v = bold.value(t * nvox + i);
            if v.is_finite() {
                row[*l] += v;
            } else {
                non_finite += 1;
            }
        }
        for (x, c) in row.iter_mut().zip(&counts) {
            *x /= *c as f64;
        }
    }
    let notes = if non_finite > 0 {
        vec![format!(
            "{}: {non_finite} non-finite voxel value(s) inside the atlas counted as 0 (as nilearn does)",
            path.display()
        )]
    } else {
        Vec::new()
    };
    Ok((RawRun { n_tr, parcels: p, names: Some(names), data }, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nifti").join(name)
    }

    /// Every byte of the headers (NIfTI-1 and NIfTI-2) set to values that break sizes, offsets
    /// and types: each read is a value or an error, never a panic or an unbounded allocation.
    #[test]
    fn garbled_headers_are_errors_not_panics() {
        let d = tempfile::tempdir().unwrap();
        let (bold, atlas) = (d.path().join("bold.nii"), d.path().join("atlas.nii"));
        std::fs::copy(fixture("i16_atlas.nii"), &atlas).unwrap();
        let at = Atlas { image: &atlas, labels: None };
        let mut errors = 0;
        for name in ["i16_bold.nii", "i16_atlas.nii"] {
            let raw = std::fs::read(fixture(name)).unwrap();
            let header = if name.starts_with("i16_bold") { 544 } else { 352 };
            for i in 0..header {
                for v in [0u8, 0x7f, 0xff] {
                    let mut b = raw.clone();
                    b[i] = v;
                    std::fs::write(&bold, &b).unwrap();
                    errors += usize::from(parcellate(&bold, &at).is_err());
                    errors += usize::from(read_image(&bold).is_err());
                }
            }
        }
        assert!(errors > 300, "{errors}");
        // The untouched pair reads.
        std::fs::copy(fixture("i16_bold.nii"), &bold).unwrap();
        let (run, notes) = parcellate(&bold, &at).unwrap();
        assert_eq!((run.n_tr, run.parcels, notes.len()), (12, 4, 0));
    }

    #[test]
    fn label_tables_need_index_and_name() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("l.tsv");
        std::fs::write(&t, "index\tlabel\n1\ta\n").unwrap();
        let e = read_label_table(&t).unwrap_err().to_string();
        assert!(e.ends_with("line 1: a label table needs `index` and `name` columns, found index, label"), "{e}");
        std::fs::write(&t, "name\tindex\nA\t1\nB\tx\n").unwrap();
        let e = read_label_table(&t).unwrap_err().to_string();
        assert!(e.ends_with("line 3: index `x` is not a number"), "{e}");
        std::fs::write(&t, "name\tindex\nA\t1\n\t2\n").unwrap();
        let e = read_label_table(&t).unwrap_err().to_string();
        assert!(e.ends_with("line 3: label 2 has an empty name"), "{e}");
        std::fs::write(&t, "name\tindex\nA\t1\nB\t2.5\n").unwrap();
        assert_eq!(read_label_table(&t).unwrap(), [(1.0, "A".to_string()), (2.5, "B".into())]);
        assert_eq!((label_name(3.0), label_name(2.5)), ("label-3".to_string(), "label-2.5".to_string()));
    }
}
