//! The readers of one run file: [`npy`] (`.npy` arrays) and [`table`] (`.tsv`/`.csv` with a
//! header of parcel names), each giving a [`RawRun`] (values as read, before standardization).

pub mod cifti;
pub(crate) mod nifti;
pub(crate) mod npy;
pub(crate) mod table;

/// A run as read, before standardization.
pub(crate) struct RawRun {
    /// TRs.
    pub(crate) n_tr: usize,
    /// Columns.
    pub(crate) parcels: usize,
    /// The header's parcel names (text files only).
    pub(crate) names: Option<Vec<String>>,
    /// `x[t, p]` at `data[t * parcels + p]`.
    pub(crate) data: Vec<f64>,
}

#[cfg(test)]
mod tests {
    use crate::testutil::*;
    use crate::Dataset;

    #[test]
    fn npy_fortran_order_and_csv_quotes() {
        use npyz::WriterBuilder;
        let d = tempfile::tempdir().unwrap();
        // x[t, p] = 10 t + p, stored column-major.
        let (n, p) = (4usize, 3usize);
        let col_major: Vec<f64> = (0..p).flat_map(|q| (0..n).map(move |t| (10 * t + q) as f64)).collect();
        let mut f = std::fs::File::create(d.path().join("sub-01_run-1.npy")).unwrap();
        let mut w = npyz::WriteOptions::new()
            .default_dtype()
            .order(npyz::Order::Fortran)
            .shape(&[n as u64, p as u64])
            .writer(&mut f)
            .begin_nd()
            .unwrap();
        w.extend(col_major).unwrap();
        w.finish().unwrap();
        write(d.path(), "sub-02_run-1.csv", "\"a\",\"b\",\"c\"\n0,1,2\n10,11,12\n20,21,22\n30,31,32\n");
        let ds = Dataset::load(d.path()).unwrap();
        assert_eq!(ds.parcel_names, ["a", "b", "c"]);
        // Both runs hold the same values, so they standardize to the same matrix.
        assert_eq!(ds.runs[0].to_vec().unwrap(), ds.runs[1].to_vec().unwrap());
        let x = ds.runs[0].to_vec().unwrap();
        assert!(x[3] < x[6], "row-major after reading");
    }

    #[test]
    fn zero_parcels_are_an_error_naming_the_file() {
        let d = tempfile::tempdir().unwrap();
        npy_file::<f32>(&d.path().join("sub-01_run-1.npy"), 100, 0, &[]);
        let e = Dataset::load(d.path()).unwrap_err().to_string();
        assert!(e.contains("sub-01_run-1.npy") && e.contains("no parcels"), "{e}");
        assert!(!e.contains('{'), "a sentence, not a Debug struct: {e}");
    }
}
