//! The writers beside the readers: run files in the formats [`crate::Dataset::load`] reads
//! (`.npy` float64 or float32 `(n_tr, P)`, `.tsv`/`.csv` with a header of parcel names),
//! `parcels.tsv`, and any array as `.npy` ([`write_npy`], the one npy encoder). Every file is written to a temporary sibling, synced and renamed, so a kill
//! leaves either no file or the whole file.

use crate::error::DataError;
use boldcast_fixtures::SynthRun;
use std::io::Write;
use std::path::Path;

/// The format of a run file.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum RunFormat {
    /// `.npy`, float64, shape `(n_tr, parcels)`, C order.
    Npy,
    /// `.npy`, float32 (each value rounded), shape `(n_tr, parcels)`, C order.
    NpyF32,
    /// `.tsv`: a header row of parcel names, then one tab-separated row per TR.
    Tsv,
    /// `.csv`: as `.tsv`, comma-separated.
    Csv,
}

impl RunFormat {
    /// The file extension, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            RunFormat::Npy | RunFormat::NpyF32 => "npy",
            RunFormat::Tsv => "tsv",
            RunFormat::Csv => "csv",
        }
    }
}

/// The file name of a run: `sub-<subject>_run-<run>_bold.<ext>`.
pub fn run_file_name(run: &SynthRun, format: RunFormat) -> String {
    format!("sub-{}_run-{}_bold.{}", run.subject, run.run, format.extension())
}

/// Writes `path` through [`boldcast_storage::fsutil::replace_with`]; a failure is a [`DataError::Write`]
/// naming `path`.
fn write_atomic(
    path: &Path,
    fill: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> Result<(), DataError> {
    boldcast_storage::fsutil::replace_with(path, fill)
        .map_err(|source| DataError::Write { path: path.to_path_buf(), source })
}

/// Writes `run` to `path` in `format`; `names` are the parcel names of the text header.
pub fn write_run(path: &Path, run: &SynthRun, names: &[String], format: RunFormat) -> Result<(), DataError> {
    if names.len() != run.parcels {
        return Err(DataError::config(
            "parcel names",
            names.len(),
            format!("the run {} has {} parcels", run_file_name(run, format), run.parcels),
        ));
    }
    if run.data.len() != run.n_tr * run.parcels {
        return Err(DataError::config(
            "run data",
            run.data.len(),
            format!("the run {} is {} TRs of {} parcels", run_file_name(run, format), run.n_tr, run.parcels),
        ));
    }
    write_atomic(path, |w| match format {
        RunFormat::Npy => npy_into(w, &[run.n_tr, run.parcels], run.data.iter().copied()),
        RunFormat::NpyF32 => npy_into(w, &[run.n_tr, run.parcels], run.data.iter().map(|&x| x as f32)),
        RunFormat::Tsv | RunFormat::Csv => {
            let sep = if format == RunFormat::Tsv { "\t" } else { "," };
            let mut s = names.join(sep);
            s.push('\n');
            for t in 0..run.n_tr {
                let row: Vec<String> =
                    run.data[t * run.parcels..(t + 1) * run.parcels].iter().map(f64::to_string).collect();
                s.push_str(&row.join(sep));
                s.push('\n');
            }
            w.write_all(s.as_bytes())
        }
    })
}

/// Writes `values` to `path` as a C-order `.npy` array of `shape` (the dtype of `T`: `<f4`
/// for `f32`, `<f8` for `f64`, `<i8` for `i64`), atomically. A value count other than the
/// shape's is refused before anything is written.
pub fn write_npy<T: npyz::AutoSerialize + Copy>(path: &Path, shape: &[usize], values: &[T]) -> Result<(), DataError> {
    let n: usize = shape.iter().product();
    if values.len() != n {
        return Err(DataError::config(
            "npy values",
            values.len(),
            format!("the array {} has shape {shape:?}", path.display()),
        ));
    }
    write_atomic(path, |w| npy_into(w, shape, values.iter().copied()))
}

/// The one `.npy` encoder: the header of `shape` and the values, C order.
fn npy_into<T: npyz::AutoSerialize>(
    w: &mut impl Write,
    shape: &[usize],
    values: impl IntoIterator<Item = T>,
) -> std::io::Result<()> {
    use npyz::WriterBuilder;
    let shape: Vec<u64> = shape.iter().map(|&s| s as u64).collect();
    let mut npy = npyz::WriteOptions::new().default_dtype().shape(&shape).writer(w).begin_nd()?;
    npy.extend(values)?;
    npy.finish()
}

/// Writes `parcels.tsv` (`name x y z`, one row per parcel) to `path`.
pub fn write_parcels(path: &Path, names: &[String], centroids: &[[f64; 3]]) -> Result<(), DataError> {
    if names.len() != centroids.len() {
        return Err(DataError::config(
            "centroids",
            centroids.len(),
            format!("{} parcel names were given", names.len()),
        ));
    }
    let mut text = String::from("name\tx\ty\tz\n");
    for (n, c) in names.iter().zip(centroids) {
        text.push_str(&format!("{n}\t{}\t{}\t{}\n", c[0], c[1], c[2]));
    }
    write_atomic(path, |w| w.write_all(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Dataset;

    fn runs() -> Vec<SynthRun> {
        let spec = boldcast_fixtures::Ar1Spec::new(
            boldcast_fixtures::Layout { subjects: 2, runs: 1, trs: 12, parcels: 3, seed: 5 },
            0.7,
        );
        spec.generate().unwrap()
    }

    #[test]
    fn written_runs_load_back_as_the_same_dataset() {
        let runs = runs();
        let names = boldcast_fixtures::parcel_names(3);
        let centroids = boldcast_fixtures::circle_centroids(3);
        let want = Dataset::from_synth(&runs, Some(centroids.clone())).unwrap();
        for format in [RunFormat::Npy, RunFormat::Tsv, RunFormat::Csv] {
            let d = tempfile::tempdir().unwrap();
            for r in &runs {
                write_run(&d.path().join(run_file_name(r, format)), r, &names, format).unwrap();
            }
            write_parcels(&d.path().join("parcels.tsv"), &names, &centroids).unwrap();
            let ds = Dataset::load(d.path()).unwrap();
            assert_eq!(ds.runs.len(), 2, "{format:?}");
            assert_eq!(ds.parcel_names, names);
            assert_eq!(ds.centroids.as_ref(), Some(&centroids));
            for (a, b) in ds.runs.iter().zip(&want.runs) {
                assert_eq!((&a.id, a.n_tr), (&b.id, b.n_tr));
                // f64 Display round-trips, so the text formats load the very same values.
                assert_eq!(a.to_vec().unwrap(), b.to_vec().unwrap(), "{format:?}");
            }
            let mut files: Vec<String> =
                std::fs::read_dir(d.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
            files.sort();
            let ext = format.extension();
            assert_eq!(
                files,
                ["parcels.tsv".to_string(), format!("sub-01_run-1_bold.{ext}"), format!("sub-02_run-1_bold.{ext}")]
            );
        }
    }

    #[test]
    fn npy_arrays_read_back_with_their_shape_and_dtype() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.npy");
        write_npy(&p, &[2, 3], &[1.5f32, 2.0, -3.0, 4.0, 5.0, 6.25]).unwrap();
        let npy = npyz::NpyFile::new(std::fs::File::open(&p).unwrap()).unwrap();
        assert_eq!(npy.shape(), &[2, 3]);
        assert_eq!(npy.into_vec::<f32>().unwrap(), [1.5, 2.0, -3.0, 4.0, 5.0, 6.25]);
        let e = write_npy(&d.path().join("b.npy"), &[2, 2], &[1i64, 2, 3]).unwrap_err().to_string();
        assert!(e.contains("npy values = 3") && e.contains("b.npy has shape [2, 2]"), "{e}");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_failed_write_names_the_file_and_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let runs = runs();
        let path = d.path().join("missing").join("sub-01_run-1_bold.npy");
        let e = write_run(&path, &runs[0], &boldcast_fixtures::parcel_names(3), RunFormat::Npy).unwrap_err();
        assert!(matches!(e, DataError::Write { .. }), "{e:?}");
        assert!(e.to_string().starts_with(&format!("{}: ", path.display())), "{e}");
        let e = write_run(&d.path().join("x.tsv"), &runs[0], &boldcast_fixtures::parcel_names(2), RunFormat::Tsv)
            .unwrap_err();
        assert!(e.to_string().contains("invalid parcel names = 2: the run sub-01_run-1_bold.tsv has 3 parcels"), "{e}");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }
}
