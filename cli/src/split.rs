//! The subject-level split of `train` and `eval`: which subjects are trained on and which are
//! held out for validation. No subject is ever in both.
//!
//! Decided in this order (the keys of `[data]`):
//!
//! 1. `subjects_train` / `subjects_heldout`: explicit labels (`01` or `sub-01`). With one list
//!    only, the other is every remaining subject; with both, subjects in neither are unused.
//!    A label the data lacks, or one in both lists, is an error naming it;
//! 2. else `heldout_fraction > 0`: `round(fraction * subjects)` subjects (at least one, and at
//!    least one left for training), drawn by a ChaCha8 shuffle seeded with `train.seed`;
//! 3. else the last `val_subjects` subjects in sorted order (at least one).
//!
//! On the command line, `--subjects-train` and `--subjects-heldout` take a comma-separated
//! list or `@FILE`, a file of labels separated by whitespace, commas or newlines (`#` starts a
//! comment), see [`parse_subject_list`].

use crate::error::CliError;
use boldcast::config::DataConfig;
use boldcast::data::Dataset;
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
pub fn parse_subject_list(arg: &str) -> Result<Vec<String>, CliError> {
    let text = match arg.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).map_err(CliError::io(path))?,
        None => arg.to_string(),
    };
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        for tok in line.split(|c: char| c == ',' || c.is_whitespace()).filter(|t| !t.is_empty()) {
            let label = bare(tok);
            if label.is_empty() || !label.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Err(CliError::Msg(format!(
                    "subject list `{arg}`: `{tok}` is not a subject label (letters and digits, optionally after sub-)"
                )));
            }
            out.push(label);
        }
    }
    if out.is_empty() {
        return Err(CliError::Msg(format!("subject list `{arg}` names no subject")));
    }
    Ok(out)
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

/// Splits `ds` by subject as `[data]` says (see the module documentation).
pub fn split(ds: &Dataset, data: &DataConfig, seed: u64) -> Result<Split, CliError> {
    let subjects = ds.subjects();
    let known = || subjects.iter().map(|s| format!("sub-{s}")).collect::<Vec<_>>().join(", ");
    let check = |field: &str, list: &[String]| -> Result<Vec<String>, CliError> {
        let mut out: Vec<String> = Vec::new();
        for l in list {
            let b = bare(l);
            if !subjects.contains(&b) {
                return Err(CliError::Msg(format!(
                    "{field}: subject `sub-{b}` is not in the data (subjects: {})",
                    known()
                )));
            }
            if out.contains(&b) {
                return Err(CliError::Msg(format!("{field}: subject `sub-{b}` is listed twice")));
            }
            out.push(b);
        }
        Ok(out)
    };
    let tr = check("data.subjects_train", &data.subjects_train)?;
    let ho = check("data.subjects_heldout", &data.subjects_heldout)?;
    if let Some(b) = tr.iter().find(|s| ho.contains(s)) {
        return Err(CliError::Msg(format!(
            "subject `sub-{b}` is in both data.subjects_train and data.subjects_heldout: a subject is either \
             trained on or held out"
        )));
    }
    let n = subjects.len();
    let (mut train, mut held, how) = if !tr.is_empty() || !ho.is_empty() {
        let train: Vec<String> =
            if tr.is_empty() { subjects.iter().filter(|s| !ho.contains(s)).cloned().collect() } else { tr };
        let held: Vec<String> =
            if ho.is_empty() { subjects.iter().filter(|s| !train.contains(s)).cloned().collect() } else { ho };
        (train, held, "explicit subject lists".to_string())
    } else if data.heldout_fraction > 0.0 {
        if n < 2 {
            return Err(CliError::Msg(format!(
                "data.heldout_fraction = {}: the data has {n} subject, and a split needs at least 2",
                data.heldout_fraction
            )));
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
            return Err(CliError::Msg(format!(
                "data.val_subjects = {k}: must hold out at least one of the {n} subjects and leave one for training \
                 (or set data.subjects_heldout / data.heldout_fraction)"
            )));
        }
        let held = subjects[n - k..].to_vec();
        (subjects[..n - k].to_vec(), held, format!("the last {k} subject(s) in sorted order (data.val_subjects)"))
    };
    train.sort();
    held.sort();
    if train.is_empty() {
        return Err(CliError::Msg(format!("the split leaves no subject for training (subjects: {})", known())));
    }
    if held.is_empty() {
        return Err(CliError::Msg(format!("the split holds out no subject for validation (subjects: {})", known())));
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
