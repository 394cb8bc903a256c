//! `.npy` run files: a 2-D float32 or float64 array `(n_tr, P)` in C or Fortran order, read
//! row-major into f64; a non-finite value is an error naming its row and column.

use super::RawRun;
use crate::error::{io_err, DataError};
use crate::store::DiskElem;
use std::path::Path;

/// Reads a `.npy` run.
///
/// The sizes are checked before anything is allocated: the header's element count, computed
/// with checked arithmetic, times the element size must be exactly the bytes after the header,
/// so a shape whose product overflows, a shape claiming more data than the file holds, and a
/// shape claiming less (extra rows, trailing bytes) are all errors naming the file.
///
/// With `allow_nan` (`--missing drop-parcel`) a NaN is kept for the caller to drop its parcel;
/// an infinity is always an error.
pub(crate) fn read_npy(path: &Path, allow_nan: bool) -> Result<RawRun, DataError> {
    let bytes = std::fs::read(path).map_err(io_err(path))?;
    let npy_err = |reason: String| DataError::Npy { path: path.to_path_buf(), reason };
    // npyz allocates the header length the file claims before reading it, so a header that
    // runs past the end of the file is refused first.
    let (start, offset) = data_offset(&bytes).map_err(|why| npy_err(format!("not a valid .npy file: {why}")))?;
    // npyz's parser of the header backtracks exponentially on nested brackets (13 unclosed `{`
    // take seconds); a header is a flat dict holding a tuple, so deep nesting is refused first.
    let depth = nesting(&bytes[start..offset]);
    if depth > MAX_NESTING {
        return Err(npy_err(format!(
            "not a valid .npy file: the header nests brackets {depth} deep (at most {MAX_NESTING})"
        )));
    }
    // npyz multiplies the shape out unchecked, so an overflowing shape is refused first.
    if let Some(shape) = header_shape(&bytes[..offset]) {
        if element_count(&shape).is_none() {
            return Err(npy_err(format!("header shape {}: the element count overflows", fmt_shape(&shape))));
        }
    }
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(|e| npy_err(format!("not a valid .npy file: {e}")))?;
    let shape: Vec<u64> = npy.shape().to_vec();
    let order = npy.order();
    if shape.len() != 2 {
        return Err(npy_err(format!("expected a 2-D array (n_tr, parcels), found shape {shape:?}")));
    }
    let count = element_count(&shape)
        .ok_or_else(|| npy_err(format!("header shape {}: the element count overflows", fmt_shape(&shape))))?;
    let held = bytes.len() - offset;
    let needs = npy.dtype().num_bytes().and_then(|b| count.checked_mul(b));
    if needs != Some(held) {
        let needs = needs.map_or_else(|| format!("more than {}", usize::MAX), |b| b.to_string());
        return Err(npy_err(format!(
            "header shape {} needs {needs} bytes of data, the file holds {held}",
            fmt_shape(&shape)
        )));
    }
    // Both fit in usize: their product does.
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
        let mut c = vec![0.0; count];
        for t in 0..n {
            for q in 0..p {
                c[t * p + q] = data[q * n + t];
            }
        }
        c
    } else {
        data
    };
    if let Some(i) = data.iter().position(|v| v.is_infinite() || (v.is_nan() && !allow_nan)) {
        return Err(DataError::Cell {
            path: path.to_path_buf(),
            location: format!("row {}, column {}", i / p, i % p + 1),
            reason: crate::missing::non_finite_reason(data[i]),
        });
    }
    Ok(RawRun { n_tr: n, parcels: p, names: None, data })
}

/// Where the values of a `.npy` run that can stay on disk are: little-endian float32 or
/// float64 in C order (`None` for any other valid or invalid file, which [`read_npy`] reads or
/// refuses). Only the header is read; the file's size must be the header's plus exactly the
/// values the shape claims.
pub(crate) fn npy_layout(path: &Path) -> Result<Option<(u64, DiskElem, usize, usize)>, DataError> {
    use std::io::Read;
    let len = std::fs::metadata(path).map_err(io_err(path))?.len();
    let mut head = Vec::new();
    let file = std::fs::File::open(path).map_err(io_err(path))?;
    // A version 2 header may be long; one of more than 1 MiB is read whole by `read_npy`.
    file.take(1 << 20).read_to_end(&mut head).map_err(io_err(path))?;
    let Ok((start, offset)) = data_offset(&head) else { return Ok(None) };
    let header = &head[start..offset];
    if nesting(header) > MAX_NESTING {
        return Ok(None);
    }
    let Some(shape) = header_shape(&head[..offset]) else { return Ok(None) };
    // npyz multiplies the shape out unchecked: an overflowing one is `read_npy`'s to refuse.
    if element_count(&shape).is_none() {
        return Ok(None);
    }
    let Ok(npy) = npyz::NpyFile::new(&head[..offset]) else { return Ok(None) };
    let elem = match npy.dtype().descr().trim_matches('\'') {
        "<f4" => DiskElem::F32,
        "<f8" => DiskElem::F64,
        _ => return Ok(None),
    };
    if npy.order() != npyz::Order::C || shape.len() != 2 || npy.shape() != shape.as_slice() {
        return Ok(None);
    }
    let (Ok(n), Ok(p)) = (usize::try_from(shape[0]), usize::try_from(shape[1])) else { return Ok(None) };
    let bytes =
        n.checked_mul(p).and_then(|c| c.checked_mul(elem.size())).and_then(|b| (offset as u64).checked_add(b as u64));
    if bytes != Some(len) || n == 0 || p == 0 {
        return Ok(None);
    }
    Ok(Some((offset as u64, elem, n, p)))
}

/// The deepest bracket nesting [`read_npy`] hands to npyz: a header dict holding a tuple is 2
/// deep, a structured dtype's list of tuples 4.
const MAX_NESTING: usize = 4;

/// How deep `(`, `[` and `{` nest in `header` (closing brackets of any kind close one level;
/// brackets in quotes count too: no dtype this reader accepts has any).
fn nesting(header: &[u8]) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for &c in header {
        match c {
            b'(' | b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// The start and end of the header dict of an NPY version 1, 2 or 3 file (the data starts at
/// its end); an error says why there is none (no magic, another version, a header length that
/// runs past the end of the file).
fn data_offset(bytes: &[u8]) -> Result<(usize, usize), String> {
    if bytes.get(..6) != Some(b"\x93NUMPY".as_slice()) {
        return Err("no NPY magic (\\x93NUMPY) at its start".into());
    }
    let field = |r: std::ops::Range<usize>| {
        bytes.get(r).ok_or_else(|| format!("the file ends inside the header length field ({} bytes)", bytes.len()))
    };
    let (start, len) = match bytes.get(6) {
        Some(1) => (10usize, u16::from_le_bytes([field(8..10)?[0], field(8..10)?[1]]) as usize),
        Some(2 | 3) => {
            let f = field(8..12)?;
            (12, u32::from_le_bytes([f[0], f[1], f[2], f[3]]) as usize)
        }
        Some(v) => return Err(format!("format version {v} (only 1, 2 and 3 exist)")),
        None => return Err(format!("the file ends after {} bytes, inside the magic and version", bytes.len())),
    };
    let end = start.saturating_add(len);
    if end > bytes.len() {
        return Err(format!("the header length {len} runs past the end of the file ({} bytes)", bytes.len()));
    }
    Ok((start, end))
}

/// The `'shape'` tuple of a header dict (`header` is the file up to the data), if it can be read
/// as a tuple of integers; `None` leaves the judgement to npyz.
fn header_shape(header: &[u8]) -> Option<Vec<u64>> {
    let text = String::from_utf8_lossy(header);
    let at = text.find("'shape'").or_else(|| text.find("\"shape\""))? + "'shape'".len();
    let rest = text[at..].trim_start().strip_prefix(':')?.trim_start();
    let close = match rest.chars().next()? {
        '(' => ')',
        '[' => ']',
        _ => return None,
    };
    let inner = &rest[1..rest.find(close)?];
    inner.split(',').map(str::trim).filter(|d| !d.is_empty()).map(|d| d.parse().ok()).collect()
}

/// The product of the shape, if it fits in `usize`.
fn element_count(shape: &[u64]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?))
}

/// `(a, b)`.
fn fmt_shape(shape: &[u64]) -> String {
    format!("({})", shape.iter().map(u64::to_string).collect::<Vec<_>>().join(", "))
}

#[cfg(test)]
mod tests {
    use crate::testutil::*;
    use crate::Dataset;

    #[test]
    fn npy_nan_and_shape_are_errors() {
        let d = tempfile::tempdir().unwrap();
        let mut v = vec![0.5f32; 12];
        v[7] = f32::NAN;
        npy_file(&d.path().join("sub-01_run-1.npy"), 4, 3, &v);
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

    /// Loads a directory holding one hand-written `sub-01_run-1_bold.npy`; the error's text.
    fn load_raw_err(dict: &str, data: &[u8]) -> String {
        let d = tempfile::tempdir().unwrap();
        write_npy_raw(&d.path().join("sub-01_run-1_bold.npy"), dict, data);
        Dataset::load(d.path()).unwrap_err().to_string()
    }

    /// A run with the header `dict` and the bytes `data` is refused for its shape: `why`
    /// follows the file name and `header shape `.
    fn assert_shape_error(dict: &str, data: &[u8], why: &str) {
        let e = load_raw_err(dict, data);
        assert!(e.contains(&format!("sub-01_run-1_bold.npy: header shape {why}")), "{e}");
    }

    /// Fuzzing (issue 17): npyz's header parser backtracks exponentially on nested brackets:
    /// with 13 unclosed `{` (a 128-byte file) it takes seconds, every `{` more three times
    /// as long (libFuzzer's find held 31 of them in 157 bytes).
    #[test]
    fn deeply_nested_header_brackets_are_an_error_at_once() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub-01_run-1_bold.npy");
        let dict = format!("{{'descr': {}'<f4', 'fortran_order': True, 'shape': (2, 1), }}", "{".repeat(13));
        write_npy_raw(&p, &dict, &[0; 8]);
        let t = std::time::Instant::now();
        let e = Dataset::load(d.path()).unwrap_err().to_string();
        assert!(t.elapsed() < std::time::Duration::from_secs(1), "took {:?}", t.elapsed());
        assert!(
            e.contains("sub-01_run-1_bold.npy: not a valid .npy file: the header nests brackets 15 deep (at most 4)"),
            "{e}"
        );
        // A flat dict with a 2-D shape (depth 2) still loads.
        write_npy_raw(&p, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 1), }", &[0; 8]);
        assert_eq!(super::read_npy(&p, false).unwrap().n_tr, 2);
    }

    /// Fuzzing (issue 17): npyz allocated the header length a version-2 file claims (up to
    /// 4 GiB) before finding that the file is shorter.
    #[test]
    fn a_header_length_past_the_end_of_the_file_is_an_error_before_any_allocation() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub-01_run-1_bold.npy");
        let mut bytes = b"\x93NUMPY\x02\x00".to_vec();
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        bytes.extend_from_slice(b"{'descr': '<f8', ");
        std::fs::write(&p, &bytes).unwrap();
        let e = Dataset::load(d.path()).unwrap_err().to_string();
        assert!(
            e.contains("sub-01_run-1_bold.npy: not a valid .npy file: the header length 4294967295 runs past the end of the file (29 bytes)"),
            "{e}"
        );
        // Version 1 the same, and the other ways to have no header.
        let mut v1 = b"\x93NUMPY\x01\x00".to_vec();
        v1.extend_from_slice(&500u16.to_le_bytes());
        for (bytes, why) in [
            (v1, "the header length 500 runs past the end of the file (10 bytes)"),
            (b"\x93NUMPY\x04\x00\x10\x00".to_vec(), "format version 4 (only 1, 2 and 3 exist)"),
            (b"\x93NUMPY\x02\x00\x10".to_vec(), "the file ends inside the header length field (9 bytes)"),
            (b"\x93NUMPY".to_vec(), "the file ends after 6 bytes, inside the magic and version"),
        ] {
            std::fs::write(&p, &bytes).unwrap();
            let e = Dataset::load(d.path()).unwrap_err().to_string();
            assert!(e.contains(&format!("sub-01_run-1_bold.npy: not a valid .npy file: {why}")), "{e}");
        }
    }

    #[test]
    fn npy_shape_product_overflow_is_an_error() {
        assert_shape_error(
            "{'descr': '<f8', 'fortran_order': True, 'shape': (8589934592, 2147483648), }",
            &[],
            "(8589934592, 2147483648): the element count overflows",
        );
        assert_shape_error(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427388104, 4), }",
            &f8_bytes(800),
            "(4611686018427388104, 4): the element count overflows",
        );
    }

    #[test]
    fn npy_shape_wrapping_to_zero_is_an_error() {
        // 2^32 * 2^32 elements wrap to 0 in u64.
        assert_shape_error(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
            &[],
            "(4294967296, 4294967296): the element count overflows",
        );
    }

    #[test]
    fn npy_huge_shape_is_refused_before_allocating() {
        // 12.9e9 doubles: 103 GB claimed, 16 bytes present; refused before anything is allocated.
        assert_shape_error(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (3221225472, 4), }",
            &f8_bytes(2),
            "(3221225472, 4) needs 103079215104 bytes of data, the file holds 16",
        );
        assert_shape_error(
            "{'descr': '<f4', 'fortran_order': True, 'shape': (3221225472, 8), }",
            &[],
            "(3221225472, 8) needs 103079215104 bytes of data, the file holds 0",
        );
    }

    #[test]
    fn npy_extra_rows_or_trailing_bytes_are_errors() {
        // The header claims 3 rows of 2; the file holds 4.
        assert_shape_error(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), }",
            &f8_bytes(8),
            "(3, 2) needs 48 bytes of data, the file holds 64",
        );
        // 3 trailing bytes after the data.
        let mut data = f8_bytes(8);
        data.extend_from_slice(b"abc");
        assert_shape_error(
            "{'descr': '<f8', 'fortran_order': True, 'shape': (4, 2), }",
            &data,
            "(4, 2) needs 64 bytes of data, the file holds 67",
        );
        // Too few bytes is refused too, and an exact file still loads.
        assert_shape_error(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (4, 2), }",
            &f8_bytes(7),
            "(4, 2) needs 64 bytes of data, the file holds 56",
        );
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub-01_run-1_bold.npy");
        write_npy_raw(&p, "{'descr': '<f8', 'fortran_order': True, 'shape': (4, 2), }", &f8_bytes(8));
        let r = super::read_npy(&p, false).unwrap();
        assert_eq!((r.n_tr, r.parcels), (4, 2));
        assert_eq!(r.data, [0.0, 4.0, 1.0, 5.0, 2.0, 6.0, 3.0, 7.0]);
    }
}
