//! BIDS run names: the entities of a run file's name ([`RunId`]) and [`parse_run_name`], the one
//! place the pattern `sub-<label>[_ses-<label>][_<key>-<value>...]_run-<label>[_<anything>].<ext>`
//! is decided.

use std::fmt;

/// The BIDS entities that identify a run.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId {
    /// `sub-` label.
    pub subject: String,
    /// `ses-` label, if any.
    pub session: Option<String>,
    /// Other `key-value` entities between `ses` and `run`, in file order (e.g. `task-rest`).
    pub other: Vec<String>,
    /// `run-` label.
    pub run: String,
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sub-{}", self.subject)?;
        if let Some(s) = &self.session {
            write!(f, "_ses-{s}")?;
        }
        for o in &self.other {
            write!(f, "_{o}")?;
        }
        write!(f, "_run-{}", self.run)
    }
}

/// The run a file name stands for, or `None` when it does not follow the pattern.
pub fn parse_run_name(file_name: &str) -> Option<(RunId, &'static str)> {
    let (stem, ext) = file_name.rsplit_once('.')?;
    let ext = match ext {
        "npy" => "npy",
        "tsv" => "tsv",
        "csv" => "csv",
        _ => return None,
    };
    let label = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric());
    let mut parts = stem.split('_');
    let subject = parts.next()?.strip_prefix("sub-").filter(|l| label(l))?.to_string();
    let mut session = None;
    let mut other = Vec::new();
    for (i, part) in parts.by_ref().enumerate() {
        if let Some(r) = part.strip_prefix("run-") {
            return label(r).then(|| (RunId { subject, session, other, run: r.to_string() }, ext));
        }
        if let Some(s) = part.strip_prefix("ses-") {
            if i != 0 || !label(s) {
                return None;
            }
            session = Some(s.to_string());
            continue;
        }
        let (k, v) = part.split_once('-')?;
        if !label(k) || !label(v) {
            return None;
        }
        other.push(part.to_string());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_names_follow_bids() {
        let (id, ext) = parse_run_name("sub-01_ses-A_task-rest_run-2_space-MNI_timeseries.tsv").unwrap();
        assert_eq!(ext, "tsv");
        assert_eq!(id.subject, "01");
        assert_eq!(id.session.as_deref(), Some("A"));
        assert_eq!(id.other, vec!["task-rest".to_string()]);
        assert_eq!(id.run, "2");
        assert_eq!(id.to_string(), "sub-01_ses-A_task-rest_run-2");
        assert!(parse_run_name("sub-01_run-1.npy").is_some());
        assert!(parse_run_name("sub-01_bold.npy").is_none(), "no run entity");
        assert!(parse_run_name("sub-01_run-1.txt").is_none());
        assert!(parse_run_name("sub-0_1_run-1.npy").is_none());
        assert!(parse_run_name("ses-1_sub-01_run-1.npy").is_none());
        assert!(parse_run_name("sub-01_run-.npy").is_none());
    }
}
