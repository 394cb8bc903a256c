//! The filtered-input check where the data are loaded (`load_data`): a dataset of slow
//! series (nothing above a tenth of Nyquist) is measured as filtered, with the cutoff in Hz
//! from its sidecar's TR and the warning among the notes; the synthetic fixture is not.

use boldcast_data::spectrum::SpectrumVerdict;
use boldcast_train::config::RunConfig;
use boldcast_train::data::{load_data, TrainData};

fn quick() -> RunConfig {
    boldcast_train::presets::preset("quick").unwrap()
}

/// Sums of sines below 0.05 cycles per TR (0.1 of Nyquist), a phase per parcel and subject.
fn slow_run(subject: usize) -> String {
    let mut text = "a\tb\tc\n".to_string();
    for t in 0..256 {
        let row: Vec<String> = (0..3)
            .map(|p| {
                let x: f64 = (1..=5)
                    .map(|j| (2.0 * std::f64::consts::PI * 0.01 * j as f64 * t as f64 + (p + subject * j) as f64).sin())
                    .sum();
                format!("{x:.6}")
            })
            .collect();
        text += &(row.join("\t") + "\n");
    }
    text
}

#[test]
fn slow_runs_warn_and_the_fixture_does_not() {
    let d = tempfile::tempdir().unwrap();
    for s in 1..=4 {
        std::fs::write(d.path().join(format!("sub-0{s}_run-1_bold.tsv")), slow_run(s)).unwrap();
    }
    std::fs::write(d.path().join("bold.json"), "{\"RepetitionTime\": 2.0}").unwrap();
    let mut cfg = quick();
    cfg.data.dir = Some(d.path().to_path_buf());
    let loaded = load_data(&cfg).unwrap();
    let s = &loaded.spectrum;
    assert_eq!((s.verdict, s.runs.len()), (SpectrumVerdict::LooksFiltered, 4));
    let c = s.median_cutoff_nyquist.unwrap();
    assert!(c > 0.09 && c < 0.15, "cutoff {c} of Nyquist");
    assert_eq!(s.median_cutoff_hz, Some(c * 0.25), "TR 2 s: Nyquist 0.25 Hz");
    let warned: Vec<&String> = loaded.notes.iter().filter(|n| n.contains("looks low-pass or band-pass")).collect();
    assert_eq!(warned.len(), 1, "{:?}", loaded.notes);
    assert!(warned[0].contains("leaks the future into the past"));
    // It travels to the training data (and from there to summary.json).
    let split = boldcast_data::split(&loaded.ds, &cfg.data, 0).unwrap();
    let td = TrainData::new(loaded, split, &cfg).unwrap();
    assert!(td.spectrum.looks_filtered());
    assert_eq!(td.notes.iter().filter(|n| n.contains("looks low-pass")).count(), 1);

    let fixture = load_data(&quick()).unwrap();
    assert_eq!(fixture.spectrum.verdict, SpectrumVerdict::NotFiltered);
    assert!(fixture.notes.iter().all(|n| !n.contains("looks low-pass")));
}
