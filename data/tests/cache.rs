//! The conversion cache (`Selection::cache`, `--cache DIR`): text and CIFTI runs converted once
//! into `.npy` files and read from disk give the bits of the same runs held in memory; entries
//! are reused while their source is unchanged and converted again when it changes; a run with a
//! non-finite value is not cached and its error names the source.

use boldcast_core::Tokens;
use boldcast_data::write::{write_run, RunFormat};
use boldcast_data::{Dataset, Selection, WindowRef, WindowSpec};
use boldcast_fixtures::{parcel_names, Ar1Spec, Layout};
use std::path::{Path, PathBuf};

fn with_cache(dir: &Path) -> Selection {
    Selection { cache: Some(dir.to_path_buf()), ..Selection::default() }
}

fn bits(ds: &Dataset) -> Vec<u32> {
    let spec = WindowSpec { window: 16, stride: 7, d_in: 2 };
    let w: Vec<WindowRef> = ds.windows(&spec).unwrap();
    let t: Tokens<f32> = ds.tokens(&w, &spec).unwrap();
    t.data().iter().map(|v| v.to_bits()).collect()
}

fn entries(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

fn cache_note(ds: &Dataset) -> String {
    ds.reader_notes.iter().find(|n| n.starts_with("cache ")).cloned().unwrap_or_default()
}

/// Three subjects of AR(1) text runs (float64 values: the cache keeps them as float64).
fn text_dataset(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let spec = Ar1Spec::new(Layout { subjects: 3, runs: 1, trs: 150, parcels: 4, seed: 9 }, 0.8);
    for r in spec.generate().unwrap() {
        let name = format!("sub-{}_task-rest_bold.tsv", r.subject);
        write_run(&dir.join(name), &r, &parcel_names(4), RunFormat::Tsv).unwrap();
    }
}

#[test]
fn cached_text_runs_give_the_bits_of_runs_in_memory_and_are_reused_until_changed() {
    let d = tempfile::tempdir().unwrap();
    let (data, cache) = (d.path().join("data"), d.path().join("cache"));
    text_dataset(&data);
    let mem = Dataset::load(&data).unwrap();
    assert!(mem.runs.iter().all(|r| !r.on_disk()));
    let first = Dataset::load_with(&data, &with_cache(&cache)).unwrap();
    assert!(first.runs.iter().all(|r| r.on_disk() && r.memory_bytes() == 0));
    assert_eq!(cache_note(&first), format!("cache {}: 3 run(s) converted to .npy, 0 reused", cache.display()));
    assert_eq!((entries(&cache, "npy").len(), entries(&cache, "json").len()), (3, 3));
    // The same parcel names, statistics, values and tokens; the runs keep their source paths.
    assert_eq!(first.parcel_names, mem.parcel_names);
    for (a, b) in first.runs.iter().zip(&mem.runs) {
        assert_eq!((&a.path, &a.stats, a.file), (&b.path, &b.stats, b.file));
        assert_eq!(a.to_vec().unwrap(), b.to_vec().unwrap());
    }
    assert_eq!(bits(&first), bits(&mem));
    assert_eq!(first.fingerprint(&[0, 1, 2]).unwrap(), mem.fingerprint(&[0, 1, 2]).unwrap());
    // Float64 text values stay float64 on disk (header, then 150 x 4 values of 8 bytes).
    let npy = &entries(&cache, "npy")[0];
    assert_eq!(std::fs::metadata(npy).unwrap().len(), 128 + 150 * 4 * 8);
    // Loaded again: every entry reused, the same bits.
    let again = Dataset::load_with(&data, &with_cache(&cache)).unwrap();
    assert_eq!(cache_note(&again), format!("cache {}: 0 run(s) converted to .npy, 3 reused", cache.display()));
    assert_eq!(bits(&again), bits(&mem));
    // A source rewritten (other values, another size): converted again, its new values read.
    let src = data.join("sub-02_task-rest_bold.tsv");
    let text = std::fs::read_to_string(&src).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.truncate(120);
    std::fs::write(&src, lines.join("\n") + "\n").unwrap();
    let changed = Dataset::load_with(&data, &with_cache(&cache)).unwrap();
    assert_eq!(cache_note(&changed), format!("cache {}: 1 run(s) converted to .npy, 2 reused", cache.display()));
    assert_eq!(changed.runs[1].n_tr, 119);
    let mem = Dataset::load(&data).unwrap();
    assert_eq!(bits(&changed), bits(&mem));
    // A damaged entry is converted again, never read as numbers.
    for j in entries(&cache, "json") {
        std::fs::write(&j, "{ not json").unwrap();
    }
    let repaired = Dataset::load_with(&data, &with_cache(&cache)).unwrap();
    assert_eq!(cache_note(&repaired), format!("cache {}: 3 run(s) converted to .npy, 0 reused", cache.display()));
    assert_eq!(bits(&repaired), bits(&mem));
}

#[test]
fn cifti_series_of_float32_are_cached_as_float32() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cifti");
    let d = tempfile::tempdir().unwrap();
    let (data, cache) = (d.path().join("data"), d.path().join("cache"));
    std::fs::create_dir_all(&data).unwrap();
    for s in ["01", "02"] {
        std::fs::copy(fixtures.join("f32.ptseries.nii"), data.join(format!("sub-{s}_run-1_bold.ptseries.nii")))
            .unwrap();
    }
    let mem = Dataset::load(&data).unwrap();
    let cached = Dataset::load_with(&data, &with_cache(&cache)).unwrap();
    assert!(cached.runs.iter().all(|r| r.on_disk()));
    assert_eq!(cached.parcel_names, mem.parcel_names, "names from the file, kept in the entry");
    assert_eq!(cached.tr, mem.tr, "the series step, kept in the entry");
    assert!(mem.tr.is_some());
    assert_eq!(bits(&cached), bits(&mem));
    let (r, p) = (mem.runs[0].n_tr as u64, mem.parcels as u64);
    for npy in entries(&cache, "npy") {
        assert_eq!(std::fs::metadata(&npy).unwrap().len(), 128 + r * p * 4, "float32: {}", npy.display());
    }
    let reused = Dataset::load_with(&data, &with_cache(&cache)).unwrap();
    assert_eq!((reused.parcel_names.clone(), reused.tr), (mem.parcel_names.clone(), mem.tr));
    assert_eq!(bits(&reused), bits(&mem));
}

#[test]
fn a_non_finite_value_is_not_cached_and_its_error_names_the_source() {
    let d = tempfile::tempdir().unwrap();
    let (data, cache) = (d.path().join("data"), d.path().join("cache"));
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("sub-01_bold.tsv"), "a\tb\n1\t2\n3\tinf\n5\t6\n").unwrap();
    let e = Dataset::load_with(&data, &with_cache(&cache)).unwrap_err().to_string();
    assert!(e.contains("sub-01_bold.tsv") && e.contains("non-finite value"), "{e}");
    assert!(!cache.exists() || entries(&cache, "npy").is_empty(), "nothing cached");
    // A cache path that is a file is an error naming it.
    std::fs::write(data.join("sub-01_bold.tsv"), "a\tb\n1\t2\n3\t4\n5\t6\n").unwrap();
    std::fs::write(&cache, "x").unwrap();
    let e = Dataset::load_with(&data, &with_cache(&cache)).unwrap_err().to_string();
    assert!(e.contains(&cache.display().to_string()), "{e}");
}
