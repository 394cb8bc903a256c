//! BIDS file names: the entities, suffix and extension of a name ([`BidsName`],
//! [`parse_bids_name`]), the identity of a run ([`RunId`]) and [`parse_run_name`], the one place
//! the pattern `sub-<label>[_ses-<label>][_<key>-<value>...][_run-<label>][_<key>-<value>...][_<suffix>].<ext>`
//! is decided.
//!
//! A run's identity is its subject, session, run (`1` when the name has no `run` entity, as
//! BIDS allows for a single run) and the acquisition entities (`task`, `acq`, `ce`, `dir`,
//! `rec`, `echo`, ...) in file order. The derivative entities ([`VARIANT_KEYS`]: `space`,
//! `seg`/`atlas`, `res`, `den`, `desc`, `stat`, `hemi`, `label`) say which version of the run a
//! file holds, not which run: one tree can hold the same run in several parcellations, and
//! the loader picks one ([`crate::Selection`]). Before the `run` entity the name must be
//! entities only; after it, entities, then at most one suffix, and (for names that predate
//! this reader, `sub-01_run-1_my-notes.npy`) anything else is ignored.

use std::fmt;

/// The derivative entities: which version of a run a file holds (kept in [`BidsName`], not in
/// [`RunId`]).
pub const VARIANT_KEYS: [&str; 9] = ["space", "seg", "atlas", "res", "den", "desc", "stat", "hemi", "label"];

/// The data extensions a run file may have (a compound one such as `ptseries.nii` before any
/// it ends with).
pub const RUN_EXTENSIONS: [&str; 7] = ["ptseries.nii", "dtseries.nii", "nii.gz", "nii", "npy", "tsv", "csv"];

/// The BIDS entities that identify a run.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId {
    /// `sub-` label.
    pub subject: String,
    /// `ses-` label, if any.
    pub session: Option<String>,
    /// The acquisition entities other than `sub`, `ses` and `run`, in file order (e.g.
    /// `task-rest`).
    pub other: Vec<String>,
    /// `run-` label (`1` when the name has none).
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

impl RunId {
    /// The identity with the run index as a number without leading zeros (`run-01` is
    /// `run-1`): two files whose normalized identities agree are the same run.
    pub fn normalized(&self) -> RunId {
        let run = self.run.trim_start_matches('0');
        RunId { run: if run.is_empty() { "0".into() } else { run.into() }, ..self.clone() }
    }

    /// The value of the acquisition entity `key` (e.g. `task`), if the name has it.
    pub fn entity(&self, key: &str) -> Option<&str> {
        self.other.iter().find_map(|kv| kv.strip_prefix(key).and_then(|r| r.strip_prefix('-')))
    }
}

/// A parsed BIDS file name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BidsName {
    /// Every `key-value` entity in file order, `sub` first.
    pub entities: Vec<(String, String)>,
    /// The suffix (`bold`, `timeseries`, `motion`, ...), if any.
    pub suffix: Option<String>,
    /// The extension without its first dot (`npy`, `ptseries.nii`, `json`, ...).
    pub ext: String,
}

impl BidsName {
    /// The value of entity `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entities.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The parcellation: the `seg` entity, or `atlas` (the older XCP-D spelling).
    pub fn seg(&self) -> Option<&str> {
        self.get("seg").or_else(|| self.get("atlas"))
    }

    /// The run this name stands for.
    pub fn run_id(&self) -> RunId {
        let mut id = RunId { subject: String::new(), session: None, other: Vec::new(), run: "1".into() };
        for (k, v) in &self.entities {
            match k.as_str() {
                "sub" => id.subject = v.clone(),
                "ses" => id.session = Some(v.clone()),
                "run" => id.run = v.clone(),
                k if VARIANT_KEYS.contains(&k) => {}
                _ => id.other.push(format!("{k}-{v}")),
            }
        }
        id
    }
}

fn label(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric())
}

/// The extension of `name` among `known` (longest first) or, when none matches, the text after
/// the last dot; and the stem before it.
fn split_ext<'a>(name: &'a str, known: &[&str]) -> Option<(&'a str, String)> {
    for k in known {
        if let Some(stem) = name.strip_suffix(k).and_then(|s| s.strip_suffix('.')) {
            return Some((stem, (*k).to_string()));
        }
    }
    let (stem, ext) = name.split_once('.')?;
    Some((stem, ext.to_string()))
}

/// The entities, suffix and extension of a BIDS file name, or `None` when it does not start
/// with `sub-<label>`, `ses` is not second, a part before `run` is not an entity, the run
/// index is not a number, or an entity repeats.
pub fn parse_bids_name(file_name: &str) -> Option<BidsName> {
    let (stem, ext) = split_ext(file_name, &RUN_EXTENSIONS)?;
    let mut entities: Vec<(String, String)> = Vec::new();
    let mut suffix = None;
    let parts: Vec<&str> = stem.split('_').collect();
    let mut after_run = false;
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        match part.split_once('-') {
            Some((k, v)) if label(k) && label(v) => {
                let ok = match k {
                    "sub" => i == 0,
                    "ses" => i == 1,
                    // BIDS: the run index is a non-negative integer.
                    "run" => i > 0 && v.bytes().all(|b| b.is_ascii_digit()),
                    _ => i > 0,
                };
                if !ok || entities.iter().any(|(e, _)| e == k) {
                    return None;
                }
                after_run |= k == "run";
                entities.push((k.to_string(), v.to_string()));
            }
            _ if i == 0 => return None,
            _ if last && label(part) => suffix = Some(part.to_string()),
            // Before `run`, only entities; after it, the rest of an older name is free text.
            _ if after_run => break,
            _ => return None,
        }
    }
    Some(BidsName { entities, suffix, ext })
}

/// The entities and suffix of a JSON sidecar's name, which (inherited from a directory above)
/// need not start with `sub`: `task-rest_bold.json`, `sub-01_task-rest_bold.json`.
pub fn parse_sidecar_name(file_name: &str) -> Option<BidsName> {
    let stem = file_name.strip_suffix(".json")?;
    let parts: Vec<&str> = stem.split('_').collect();
    let (last, init) = parts.split_last()?;
    let mut entities: Vec<(String, String)> = Vec::new();
    for part in init {
        let (k, v) = part.split_once('-').filter(|(k, v)| label(k) && label(v))?;
        if entities.iter().any(|(e, _)| e == k) {
            return None;
        }
        entities.push((k.to_string(), v.to_string()));
    }
    label(last).then(|| BidsName { entities, suffix: Some(last.to_string()), ext: "json".into() })
}

/// The run a file name stands for and its data extension (`ptseries.nii`, `dtseries.nii`,
/// `npy`, `tsv` or `csv`, in lowercase), or `None` when it does not follow the
/// pattern or has another extension.
pub fn parse_run_name(file_name: &str) -> Option<(RunId, &'static str)> {
    let name = parse_bids_name(file_name)?;
    let ext = RUN_EXTENSIONS.into_iter().find(|e| *e == name.ext)?;
    Some((name.run_id(), ext))
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
        assert_eq!(id.entity("task"), Some("rest"));
        assert!(parse_run_name("sub-01_run-1.npy").is_some());
        assert!(parse_run_name("sub-01_run-1.txt").is_none());
        assert!(parse_run_name("sub-0_1_run-1.npy").is_none());
        assert!(parse_run_name("ses-1_sub-01_run-1.npy").is_none());
        assert!(parse_run_name("sub-01_run-.npy").is_none());
        assert!(parse_run_name("sub-01_task-rest_ses-1_run-1.npy").is_none(), "ses second");
        assert!(parse_run_name("sub-01_run-1_run-2.npy").is_none(), "an entity twice");
        // After the run entity, an older name's free text is ignored.
        assert_eq!(parse_run_name("sub-01_run-1_my-notes.v2_bold.npy").unwrap().0.to_string(), "sub-01_run-1");
    }

    #[test]
    fn a_name_without_a_run_entity_is_run_one() {
        let (id, _) = parse_run_name("sub-01_bold.npy").unwrap();
        assert_eq!(id.to_string(), "sub-01_run-1");
        let n = "sub-01_ses-1_task-rest_space-fsLR_seg-4S156Parcels_stat-mean_timeseries.tsv";
        let b = parse_bids_name(n).unwrap();
        assert_eq!(b.suffix.as_deref(), Some("timeseries"));
        assert_eq!((b.get("space"), b.seg(), b.get("stat")), (Some("fsLR"), Some("4S156Parcels"), Some("mean")));
        assert_eq!(b.run_id().to_string(), "sub-01_ses-1_task-rest_run-1");
        // The older spelling, and a CIFTI extension.
        let b =
            parse_bids_name("sub-02_task-rest_run-3_space-fsLR_atlas-Glasser_den-91k_timeseries.ptseries.nii").unwrap();
        assert_eq!((b.ext.as_str(), b.seg(), b.get("den")), ("ptseries.nii", Some("Glasser"), Some("91k")));
        assert_eq!(b.run_id().to_string(), "sub-02_task-rest_run-3");
        // Not BIDS before a run entity.
        assert!(parse_run_name("sub-01_my-notes.v2_bold.npy").is_none());
        assert!(parse_run_name("sub-01_bold_extra.npy").is_none());
        let j = parse_bids_name("sub-01_task-rest_bold.json").unwrap();
        assert_eq!((j.ext.as_str(), j.suffix.as_deref()), ("json", Some("bold")));
        assert!(parse_bids_name("task-rest_bold.json").is_none(), "not a subject's file");
        let s = parse_sidecar_name("task-rest_bold.json").unwrap();
        assert_eq!((s.get("task"), s.suffix.as_deref()), (Some("rest"), Some("bold")));
        assert!(parse_sidecar_name("task-rest_x-_bold.json").is_none());
    }
}
