//! Runs kept on disk (`.npy`, little-endian f32/f64, C order) give the same statistics and
//! tokens, bit for bit, as the same numbers held in memory; a file changed under a loaded run
//! is an error naming it.

use boldcast_core::Tokens;
use boldcast_data::write::{write_run, RunFormat};
use boldcast_data::{Dataset, WindowRef, WindowSpec};
use boldcast_fixtures::{parcel_names, SynthRun};
use std::path::Path;

/// `n x p` values of a few magnitudes, exactly representable in f32.
fn values(n: usize, p: usize, seed: usize) -> Vec<f64> {
    (0..n * p)
        .map(|i| f64::from(((i * 7919 + seed * 31) % 211) as f32 * 0.37 - 30.0 + (i % p) as f32 * 100.0))
        .collect()
}

fn write_f32_npy(path: &Path, n: usize, p: usize, x: &[f64]) {
    use npyz::WriterBuilder;
    let mut f = std::fs::File::create(path).unwrap();
    let mut w =
        npyz::WriteOptions::new().default_dtype().shape(&[n as u64, p as u64]).writer(&mut f).begin_nd().unwrap();
    w.extend(x.iter().map(|&v| v as f32)).unwrap();
    w.finish().unwrap();
}

fn all_tokens(ds: &Dataset, spec: &WindowSpec) -> Tokens<f32> {
    let w: Vec<WindowRef> = ds.windows(spec).unwrap();
    ds.tokens::<f32>(&w, spec).unwrap()
}

#[test]
fn runs_on_disk_give_the_bits_of_runs_in_memory() {
    let (n, p) = (2500, 5);
    let d_disk = tempfile::tempdir().unwrap();
    let d_mem = tempfile::tempdir().unwrap();
    let mut synth = Vec::new();
    for s in 1..=3 {
        let x = values(n, p, s);
        write_f32_npy(&d_disk.path().join(format!("sub-0{s}_run-1_bold.npy")), n, p, &x);
        let r = SynthRun { subject: format!("0{s}"), run: "1".into(), n_tr: n, parcels: p, data: x };
        // The same numbers as text (read whole, into memory).
        write_run(&d_mem.path().join(format!("sub-0{s}_run-1_bold.tsv")), &r, &parcel_names(p), RunFormat::Tsv)
            .unwrap();
        synth.push(r);
    }
    // And as float64 .npy (on disk too).
    let d_f64 = tempfile::tempdir().unwrap();
    for r in &synth {
        let name = format!("sub-{}_run-1_bold.npy", r.subject);
        write_run(&d_f64.path().join(name), r, &parcel_names(p), RunFormat::Npy).unwrap();
    }
    let disk = Dataset::load(d_disk.path()).unwrap();
    let f64_disk = Dataset::load(d_f64.path()).unwrap();
    let mem = Dataset::load(d_mem.path()).unwrap();
    let gen = Dataset::from_synth(&synth, None).unwrap();
    assert!(disk.runs.iter().chain(&f64_disk.runs).all(|r| r.on_disk() && r.memory_bytes() == 0));
    assert!(mem.runs.iter().all(|r| !r.on_disk() && r.memory_bytes() == n * p * 8));
    for other in [&mem, &gen, &f64_disk] {
        for (a, b) in disk.runs.iter().zip(&other.runs) {
            assert_eq!(a.stats, b.stats, "{}", a.path.display());
            assert_eq!(a.to_vec().unwrap(), b.to_vec().unwrap());
            assert_eq!(a.rows(1000, 1033).unwrap(), b.rows(1000, 1033).unwrap());
        }
        for spec in [WindowSpec { window: 64, stride: 48, d_in: 1 }, WindowSpec { window: 96, stride: 100, d_in: 3 }] {
            let (x, y) = (all_tokens(&disk, &spec), all_tokens(other, &spec));
            let bits = |t: &Tokens<f32>| t.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&x), bits(&y));
        }
        assert_eq!(disk.fingerprint(&[0, 2]).unwrap(), other.fingerprint(&[0, 2]).unwrap());
        assert_eq!(disk.empirical_floor(&[1, 5], 1).unwrap(), other.empirical_floor(&[1, 5], 1).unwrap());
        assert_eq!(disk.adjacency(2, &[0, 1]).unwrap(), other.adjacency(2, &[0, 1]).unwrap());
    }
    // Rows outside the run are an error, not a panic.
    let e = disk.runs[0].rows(10, n + 1).unwrap_err().to_string();
    assert!(e.contains("sub-01_run-1_bold.npy has 2500 TRs"), "{e}");
}

#[test]
fn a_file_changed_under_a_loaded_run_is_an_error_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("sub-01_run-1_bold.npy");
    write_f32_npy(&path, 100, 3, &values(100, 3, 1));
    let ds = Dataset::load(d.path()).unwrap();
    assert!(ds.runs[0].rows(0, 10).is_ok());
    // Truncated: the size differs from the one recorded.
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(200).unwrap();
    let e = ds.runs[0].rows(0, 10).unwrap_err().to_string();
    assert!(e.contains("sub-01_run-1_bold.npy") && e.contains("changed since it was loaded"), "{e}");
    std::fs::remove_file(&path).unwrap();
    let e = ds.runs[0].rows(0, 10).unwrap_err().to_string();
    assert!(e.contains("sub-01_run-1_bold.npy"), "{e}");
}

#[test]
fn a_non_finite_value_on_disk_names_its_row_and_column() {
    let d = tempfile::tempdir().unwrap();
    let mut x = values(3000, 4, 2);
    x[2500 * 4 + 2] = f64::INFINITY;
    write_f32_npy(&d.path().join("sub-01_run-1_bold.npy"), 3000, 4, &x);
    let e = Dataset::load(d.path()).unwrap_err().to_string();
    assert!(e.ends_with("sub-01_run-1_bold.npy, row 2500, column 3: non-finite value inf"), "{e}");
}
