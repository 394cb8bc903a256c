//! `.npy` run files: a 2-D float32 or float64 array `(n_tr, P)` in C or Fortran order, read
//! row-major into f64; a non-finite value is an error naming its row and column.

use super::RawRun;
use crate::error::{io_err, DataError};
use std::path::Path;

/// Reads a `.npy` run.
pub(crate) fn read_npy(path: &Path) -> Result<RawRun, DataError> {
    let bytes = std::fs::read(path).map_err(io_err(path))?;
    let npy_err = |reason: String| DataError::Npy { path: path.to_path_buf(), reason };
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(|e| npy_err(format!("not a valid .npy file: {e}")))?;
    let shape: Vec<u64> = npy.shape().to_vec();
    let order = npy.order();
    if shape.len() != 2 {
        return Err(npy_err(format!("expected a 2-D array (n_tr, parcels), found shape {shape:?}")));
    }
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
        let mut c = vec![0.0; n * p];
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
}
