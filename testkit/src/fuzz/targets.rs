//! The fuzz targets of the data crate and the golden cases, and their seeds: each target
//! writes its input where the tool would find the file and calls the public entry point the
//! tool calls ([`Dataset::load`], [`SafetensorsFile::open`] and every tensor read,
//! [`GoldenCase::load`]; for CIFTI-2 files, which the loader does not list yet,
//! [`CiftiFile::open`], [`cifti::ptseries`] and [`cifti::parcellate_dtseries`]). A valid value is checked too (a parser that returns `Ok` with
//! inconsistent sizes or non-finite values is caught by an assertion, which the checker counts
//! as a panic).
//!
//! The same functions are the bodies of the `cargo fuzz` targets in `fuzz/`.

use super::check::{Outcome, Target};
use super::mutate::{npy_bytes, Format, Plan, Seed};
use crate::golden::GoldenCase;
use boldcast_data::cifti::{self, CiftiFile, ParcelSeries};
use boldcast_data::write::{write_parcels, write_run, RunFormat};
use boldcast_data::{parse_bids_name, parse_run_name, parse_sidecar_name, Dataset, Selection};
use boldcast_fixtures::SynthRun;
use boldcast_storage::tensorfile::{save_safetensors, SafetensorsFile};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The run file every run target writes (a BIDS name, so the loader takes it as a run).
pub const RUN_STEM: &str = "sub-01_run-1_bold";
/// The directory name of the golden targets' case (every path of their errors contains it).
pub const GOLDEN_DIR: &str = "golden-fuzz-case";
/// The golden case whose files the golden targets use (small: 36 KB; Mamba-2, k > 0).
pub const GOLDEN_CASE: &str = "mamba2-full-k";

/// A fresh directory of this process for target `name` (under the system's temporary
/// directory; [`remove_scratch`] removes them all).
pub fn scratch(name: &str) -> PathBuf {
    let d = scratch_root().join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("creating the fuzz scratch directory {}: {e}", d.display()));
    d
}

/// `BOLDCAST_FUZZ_DIR` when set, else `/dev/shm` when it is a directory (memory: a case
/// rewrites its file, which on a disk filesystem such as ext4 starts a write-back each time and
/// makes the run ten times slower), else the system's temporary directory.
fn scratch_root() -> PathBuf {
    let base = match std::env::var_os("BOLDCAST_FUZZ_DIR") {
        Some(d) => PathBuf::from(d),
        None if Path::new("/dev/shm").is_dir() => PathBuf::from("/dev/shm"),
        None => std::env::temp_dir(),
    };
    base.join(format!("boldcast-fuzz-{}", std::process::id()))
}

/// Removes the scratch directories of this process.
pub fn remove_scratch() {
    let _ = std::fs::remove_dir_all(scratch_root());
}

/// Writes `bytes` to `path` (a failure is the harness's, not the parser's: it panics).
pub fn put(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("writing the fuzz input {}: {e}", path.display()));
}

/// Loads `dir` as a dataset and checks a valid one: one run, `n_tr * parcels` finite values,
/// a name per parcel, a finite centroid per parcel when there are centroids.
fn load_dataset(dir: &Path) -> Outcome {
    let ds = Dataset::load(dir).map_err(|e| e.to_string())?;
    assert_eq!(ds.runs.len(), 1, "one run file, one run");
    assert!(ds.parcels >= 1);
    let r = &ds.runs[0];
    let x = r.to_vec().map_err(|e| e.to_string())?;
    assert_eq!(x.len(), r.n_tr.checked_mul(ds.parcels).expect("n_tr * parcels fits"), "values of {r:?}");
    assert!(x.iter().all(|v| v.is_finite()), "non-finite standardized values");
    assert_eq!(ds.parcel_names.len(), ds.parcels);
    if let Some(c) = &ds.centroids {
        assert_eq!(c.len(), ds.parcels);
        assert!(c.iter().flatten().all(|v| v.is_finite()));
    }
    Ok(())
}

fn run_dir(name: &'static str, dir: &'static OnceLock<PathBuf>) -> &'static Path {
    dir.get_or_init(|| scratch(name))
}

/// `Dataset::load` of the directory `dir` (made once) holding only the run file
/// `sub-01_run-1_bold.<ext>` with `bytes`.
fn one_run(ext: &'static str, dir: &'static OnceLock<PathBuf>, bytes: &[u8]) -> Outcome {
    let dir = run_dir(ext, dir);
    put(&dir.join(format!("{RUN_STEM}.{ext}")), bytes);
    load_dataset(dir)
}

/// A `.npy` run: `Dataset::load` of a directory holding only `sub-01_run-1_bold.npy`.
pub fn npy(bytes: &[u8]) -> Outcome {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    one_run("npy", &DIR, bytes)
}

/// A `.tsv` run.
pub fn tsv(bytes: &[u8]) -> Outcome {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    one_run("tsv", &DIR, bytes)
}

/// A `.csv` run.
pub fn csv(bytes: &[u8]) -> Outcome {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    one_run("csv", &DIR, bytes)
}

/// `parcels.tsv` beside a valid `.npy` run of [`PARCELS`] parcels (the parcels seed's count).
pub fn parcels(bytes: &[u8]) -> Outcome {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let d = scratch("parcels");
        let run = synth_run(12, PARCELS);
        write_run(&d.join(format!("{RUN_STEM}.npy")), &run, &names(PARCELS), RunFormat::Npy)
            .expect("the parcels target's run is written");
        d
    });
    put(&dir.join("parcels.tsv"), bytes);
    load_dataset(dir)
}

/// Parcels of the `parcels` target's run.
pub const PARCELS: usize = 4;

/// A safetensors file: [`SafetensorsFile::open`], then its names, metadata, and every tensor
/// read the way its dtype is read (`F32`/`F64` as f32 and f64, `I64` as integers; any other
/// dtype must be refused by the float reader).
pub fn safetensors(bytes: &[u8]) -> Outcome {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let path = run_dir("safetensors", &DIR).join("fuzz.safetensors");
    put(&path, bytes);
    let f = SafetensorsFile::open(&path).map_err(|e| e.to_string())?;
    let _ = f.metadata();
    for name in f.names() {
        let (shape, dtype) = f.info(&name).map_err(|e| e.to_string())?;
        let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).expect("a validated shape's size fits");
        match dtype.as_str() {
            "F32" | "F64" => {
                assert_eq!(f.tensor::<f32>(&name).map_err(|e| e.to_string())?.data.len(), n);
                assert_eq!(f.tensor::<f64>(&name).map_err(|e| e.to_string())?.data.len(), n);
            }
            "I64" => assert_eq!(f.i64(&name).map_err(|e| e.to_string())?.1.len(), n),
            _ => assert!(f.tensor::<f32>(&name).is_err(), "dtype {dtype} read as floats"),
        }
    }
    Ok(())
}

/// The golden case directory of the golden targets: a copy of [`GOLDEN_CASE`].
fn golden_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = scratch("golden").join(GOLDEN_DIR);
        std::fs::create_dir_all(&d).expect("the golden scratch directory");
        let src = crate::cases::repo_case(GOLDEN_CASE);
        for f in GOLDEN_FILES {
            std::fs::copy(src.join(f), d.join(f)).unwrap_or_else(|e| panic!("copying {}: {e}", src.join(f).display()));
        }
        d
    })
}

const GOLDEN_FILES: [&str; 4] = ["config.json", "weights.safetensors", "inputs.safetensors", "expected.safetensors"];

/// Loads the golden case with `file` replaced by `bytes` (the others are the case's own).
fn golden_with(file: &str, bytes: &[u8]) -> Outcome {
    let dir = golden_dir();
    put(&dir.join(file), bytes);
    let r = GoldenCase::load(dir).map(|c| {
        let mc = c.model_config();
        assert!(mc.validate().is_ok());
        assert!(c.tokens().data().iter().all(|x| x.is_finite()), "non-finite golden tokens accepted");
        assert!(c.weights().iter().all(|w| w.data.iter().all(|x| x.is_finite())), "non-finite weights accepted");
    });
    // Put the case's own file back for the other golden target.
    let own = crate::cases::repo_case(GOLDEN_CASE).join(file);
    std::fs::copy(&own, dir.join(file)).unwrap_or_else(|e| panic!("restoring {}: {e}", own.display()));
    r.map_err(|e| e.to_string())
}

/// A golden case's `config.json`: [`GoldenCase::load`] of a copy of [`GOLDEN_CASE`] with it.
pub fn golden_config(bytes: &[u8]) -> Outcome {
    golden_with("config.json", bytes)
}

/// A golden case's `inputs.safetensors` (tokens and adjacency).
pub fn golden_inputs(bytes: &[u8]) -> Outcome {
    golden_with("inputs.safetensors", bytes)
}

/// Bytes of the golden case's files other than `file` (for [`Target::other_input`]).
fn golden_other(file: &str) -> usize {
    let src = crate::cases::repo_case(GOLDEN_CASE);
    GOLDEN_FILES.iter().filter(|f| **f != file).map(|f| file_len(&src.join(f))).sum()
}

/// The length of a file (0 when it cannot be read).
pub fn file_len(p: &Path) -> usize {
    std::fs::metadata(p).map(|m| m.len() as usize).unwrap_or(0)
}

/// `n_tr x parcels` values `sin`-like and distinct per parcel.
fn synth_run(n_tr: usize, parcels: usize) -> SynthRun {
    let data = (0..n_tr * parcels).map(|i| ((i * 7919) % 101) as f64 / 10.0 - 5.0).collect();
    SynthRun { subject: "01".into(), run: "1".into(), n_tr, parcels, data }
}

fn names(p: usize) -> Vec<String> {
    (0..p).map(|q| format!("V{q}")).collect()
}

/// A run written by the data crate's writer in `format`; its bytes.
fn written(format: RunFormat, n_tr: usize, parcels: usize) -> Vec<u8> {
    let d = scratch(&format!("seed-{}", format.extension()));
    let p = d.join(format!("{RUN_STEM}.{}", format.extension()));
    write_run(&p, &synth_run(n_tr, parcels), &names(parcels), format).expect("a seed run is written");
    std::fs::read(&p).expect("a seed run is read back")
}

/// The CIFTI-2 fixtures of the data crate (written by nibabel: `make_fixtures.py` there).
pub fn cifti_fixture(name: &str) -> PathBuf {
    crate::cases::repo_root().join("data/tests/fixtures/cifti").join(name)
}

/// The label file beside the `dtseries` target's input, and the series beside the `dlabel`
/// target's (both the fixtures').
pub const CIFTI_DLABEL: &str = "atlas.dlabel.nii";
/// The dense series of the `dlabel` target.
pub const CIFTI_DTSERIES: &str = "sub-01_run-1.dtseries.nii";

/// Checks a parcel series a CIFTI reader returned: `n_tr * parcels` finite values, a name
/// per parcel, a positive TR.
fn check_parcel_series(s: &ParcelSeries) {
    assert!(s.n_tr >= 1 && !s.names.is_empty());
    assert_eq!(s.data.len(), s.n_tr.checked_mul(s.names.len()).expect("n_tr * parcels fits"));
    assert!(s.data.iter().all(|v| v.is_finite()), "non-finite values accepted");
    assert!(s.tr_seconds.is_finite() && s.tr_seconds > 0.0, "TR {}", s.tr_seconds);
}

/// A `.ptseries.nii`: [`cifti::ptseries`] (what the loader will call), after
/// [`CiftiFile::open`] and its values (the public API), whose shape must agree.
pub fn ptseries(bytes: &[u8]) -> Outcome {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let path = run_dir("ptseries", &DIR).join(format!("{RUN_STEM}.ptseries.nii"));
    put(&path, bytes);
    let f = CiftiFile::open(&path).map_err(|e| e.to_string())?;
    let (rows, columns) = f.shape();
    assert_eq!(f.values().map_err(|e| e.to_string())?.len(), rows * columns);
    let s = cifti::ptseries(&path).map_err(|e| e.to_string())?;
    check_parcel_series(&s);
    assert_eq!((s.n_tr, s.names.len()), (rows, columns));
    // And as the loader reads it, a run of a dataset.
    load_dataset(path.parent().expect("the run's directory"))
}

/// A BIDS sidecar: `Dataset::load` of a tree holding `sub-01/func/sub-01_task-rest_run-1_bold.tsv`
/// and its `.json` sidecar with `bytes`; a valid one gives the run a positive TR or none.
pub fn sidecar(bytes: &[u8]) -> Outcome {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let root = DIR.get_or_init(|| {
        let d = scratch("sidecar");
        let func = d.join("sub-01/func");
        std::fs::create_dir_all(&func).expect("the sidecar target's tree");
        write_run(&func.join(format!("{SIDECAR_STEM}.tsv")), &synth_run(12, 3), &names(3), RunFormat::Tsv)
            .expect("the sidecar target's run is written");
        d
    });
    put(&root.join("sub-01/func").join(format!("{SIDECAR_STEM}.json")), bytes);
    let ds = Dataset::load(root).map_err(|e| e.to_string())?;
    assert_eq!(ds.runs.len(), 1);
    if let Some(tr) = &ds.runs[0].tr {
        assert!(tr.seconds.is_finite() && tr.seconds > 0.0, "TR {tr:?} accepted");
        assert_eq!(ds.tr, Some(tr.seconds));
    }
    Ok(())
}

/// The conversion cache's entry (`<key>.json`) of one `.tsv` run replaced by `bytes`: a load
/// through the cache never fails on it and gives exactly the run read without the cache, parcel
/// names included (an entry damaged, edited or foreign is converted again, never trusted).
pub fn cache_entry(bytes: &[u8]) -> Outcome {
    let (root, (names, values)) = cache_root();
    put(&cache_json(root), bytes);
    let sel = Selection { cache: Some(root.join("cache")), ..Selection::default() };
    let ds = Dataset::load_with(root.join("data"), &sel).expect("a cache entry never stops a load");
    let run = &ds.runs[0];
    assert!(run.on_disk(), "the run is read from the cache");
    assert_eq!(&ds.parcel_names, names);
    assert_eq!(&run.to_vec().expect("the cached run reads"), values);
    Ok(())
}

/// The cache target's directory and its run's parcel names and values.
type CacheRoot = (PathBuf, (Vec<String>, Vec<f64>));

/// The cache target's directory (`data/` with one `.tsv` run, `cache/` filled by a first load)
/// and that run's parcel names and standardized values read without the cache.
fn cache_root() -> &'static CacheRoot {
    static DIR: OnceLock<CacheRoot> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = scratch("cache_entry");
        let data = d.join("data");
        std::fs::create_dir_all(&data).expect("the cache target's data directory");
        write_run(&data.join(format!("{RUN_STEM}.tsv")), &synth_run(12, 3), &names(3), RunFormat::Tsv)
            .expect("the cache target's run is written");
        let ds = Dataset::load(&data).expect("the cache target's run loads");
        let want = (ds.parcel_names.clone(), ds.runs[0].to_vec().expect("the run reads"));
        let sel = Selection { cache: Some(d.join("cache")), ..Selection::default() };
        Dataset::load_with(&data, &sel).expect("the first load fills the cache");
        (d, want)
    })
}

/// The one entry file of the cache target's cache.
fn cache_json(root: &Path) -> PathBuf {
    let dir = root.join("cache");
    let mut found = std::fs::read_dir(&dir)
        .expect("the cache target's cache")
        .map(|e| e.expect("a cache entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"));
    found.next().expect("the cache holds the run's entry")
}

/// The stem of the sidecar target's run (and sidecar).
pub const SIDECAR_STEM: &str = "sub-01_task-rest_run-1_bold";

/// A file name (the bytes as UTF-8, lossily): [`parse_bids_name`], [`parse_run_name`] and
/// [`parse_sidecar_name`]; what they accept has alphanumeric, distinct entities, and a run's
/// identity written back as a name parses to the same identity.
pub fn bids_name(bytes: &[u8]) -> Outcome {
    let name = String::from_utf8_lossy(bytes);
    for parsed in [parse_bids_name(&name), parse_sidecar_name(&name)].into_iter().flatten() {
        let alnum = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric());
        assert!(parsed.entities.iter().all(|(k, v)| alnum(k) && alnum(v)), "{parsed:?}");
        let mut keys: Vec<&str> = parsed.entities.iter().map(|(k, _)| k.as_str()).collect();
        keys.sort_unstable();
        let n = keys.len();
        keys.dedup();
        assert_eq!(keys.len(), n, "an entity twice in {parsed:?}");
    }
    if let Some((id, _)) = parse_run_name(&name) {
        let again = parse_run_name(&format!("{id}.npy")).map(|(i, _)| i);
        assert_eq!(again.as_ref(), Some(&id), "{name:?}");
    }
    Ok(())
}

/// A directory holding a copy of the fixture `fixed` (the other file of a parcellation).
fn cifti_dir(name: &str, dir: &'static OnceLock<PathBuf>, fixed: &str) -> &'static Path {
    dir.get_or_init(|| {
        let d = scratch(name);
        let src = cifti_fixture(fixed);
        std::fs::copy(&src, d.join(fixed)).unwrap_or_else(|e| panic!("copying {}: {e}", src.display()));
        d
    })
}

/// A `.dtseries.nii` averaged over the fixture label file: [`cifti::parcellate_dtseries`].
pub fn dtseries(bytes: &[u8]) -> Outcome {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = cifti_dir("dtseries", &DIR, CIFTI_DLABEL);
    let path = dir.join(format!("{RUN_STEM}.dtseries.nii"));
    put(&path, bytes);
    let s = cifti::parcellate_dtseries(&path, &dir.join(CIFTI_DLABEL)).map_err(|e| e.to_string())?;
    check_parcel_series(&s);
    Ok(())
}

/// A `.dlabel.nii` parcellating the fixture dense series: [`cifti::parcellate_dtseries`].
pub fn dlabel(bytes: &[u8]) -> Outcome {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = cifti_dir("dlabel", &DIR, CIFTI_DTSERIES);
    let path = dir.join("fuzz.dlabel.nii");
    put(&path, bytes);
    let s = cifti::parcellate_dtseries(&dir.join(CIFTI_DTSERIES), &path).map_err(|e| e.to_string())?;
    check_parcel_series(&s);
    Ok(())
}

/// Seeds of the fixtures `names` (NIfTI-2: the header and the XML up to `vox_offset` take the
/// truncations, most random edits, the numbers' substitutions and the header fields' edits).
fn cifti_seeds(names: &[&str]) -> Vec<Seed> {
    let read = |n: &str| std::fs::read(cifti_fixture(n)).unwrap_or_else(|e| panic!("the CIFTI fixture {n}: {e}"));
    names.iter().map(|n| Seed::new(*n, Format::Nifti, read(n))).collect()
}

/// Every data and golden target with its seeds and plan, as the harness runs them. Case
/// counts are fixed, sized so that every target of both harnesses takes about 40 s in all on
/// two cores (the debug test profile, opt-level 2).
pub fn data_targets() -> Vec<Target> {
    [file_targets(), golden_targets(), cifti_and_name_targets()].into_iter().flatten().collect()
}

/// The targets of the run files, `parcels.tsv` and safetensors files.
fn file_targets() -> Vec<Target> {
    let npy_dict =
        |descr: &str, fortran: &str| format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': (6, 3), }}");
    let f4: Vec<u8> = (0..18).flat_map(|i| (i as f32 * 0.5 - 2.0).to_le_bytes()).collect();
    let f8: Vec<u8> = (0..18).flat_map(|i| (i as f64 * 0.25 + 1.0).to_le_bytes()).collect();
    let npy_seeds = vec![
        Seed::new("written.npy", Format::Npy, written(RunFormat::Npy, 8, 3)),
        Seed::new("f4-fortran.npy", Format::Npy, npy_bytes(1, &npy_dict("<f4", "True"), None, &f4)),
        Seed::new("f8-v2.npy", Format::Npy, npy_bytes(2, &npy_dict("<f8", "False"), None, &f8)),
    ];
    let text = |format: RunFormat, sep: u8| {
        let mut bom = b"\xef\xbb\xbf".to_vec();
        bom.extend_from_slice(&written(format, 5, 3));
        vec![
            Seed::new(format!("written.{}", format.extension()), Format::Delimited(sep), written(format, 12, 3)),
            Seed::new(format!("bom.{}", format.extension()), Format::Delimited(sep), bom),
        ]
    };
    let parcels_seed = parcels_seed();
    let st_seed = safetensors_seed();
    let golden_inputs_seed =
        std::fs::read(crate::cases::repo_case(GOLDEN_CASE).join("inputs.safetensors")).expect("the golden inputs");
    let text_plan = Plan { random: 4000, max_structured: 2000, max_numbers: 1500, ..Plan::default() };
    vec![
        Target {
            name: "npy",
            seeds: npy_seeds,
            plan: Plan { random: 10_000, ..Plan::default() },
            other_input: 0,
            must_name: &["sub-01_run-1_bold.npy"],
            run: Box::new(npy),
        },
        Target {
            name: "tsv",
            seeds: text(RunFormat::Tsv, b'\t'),
            plan: text_plan,
            other_input: 0,
            must_name: &["sub-01_run-1_bold.tsv"],
            run: Box::new(tsv),
        },
        Target {
            name: "csv",
            seeds: text(RunFormat::Csv, b','),
            plan: text_plan,
            other_input: 0,
            must_name: &["sub-01_run-1_bold.csv"],
            run: Box::new(csv),
        },
        Target {
            name: "parcels",
            seeds: vec![Seed::new("parcels.tsv", Format::Delimited(b'\t'), parcels_seed)],
            plan: Plan { random: 5000, ..text_plan },
            other_input: 1024,
            must_name: &["parcels.tsv"],
            run: Box::new(parcels),
        },
        Target {
            name: "safetensors",
            seeds: vec![
                Seed::new("written.safetensors", Format::Safetensors, st_seed),
                Seed::new(format!("{GOLDEN_CASE}/inputs.safetensors"), Format::Safetensors, golden_inputs_seed.clone()),
            ],
            plan: Plan { random: 10_000, ..Plan::default() },
            other_input: 0,
            must_name: &["fuzz.safetensors"],
            run: Box::new(safetensors),
        },
    ]
}

/// The targets of the golden cases' files.
fn golden_targets() -> Vec<Target> {
    let golden_inputs_seed =
        std::fs::read(crate::cases::repo_case(GOLDEN_CASE).join("inputs.safetensors")).expect("the golden inputs");
    let config_seeds: Vec<Seed> = crate::golden::case_dirs(crate::cases::repo_cases_dir())
        .expect("the repository's golden cases")
        .into_iter()
        .map(|d| {
            let name = d.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            Seed::new(
                format!("{name}/config.json"),
                Format::Json,
                std::fs::read(d.join("config.json")).expect("a golden config"),
            )
        })
        .collect();
    vec![
        Target {
            name: "golden_config",
            seeds: config_seeds,
            plan: Plan { random: 1500, max_structured: 1000, max_numbers: 300, ..Plan::default() },
            other_input: golden_other("config.json"),
            must_name: &[GOLDEN_DIR],
            run: Box::new(golden_config),
        },
        Target {
            name: "golden_inputs",
            seeds: vec![Seed::new(
                format!("{GOLDEN_CASE}/inputs.safetensors"),
                Format::Safetensors,
                golden_inputs_seed,
            )],
            plan: Plan { random: 1500, max_structured: 500, max_numbers: 300, ..Plan::default() },
            other_input: golden_other("inputs.safetensors"),
            must_name: &[GOLDEN_DIR],
            run: Box::new(golden_inputs),
        },
    ]
}

/// The targets of the CIFTI files, the sidecars, the cache's entries and BIDS names.
fn cifti_and_name_targets() -> Vec<Target> {
    let cifti_plan = Plan { random: 6000, ..Plan::default() };
    vec![
        Target {
            name: "ptseries",
            seeds: cifti_seeds(&["f32.ptseries.nii", "be.ptseries.nii", "i16.ptseries.nii"]),
            plan: cifti_plan,
            other_input: 0,
            must_name: &["sub-01_run-1_bold.ptseries.nii"],
            run: Box::new(ptseries),
        },
        Target {
            name: "dtseries",
            seeds: cifti_seeds(&[CIFTI_DTSERIES]),
            plan: cifti_plan,
            other_input: file_len(&cifti_fixture(CIFTI_DLABEL)),
            must_name: &["sub-01_run-1_bold.dtseries.nii"],
            run: Box::new(dtseries),
        },
        Target {
            name: "sidecar",
            seeds: vec![
                Seed::new("bold.json", Format::Json, b"{\"RepetitionTime\": 0.72, \"TaskName\": \"rest\"}".to_vec()),
                Seed::new("no-tr.json", Format::Json, b"{\"Sources\": [\"bids:raw:x\"], \"EchoTime\": 0.03}".to_vec()),
                Seed::new("bom.json", Format::Json, b"\xef\xbb\xbf{\"RepetitionTime\": 2.0}".to_vec()),
            ],
            plan: Plan { random: 3000, max_structured: 1000, max_numbers: 500, ..Plan::default() },
            other_input: 1024,
            must_name: &["sub-01_task-rest_run-1_bold"],
            run: Box::new(sidecar),
        },
        Target {
            name: "cache_entry",
            seeds: vec![Seed::new(
                "entry.json",
                Format::Json,
                std::fs::read(cache_json(&cache_root().0)).expect("the cache target's entry"),
            )],
            plan: Plan { random: 2000, max_structured: 1000, max_numbers: 500, ..Plan::default() },
            other_input: 1024,
            must_name: &[],
            run: Box::new(cache_entry),
        },
        Target {
            name: "bids_name",
            seeds: [
                "sub-01_ses-1_task-rest_run-1_space-fsLR_seg-4S156Parcels_stat-mean_timeseries.tsv",
                "sub-02_task-rest_space-fsLR_atlas-Glasser_den-91k_timeseries.ptseries.nii",
                "sub-01_run-1_my-notes.v2_bold.npy",
                "task-rest_bold.json",
            ]
            .into_iter()
            .map(|n| Seed::new(n, Format::Binary, n.as_bytes().to_vec()))
            .collect(),
            plan: Plan { random: 5000, ..Plan::default() },
            other_input: 0,
            must_name: &[],
            run: Box::new(bids_name),
        },
        Target {
            name: "dlabel",
            seeds: cifti_seeds(&[CIFTI_DLABEL]),
            plan: cifti_plan,
            other_input: file_len(&cifti_fixture(CIFTI_DTSERIES)),
            must_name: &["fuzz.dlabel.nii"],
            run: Box::new(dlabel),
        },
    ]
}

/// The seed of `parcels.tsv`: the file the data crate writes.
fn parcels_seed() -> Vec<u8> {
    let d = scratch("seed-parcels");
    let xyz: Vec<[f64; 3]> = (0..PARCELS).map(|q| [q as f64, -1.5 * q as f64, 2e-3]).collect();
    write_parcels(&d.join("parcels.tsv"), &names(PARCELS), &xyz).expect("the parcels seed is written");
    std::fs::read(d.join("parcels.tsv")).expect("the parcels seed is read back")
}

/// The seed of the safetensors target: a file the data crate writes, with metadata.
fn safetensors_seed() -> Vec<u8> {
    use boldcast_core::model::NamedTensor;
    let d = scratch("seed-safetensors");
    let p = d.join("w.safetensors");
    let ts = vec![
        NamedTensor { name: "a.weight".into(), shape: vec![2, 3], data: vec![0.5f64, -1.0, 2.0, 3.5, 1e-3, 7.0] },
        NamedTensor { name: "b".into(), shape: vec![1], data: vec![4.0] },
    ];
    let meta = [("config".to_string(), "{\"x\": 1}".to_string()), ("step".to_string(), "3".to_string())].into();
    save_safetensors(&p, &ts, Some(meta)).expect("the safetensors seed is written");
    std::fs::read(&p).expect("the safetensors seed is read back")
}
