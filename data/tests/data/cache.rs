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

/// Three subjects of AR(1) text runs (float64 values: the cache keeps them as float64) in
/// `d/data`; returns it and the cache folder, `d/cache`.
fn text_dataset(d: &Path) -> (PathBuf, PathBuf) {
    let dir = d.join("data");
    std::fs::create_dir_all(&dir).unwrap();
    let spec = Ar1Spec::new(Layout { subjects: 3, runs: 1, trs: 150, parcels: 4, seed: 9 }, 0.8);
    for r in spec.generate().unwrap() {
        let name = format!("sub-{}_task-rest_bold.tsv", r.subject);
        write_run(&dir.join(name), &r, &parcel_names(4), RunFormat::Tsv).unwrap();
    }
    (dir, d.join("cache"))
}

#[test]
fn cached_text_runs_give_the_bits_of_runs_in_memory_and_are_reused_until_changed() {
    let d = tempfile::tempdir().unwrap();
    let (data, cache) = text_dataset(d.path());
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
    let file = d.path().join("cache-file");
    std::fs::write(&file, "x").unwrap();
    let e = Dataset::load_with(&data, &with_cache(&file)).unwrap_err().to_string();
    assert!(e.contains(&file.display().to_string()), "{e}");
}

/// An entry's array changed behind the cache (rows zeroed in place, or another entry's array
/// copied over it, both the same size) is converted again, never reused as numbers.
#[test]
fn an_entry_whose_array_was_changed_is_converted_again() {
    let d = tempfile::tempdir().unwrap();
    let (data, cache) = text_dataset(d.path());
    let mem = Dataset::load(&data).unwrap();
    Dataset::load_with(&data, &with_cache(&cache)).unwrap();
    let npys = entries(&cache, "npy");
    // Rows 10..20 zeroed in place: same size, same header.
    let mut bytes = std::fs::read(&npys[0]).unwrap();
    let row = 4 * 8;
    bytes[128 + 10 * row..128 + 20 * row].fill(0);
    std::fs::write(&npys[0], &bytes).unwrap();
    let zeroed = Dataset::load_with(&data, &with_cache(&cache)).unwrap();
    assert_eq!(cache_note(&zeroed), format!("cache {}: 1 run(s) converted to .npy, 2 reused", cache.display()));
    assert_eq!(bits(&zeroed), bits(&mem));
    // Another entry's array over this one.
    std::fs::copy(&npys[1], &npys[2]).unwrap();
    let copied = Dataset::load_with(&data, &with_cache(&cache)).unwrap();
    assert_eq!(cache_note(&copied), format!("cache {}: 1 run(s) converted to .npy, 2 reused", cache.display()));
    assert_eq!(bits(&copied), bits(&mem));
    assert_eq!(copied.fingerprint(&[0, 1, 2]).unwrap(), mem.fingerprint(&[0, 1, 2]).unwrap());
}

/// Loaders filling one new cache at the same time (a Slurm array over one `--cache`) all
/// succeed with the bits of the runs in memory, round after round.
#[test]
fn concurrent_loaders_fill_one_new_cache() {
    let d = tempfile::tempdir().unwrap();
    let (data, _) = text_dataset(d.path());
    let want = bits(&Dataset::load(&data).unwrap());
    for round in 0..12 {
        let cache = d.path().join(format!("cache-{round}"));
        let loaders: Vec<_> = (0..3)
            .map(|_| {
                let (data, cache) = (data.clone(), cache.clone());
                std::thread::spawn(move || {
                    let ds = Dataset::load_with(&data, &with_cache(&cache)).map_err(|e| e.to_string())?;
                    // Every row read after the others finished writing.
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    ds.runs.iter().try_for_each(|r| r.to_vec().map(drop)).map_err(|e| e.to_string())?;
                    Ok::<_, String>(bits(&ds))
                })
            })
            .collect();
        for l in loaders {
            let got = l.join().unwrap().unwrap_or_else(|e| panic!("round {round}: {e}"));
            assert_eq!(got, want, "round {round}");
        }
        assert_eq!((entries(&cache, "npy").len(), entries(&cache, "json").len()), (3, 3), "round {round}");
    }
}

/// Temporaries left by a conversion that was killed (`.<key>.npy.tmp-<pid>`) are removed by
/// the next load that uses the cache; the entries stay.
#[test]
fn a_killed_conversion_leaves_no_temporary_after_the_next_load() {
    let d = tempfile::tempdir().unwrap();
    let (data, cache) = text_dataset(d.path());
    Dataset::load_with(&data, &with_cache(&cache)).unwrap();
    let key = entries(&cache, "npy")[0].file_stem().unwrap().to_string_lossy().into_owned();
    let stale = [
        cache.join(format!(".{key}.npy.tmp-4194301")),
        cache.join(format!(".{key}.json.tmp-4194302")),
        cache.join(".0123456789abcdef.npy.tmp-4194303"),
    ];
    for s in &stale {
        std::fs::write(s, b"half a conversion").unwrap();
    }
    std::fs::write(cache.join("notes.txt"), b"not the cache's").unwrap();
    let ds = Dataset::load_with(&data, &with_cache(&cache)).unwrap();
    assert_eq!(cache_note(&ds), format!("cache {}: 0 run(s) converted to .npy, 3 reused", cache.display()));
    for s in &stale {
        assert!(!s.exists(), "{} is left", s.display());
    }
    assert!(cache.join("notes.txt").exists(), "only the cache's temporaries are removed");
}
