//! Where a run's values live ([`Values`]): standardized in memory, or raw in a `.npy` file on
//! disk ([`DiskRun`]) and standardized when they are read, so that a dataset larger than the
//! machine's memory can be trained on.
//!
//! A `.npy` run of little-endian float32 or float64 in C order is kept on disk: its
//! statistics come from one read of the file, or three streaming passes for a run over
//! [`ONE_READ_BYTES`] ([`crate::standardize::parcel_stats_rows`],
//! the bits a run in memory gets), and each read of rows (a window's tokens) reads exactly
//! those rows with one positioned read and applies [`ParcelStats::apply`], the one
//! standardization formula: the tokens are the same bits as those of the same file read
//! whole. The file is opened for each read (a dataset may have more runs than a process may
//! hold files open) and its size and modification time are checked against those recorded at
//! load, so a file changed under a run is an error naming it, never other numbers.
//!
//! Reads go through `pread` rather than a memory map: the kernel's page cache keeps what fits,
//! the process's resident memory stays that of one batch, and a file truncated under the run
//! is an error, where a mapped file would kill the process with `SIGBUS`.

use crate::dataset::FileStamp;
use crate::error::{io_err, DataError};
use crate::standardize::ParcelStats;
use std::path::PathBuf;

/// Rows read at a time by the statistics passes (about 4 MB at 1,024 parcels in f32).
const STATS_CHUNK_ROWS: usize = 1024;

/// A run whose values take at most this many bytes as f64 is read once for its statistics
/// (the load of a dataset of many ordinary runs then reads each file once, not three times).
pub const ONE_READ_BYTES: usize = 64 << 20;

/// The element type of a run on disk.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DiskElem {
    /// Little-endian float32.
    F32,
    /// Little-endian float64.
    F64,
}

impl DiskElem {
    /// Bytes per value.
    pub fn size(self) -> usize {
        match self {
            DiskElem::F32 => 4,
            DiskElem::F64 => 8,
        }
    }
}

/// A run kept on disk: raw values `x[t, p]` at `offset + (t P + p) size` of `path`.
#[derive(Clone, Debug, PartialEq)]
pub struct DiskRun {
    /// The file.
    pub path: PathBuf,
    /// Where the values start.
    pub offset: u64,
    /// Their type.
    pub elem: DiskElem,
    /// TRs.
    pub n_tr: usize,
    /// Parcels.
    pub parcels: usize,
    /// The file as it was when loaded.
    pub stamp: FileStamp,
}

impl DiskRun {
    /// The raw values of rows `t0..t1` (row-major, as f64), read with one positioned read.
    pub fn raw_rows(&self, t0: usize, t1: usize) -> Result<Vec<f64>, DataError> {
        let bad = |reason: String| DataError::Npy { path: self.path.clone(), reason };
        if t0 > t1 || t1 > self.n_tr {
            return Err(bad(format!("rows {t0}..{t1} of a run of {} TRs", self.n_tr)));
        }
        let file = std::fs::File::open(&self.path).map_err(io_err(&self.path))?;
        let now = FileStamp::of(&self.path)?;
        if now != self.stamp {
            return Err(bad(format!(
                "changed since it was loaded (size {} -> {} bytes, or its modification time): reload the data",
                self.stamp.size, now.size
            )));
        }
        // Both products fit: the whole file's size was checked when it was loaded.
        let (row, size) = (self.parcels * self.elem.size(), self.elem.size());
        let mut bytes = vec![0u8; (t1 - t0) * row];
        read_at(&file, &mut bytes, self.offset + (t0 * row) as u64)
            .map_err(|e| bad(format!("reading rows {t0}..{t1}: {e}")))?;
        Ok(match self.elem {
            DiskElem::F32 => {
                bytes.chunks_exact(size).map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))).collect()
            }
            DiskElem::F64 => bytes
                .chunks_exact(size)
                .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
                .collect(),
        })
    }

    /// The statistics of every parcel: from one read of the run when its values take at most
    /// `ONE_READ_BYTES` as f64 (a run of 1,200 TRs x 1,024 parcels is 9.4 MiB), else from
    /// three streaming passes; the same sums in the same order either way, so the bits of the
    /// run held in memory. A non-finite value is an error naming the file, row and column, as
    /// when the file is read whole.
    pub fn stats(&self) -> Result<Vec<ParcelStats>, DataError> {
        self.stats_within(ONE_READ_BYTES)
    }

    fn stats_within(&self, one_read: usize) -> Result<Vec<ParcelStats>, DataError> {
        self.stats_hashed_within(one_read).map(|(stats, _)| stats)
    }

    /// [`DiskRun::stats`] and the [`ContentHash`] of the run's values, computed from the same
    /// read (the conversion cache checks an entry's array by it at no extra read).
    pub(crate) fn stats_hashed(&self) -> Result<(Vec<ParcelStats>, String), DataError> {
        self.stats_hashed_within(ONE_READ_BYTES)
    }

    fn stats_hashed_within(&self, one_read: usize) -> Result<(Vec<ParcelStats>, String), DataError> {
        let (n, p) = (self.n_tr, self.parcels);
        let mut h = ContentHash::new(n, p);
        let r = if n.saturating_mul(p).saturating_mul(8) <= one_read {
            let raw = self.raw_rows(0, n)?;
            h.feed(&raw);
            crate::standardize::parcel_stats(&raw, n, p)
        } else {
            // The first pass reads rows 0.. in order; the hash is fed by that pass only.
            let mut passes = 0usize;
            let rows = |t0: usize, t1| {
                passes += usize::from(t0 == 0);
                let raw = self.raw_rows(t0, t1)?;
                if passes == 1 {
                    h.feed(&raw);
                }
                Ok::<_, DataError>(std::borrow::Cow::Owned(raw))
            };
            crate::standardize::parcel_stats_rows(n, p, STATS_CHUNK_ROWS, rows)?
        };
        let stats = r.map_err(|e| DataError::Cell {
            path: self.path.clone(),
            location: format!("row {}, column {}", e.row, e.parcel + 1),
            reason: crate::missing::non_finite_reason(e.value),
        })?;
        Ok((stats, h.hex()))
    }
}

/// The content hash of a run's values: [`boldcast_storage::hash::Fnv64`] of its shape, then of every
/// value's f64 bits in row order. A float32 file and the float64 values it was written from
/// hash alike, so an entry of the conversion cache records it from the values it writes.
pub(crate) struct ContentHash(boldcast_storage::hash::Fnv64);

impl ContentHash {
    /// A hash of `n` rows of `p` values, to be fed in row order.
    pub(crate) fn new(n: usize, p: usize) -> Self {
        let mut h = boldcast_storage::hash::Fnv64::default();
        h.count(n).count(p);
        ContentHash(h)
    }

    /// Feeds the next values.
    pub(crate) fn feed(&mut self, values: &[f64]) {
        for v in values {
            self.0.update(&v.to_bits().to_le_bytes());
        }
    }

    /// The hash as 16 hex digits.
    pub(crate) fn hex(&self) -> String {
        self.0.hex()
    }
}

#[cfg(unix)]
fn read_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.read_exact_at(buf, offset)
}

#[cfg(not(unix))]
fn read_at(mut file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buf)
}

/// The values of a run.
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// Standardized `x[t, p]` at `[t P + p]`.
    Memory(Vec<f64>),
    /// Raw values on disk, standardized when read.
    Disk(DiskRun),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One read and three streaming passes give the same statistics, and the same error.
    #[test]
    fn one_read_and_streaming_passes_agree() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("run.npy");
        let (n, p) = (2500, 3);
        let mut x: Vec<f64> = (0..n * p).map(|i| ((i * 7919) % 1013) as f64 * 0.25 - 100.0 + (i % p) as f64).collect();
        crate::write::write_npy(&path, &[n, p], &x).unwrap();
        let (offset, elem, _, _) = crate::read::npy::npy_layout(&path).unwrap().unwrap();
        let stamp = FileStamp::of(&path).unwrap();
        let run = DiskRun { path: path.clone(), offset, elem, n_tr: n, parcels: p, stamp };
        let (once, streamed) = (run.stats_within(usize::MAX).unwrap(), run.stats_within(0).unwrap());
        assert_eq!(once, streamed);
        assert_eq!(once, crate::standardize::parcel_stats(&x, n, p).unwrap());
        assert!(once.iter().all(|s| s.sd > 0.0));
        // The content hash comes from either read, and is that of the values.
        let mut want = ContentHash::new(n, p);
        want.feed(&x);
        let (a, b) = (run.stats_hashed_within(usize::MAX).unwrap(), run.stats_hashed_within(0).unwrap());
        assert_eq!((&a.0, &a.1), (&once, &want.hex()));
        assert_eq!(a, b);
        x[2100 * p + 1] = f64::NAN;
        crate::write::write_npy(&path, &[n, p], &x).unwrap();
        let run = DiskRun { stamp: FileStamp::of(&path).unwrap(), ..run };
        let (a, b) = (run.stats_within(usize::MAX).unwrap_err(), run.stats_within(0).unwrap_err());
        assert_eq!(a.to_string(), b.to_string());
        assert!(
            a.to_string().contains("run.npy, row 2100, column 2: non-finite value NaN; pass --missing drop-parcel"),
            "{a}"
        );
    }
}
