//! The subject-level split: explicit lists (flags, @files, config), a seeded fraction, the
//! `val_subjects` fallback, and the errors; the per-epoch order.

use crate::common;
use boldcast::data::{parse_subject_list, split, Dataset};
use boldcast::fixtures::{Ar1Spec, Layout};
use boldcast_train::order::epoch_order;
use common::*;

fn dataset(subjects: usize, runs: usize) -> Dataset {
    let fx = Ar1Spec::new(Layout { subjects, runs, trs: 40, parcels: 3, seed: 1 }, 0.5);
    Dataset::from_synth(&fx.generate().unwrap(), None).unwrap()
}

#[test]
fn lists_fractions_and_the_fallback() {
    let ds = dataset(5, 2);
    let mut d = boldcast_train::presets::preset("quick").unwrap().data;
    // Fallback: the last val_subjects.
    d.val_subjects = 2;
    let s = split(&ds, &d, 0).unwrap();
    assert_eq!(
        (s.train_subjects.clone(), s.heldout_subjects.clone()),
        (vec!["01".into(), "02".into(), "03".into()], vec!["04".to_string(), "05".into()])
    );
    assert_eq!(
        (s.train_runs.clone(), s.heldout_runs.clone()),
        ((0..6).collect::<Vec<_>>(), (6..10).collect::<Vec<_>>())
    );
    // Held-out list only: everyone else trains.
    d.subjects_heldout = vec!["sub-02".into()];
    let s = split(&ds, &d, 0).unwrap();
    assert_eq!(s.heldout_subjects, ["02"]);
    assert_eq!(s.train_subjects, ["01", "03", "04", "05"]);
    assert_eq!(s.heldout_runs, [2, 3]);
    // Both lists: the rest is unused.
    d.subjects_train = vec!["01".into(), "05".into()];
    let s = split(&ds, &d, 0).unwrap();
    assert_eq!((s.train_runs.clone(), s.heldout_runs.clone()), (vec![0, 1, 8, 9], vec![2, 3]));
    // A subject in both, or one the data lacks, is an error naming it.
    d.subjects_train = vec!["02".into()];
    let e = split(&ds, &d, 0).unwrap_err().to_string();
    assert!(e.contains("subject `sub-02` is in both data.subjects_train and data.subjects_heldout"), "{e}");
    d.subjects_train = vec!["09".into()];
    let e = split(&ds, &d, 0).unwrap_err().to_string();
    assert!(e.contains("data.subjects_train: subject `sub-09` is not in the data (subjects: sub-01, sub-02"), "{e}");
    // A seeded fraction: deterministic per seed, 40 % of 5 = 2 subjects.
    d.subjects_train.clear();
    d.subjects_heldout.clear();
    d.heldout_fraction = 0.4;
    let a = split(&ds, &d, 7).unwrap();
    assert_eq!(a.heldout_subjects.len(), 2);
    assert_eq!(a, split(&ds, &d, 7).unwrap());
    let seeds: std::collections::BTreeSet<Vec<String>> =
        (0..20).map(|s| split(&ds, &d, s).unwrap().heldout_subjects).collect();
    assert!(seeds.len() > 3, "the seed changes the draw: {seeds:?}");
    // No room for a split.
    d.heldout_fraction = 0.0;
    d.val_subjects = 5;
    assert!(split(&ds, &d, 0).unwrap_err().to_string().contains("data.val_subjects = 5"));
}

#[test]
fn subject_lists_from_flags_and_files() {
    assert_eq!(parse_subject_list("01,sub-02, 3").unwrap(), ["01", "02", "3"]);
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("heldout.txt");
    std::fs::write(&f, "# held out\nsub-04\n05 06,07\n").unwrap();
    assert_eq!(parse_subject_list(&format!("@{}", f.display())).unwrap(), ["04", "05", "06", "07"]);
    assert!(parse_subject_list("01,sub-0/2").unwrap_err().to_string().contains("`sub-0/2` is not a subject label"));
    assert!(parse_subject_list(&format!("@{}", d.path().join("missing").display())).is_err());
}

#[test]
fn the_binary_rejects_a_subject_in_both_lists_and_uses_a_list_file() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("r");
    let o = quick("train", &out, &["--subjects-train", "01,02,03", "--subjects-heldout", "sub-03"]);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o).1;
    assert!(
        e.contains("invalid data.subjects_heldout") && e.contains("subject `sub-03` is also in data.subjects_train"),
        "{e}"
    );
    assert!(!out.exists(), "nothing written on a configuration error");
    let f = d.path().join("train.txt");
    std::fs::write(&f, "sub-01\nsub-03\n").unwrap();
    let o = quick(
        "train",
        &out,
        &["--subjects-train", &format!("@{}", f.display()), "--subjects-heldout", "02", "--max-steps", "4"],
    );
    let (stdout, stderr) = text(&o);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{stdout}{stderr}");
    assert!(stdout.contains("train [\"01\", \"03\"]") && stdout.contains("held out [\"02\"]"), "{stdout}");
    let resolved = std::fs::read_to_string(out.join("config.resolved.toml")).unwrap();
    assert!(resolved.contains("subjects_heldout = [\"02\"]"), "{resolved}");
}

#[test]
fn the_epoch_order_is_a_seeded_permutation_that_changes_every_epoch() {
    let (o0, r0) = epoch_order(40, 3, 0, true);
    let (o1, r1) = epoch_order(40, 3, 1, true);
    let mut sorted = o0.clone();
    sorted.sort();
    assert_eq!(sorted, (0..40).collect::<Vec<_>>());
    assert_ne!(o0, o1);
    assert_ne!(o0, (0..40).collect::<Vec<_>>());
    assert_eq!((o0.clone(), r0.clone()), epoch_order(40, 3, 0, true), "a pure function of (seed, epoch)");
    assert_ne!(o0, epoch_order(40, 4, 0, true).0);
    assert_eq!((r0.stream + 1, r0.word_pos.clone()), (r1.stream, r1.word_pos));
    assert_eq!(epoch_order(5, 3, 2, false).0, [0, 1, 2, 3, 4]);
}

#[test]
fn runs_without_parcels_are_an_error_naming_the_file() {
    let d = tempfile::tempdir().unwrap();
    let data = zero_parcel_data(d.path(), 300);
    // Without spatial attention, so that nothing else refuses 0 parcels first.
    let cfg = write_file(d.path(), "k0.toml", "[model]\nk_neighbors = 0\n");
    let out = d.path().join("r");
    let o = run(&["train", "--preset", "quick", "--config", s(&cfg), "--data", s(&data), "--out", s(&out)]);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o).1;
    assert!(e.starts_with("error: ") && e.contains("sub-01_run-1_bold.npy") && e.contains("no parcels"), "{e}");
    assert!(!e.contains('{') && !e.contains("TokenShape"), "a sentence, not a Debug struct: {e}");
    assert!(!out.exists(), "nothing written");
}

#[test]
fn the_group_column_keeps_families_on_one_side_in_train_and_eval() {
    use boldcast::data::write::{write_run, RunFormat};
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let fx = Ar1Spec::new(Layout { subjects: 5, runs: 1, trs: 200, parcels: 3, seed: 1 }, 0.5);
    for r in fx.generate().unwrap() {
        let path = data.join(format!("sub-{}_run-{}_bold.npy", r.subject, r.run));
        write_run(&path, &r, &boldcast::fixtures::parcel_names(3), RunFormat::Npy).unwrap();
    }
    // Twins 01 and 02, siblings 03 and 05, 04 alone.
    let table = "participant_id\tfamily_id\nsub-01\tF1\nsub-02\tF1\nsub-03\tF2\nsub-04\tF3\nsub-05\tF2\n";
    std::fs::write(data.join("participants.tsv"), table).unwrap();
    let train = |out: &str, extra: &[&str]| {
        let out = d.path().join(out);
        let mut args = vec!["train", "--preset", "quick", "--max-steps", "4", "--data", data.to_str().unwrap()];
        args.extend_from_slice(&["--out", out.to_str().unwrap(), "--group-column"]);
        args.extend_from_slice(extra);
        run(&args)
    };
    let o = train("split", &["family_id", "--subjects-heldout", "02"]);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o).1;
    assert!(e.contains("family_id `F1` would straddle the split: sub-01 trained on, sub-02 held out"), "{e}");
    let o = train("column", &["family", "--subjects-heldout", "02"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("no column `family` (columns: participant_id, family_id)"), "{}", text(&o).1);
    let o = train("ok", &["family_id", "--subjects-train", "03,04", "--subjects-heldout", "01,02"]);
    let (stdout, stderr) = text(&o);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{stdout}{stderr}");
    assert!(stdout.contains("held out [\"01\", \"02\"]"), "{stdout}");
    let resolved = std::fs::read_to_string(d.path().join("ok/config.resolved.toml")).unwrap();
    assert!(resolved.contains("group_column = \"family_id\""), "{resolved}");
    // Scoring 05 would test on the sibling of 03, a training subject.
    let ok = d.path().join("ok");
    let o = run(&["eval", "--checkpoint", ok.to_str().unwrap(), "--test-subjects", "05"]);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o).1;
    assert!(e.contains("family_id `F2` would straddle the split: sub-03 trained on, sub-05 held out"), "{e}");
}
