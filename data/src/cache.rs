//! The conversion cache ([`Selection::cache`], `--cache DIR`): a run whose file cannot stay on
//! disk as it is (text, CIFTI, a `.npy` in Fortran order or big-endian) is converted once into
//! a little-endian C-order `.npy` under the cache directory and then read from there as a run
//! on disk ([`crate::store`]), so that a dataset of any format larger than memory can be
//! trained on.
//!
//! - **Same numbers.** A cached file holds the values exactly as the reader gave them, before
//!   standardization: float32 when every value is a float32 (CIFTI series stored as float32,
//!   `bc-cli synth`'s default), else float64. The run on disk is standardized by the same
//!   formula as a run in memory, so its tokens are the same bits.
//! - **Reused while the source is unchanged.** Each entry is `<key>.npy` with `<key>.json`
//!   beside it, the key a hash ([`boldcast_storage::hash`]) of the cache's version, the source file's
//!   canonical path, size and modification time and, for a dense series, the same of the
//!   parcellation. The JSON records them again (and the parcel names, the TR the file gave,
//!   the reader's notes and a hash of all of it) and is checked against the source and its
//!   hash before the entry is used; an entry that does not match is converted again. Both
//!   files are written atomically, the `.npy` first, so an interrupted conversion leaves no
//!   entry that looks complete.
//! - **Checked arrays.** The JSON records the content hash of the array it was written with
//!   (`crate::store::ContentHash`); a reused `.npy` is hashed in the same read that gives
//!   its statistics, and one whose values changed (rows zeroed in place, another entry's
//!   array copied over it) is converted again, never read as numbers.
//! - **Shared between processes.** Each entry is filled under its own lock, `<key>.lock`
//!   (an advisory `flock` on Unix): a loader that finds the lock held waits, then reuses what
//!   the holder wrote, so a Slurm array of jobs over one new cache converts each run once and
//!   never replaces an array another job reads.
//! - **No leftovers.** A conversion killed mid-write leaves `.<key>.npy.tmp-<pid>` (or
//!   `.json`); every load that uses the cache removes those whose entry's lock is free (no
//!   process, on any host sharing the lock, is writing them).
//! - **Errors name the source.** A run with a non-finite value is not cached: it is read as
//!   before and the error names the source file, row and column. Entries are never deleted
//!   by the loader; removing the directory is always safe.

use crate::dataset::FileStamp;
use crate::error::{io_err, DataError};
use crate::read::npy::npy_layout;
use crate::read::RawRun;
use crate::standardize::ParcelStats;
use crate::store::{ContentHash, DiskElem, DiskRun};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Bumped whenever a reader or this module changes what an entry holds.
const CACHE_VERSION: u32 = 2;

/// The largest `<key>.json` read (names of a million parcels fit).
const MAX_ENTRY_BYTES: u64 = 64 << 20;

/// What a cached run's `<key>.json` records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Entry {
    version: u32,
    source: PathBuf,
    source_stamp: Stamp,
    parcellation: Option<(PathBuf, Stamp)>,
    n_tr: usize,
    parcels: usize,
    dtype: String,
    names: Option<Vec<String>>,
    tr_seconds: Option<f64>,
    notes: Vec<String>,
    /// The content hash of the array ([`ContentHash`]).
    content: String,
    /// The hash of the entry's other fields ([`Entry::checksum`]): an entry edited or damaged
    /// into other valid JSON is converted again, never trusted.
    check: String,
}

impl Entry {
    /// The hash of every field but `check`, as serialized.
    fn checksum(&self) -> String {
        let bare = Entry { check: String::new(), ..self.clone() };
        boldcast_storage::hash::fnv1a_hex(&serde_json::to_vec(&bare).expect("an entry serializes"))
    }
}

/// A [`FileStamp`] as the entry stores it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    size: u64,
    modified_ns: Option<u64>,
}

impl From<FileStamp> for Stamp {
    fn from(s: FileStamp) -> Self {
        Stamp { size: s.size, modified_ns: s.modified_ns }
    }
}

/// A run as the cache gives it: on disk (with the statistics computed while its array was
/// checked), with the parcel names and TR its source gave and the reader's notes.
pub(crate) struct CachedRun {
    pub(crate) disk: DiskRun,
    pub(crate) stats: Vec<ParcelStats>,
    pub(crate) names: Option<Vec<String>>,
    pub(crate) tr_seconds: Option<f64>,
    pub(crate) notes: Vec<String>,
}

/// What a conversion reads from a source: its values, the TR it records and the reader's
/// notes.
pub(crate) struct Converted {
    pub(crate) raw: RawRun,
    pub(crate) tr_seconds: Option<f64>,
    pub(crate) notes: Vec<String>,
}

/// The cache at `dir` for one source file.
pub(crate) struct Slot {
    lock: PathBuf,
    json: PathBuf,
    npy: PathBuf,
    entry: Entry,
}

impl Slot {
    /// The slot of `source` (stamped `stamp`) and, for a dense series, its `parcellation`.
    pub(crate) fn new(
        dir: &Path,
        source: &Path,
        stamp: FileStamp,
        parcellation: Option<&Path>,
    ) -> Result<Slot, DataError> {
        let canonical = |p: &Path| std::fs::canonicalize(p).map_err(io_err(p));
        let source = canonical(source)?;
        let parcellation = match parcellation {
            Some(p) => Some((canonical(p)?, Stamp::from(FileStamp::of(p)?))),
            None => None,
        };
        let mut h = boldcast_storage::hash::Fnv64::default();
        h.count(CACHE_VERSION as usize).text(&source.to_string_lossy());
        stamp_into(&mut h, stamp.into());
        if let Some((p, s)) = &parcellation {
            h.text(&p.to_string_lossy());
            stamp_into(&mut h, *s);
        }
        let key = h.hex();
        let entry = Entry {
            version: CACHE_VERSION,
            source,
            source_stamp: stamp.into(),
            parcellation,
            n_tr: 0,
            parcels: 0,
            dtype: String::new(),
            names: None,
            tr_seconds: None,
            notes: Vec::new(),
            content: String::new(),
            check: String::new(),
        };
        Ok(Slot {
            lock: dir.join(format!("{key}.lock")),
            json: dir.join(format!("{key}.json")),
            npy: dir.join(format!("{key}.npy")),
            entry,
        })
    }

    /// Takes the slot's lock (creating the cache directory), waiting while another loader
    /// holds it; it is released when the returned file is dropped.
    pub(crate) fn lock(&self) -> Result<std::fs::File, DataError> {
        let dir = self.npy.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|source| DataError::Write { path: dir.to_path_buf(), source })?;
        let file = open_lock(&self.lock)?;
        file.lock().map_err(|source| DataError::Write { path: self.lock.clone(), source })?;
        Ok(file)
    }

    /// The entry, when one is there and matches the source; anything else (no entry, another
    /// source, a damaged file) is `None`, to be converted again.
    pub(crate) fn lookup(&self) -> Option<CachedRun> {
        let len = std::fs::metadata(&self.json).ok()?.len();
        if len > MAX_ENTRY_BYTES {
            return None;
        }
        let found: Entry = serde_json::from_slice(&std::fs::read(&self.json).ok()?).ok()?;
        let same_source = found.check == found.checksum()
            && found.version == self.entry.version
            && found.source == self.entry.source
            && found.source_stamp == self.entry.source_stamp
            && found.parcellation == self.entry.parcellation;
        if !same_source {
            return None;
        }
        let (offset, elem, n_tr, parcels) = npy_layout(&self.npy).ok()??;
        if (n_tr, parcels, elem_name(elem)) != (found.n_tr, found.parcels, found.dtype.as_str()) {
            return None;
        }
        let stamp = FileStamp::of(&self.npy).ok()?;
        let disk = DiskRun { path: self.npy.clone(), offset, elem, n_tr, parcels, stamp };
        let (stats, content) = disk.stats_hashed().ok()?;
        if content != found.content {
            return None;
        }
        Some(CachedRun { disk, stats, names: found.names, tr_seconds: found.tr_seconds, notes: found.notes })
    }

    /// Writes `c` into the slot (whose lock the caller holds, [`Slot::lock`]) and gives it back
    /// as a run on disk; `Ok(None)` when it holds a non-finite value (left to the loader, whose
    /// error names the source).
    pub(crate) fn store(mut self, c: &Converted) -> Result<Option<CachedRun>, DataError> {
        let raw = &c.raw;
        if raw.data.iter().any(|v| !v.is_finite()) {
            return Ok(None);
        }
        let mut content = ContentHash::new(raw.n_tr, raw.parcels);
        content.feed(&raw.data);
        self.entry.content = content.hex();
        let shape = [raw.n_tr, raw.parcels];
        let single = raw.data.iter().all(|&v| f64::from(v as f32) == v);
        if single {
            let values: Vec<f32> = raw.data.iter().map(|&v| v as f32).collect();
            crate::write::write_npy(&self.npy, &shape, &values)?;
        } else {
            crate::write::write_npy(&self.npy, &shape, &raw.data)?;
        }
        let elem = if single { DiskElem::F32 } else { DiskElem::F64 };
        self.entry.n_tr = raw.n_tr;
        self.entry.parcels = raw.parcels;
        self.entry.dtype = elem_name(elem).into();
        self.entry.names.clone_from(&raw.names);
        self.entry.tr_seconds = c.tr_seconds;
        self.entry.notes.clone_from(&c.notes);
        self.entry.check = self.entry.checksum();
        let text = serde_json::to_vec_pretty(&self.entry).expect("an entry serializes");
        boldcast_storage::fsutil::write_atomic(&self.json, &text)
            .map_err(|source| DataError::Write { path: self.json.clone(), source })?;
        match self.lookup() {
            Some(run) => Ok(Some(run)),
            None => Err(DataError::Write {
                path: self.npy.clone(),
                source: std::io::Error::other("the cache entry just written does not read back"),
            }),
        }
    }
}

/// Opens (creating) the lock file `path`; anything there but a regular file (a symbolic
/// link, a directory) is an error naming it, never followed.
fn open_lock(path: &Path) -> Result<std::fs::File, DataError> {
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_file() {
            return Err(DataError::Write {
                path: path.to_path_buf(),
                source: std::io::Error::other("the cache entry's lock is not a regular file"),
            });
        }
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|source| DataError::Write { path: path.to_path_buf(), source })
}

/// The key of a temporary file a conversion writes, `.<key>.npy.tmp-<pid>` or
/// `.<key>.json.tmp-<pid>`.
fn temporary_key(name: &str) -> Option<&str> {
    let (stem, pid) = name.strip_prefix('.')?.rsplit_once(".tmp-")?;
    let key = stem.strip_suffix(".npy").or_else(|| stem.strip_suffix(".json"))?;
    let hex = key.len() == 16 && key.bytes().all(|b| b.is_ascii_hexdigit());
    (hex && !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())).then_some(key)
}

/// Removes the temporaries of killed conversions from the cache at `dir`: those whose entry's
/// lock is free (no loader is writing them). Best effort: what cannot be removed stays.
pub(crate) fn sweep(dir: &Path) {
    let Ok(list) = std::fs::read_dir(dir) else { return };
    for e in list.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(key) = temporary_key(&name) else { continue };
        let lock = dir.join(format!("{key}.lock"));
        // A temporary is written only under its entry's lock, so none without a lock file is
        // being written.
        let free = !lock.exists() || open_lock(&lock).is_ok_and(|f| f.try_lock().is_ok());
        if free {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

fn stamp_into(h: &mut boldcast_storage::hash::Fnv64, s: Stamp) {
    h.update(&s.size.to_le_bytes());
    match s.modified_ns {
        Some(ns) => h.update(&[1]).update(&ns.to_le_bytes()),
        None => h.update(&[0]),
    };
}

fn elem_name(e: DiskElem) -> &'static str {
    match e {
        DiskElem::F32 => "float32",
        DiskElem::F64 => "float64",
    }
}
