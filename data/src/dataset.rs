//! [`Dataset`]: the standardized runs of a directory ([`Dataset::load`]) or of generated data
//! ([`Dataset::from_synth`]) with the same parcels, their names, centroids and warnings; the
//! per-parcel series, the empirical floor and the subjects.

use crate::error::DataError;
use crate::names::RunId;
use crate::parcels::read_parcels;
use crate::read::npy::{npy_layout, read_npy};
use crate::read::table::read_text;
use crate::standardize::{constant_parcels, standardize, ParcelStats};
use crate::store::{DiskRun, Values};
use boldcast_core::floor::empirical_floor_per_parcel;
use boldcast_fixtures::SynthRun;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::discover::{data_extension, discover, RunFile};
use crate::select::{check_tr, pick, sidecar_tr, Selection};

/// One run, standardized.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    /// Its entities.
    pub id: RunId,
    /// The file it came from (the run's label for in-memory data).
    pub path: PathBuf,
    /// TRs.
    pub n_tr: usize,
    /// The values: standardized in memory, or on disk ([`crate::store`]); read them through
    /// [`Run::rows`].
    values: Values,
    /// How each parcel was standardized: [`ParcelStats::undo`] gives a value in the file's
    /// own units back (a forecast in the run's units, for instance).
    pub stats: Vec<ParcelStats>,
    /// The TR in seconds, when known (the file, its sidecar or the settings), and where it
    /// came from.
    pub tr: Option<Tr>,
    /// The file's size and modification time when it was read (`None` for generated runs).
    pub file: Option<FileStamp>,
}

/// A file's size and modification time, as recorded when it was read.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FileStamp {
    /// Bytes.
    pub size: u64,
    /// Nanoseconds since the Unix epoch (`None` where the filesystem keeps no time).
    pub modified_ns: Option<u64>,
}

impl FileStamp {
    /// The stamp of `path` now.
    pub fn of(path: &Path) -> Result<FileStamp, DataError> {
        let m = std::fs::metadata(path).map_err(crate::error::io_err(path))?;
        let modified_ns = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .and_then(|d| u64::try_from(d.as_nanos()).ok());
        Ok(FileStamp { size: m.len(), modified_ns })
    }
}

/// Rows hashed at a time by [`Dataset::fingerprint`].
const FINGERPRINT_ROWS: usize = 4096;

/// A run's TR and where it was read.
#[derive(Clone, Debug, PartialEq)]
pub struct Tr {
    /// Seconds.
    pub seconds: f64,
    /// `"sidecar <path>"`, `"CIFTI series step"`, `"data.tr"`.
    pub source: String,
}

impl Run {
    /// A hash of the run's statistics: its TRs and each parcel's shift, mean and standard
    /// deviation ([`boldcast_storage::hash::Fnv64`]). It changes when the file's values do, and costs
    /// nothing to recompute: a record of what a model was trained on.
    pub fn stats_hash(&self) -> String {
        let mut h = boldcast_storage::hash::Fnv64::default();
        h.count(self.n_tr).count(self.stats.len());
        for s in &self.stats {
            h.update(&s.shift.to_le_bytes())
                .update(&s.mean.to_bits().to_le_bytes())
                .update(&s.sd.to_bits().to_le_bytes());
        }
        h.hex()
    }

    /// The standardized rows `t0..t1` of the run, `x[t, p]` at `[(t - t0) * parcels + p]`: the
    /// one way to read a run's values (in memory they are borrowed; a run kept on disk reads
    /// and standardizes them). An error for rows outside the run, or a file changed on disk.
    pub fn rows(&self, t0: usize, t1: usize) -> Result<std::borrow::Cow<'_, [f64]>, DataError> {
        let p = self.stats.len();
        if t0 > t1 || t1 > self.n_tr {
            return Err(DataError::config(
                "rows",
                format!("{t0}..{t1}"),
                format!("{} has {} TRs", self.path.display(), self.n_tr),
            ));
        }
        match &self.values {
            Values::Memory(v) => Ok(std::borrow::Cow::Borrowed(&v[t0 * p..t1 * p])),
            Values::Disk(d) => {
                let mut raw = d.raw_rows(t0, t1)?;
                for (i, x) in raw.iter_mut().enumerate() {
                    *x = self.stats[i % p].apply(*x);
                }
                Ok(std::borrow::Cow::Owned(raw))
            }
        }
    }

    /// Every standardized value, `x[t, p]` at `[t * parcels + p]`.
    pub fn to_vec(&self) -> Result<Vec<f64>, DataError> {
        self.rows(0, self.n_tr).map(std::borrow::Cow::into_owned)
    }

    /// Whether the run is kept on disk and read on demand (`crate::store`).
    pub fn on_disk(&self) -> bool {
        matches!(self.values, Values::Disk(_))
    }

    /// The bytes the run holds in memory (its standardized values; 0 on disk).
    pub fn memory_bytes(&self) -> usize {
        match &self.values {
            Values::Memory(v) => v.len() * std::mem::size_of::<f64>(),
            Values::Disk(_) => 0,
        }
    }
}

/// The empirical single-lag floor of a dataset ([`Dataset::empirical_floor`]).
#[derive(Clone, Debug, PartialEq)]
pub struct EmpiricalFloor {
    /// The mean of `per_parcel`.
    pub overall: f64,
    /// Per horizon, the mean over parcels.
    pub per_horizon: Vec<f64>,
    /// Per parcel (in the runs' column order), the mean over horizons and token elements.
    pub per_parcel: Vec<f64>,
}

/// A set of standardized runs with the same parcels.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    /// The runs, in file-name order.
    pub runs: Vec<Run>,
    /// P.
    pub parcels: usize,
    /// Parcel names: the header of text files, else `parcels.tsv`'s, else `parcel-000`, ...
    pub parcel_names: Vec<String>,
    /// Centroids from `parcels.tsv`, if present.
    pub centroids: Option<Vec<[f64; 3]>>,
    /// Data files in the directory whose names do not match the run pattern (a data
    /// extension in another case, `.NPY`, included).
    pub ignored: Vec<PathBuf>,
    /// Entries named like runs, sidecars (or `parcels.tsv`) that are not readable files, with
    /// why: a dangling symbolic link, one that cannot be followed (a loop), a directory, a
    /// device; and gzip-compressed run files, which are not read.
    pub skipped: Vec<(PathBuf, String)>,
    /// Warnings (zero-variance parcels), one per parcel.
    pub warnings: Vec<String>,
    /// Tables found beside the series that are not runs (coverage, design, motion, ...).
    pub tables: Vec<PathBuf>,
    /// The TR shared by every run, when every run has one and they agree.
    pub tr: Option<f64>,
    /// What the readers left out and why (a label of a parcellation without grayordinates),
    /// once each.
    pub reader_notes: Vec<String>,
    /// Parcels dropped from every run for their missing values (`--missing drop-parcel`),
    /// in the files' column order; [`Dataset::parcel_names`] no longer holds them.
    pub dropped_parcels: Vec<crate::missing::DroppedParcel>,
}

impl Dataset {
    /// The fingerprint of the runs `runs` (indices into [`Dataset::runs`]): the
    /// [`boldcast_storage::hash::Fnv64`] of the parcel names, then of each run its identity, its TRs and
    /// its standardized values' bits. A checkpoint records it for its training runs, so a
    /// resume or an evaluation can tell that a training file was replaced.
    pub fn fingerprint(&self, runs: &[usize]) -> Result<String, DataError> {
        let mut h = boldcast_storage::hash::Fnv64::default();
        h.count(self.parcel_names.len());
        for n in &self.parcel_names {
            h.text(n);
        }
        h.count(runs.len());
        for r in runs.iter().filter_map(|&i| self.runs.get(i)) {
            h.text(&r.id.to_string()).count(r.n_tr).count(r.n_tr * self.parcels);
            // A run at a time, in chunks: a run on disk is never held whole.
            for t0 in (0..r.n_tr).step_by(FINGERPRINT_ROWS) {
                for x in r.rows(t0, (t0 + FINGERPRINT_ROWS).min(r.n_tr))?.iter() {
                    h.update(&x.to_bits().to_le_bytes());
                }
            }
        }
        Ok(h.hex())
    }

    /// What a user should be told about this dataset, one line each for standard error: every
    /// warning (`warning: ...`), then the data files not named like runs (`note: ignored N
    /// file(s) not named like runs: a, b`, with a hint when one's extension is in another case),
    /// then the entries named like runs that cannot be read (`note: skipped N entries named like
    /// runs, sidecars or parcels.tsv that cannot be read: a (a directory), b (a dangling symbolic link)`).
    pub fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self.warnings.iter().map(|w| format!("warning: {w}")).collect();
        if !self.ignored.is_empty() {
            let names: Vec<String> = self.ignored.iter().map(|p| p.display().to_string()).collect();
            let case =
                self.ignored.iter().any(|p| data_extension(&p.to_string_lossy()).is_some_and(|(_, exact)| !exact));
            notes.push(format!(
                "note: ignored {} file(s) not named like runs: {}{}",
                names.len(),
                names.join(", "),
                if case { " (run files end in lowercase .npy, .tsv or .csv)" } else { "" }
            ));
        }
        notes.extend(self.reader_notes.iter().map(|n| format!("note: {n}")));
        if !self.tables.is_empty() {
            let mut kinds: Vec<String> = self
                .tables
                .iter()
                .filter_map(|p| crate::names::parse_bids_name(&p.file_name()?.to_string_lossy()))
                .map(|b| b.get("stat").map_or_else(|| b.suffix.clone().unwrap_or_default(), str::to_string))
                .collect();
            kinds.sort();
            kinds.dedup();
            notes.push(format!(
                "note: {} table(s) beside the series are not runs and were left out ({})",
                self.tables.len(),
                kinds.join(", ")
            ));
        }
        if !self.skipped.is_empty() {
            let entries: Vec<String> = self.skipped.iter().map(|(p, why)| format!("{} ({why})", p.display())).collect();
            notes.push(format!(
                "note: skipped {} {} named like runs, sidecars or parcels.tsv that cannot be read: {}",
                entries.len(),
                if entries.len() == 1 { "entry" } else { "entries" },
                entries.join(", ")
            ));
        }
        notes
    }

    /// Loads every run of `dir` (see the [crate] documentation) and standardizes it.
    pub fn load(dir: impl AsRef<Path>) -> Result<Dataset, DataError> {
        Self::load_with(dir, &Selection::default())
    }

    /// Loads the runs of `dir`, a flat directory or a BIDS derivatives tree, that `sel` picks
    /// ([`crate::select`]), and standardizes them.
    pub fn load_with(dir: impl AsRef<Path>, sel: &Selection) -> Result<Dataset, DataError> {
        Self::load_within(dir.as_ref(), sel, boldcast_storage::memory::machine_memory())
    }

    /// [`Dataset::load_with`] on a machine of `memory` bytes (`None`: unknown): the runs held
    /// in memory may take up to 3/4 of it, else [`DataError::InMemoryTooLarge`].
    fn load_within(dir: &Path, sel: &Selection, memory: Option<u64>) -> Result<Dataset, DataError> {
        check_tr(sel.tr)?;
        let disc = discover(dir)?;
        if disc.runs.is_empty() {
            let name = |p: &PathBuf| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            return Err(DataError::NoRuns {
                dir: dir.to_path_buf(),
                ignored: disc.ignored.iter().map(name).collect(),
                skipped: disc.skipped.iter().map(|(p, why)| format!("{}, {why}", name(p))).collect(),
            });
        }
        let (runs, nifti_note) = without_unread_nifti(disc.runs, sel);
        let found = pick(runs, sel, dir)?;
        if let Some(cache) = &sel.cache {
            crate::cache::sweep(cache);
        }
        check_duplicates(&found)?;
        let mut raws = Vec::new();
        let mut reader_notes: Vec<String> = nifti_note.into_iter().collect();
        let mut cached = CacheCount::default();
        let (total, mut held) = (found.len(), 0u64);
        for f in found {
            let stamp = FileStamp::of(&f.path)?;
            let (raw, file_tr, notes) = load_run(&f, stamp, sel, &mut cached)?;
            if let Loaded::Raw(r) = &raw {
                held = held.saturating_add(r.data.len() as u64 * 8);
                check_held(dir, (raws.len() + 1, total), held, memory)?;
            }
            for n in notes {
                if !reader_notes.contains(&n) {
                    reader_notes.push(n);
                }
            }
            let tr = run_tr(&f, file_tr, &disc.sidecars, dir, sel)?;
            if raw.parcels() == 0 {
                return Err(DataError::Empty {
                    path: f.path,
                    reason: format!("no parcels: {} TRs of 0 columns", raw.n_tr()),
                });
            }
            raws.push((f.id, f.path, raw, (tr, stamp)));
        }
        let trs: Vec<(PathBuf, Option<Tr>)> = raws.iter().map(|(_, p, _, t)| (p.clone(), t.0.clone())).collect();
        let tr = common_tr(&trs, sel)?;
        reader_notes.extend(untimed_note(&trs));
        let (mut parcel_names, mut centroids) = check_parcels(&raws, disc.parcels.as_deref())?;
        let mut parcels = (&mut parcel_names, &mut centroids);
        let dropped = apply_policies(&mut raws, &mut parcels, &disc.tables, sel, &mut reader_notes)?;
        let p = raws[0].2.parcels();
        let trs: Vec<(Option<Tr>, FileStamp)> = raws.iter().map(|r| r.3.clone()).collect();
        let runs = raws.into_iter().map(|(id, path, raw, _)| (id, path, raw)).collect();
        let mut ds = Self::from_parts(runs, p, parcel_names, centroids)?;
        for (r, (t, stamp)) in ds.runs.iter_mut().zip(trs) {
            (r.tr, r.file) = (t, Some(stamp));
        }
        ds.tr = tr;
        ds.warnings.extend(unusual_trs(&ds.runs));
        if !dropped.is_empty() {
            ds.warnings.push(crate::missing::dropped_warning(&dropped, p + dropped.len()));
        }
        ds.dropped_parcels = dropped;
        ds.ignored = disc.ignored;
        ds.skipped = disc.skipped;
        ds.tables = disc.tables;
        if let (Some(dir), true) = (&sel.cache, cached.converted + cached.reused > 0) {
            reader_notes.push(format!(
                "cache {}: {} run(s) converted to .npy, {} reused",
                dir.display(),
                cached.converted,
                cached.reused
            ));
        }
        ds.reader_notes = reader_notes;
        Ok(ds)
    }

    /// Standardizes runs `(id, path, values)` into a dataset (in memory, or the statistics of
    /// a run on disk); a non-finite value is [`DataError::Cell`] naming the run's path, the row
    /// and the parcel.
    fn from_parts(
        runs: Vec<(RunId, PathBuf, Loaded)>,
        parcels: usize,
        parcel_names: Vec<String>,
        centroids: Option<Vec<[f64; 3]>>,
    ) -> Result<Self, DataError> {
        let mut constant: BTreeMap<usize, (usize, PathBuf)> = BTreeMap::new();
        let runs: Vec<Run> = runs
            .into_iter()
            .map(|(id, path, loaded)| {
                let (n_tr, values, stats) = match loaded {
                    Loaded::Raw(raw) => {
                        let mut data = raw.data;
                        let stats = standardize(&mut data, raw.n_tr, parcels).map_err(|e| DataError::Cell {
                            path: path.clone(),
                            location: format!("row {}, column {} ({})", e.row, e.parcel + 1, parcel_names[e.parcel]),
                            reason: format!("non-finite value {}", e.value),
                        })?;
                        (raw.n_tr, Values::Memory(data), stats)
                    }
                    Loaded::Disk(d, _, known) => {
                        let stats = match known {
                            Some(s) => s,
                            None => d.stats()?,
                        };
                        (d.n_tr, Values::Disk(d), stats)
                    }
                };
                for q in constant_parcels(&stats) {
                    constant.entry(q).or_insert((0, path.clone())).0 += 1;
                }
                Ok(Run { id, path, n_tr, values, stats, tr: None, file: None })
            })
            .collect::<Result<_, DataError>>()?;
        let warnings = constant
            .into_iter()
            .map(|(q, (count, first))| {
                format!(
                    "parcel `{}` (column {}) has zero variance in {count} run(s) (first: {}); it is set to zeros there",
                    parcel_names[q],
                    q + 1,
                    first.display()
                )
            })
            .collect();
        Ok(Dataset {
            runs,
            parcels,
            parcel_names,
            centroids,
            ignored: Vec::new(),
            skipped: Vec::new(),
            warnings,
            tables: Vec::new(),
            tr: None,
            reader_notes: Vec::new(),
            dropped_parcels: Vec::new(),
        })
    }

    /// A dataset from generated runs (standardized like loaded ones); `centroids`, if given,
    /// play the role of `parcels.tsv`.
    pub fn from_synth(runs: &[SynthRun], centroids: Option<Vec<[f64; 3]>>) -> Result<Dataset, DataError> {
        Self::from_synth_owned(runs.to_vec(), centroids)
    }

    /// [`Dataset::from_synth`] taking the runs, whose values it keeps instead of copying them
    /// (a training run's data are held once, not twice).
    pub fn from_synth_owned(runs: Vec<SynthRun>, centroids: Option<Vec<[f64; 3]>>) -> Result<Dataset, DataError> {
        let first = runs.first().ok_or_else(|| DataError::config("data", "[]", "no runs were generated"))?;
        let p = first.parcels;
        let parts = runs
            .into_iter()
            .map(|r| {
                let id = RunId { subject: r.subject.clone(), session: None, other: Vec::new(), run: r.run.clone() };
                let path = PathBuf::from(format!("{id} (synthetic)"));
                if r.parcels != p {
                    return Err(DataError::ParcelCount {
                        path: path.clone(),
                        first: PathBuf::from("the first synthetic run"),
                        expected: p,
                        found: r.parcels,
                    });
                }
                Ok((
                    id,
                    path,
                    Loaded::Raw(crate::read::RawRun { n_tr: r.n_tr, parcels: r.parcels, names: None, data: r.data }),
                ))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(c) = &centroids {
            if c.len() != p {
                return Err(DataError::config("centroids", c.len(), format!("the runs have {p} parcels")));
            }
        }
        Self::from_parts(parts, p, boldcast_fixtures::parcel_names(p), centroids)
    }

    /// `series[r][p]`: parcel `p` of run `r` as a series (standardized).
    pub fn series(&self) -> Result<Vec<Vec<Vec<f64>>>, DataError> {
        self.series_of(&(0..self.runs.len()).collect::<Vec<_>>())
    }

    /// [`Dataset::series`] of the runs `runs` only (indices into [`Dataset::runs`]), in that
    /// order.
    pub fn series_of(&self, runs: &[usize]) -> Result<Vec<Vec<Vec<f64>>>, DataError> {
        runs.iter()
            .map(|&i| {
                let r = &self.runs[i];
                let x = r.rows(0, r.n_tr)?;
                Ok((0..self.parcels).map(|q| (0..r.n_tr).map(|t| x[t * self.parcels + q]).collect()).collect())
            })
            .collect()
    }

    /// The empirical single-lag floor per parcel (MODEL.md, "The loss floor"), from
    /// The empirical single-lag floor of every run: per parcel over `horizons`, its mean
    /// (`overall`), and per horizon the mean over parcels.
    pub fn empirical_floor(&self, horizons: &[usize], d_in: usize) -> Result<EmpiricalFloor, DataError> {
        let per_parcel = self.empirical_floor_per_parcel(horizons, d_in)?;
        let overall = per_parcel.iter().sum::<f64>() / per_parcel.len() as f64;
        let mut per_horizon = Vec::with_capacity(horizons.len());
        for &h in horizons {
            let p = self.empirical_floor_per_parcel(&[h], d_in)?;
            per_horizon.push(p.iter().sum::<f64>() / p.len() as f64);
        }
        Ok(EmpiricalFloor { overall, per_horizon, per_parcel })
    }

    /// `boldcast_core::floor::empirical_floor_per_parcel` on the standardized runs. A `d_in`
    /// longer than the shortest run is an error naming that run and its length: no token of
    /// it would fit.
    pub fn empirical_floor_per_parcel(&self, horizons: &[usize], d_in: usize) -> Result<Vec<f64>, DataError> {
        if let Some(r) = self.runs.iter().filter(|r| d_in > r.n_tr).min_by_key(|r| r.n_tr) {
            let reason =
                format!("longer than run {} ({} TRs): a token of d_in TRs must fit in every run", r.id, r.n_tr);
            return Err(DataError::config("d_in", d_in.to_string(), reason));
        }
        empirical_floor_per_parcel(&self.series()?, horizons, d_in)
            .map_err(|e| DataError::config("floor", "", e.to_string()))
    }

    /// The distinct subjects, sorted.
    pub fn subjects(&self) -> Vec<String> {
        let mut s: Vec<String> = self.runs.iter().map(|r| r.id.subject.clone()).collect();
        s.sort();
        s.dedup();
        s
    }
}

/// A run as loaded: its values read, or a `.npy` file that stays on disk.
enum Loaded {
    Raw(crate::read::RawRun),
    /// A run on disk, with the parcel names its source gave (a cached conversion) and its
    /// statistics when they were computed already (the cache's check of an entry).
    Disk(DiskRun, Option<Vec<String>>, Option<Vec<ParcelStats>>),
}

impl Loaded {
    fn parcels(&self) -> usize {
        match self {
            Loaded::Raw(r) => r.parcels,
            Loaded::Disk(d, ..) => d.parcels,
        }
    }

    fn n_tr(&self) -> usize {
        match self {
            Loaded::Raw(r) => r.n_tr,
            Loaded::Disk(d, ..) => d.n_tr,
        }
    }

    fn names(&self) -> Option<&Vec<String>> {
        match self {
            Loaded::Raw(r) => r.names.as_ref(),
            Loaded::Disk(_, names, _) => names.as_ref(),
        }
    }
}

/// Refuses two files of one run: `run-01` and `run-1` are one run (BIDS: the run index is a
/// number).
fn check_duplicates(found: &[RunFile]) -> Result<(), DataError> {
    let mut seen: BTreeMap<RunId, PathBuf> = BTreeMap::new();
    for f in found {
        let same = f.id.normalized();
        if let Some(other) = seen.insert(same.clone(), f.path.clone()) {
            let (a, b) = if other < f.path { (f.path.clone(), other) } else { (other, f.path.clone()) };
            return Err(DataError::DuplicateRun { path: a, other: b, entities: same.to_string() });
        }
    }
    Ok(())
}

/// Stops a load whose runs in memory, `held` bytes after `read` of `total` runs, pass 3/4 of
/// the machine's `memory` (a dataset of text runs larger than memory is an error naming
/// `--cache`, not the kernel's out-of-memory kill).
fn check_held(dir: &Path, (read, total): (usize, usize), held: u64, memory: Option<u64>) -> Result<(), DataError> {
    match memory {
        Some(m) if held > m / 4 * 3 => Err(DataError::InMemoryTooLarge {
            dir: dir.to_path_buf(),
            read,
            total,
            held: boldcast_core::memory::format_bytes(held as f64),
            machine: boldcast_core::memory::format_bytes(m as f64),
        }),
        _ => Ok(()),
    }
}

/// Runs taken from the conversion cache and converted into it by one load.
#[derive(Default)]
struct CacheCount {
    converted: usize,
    reused: usize,
}

/// Reads one run file ([`read_run`]), through the conversion cache when [`Selection::cache`]
/// is set and the file cannot stay on disk as it is ([`crate::cache`]).
fn load_run(
    f: &RunFile,
    stamp: FileStamp,
    sel: &Selection,
    count: &mut CacheCount,
) -> Result<(Loaded, Option<f64>, Vec<String>), DataError> {
    let Some(dir) = sel.cache.as_ref().filter(|_| !sel.in_memory()) else { return read_run(f, stamp, sel) };
    if f.ext == "npy" && npy_layout(&f.path)?.is_some() {
        return read_run(f, stamp, sel);
    }
    let dense = if f.ext == "dtseries.nii" { sel.parcellation.as_deref() } else { None };
    let slot = crate::cache::Slot::new(dir, &f.path, stamp, dense)?;
    // Held until the entry is found or written: a concurrent loader waits, then reuses it.
    let _lock = slot.lock()?;
    if let Some(c) = slot.lookup() {
        count.reused += 1;
        return Ok((Loaded::Disk(c.disk, c.names, Some(c.stats)), c.tr_seconds, c.notes));
    }
    let (loaded, tr_seconds, notes) = read_run(f, stamp, sel)?;
    let Loaded::Raw(raw) = loaded else { return Ok((loaded, tr_seconds, notes)) };
    let conv = crate::cache::Converted { raw, tr_seconds, notes };
    Ok(match slot.store(&conv)? {
        Some(c) => {
            count.converted += 1;
            (Loaded::Disk(c.disk, c.names, Some(c.stats)), c.tr_seconds, c.notes)
        }
        None => (Loaded::Raw(conv.raw), conv.tr_seconds, conv.notes),
    })
}

/// Reads one run file by its extension, with the TR its file records (CIFTI) and the notes of
/// what its reader left out; a `.npy` file of little-endian f32 or f64 in C order stays on
/// disk ([`crate::store`]); a dense CIFTI series is averaged over the labels of
/// [`Selection::parcellation`].
fn read_run(f: &RunFile, stamp: FileStamp, sel: &Selection) -> Result<(Loaded, Option<f64>, Vec<String>), DataError> {
    let cifti = |c: crate::read::cifti::CiftiRun| (Loaded::Raw(c.raw), c.tr_seconds, c.notes);
    let drop = sel.missing() == crate::missing::Missing::DropParcel;
    Ok(match f.ext {
        "npy" => match npy_layout(&f.path)?.filter(|_| !sel.in_memory()) {
            Some((offset, elem, n_tr, parcels)) => {
                let disk = DiskRun { path: f.path.clone(), offset, elem, n_tr, parcels, stamp };
                (Loaded::Disk(disk, None, None), None, Vec::new())
            }
            None => (Loaded::Raw(read_npy(&f.path, drop)?), None, Vec::new()),
        },
        "tsv" => (Loaded::Raw(read_text(&f.path, '\t', sel.missing())?), None, Vec::new()),
        "csv" => (Loaded::Raw(read_text(&f.path, ',', sel.missing())?), None, Vec::new()),
        "ptseries.nii" => cifti(crate::read::cifti::read_ptseries(&f.path)?),
        "nii" | "nii.gz" => {
            let Some(image) = &sel.atlas_image else {
                return Err(DataError::Select {
                    reason: format!(
                        "{}: a 4-D NIfTI run is averaged into parcels: give the labelled atlas image on its grid \
                         with --atlas-image FILE.nii.gz (data.atlas_image), and its names with --atlas-labels \
                         FILE.tsv",
                        f.path.display()
                    ),
                });
            };
            let atlas = crate::read::nifti::Atlas { image, labels: sel.atlas_labels.as_deref() };
            let (raw, notes) = crate::read::nifti::parcellate(&f.path, &atlas)?;
            (Loaded::Raw(raw), None, notes)
        }
        _ => {
            let Some(labels) = &sel.parcellation else {
                return Err(DataError::Select {
                    reason: format!(
                        "{}: a dense series (.dtseries.nii) is averaged into parcels: give the parcellation with \
                         --parcellation FILE.dlabel.nii (data.parcellation)",
                        f.path.display()
                    ),
                });
            };
            cifti(crate::read::cifti::read_dtseries_parcellated(&f.path, labels)?)
        }
    })
}

/// The TR of one run: its file's (a CIFTI series step), else its sidecar's, else the
/// settings' (and a TR read must agree with the settings').
fn run_tr(
    f: &RunFile,
    file_tr: Option<f64>,
    sidecars: &[(PathBuf, crate::names::BidsName)],
    root: &Path,
    sel: &Selection,
) -> Result<Option<Tr>, DataError> {
    let read = match file_tr {
        Some(s) => {
            if let Some(why) = crate::select::tr_problem(s) {
                return Err(DataError::Select {
                    reason: format!(
                        "{}: its CIFTI series step {} s {why}",
                        f.path.display(),
                        crate::window::seconds_text(s)
                    ),
                });
            }
            Some(Tr { seconds: s, source: "CIFTI series step".into() })
        }
        None => {
            sidecar_tr(f, sidecars, root)?.map(|(s, p)| Tr { seconds: s, source: format!("sidecar {}", p.display()) })
        }
    };
    match (read, sel.tr) {
        (Some(t), Some(want)) if t.seconds != want => Err(DataError::Select {
            reason: format!(
                "{}: its TR is {} s ({}), but data.tr (--tr) is {} s",
                f.path.display(),
                crate::window::seconds_text(t.seconds),
                t.source,
                crate::window::seconds_text(want)
            ),
        }),
        (Some(t), _) => Ok(Some(t)),
        (None, Some(want)) => Ok(Some(Tr { seconds: want, source: "data.tr".into() })),
        (None, None) => Ok(None),
    }
}

/// The TR every run shares; an error naming two runs whose TRs differ, or a run without a TR
/// among runs with one, unless allowed.
fn common_tr(trs: &[(PathBuf, Option<Tr>)], sel: &Selection) -> Result<Option<f64>, DataError> {
    let known: Vec<(&PathBuf, f64)> = trs.iter().filter_map(|(p, t)| t.as_ref().map(|t| (p, t.seconds))).collect();
    let Some(&(first, tr)) = known.first() else { return Ok(None) };
    let untimed = trs.iter().find(|(_, t)| t.is_none()).map(|(p, _)| p);
    match (known.iter().find(|(_, t)| *t != tr), untimed) {
        (Some((other, t)), _) if !sel.allow_mixed_tr => Err(DataError::Select {
            reason: format!(
                "runs with different TRs: {} has {} s, {} has {} s; set data.allow_mixed_tr (--allow-mixed-tr) to \
                 train on both",
                first.display(),
                crate::window::seconds_text(tr),
                other.display(),
                crate::window::seconds_text(*t)
            ),
        }),
        (None, Some(other)) if !sel.allow_mixed_tr => Err(DataError::Select {
            reason: format!(
                "runs with and without a TR: {} has {} s, {} has none (no CIFTI series step, sidecar or --tr); give \
                 data.tr (--tr), or set data.allow_mixed_tr (--allow-mixed-tr) to train on both",
                first.display(),
                crate::window::seconds_text(tr),
                other.display()
            ),
        }),
        (None, None) => Ok(Some(tr)),
        _ => Ok(None),
    }
}

/// One warning per distinct TR outside [`crate::select::TR_USUAL`], naming where the first run
/// with it read it.
fn unusual_trs(runs: &[Run]) -> Vec<String> {
    let mut seen: Vec<u64> = Vec::new();
    let mut out = Vec::new();
    for t in runs.iter().filter_map(|r| r.tr.as_ref()) {
        if seen.contains(&t.seconds.to_bits()) {
            continue;
        }
        seen.push(t.seconds.to_bits());
        out.extend(crate::select::unusual_tr(t.seconds, &t.source));
    }
    out
}

/// The note naming the runs without a TR when others have one (a load that allows mixed TRs).
fn untimed_note(trs: &[(PathBuf, Option<Tr>)]) -> Option<String> {
    let untimed: Vec<String> = trs.iter().filter(|(_, t)| t.is_none()).map(|(p, _)| p.display().to_string()).collect();
    (!untimed.is_empty() && untimed.len() < trs.len()).then(|| {
        format!(
            "{} run(s) have no TR: {}; their horizons are in TRs only (give data.tr, --tr)",
            untimed.len(),
            untimed.join(", ")
        )
    })
}

/// What `sel` does to the runs once read, all in memory ([`Selection::in_memory`]): drops the
/// parcels with missing values (`--missing drop-parcel`) from the runs, `names` and centroids,
/// then regresses out the confounds (`--confounds`); gives the dropped parcels and adds notes.
#[allow(clippy::type_complexity)]
fn apply_policies(
    raws: &mut [(RunId, PathBuf, Loaded, (Option<Tr>, FileStamp))],
    (names, centroids): &mut (&mut Vec<String>, &mut Option<Vec<[f64; 3]>>),
    tables: &[PathBuf],
    sel: &Selection,
    notes: &mut Vec<String>,
) -> Result<Vec<crate::missing::DroppedParcel>, DataError> {
    if let (Some(dir), true) = (&sel.cache, sel.in_memory()) {
        notes.push(format!(
            "cache {} not used: --missing drop-parcel, --confounds and --atlas-image read every run into memory",
            dir.display()
        ));
    }
    let dropped = if sel.missing() == crate::missing::Missing::DropParcel {
        drop_missing(raws, names, centroids)?
    } else {
        Vec::new()
    };
    if let Some(strategy) = &sel.confounds {
        notes.push(regress_confounds(raws, tables, strategy)?);
    }
    Ok(dropped)
}

/// The runs to pick from: without [`Selection::atlas_image`], 4-D NIfTI runs beside runs of
/// other formats are left out with a note (a tree of XCP-D's that holds both the volumes and
/// their parcel series loads as before); alone, they are kept, and reading them is the error
/// that names the flag.
fn without_unread_nifti(runs: Vec<RunFile>, sel: &Selection) -> (Vec<RunFile>, Option<String>) {
    let nifti = |r: &RunFile| r.ext.starts_with("nii");
    if sel.atlas_image.is_some() || runs.iter().all(nifti) || !runs.iter().any(nifti) {
        return (runs, None);
    }
    let (left, kept): (Vec<RunFile>, Vec<RunFile>) = runs.into_iter().partition(nifti);
    let note = format!(
        "{} 4-D NIfTI run(s) (*_bold.nii, *_bold.nii.gz) left out: give --atlas-image FILE (data.atlas_image) to \
         average them into parcels",
        left.len()
    );
    (kept, Some(note))
}

/// Regresses the confounds of `strategy` out of every run (in memory here,
/// [`Selection::in_memory`]) from its table among `tables` ([`crate::confounds`]); gives the
/// note that says so.
#[allow(clippy::type_complexity)]
fn regress_confounds(
    raws: &mut [(RunId, PathBuf, Loaded, (Option<Tr>, FileStamp))],
    tables: &[PathBuf],
    strategy: &crate::confounds::ConfoundStrategy,
) -> Result<String, DataError> {
    let mut columns: Option<usize> = None;
    for (id, path, loaded, _) in raws.iter_mut() {
        let Loaded::Raw(r) = loaded else { continue };
        let c = crate::confounds::confounds_of_run(tables, id, path, r.n_tr, strategy)?;
        let k = c.names.len();
        columns = Some(columns.map_or(k, |m| m.max(k)));
        crate::confounds::clean(&mut r.data, r.n_tr, r.parcels, c.data, k);
    }
    Ok(format!(
        "confounds `{strategy}` ({} column(s)) regressed out of {} run(s), with linear detrending",
        columns.unwrap_or(0),
        raws.len()
    ))
}

/// Drops the parcels with a missing value (NaN as read) in any run from every run, from the
/// names and the centroids; gives what was dropped (an error when nothing would be left).
/// Every run is in memory here ([`Selection::in_memory`]).
#[allow(clippy::type_complexity)]
fn drop_missing(
    raws: &mut [(RunId, PathBuf, Loaded, (Option<Tr>, FileStamp))],
    names: &mut Vec<String>,
    centroids: &mut Option<Vec<[f64; 3]>>,
) -> Result<Vec<crate::missing::DroppedParcel>, DataError> {
    use crate::missing::{keep_columns, missing_parcels, MissingScan};
    let scans: Vec<MissingScan<'_>> = raws
        .iter()
        .filter_map(|(_, path, loaded, _)| match loaded {
            Loaded::Raw(r) => Some(MissingScan { path, text: r.names.is_some(), parcels: r.parcels, data: &r.data }),
            Loaded::Disk(..) => None,
        })
        .collect();
    let dropped = missing_parcels(&scans, names);
    if dropped.is_empty() {
        return Ok(dropped);
    }
    if dropped.len() == names.len() {
        return Err(crate::missing::all_dropped(&dropped));
    }
    let keep: Vec<usize> = (0..names.len()).filter(|q| !dropped.iter().any(|d| d.column == q + 1)).collect();
    for (_, _, loaded, _) in raws.iter_mut() {
        if let Loaded::Raw(r) = loaded {
            r.data = keep_columns(&r.data, r.parcels, &keep);
            r.parcels = keep.len();
            if let Some(n) = &mut r.names {
                *n = keep.iter().map(|&q| n[q].clone()).collect();
            }
        }
    }
    *names = keep.iter().map(|&q| names[q].clone()).collect();
    if let Some(c) = centroids {
        *c = keep.iter().map(|&q| c[q]).collect();
    }
    Ok(dropped)
}

/// Checks the parcel count and names of every run against the first (and the first named)
/// run, and `parcels.tsv` against them; gives the parcel names and centroids.
#[allow(clippy::type_complexity)]
fn check_parcels(
    raws: &[(RunId, PathBuf, Loaded, (Option<Tr>, FileStamp))],
    parcels_path: Option<&Path>,
) -> Result<(Vec<String>, Option<Vec<[f64; 3]>>), DataError> {
    let (first_path, p) = (raws[0].1.clone(), raws[0].2.parcels());
    let mut named: Option<(PathBuf, Vec<String>)> = None;
    for (_, path, raw, _) in raws {
        if raw.parcels() != p {
            return Err(DataError::ParcelCount {
                path: path.clone(),
                first: first_path.clone(),
                expected: p,
                found: raw.parcels(),
            });
        }
        if let Some(names) = raw.names() {
            match &named {
                None => named = Some((path.clone(), names.clone())),
                Some((first, want)) => {
                    if let Some(c) = (0..p).find(|&c| want[c] != names[c]) {
                        return Err(DataError::ParcelNames {
                            path: path.clone(),
                            first: first.clone(),
                            column: c + 1,
                            expected: want[c].clone(),
                            found: names[c].clone(),
                        });
                    }
                }
            }
        }
    }
    let mut centroids = None;
    let mut parcel_names = named.as_ref().map(|(_, n)| n.clone());
    if let Some(parcels_path) = parcels_path {
        let (names, xyz) = read_parcels(parcels_path)?;
        if names.len() != p {
            return Err(DataError::Parcels {
                path: parcels_path.to_path_buf(),
                line: None,
                reason: format!("{} parcels, but the runs have {p}", names.len()),
            });
        }
        if let Some((first, want)) = &named {
            if let Some(c) = (0..p).find(|&c| want[c] != names[c]) {
                return Err(DataError::Parcels {
                    path: parcels_path.to_path_buf(),
                    line: Some(c + 2),
                    reason: format!(
                        "parcel `{}`, but column {} of {} is `{}`",
                        names[c],
                        c + 1,
                        first.display(),
                        want[c]
                    ),
                });
            }
        }
        parcel_names.get_or_insert(names);
        centroids = Some(xyz);
    }
    Ok((parcel_names.unwrap_or_else(|| boldcast_fixtures::parcel_names(p)), centroids))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;

    #[test]
    fn loads_tsv_and_npy_standardized() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "sub-01_run-1_bold.tsv", &tsv_run(20, 3));
        let raw: Vec<f32> = (0..60).map(|i| ((i * 7) % 11) as f32).collect();
        npy_file(&d.path().join("sub-02_run-1_bold.npy"), 20, 3, &raw);
        write(d.path(), "notes.tsv", "x\n1\n");
        write(d.path(), "README.md", "hello");
        let ds = Dataset::load(d.path()).unwrap();
        assert_eq!(ds.runs.len(), 2);
        assert_eq!(ds.parcels, 3);
        assert_eq!(ds.parcel_names, vec!["P0", "P1", "P2"]);
        assert_eq!(ds.ignored, vec![d.path().join("notes.tsv")]);
        for run in &ds.runs {
            for q in 0..3 {
                let x: Vec<f64> = (0..run.n_tr).map(|t| run.to_vec().unwrap()[t * 3 + q]).collect();
                let m = x.iter().sum::<f64>() / 20.0;
                let v = x.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / 20.0;
                assert!(m.abs() < 1e-12 && (v - 1.0).abs() < 1e-12);
            }
        }
        // The npy values, standardized in f64 by hand.
        let col0: Vec<f64> = (0..20).map(|t| raw[t * 3] as f64).collect();
        let m = col0.iter().sum::<f64>() / 20.0;
        let sd = (col0.iter().map(|a| (a - m).powi(2)).sum::<f64>() / 20.0).sqrt();
        assert!((ds.runs[1].to_vec().unwrap()[3] - (col0[1] - m) / sd).abs() < 1e-12);
    }

    #[test]
    fn bad_inputs_name_file_line_and_column() {
        let e = load_err(&[("sub-01_run-1.tsv", "a\tb\n1\t2\n3\tn/a\n")]);
        assert!(e.contains("sub-01_run-1.tsv, line 3, column 2 (b): missing value `n/a`"), "{e}");
        let e = load_err(&[("sub-01_run-1.tsv", "a\tb\n1\tx1\n")]);
        assert!(e.contains("line 2, column 2 (b): `x1` is not a number"), "{e}");
        let e = load_err(&[("sub-01_run-1.csv", "a,b\n1,2\ninf,2\n")]);
        assert!(e.contains("sub-01_run-1.csv, line 3, column 1 (a): non-finite value `inf`"), "{e}");
        let e = load_err(&[("sub-01_run-1.tsv", "a\tb\n1\tNaN\n")]);
        assert!(e.contains("non-finite value `NaN`"), "{e}");
        let e = load_err(&[("sub-01_run-1.tsv", "a\tb\n1\t2\n1\t2\t3\n")]);
        assert!(e.contains("sub-01_run-1.tsv, line 3: 3 columns, but the header has 2"), "{e}");
        let e = load_err(&[("sub-01_run-1.tsv", "a\tb\n1\t2\n"), ("sub-02_run-1.tsv", "a\tb\tc\n1\t2\t3\n")]);
        assert!(e.contains("sub-02_run-1.tsv: 3 parcels, but") && e.contains("sub-01_run-1.tsv has 2"), "{e}");
        let e = load_err(&[("sub-01_run-1.tsv", "a\tb\n1\t2\n"), ("sub-02_run-1.tsv", "a\tc\n1\t2\n")]);
        assert!(e.contains("sub-02_run-1.tsv: column 2 is `c`, but") && e.contains("names it `b`"), "{e}");
        let e = load_err(&[("sub-01_run-1.tsv", "a\tb\n")]);
        assert!(e.contains("no data rows"), "{e}");
        let e = load_err(&[("bold.tsv", "a\n1\n")]);
        assert!(e.contains("no runs found") && e.contains("bold.tsv"), "{e}");
        let e = load_err(&[("sub-01_run-1_bold.tsv", "a\n1\n"), ("sub-01_run-1_bold.npy", "junk")]);
        assert!(e.contains("run sub-01_run-1 comes in several formats (npy, tsv)") && e.contains("--format"), "{e}");
        let e = load_err(&[("sub-01_run-1_bold.tsv", "a\n1\n"), ("sub-01_run-1_desc-x_bold.tsv", "a\n1\n")]);
        assert!(e.contains("are the same run (sub-01_run-1)"), "{e}");
        let e = load_err(&[("sub-01_run-1.npy", "junk")]);
        assert!(e.contains("sub-01_run-1.npy: not a valid .npy file"), "{e}");
        let e = load_err(&[
            ("sub-01_run-1.tsv", "a\tb\n1\t2\n"),
            ("parcels.tsv", "name\tx\ty\tz\na\t0\t0\t0\nb\t1\tq\t0\n"),
        ]);
        assert!(e.contains("parcels.tsv, line 3: column 3 `q` is not a finite number"), "{e}");
        let e = load_err(&[
            ("sub-01_run-1.tsv", "a\tb\n1\t2\n"),
            ("parcels.tsv", "name\tx\ty\tz\nb\t0\t0\t0\na\t1\t1\t0\n"),
        ]);
        assert!(e.contains("parcels.tsv, line 2: parcel `b`, but column 1"), "{e}");
        let missing = std::env::temp_dir().join("boldcast-no-such-dir-xyz");
        let e = Dataset::load(&missing).unwrap_err().to_string();
        assert!(e.contains("does not exist") && e.contains("boldcast-no-such-dir-xyz"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn entries_named_like_runs_that_cannot_be_read_are_listed_in_the_notes() {
        use std::os::unix::fs::symlink;
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        write(p, "sub-01_run-1.tsv", &tsv_run(20, 3));
        symlink(p.join("nowhere.tsv"), p.join("sub-02_run-1.tsv")).unwrap();
        symlink(p.join("sub-03_run-1.tsv"), p.join("sub-03_run-1.tsv")).unwrap();
        std::fs::create_dir(p.join("sub-04_run-1.npy")).unwrap();
        std::fs::create_dir(p.join("parcels.tsv")).unwrap();
        npy_file(&p.join("sub-05_run-1.NPY"), 20, 3, &[1.0; 60]);
        // Not named like runs or data: skipped without a word, as before.
        std::fs::create_dir(p.join("derivatives")).unwrap();
        symlink(p.join("nowhere"), p.join("README")).unwrap();
        let ds = Dataset::load(p).unwrap();
        assert_eq!(ds.runs.len(), 1);
        assert_eq!(ds.ignored, [p.join("sub-05_run-1.NPY")]);
        let notes = ds.notes();
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert_eq!(
            notes[0],
            format!(
                "note: ignored 1 file(s) not named like runs: {} (run files end in lowercase .npy, .tsv or .csv)",
                p.join("sub-05_run-1.NPY").display()
            )
        );
        let want = format!(
            "note: skipped 4 entries named like runs, sidecars or parcels.tsv that cannot be read: {} (a directory), {} (a \
             dangling symbolic link), {} (a symbolic link that cannot be followed: ",
            p.join("parcels.tsv").display(),
            p.join("sub-02_run-1.tsv").display(),
            p.join("sub-03_run-1.tsv").display(),
        );
        assert!(notes[1].starts_with(&want), "{}\nwant {want}", notes[1]);
        assert!(
            notes[1].ends_with(&format!("), {} (a directory)", p.join("sub-04_run-1.npy").display())),
            "{}",
            notes[1]
        );
        // With no readable run, the error lists them.
        let d = tempfile::tempdir().unwrap();
        symlink(d.path().join("gone.npy"), d.path().join("sub-01_run-1.npy")).unwrap();
        let e = Dataset::load(d.path()).unwrap_err().to_string();
        assert!(e.starts_with("no runs found in "), "{e}");
        assert!(e.ends_with(" (cannot be read: sub-01_run-1.npy, a dangling symbolic link)"), "{e}");
    }

    /// Text runs that would fill 3/4 of the machine stop the load with an error naming
    /// `--cache`; through the cache they load (runs on disk hold no memory).
    #[test]
    fn runs_in_memory_past_three_quarters_of_the_machine_stop_the_load() {
        let d = tempfile::tempdir().unwrap();
        let rows: String = (0..100).map(|t| format!("{t}\t{}\t1\t{}\n", t * t, t % 7)).collect();
        for s in 1..=3 {
            write(d.path(), &format!("sub-0{s}_run-1.tsv"), &format!("a\tb\tc\td\n{rows}"));
        }
        // Each run holds 100 x 4 x 8 = 3,200 bytes; 3/4 of 8,000 is passed by the second.
        let e = Dataset::load_within(d.path(), &Selection::default(), Some(8000)).unwrap_err().to_string();
        assert!(e.contains("the runs read into memory so far (2 of 3) hold 6.2 KiB"), "{e}");
        assert!(e.contains("more than 3/4 of this machine's 7.8 KiB; give --cache DIR (data.cache)"), "{e}");
        assert_eq!(Dataset::load_within(d.path(), &Selection::default(), Some(12_800)).unwrap().runs.len(), 3);
        let cache = Selection { cache: Some(d.path().join("cache")), ..Selection::default() };
        let ds = Dataset::load_within(&d.path().join("."), &cache, Some(8000)).unwrap();
        assert!(ds.runs.iter().all(Run::on_disk));
    }

    #[test]
    fn constant_parcel_warns_once() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "sub-01_run-1.tsv", "a\tb\n1\t5\n2\t5\n3\t5\n");
        write(d.path(), "sub-02_run-1.tsv", "a\tb\n1\t4\n2\t4\n4\t4\n");
        let ds = Dataset::load(d.path()).unwrap();
        assert_eq!(ds.warnings.len(), 1, "{:?}", ds.warnings);
        assert!(ds.warnings[0].contains("parcel `b` (column 2) has zero variance in 2 run(s)"), "{}", ds.warnings[0]);
        assert!(ds.runs.iter().all(|r| (0..r.n_tr).all(|t| r.to_vec().unwrap()[t * 2 + 1] == 0.0)));
    }

    /// Column `q` of a run.
    fn column(run: &Run, p: usize, q: usize) -> Vec<f64> {
        let x = run.to_vec().unwrap();
        (0..run.n_tr).map(|t| x[t * p + q]).collect()
    }

    #[test]
    fn parcels_near_the_ends_of_f64_standardize_to_unit_variance() {
        // Per parcel: the same ramp at five scales, two alternating near f64's largest values
        // (their sum overflows), a constant near 1e200, and an ordinary ramp.
        let n = 20;
        let ramp: Vec<f64> = (0..n).map(|t| (t * 3 % 7) as f64 + 0.25 * t as f64).collect();
        let scales = [1e200, 1e-300, 1e300, 1e-310, 1.0];
        let p = scales.len() + 3;
        let mut x = vec![0.0; n * p];
        for t in 0..n {
            for (q, s) in scales.iter().enumerate() {
                x[t * p + q] = ramp[t] * s;
            }
            x[t * p + 5] = if t % 2 == 0 { 1.7e308 } else { -1.6e308 };
            x[t * p + 6] = 3e200;
            x[t * p + 7] = ramp[t] - 50.0;
        }
        let d = tempfile::tempdir().unwrap();
        npy_file(&d.path().join("sub-01_run-1_bold.npy"), n, p, &x);
        let ds = Dataset::load(d.path()).unwrap();
        // The only warning is the truly constant parcel's.
        assert_eq!(
            ds.warnings,
            [format!(
                "parcel `parcel-006` (column 7) has zero variance in 1 run(s) (first: {}); it is set to zeros there",
                d.path().join("sub-01_run-1_bold.npy").display()
            )]
        );
        let want = column(&ds.runs[0], p, 7);
        let (m, v) = (want.iter().sum::<f64>() / n as f64, want.iter().map(|a| a * a).sum::<f64>() / n as f64);
        assert!(m.abs() < 1e-14 && (v - 1.0).abs() < 1e-14, "{m} {v}");
        for (q, s) in scales.iter().enumerate() {
            let got = column(&ds.runs[0], p, q);
            // 1e-310 is subnormal: the ramp keeps about 15 of its 52 bits there.
            let tol = if *s < 1e-300 { 1e-4 } else { 1e-12 };
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < tol, "parcel {q} (scale {s}): {g} vs {w}");
            }
        }
        let alt = column(&ds.runs[0], p, 5);
        // Two values: standardized to +-1 exactly up to rounding.
        assert!(
            alt.iter().enumerate().all(|(t, z)| (z - if t % 2 == 0 { 1.0 } else { -1.0 }).abs() < 1e-12),
            "{alt:?}"
        );
        assert!(column(&ds.runs[0], p, 6).iter().all(|&z| z == 0.0));
    }

    #[test]
    fn ordinary_parcels_standardize_to_the_same_bits_as_the_two_pass_formula() {
        let (n, p) = (50, 3);
        let x: Vec<f64> = (0..n * p).map(|i| ((i * 37) % 101) as f64 * 0.37 - 12.0 + (i % p) as f64 * 1e3).collect();
        let mut got = x.clone();
        assert_eq!(constant_parcels(&standardize(&mut got, n, p).unwrap()), Vec::<usize>::new());
        for q in 0..p {
            let col: Vec<f64> = (0..n).map(|t| x[t * p + q]).collect();
            let mean = col.iter().sum::<f64>() / n as f64;
            let sd = (col.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
            for t in 0..n {
                assert_eq!(got[t * p + q].to_bits(), ((col[t] - mean) / sd).to_bits(), "parcel {q}, TR {t}");
            }
        }
    }

    #[test]
    fn a_non_finite_generated_value_is_an_error_naming_the_run_and_parcel() {
        let mut data: Vec<f64> = (0..12).map(|i| i as f64).collect();
        data[7] = f64::NAN;
        let run = SynthRun { subject: "01".into(), run: "1".into(), n_tr: 4, parcels: 3, data };
        let e = Dataset::from_synth(std::slice::from_ref(&run), None).unwrap_err().to_string();
        assert_eq!(e, "sub-01_run-1 (synthetic), row 2, column 2 (parcel-001): non-finite value NaN");
        let mut inf = run;
        inf.data[7] = f64::INFINITY;
        inf.data[10] = f64::NEG_INFINITY;
        let e = Dataset::from_synth(&[inf], None).unwrap_err().to_string();
        assert!(e.ends_with("row 2, column 2 (parcel-001): non-finite value inf"), "{e}");
        // In a file, the reader says so first, naming the file, row and column.
        let d = tempfile::tempdir().unwrap();
        let mut x: Vec<f64> = (0..12).map(|i| (i * i) as f64).collect();
        x[5] = f64::INFINITY;
        npy_file(&d.path().join("sub-01_run-1.npy"), 4, 3, &x);
        let e = Dataset::load(d.path()).unwrap_err().to_string();
        assert!(e.ends_with("sub-01_run-1.npy, row 1, column 3: non-finite value inf"), "{e}");
    }

    #[test]
    fn empirical_floor_of_long_ar1_is_near_exact() {
        use boldcast_fixtures::{Ar1Spec, Layout, RhoSpec};
        let spec = Ar1Spec {
            layout: Layout { subjects: 4, runs: 2, trs: 5000, parcels: 3, seed: 11 },
            rho: RhoSpec::List(vec![0.9, 0.7, 0.5]),
            innovation_mix: 0.5,
            mix_k: 3,
        };
        let ds = Dataset::from_synth(&spec.generate().unwrap(), None).unwrap();
        let emp = ds.empirical_floor_per_parcel(&[1, 5], 1).unwrap();
        let exact = spec.floor(&[1, 5], 1).unwrap();
        for (e, x) in emp.iter().zip(&exact.per_parcel) {
            assert!((e - x).abs() < 0.02, "{e} vs {x}");
        }
    }
}
