//! The subject split, the one of `train`, `eval` and the tests: which subjects are trained on
//! and which are held out for validation. No subject is ever in both, and both sides have at
//! least one subject.
//!
//! Decided in this order (the keys of `[data]`, [`DataConfig`]):
//!
//! 1. `subjects_train` / `subjects_heldout`: explicit labels (`01` or `sub-01`). With one list
//!    only, the other is every remaining subject; with both, subjects in neither are unused.
//!    A label the data lacks, or one in both lists, is an error naming it;
//! 2. else `heldout_fraction > 0`: `round(fraction * subjects)` subjects (at least one, and at
//!    least one left for training), drawn by a ChaCha8 shuffle seeded with `train.seed`;
//! 3. else the last `val_subjects` subjects in sorted order: at least one, and at least one
//!    left for training (`val_subjects = 0` is an error: training needs held-out subjects).
//!
//! With `group_column` set, related subjects (the same value in that column of the data
//! directory's `participants.tsv`) stay on one side ([`crate::groups`]): explicit lists that
//! split a group are an error naming it; rules 2 and 3 hold out the whole group of each
//! subject they pick (so they may hold out more subjects than asked; the split says which).
//!
//! On the command line, `--subjects-train` and `--subjects-heldout` take a comma-separated
//! list or `@FILE`, a file of labels separated by whitespace, commas or newlines (`#` starts a
//! comment), see [`parse_subject_list`].

use crate::config::DataConfig;
use crate::dataset::Dataset;
use crate::error::SplitError;
use crate::groups::{keep_together, GroupRule};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The split of a dataset's runs by subject.
#[derive(Clone, Debug, PartialEq)]
pub struct Split {
    /// Subjects trained on (sorted, without `sub-`).
    pub train_subjects: Vec<String>,
    /// Subjects held out (sorted, without `sub-`).
    pub heldout_subjects: Vec<String>,
    /// Indices of the training runs in [`Dataset::runs`].
    pub train_runs: Vec<usize>,
    /// Indices of the held-out runs.
    pub heldout_runs: Vec<usize>,
    /// How the split was decided, in words.
    pub how: String,
}

fn bare(s: &str) -> String {
    s.trim().strip_prefix("sub-").unwrap_or(s.trim()).to_string()
}

/// Subject labels from a flag value: `01,02,sub-03`, or `@FILE` with labels separated by
/// whitespace, commas or newlines (`#` starts a comment). The `sub-` prefix is dropped.
pub fn parse_subject_list(arg: &str) -> Result<Vec<String>, SplitError> {
    let text = match arg.strip_prefix('@') {
        Some(path) => {
            std::fs::read_to_string(path).map_err(|source| SplitError::ListFile { path: path.into(), source })?
        }
        None => arg.to_string(),
    };
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        for tok in line.split(|c: char| c == ',' || c.is_whitespace()).filter(|t| !t.is_empty()) {
            let label = bare(tok);
            if label.is_empty() || !label.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Err(SplitError::NotALabel { list: arg.to_string(), token: tok.to_string() });
            }
            out.push(label);
        }
    }
    if out.is_empty() {
        return Err(SplitError::EmptyList { list: arg.to_string() });
    }
    Ok(out)
}

/// Subject labels as a flag or a library caller gives them: `01,02,sub-03` or `@FILE`
/// ([`parse_subject_list`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubjectList(pub Vec<String>);

impl std::str::FromStr for SubjectList {
    type Err = SplitError;
    fn from_str(s: &str) -> Result<Self, SplitError> {
        parse_subject_list(s).map(SubjectList)
    }
}

/// A shuffle of `0..n` by Fisher-Yates from the back, drawing `j` in `0..=i` as
/// `(next_u64 * (i + 1)) >> 64`: defined here, not by a library's version, so orders stay the
/// same across upgrades.
pub fn shuffle_indices(n: usize, rng: &mut ChaCha8Rng) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = ((rng.next_u64() as u128 * (i as u128 + 1)) >> 64) as usize;
        v.swap(i, j);
    }
    v
}

/// Splits `ds` by subject as `[data]` says (see the module documentation); `seed` is
/// `train.seed`, used by `heldout_fraction` only.
pub fn split(ds: &Dataset, data: &DataConfig, seed: u64) -> Result<Split, SplitError> {
    let subjects = ds.subjects();
    let check = |field: &'static str, list: &[String]| -> Result<Vec<String>, SplitError> {
        let mut out: Vec<String> = Vec::new();
        for l in list {
            let b = bare(l);
            if !subjects.contains(&b) {
                return Err(SplitError::UnknownSubject { field, subject: b, subjects: subjects.clone() });
            }
            if out.contains(&b) {
                return Err(SplitError::ListedTwice { field, subject: b });
            }
            out.push(b);
        }
        Ok(out)
    };
    let tr = check("data.subjects_train", &data.subjects_train)?;
    let ho = check("data.subjects_heldout", &data.subjects_heldout)?;
    if let Some(b) = tr.iter().find(|s| ho.contains(s)) {
        return Err(SplitError::InBothLists { subject: b.clone() });
    }
    let n = subjects.len();
    let explicit = !tr.is_empty() || !ho.is_empty();
    let (mut train, mut held, how) = if explicit {
        let train: Vec<String> =
            if tr.is_empty() { subjects.iter().filter(|s| !ho.contains(s)).cloned().collect() } else { tr };
        let held: Vec<String> =
            if ho.is_empty() { subjects.iter().filter(|s| !train.contains(s)).cloned().collect() } else { ho };
        (train, held, "explicit subject lists".to_string())
    } else if data.heldout_fraction > 0.0 {
        if n < 2 {
            return Err(SplitError::TooFewSubjects { heldout_fraction: data.heldout_fraction, subjects: n });
        }
        let k = ((data.heldout_fraction * n as f64).round() as usize).clamp(1, n - 1);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let order = shuffle_indices(n, &mut rng);
        let held: Vec<String> = order[..k].iter().map(|&i| subjects[i].clone()).collect();
        let train = subjects.iter().filter(|s| !held.contains(s)).cloned().collect();
        (train, held, format!("heldout_fraction {} (seed {seed}): {k} of {n} subjects", data.heldout_fraction))
    } else {
        let k = data.val_subjects;
        if k == 0 || k >= n {
            return Err(SplitError::ValSubjects { val_subjects: k, subjects: n });
        }
        let held = subjects[n - k..].to_vec();
        (subjects[..n - k].to_vec(), held, format!("the last {k} subject(s) in sorted order (data.val_subjects)"))
    };
    train.sort();
    held.sort();
    let how = match &data.group_column {
        Some(column) => {
            let dir = data.dir.as_deref().ok_or_else(|| SplitError::GroupsNeedDir { column: column.clone() })?;
            let moved = keep_together(&GroupRule { column, dir, explicit }, &subjects, &mut train, &mut held)?;
            match moved.as_slice() {
                [] => format!("{how}; {column} groups kept together"),
                m => format!("{how}; held out with their {column} group: sub-{}", m.join(", sub-")),
            }
        }
        None => how,
    };
    if train.is_empty() {
        return Err(SplitError::NoTrainSubject { subjects });
    }
    if held.is_empty() {
        return Err(SplitError::NoHeldoutSubject { subjects });
    }
    let runs_of = |set: &[String]| -> Vec<usize> {
        ds.runs.iter().enumerate().filter(|(_, r)| set.contains(&r.id.subject)).map(|(i, _)| i).collect()
    };
    Ok(Split {
        train_runs: runs_of(&train),
        heldout_runs: runs_of(&held),
        train_subjects: train,
        heldout_subjects: held,
        how,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SyntheticConfig;

    fn val_subjects(k: usize) -> DataConfig {
        DataConfig {
            val_subjects: k,
            ..DataConfig::new(SyntheticConfig { subjects: 3, runs: 2, trs: 10, parcels: 2, rho: 0.5, seed: 1 })
        }
    }

    #[test]
    fn subjects_split_keeps_runs_together() {
        use boldcast_fixtures::{Ar1Spec, Layout};
        let spec = Ar1Spec::new(Layout { subjects: 3, runs: 2, trs: 10, parcels: 2, seed: 1 }, 0.5);
        let ds = Dataset::from_synth(&spec.generate().unwrap(), None).unwrap();
        assert_eq!(ds.subjects(), ["01", "02", "03"]);
        let s = split(&ds, &val_subjects(1), 0).unwrap();
        assert_eq!((s.train_runs, s.heldout_runs), (vec![0, 1, 2, 3], vec![4, 5]));
        assert_eq!((s.train_subjects, s.heldout_subjects), (vec!["01".into(), "02".into()], vec!["03".to_string()]));
        // Training needs held-out subjects: no held-out subject is an error naming the key.
        let e = split(&ds, &val_subjects(0), 0).unwrap_err();
        assert!(matches!(e, SplitError::ValSubjects { val_subjects: 0, subjects: 3 }), "{e:?}");
        assert!(e.to_string().contains("data.val_subjects = 0: must hold out at least one of the 3 subjects"), "{e}");
        let e = split(&ds, &val_subjects(3), 0).unwrap_err().to_string();
        assert!(e.contains("data.val_subjects = 3: must hold out at least one of the 3 subjects and leave one"), "{e}");
    }

    #[test]
    fn errors_name_the_field_and_the_label() {
        let spec = boldcast_fixtures::Ar1Spec::new(
            boldcast_fixtures::Layout { subjects: 2, runs: 1, trs: 10, parcels: 2, seed: 1 },
            0.5,
        );
        let ds = Dataset::from_synth(&spec.generate().unwrap(), None).unwrap();
        let mut d = val_subjects(1);
        d.subjects_heldout = vec!["02".into(), "sub-02".into()];
        let e = split(&ds, &d, 0).unwrap_err();
        assert_eq!(e.to_string(), "data.subjects_heldout: subject `sub-02` is listed twice");
        d.subjects_heldout = vec!["01".into(), "02".into()];
        let e = split(&ds, &d, 0).unwrap_err();
        assert!(matches!(e, SplitError::NoTrainSubject { .. }), "{e:?}");
        assert_eq!(e.to_string(), "the split leaves no subject for training (subjects: sub-01, sub-02)");
        let e = parse_subject_list(" , ").unwrap_err();
        assert_eq!(e.to_string(), "subject list ` , ` names no subject");
        let one = boldcast_fixtures::Ar1Spec::new(
            boldcast_fixtures::Layout { subjects: 1, runs: 1, trs: 10, parcels: 2, seed: 1 },
            0.5,
        );
        let ds = Dataset::from_synth(&one.generate().unwrap(), None).unwrap();
        let mut d = val_subjects(1);
        d.heldout_fraction = 0.5;
        let e = split(&ds, &d, 0).unwrap_err().to_string();
        assert_eq!(e, "data.heldout_fraction = 0.5: the data has 1 subject, and a split needs at least 2");
    }

    /// Six subjects: twins 01 and 02 (F1), 03 alone (F2), siblings 04 and 05 (F3), 06 with no
    /// family recorded.
    const TWINS: &str = "participant_id\tage\tfamily_id\nsub-01\t22\tF1\nsub-02\t22\tF1\nsub-03\t30\tF2\n\
                         sub-04\t25\tF3\nsub-05\t27\tF3\nsub-06\t40\tn/a\n";

    fn six() -> Dataset {
        let spec = boldcast_fixtures::Ar1Spec::new(
            boldcast_fixtures::Layout { subjects: 6, runs: 1, trs: 10, parcels: 2, seed: 1 },
            0.5,
        );
        Dataset::from_synth(&spec.generate().unwrap(), None).unwrap()
    }

    fn grouped(dir: &std::path::Path, val: usize) -> DataConfig {
        DataConfig { dir: Some(dir.into()), group_column: Some("family_id".into()), ..val_subjects(val) }
    }

    #[test]
    fn families_never_straddle_the_split() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("participants.tsv"), TWINS).unwrap();
        let ds = six();
        // The last two subjects are 05 and 06; 05's sibling 04 goes with them.
        let s = split(&ds, &grouped(d.path(), 2), 0).unwrap();
        assert_eq!(
            (s.train_subjects, s.heldout_subjects),
            (vec!["01".into(), "02".into(), "03".into()], vec!["04".to_string(), "05".into(), "06".into()])
        );
        assert!(s.how.ends_with("held out with their family_id group: sub-04"), "{}", s.how);
        assert_eq!(s.heldout_runs, [3, 4, 5]);
        // Without the column, the same rule splits the siblings.
        let plain = split(&ds, &DataConfig { dir: Some(d.path().into()), ..val_subjects(2) }, 0).unwrap();
        assert_eq!(plain.heldout_subjects, ["05", "06"]);
        // A drawn fraction holds out whole families, whatever the seed.
        let mut frac = grouped(d.path(), 1);
        frac.heldout_fraction = 0.34;
        for seed in 0..20 {
            let s = split(&ds, &frac, seed).unwrap();
            for (a, b) in [("01", "02"), ("04", "05")] {
                let held = |x: &str| s.heldout_subjects.iter().any(|h| h == x);
                assert_eq!(held(a), held(b), "seed {seed}: {a} and {b} split: {:?}", s.heldout_subjects);
            }
        }
        // Explicit lists that keep families whole pass; one that splits the twins is an error
        // naming the family and both sides.
        let mut list = grouped(d.path(), 1);
        list.subjects_heldout = vec!["01".into(), "02".into(), "06".into()];
        assert_eq!(split(&ds, &list, 0).unwrap().train_subjects, ["03", "04", "05"]);
        list.subjects_heldout = vec!["02".into(), "03".into()];
        let e = split(&ds, &list, 0).unwrap_err();
        assert!(matches!(&e, SplitError::GroupSplit { group, .. } if group == "F1"), "{e:?}");
        assert_eq!(
            e.to_string(),
            "family_id `F1` would straddle the split: sub-01 trained on, sub-02 held out; related subjects must be \
             on one side (move them to one list)"
        );
        // Both lists given, the sibling in neither: unused, not straddling.
        list.subjects_train = vec!["01".into(), "02".into(), "04".into()];
        list.subjects_heldout = vec!["03".into(), "06".into()];
        assert_eq!(split(&ds, &list, 0).unwrap().heldout_subjects, ["03", "06"]);
    }

    #[test]
    fn a_missing_table_column_or_row_is_an_error_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let ds = six();
        let path = d.path().join("participants.tsv");
        let e = split(&ds, &grouped(d.path(), 1), 0).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{}: ", path.display())) && e.contains("needs the data's participants.tsv"),
            "{e}"
        );
        std::fs::write(&path, TWINS).unwrap();
        let mut other = grouped(d.path(), 1);
        other.group_column = Some("family".into());
        let e = split(&ds, &other, 0).unwrap_err().to_string();
        assert_eq!(e, format!("{}: no column `family` (columns: participant_id, age, family_id)", path.display()));
        std::fs::write(&path, TWINS.replace("sub-06\t40\tn/a\n", "")).unwrap();
        let e = split(&ds, &grouped(d.path(), 1), 0).unwrap_err().to_string();
        assert_eq!(e, format!("{}: no row for subject `sub-06`, so its group is unknown", path.display()));
        let synthetic = DataConfig { group_column: Some("family_id".into()), ..val_subjects(1) };
        let e = split(&ds, &synthetic, 0).unwrap_err().to_string();
        assert!(e.contains("data.group_column = `family_id`: the synthetic data has no participants.tsv"), "{e}");
    }
}
