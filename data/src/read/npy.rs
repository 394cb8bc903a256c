//! `.npy` run files: a 2-D float32 or float64 array `(n_tr, P)` in C or Fortran order, read
//! row-major into f64; a non-finite value is an error naming its row and column.

use super::RawRun;
use crate::error::{io_err, DataError};
use std::path::Path;

/// Reads a `.npy` run.
///
/// The sizes are checked before anything is allocated: the header's element count, computed
/// with checked arithmetic, times the element size must be exactly the bytes after the header,
/// so a shape whose product overflows, a shape claiming more data than the file holds, and a
/// shape claiming less (extra rows, trailing bytes) are all errors naming the file.
pub(crate) fn read_npy(path: &Path) -> Result<RawRun, DataError> {
    let bytes = std::fs::read(path).map_err(io_err(path))?;
    let npy_err = |reason: String| DataError::Npy { path: path.to_path_buf(), reason };
    let data_offset = data_offset(&bytes);
    // npyz multiplies the shape out unchecked, so an overflowing shape is refused first.
    if let Some(shape) = data_offset.and_then(|o| header_shape(&bytes[..o])) {
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
    let offset = data_offset.ok_or_else(|| npy_err("cannot find the end of the header".into()))?;
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
    if let Some(i) = data.iter().position(|v| !v.is_finite()) {
        return Err(DataError::Cell {
            path: path.to_path_buf(),
            location: format!("row {}, column {}", i / p, i % p + 1),
            reason: format!("non-finite value {}", data[i]),
        });
    }
    Ok(RawRun { n_tr: n, parcels: p, names: None, data })
}

/// The offset of the data: the end of the header of an NPY version 1, 2 or 3 file, if the
/// magic, version and header length are well formed and the header lies within the file.
fn data_offset(bytes: &[u8]) -> Option<usize> {
    if bytes.get(..6)? != b"\x93NUMPY" {
        return None;
    }
    let (start, len) = match bytes.get(6)? {
        1 => (10usize, u16::from_le_bytes(bytes.get(8..10)?.try_into().ok()?) as usize),
        2 | 3 => (12, usize::try_from(u32::from_le_bytes(bytes.get(8..12)?.try_into().ok()?)).ok()?),
        _ => return None,
    };
    let end = start.checked_add(len)?;
    (end <= bytes.len()).then_some(end)
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
        write_npy_f32(&d.path().join("sub-01_run-1.npy"), 4, 3, &v);
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

    #[test]
    fn npy_shape_product_overflow_is_an_error() {
        let e = load_raw_err("{'descr': '<f8', 'fortran_order': True, 'shape': (8589934592, 2147483648), }", &[]);
        assert!(
            e.contains("sub-01_run-1_bold.npy: header shape (8589934592, 2147483648): the element count overflows"),
            "{e}"
        );
        let e = load_raw_err(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427388104, 4), }",
            &f8_bytes(800),
        );
        assert!(
            e.contains("sub-01_run-1_bold.npy: header shape (4611686018427388104, 4): the element count overflows"),
            "{e}"
        );
    }

    #[test]
    fn npy_shape_wrapping_to_zero_is_an_error() {
        // 2^32 * 2^32 elements wrap to 0 in u64.
        let e = load_raw_err("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", &[]);
        assert!(
            e.contains("sub-01_run-1_bold.npy: header shape (4294967296, 4294967296): the element count overflows"),
            "{e}"
        );
    }

    #[test]
    fn npy_huge_shape_is_refused_before_allocating() {
        // 12.9e9 doubles: 103 GB claimed, 16 bytes present; refused before anything is allocated.
        let e = load_raw_err("{'descr': '<f8', 'fortran_order': False, 'shape': (3221225472, 4), }", &f8_bytes(2));
        assert!(
            e.contains("sub-01_run-1_bold.npy: header shape (3221225472, 4) needs 103079215104 bytes of data, the file holds 16"),
            "{e}"
        );
        let e = load_raw_err("{'descr': '<f4', 'fortran_order': True, 'shape': (3221225472, 8), }", &[]);
        assert!(
            e.contains("sub-01_run-1_bold.npy: header shape (3221225472, 8) needs 103079215104 bytes of data, the file holds 0"),
            "{e}"
        );
    }

    #[test]
    fn npy_extra_rows_or_trailing_bytes_are_errors() {
        // The header claims 3 rows of 2; the file holds 4.
        let e = load_raw_err("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), }", &f8_bytes(8));
        assert!(
            e.contains("sub-01_run-1_bold.npy: header shape (3, 2) needs 48 bytes of data, the file holds 64"),
            "{e}"
        );
        // 3 trailing bytes after the data.
        let mut data = f8_bytes(8);
        data.extend_from_slice(b"abc");
        let e = load_raw_err("{'descr': '<f8', 'fortran_order': True, 'shape': (4, 2), }", &data);
        assert!(
            e.contains("sub-01_run-1_bold.npy: header shape (4, 2) needs 64 bytes of data, the file holds 67"),
            "{e}"
        );
        // Too few bytes is refused too, and an exact file still loads.
        let e = load_raw_err("{'descr': '<f8', 'fortran_order': False, 'shape': (4, 2), }", &f8_bytes(7));
        assert!(
            e.contains("sub-01_run-1_bold.npy: header shape (4, 2) needs 64 bytes of data, the file holds 56"),
            "{e}"
        );
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub-01_run-1_bold.npy");
        write_npy_raw(&p, "{'descr': '<f8', 'fortran_order': True, 'shape': (4, 2), }", &f8_bytes(8));
        let r = super::read_npy(&p).unwrap();
        assert_eq!((r.n_tr, r.parcels), (4, 2));
        assert_eq!(r.data, [0.0, 4.0, 1.0, 5.0, 2.0, 6.0, 3.0, 7.0]);
    }
}
