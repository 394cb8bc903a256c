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
//!   beside it, the key a hash ([`crate::hash`]) of the cache's version, the source file's
//!   canonical path, size and modification time and, for a dense series, the same of the
//!   parcellation. The JSON records them again (and the parcel names, the TR the file gave,
//!   the reader's notes and a hash of all of it) and is checked against the source and its
//!   hash before the entry is used; an entry that does not match is converted again. Both files are written atomically, the
//!   `.npy` first, so an interrupted conversion leaves no entry that looks complete.
//! - **Errors name the source.** A run with a non-finite value is not cached: it is read as
//!   before and the error names the source file, row and column. Entries are never deleted
//!   by the loader; removing the directory is always safe.

use crate::dataset::FileStamp;
use crate::error::{io_err, DataError};
use crate::read::npy::npy_layout;
use crate::read::RawRun;
use crate::store::{DiskElem, DiskRun};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Bumped whenever a reader or this module changes what an entry holds.
const CACHE_VERSION: u32 = 1;

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
    /// The hash of the entry's other fields ([`Entry::checksum`]): an entry edited or damaged
    /// into other valid JSON is converted again, never trusted.
    check: String,
}

impl Entry {
    /// The hash of every field but `check`, as serialized.
    fn checksum(&self) -> String {
        let bare = Entry { check: String::new(), ..self.clone() };
        crate::hash::fnv1a_hex(&serde_json::to_vec(&bare).expect("an entry serializes"))
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

/// A run as the cache gives it: on disk, with the parcel names and TR its source gave and the
/// reader's notes.
pub(crate) struct CachedRun {
    pub(crate) disk: DiskRun,
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
        let mut h = crate::hash::Fnv64::default();
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
            check: String::new(),
        };
        Ok(Slot { json: dir.join(format!("{key}.json")), npy: dir.join(format!("{key}.npy")), entry })
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
        Some(CachedRun { disk, names: found.names, tr_seconds: found.tr_seconds, notes: found.notes })
    }

    /// Writes `c` into the slot (creating the directory) and gives it back as a run on disk;
    /// `Ok(None)` when it holds a non-finite value (left to the loader, whose error names the
    /// source).
    pub(crate) fn store(mut self, c: &Converted) -> Result<Option<CachedRun>, DataError> {
        let raw = &c.raw;
        if raw.data.iter().any(|v| !v.is_finite()) {
            return Ok(None);
        }
        let dir = self.npy.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|source| DataError::Write { path: dir.to_path_buf(), source })?;
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
        crate::fsutil::write_atomic(&self.json, &text)
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

fn stamp_into(h: &mut crate::hash::Fnv64, s: Stamp) {
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
