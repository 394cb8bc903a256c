//! Related subjects in fingerprinting ([`Relatives`]): the family rule.
//!
//! A twin's or sibling's run resembles a subject's own more than a stranger's does, so when
//! a query's best match is a relative's run, counting it a miss penalises the method for
//! seeing shared biology, and leaving it among the impostors lowers the margins and `I_diff`
//! for the same reason. With a group column of `participants.tsv` (HCP's `family_id`, the
//! split's `data.group_column`), the samples of a query's relatives are left out of its
//! gallery, of its margin's impostors and of `I_diff`'s other-subject pairs; the report
//! counts the pairs left out. Without one every other subject is a stranger.
//!
//! ```
//! use boldcast_analysis::fingerprint::Relatives;
//! use std::collections::BTreeMap;
//! let groups = BTreeMap::from([("01".into(), "F1".into()), ("02".into(), "F1".into()), ("03".into(), "F2".into())]);
//! let kin = Relatives::from_groups("family_id", groups);
//! assert!(kin.related("01", "02") && !kin.related("01", "03") && !kin.related("01", "01"));
//! assert!(!Relatives::none().related("01", "02"));
//! ```

use crate::AnalysisError;
use boldcast_data::groups::{read_groups, PARTICIPANTS};
use boldcast_data::SplitError;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// Which subjects are related: each subject's group in one column of `participants.tsv`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Relatives {
    /// The group column (`null`: none).
    column: Option<String>,
    /// Each subject (without `sub-`) and its group.
    groups: BTreeMap<String, String>,
}

impl Relatives {
    /// No group column: no subject is related to another.
    pub fn none() -> Self {
        Self::default()
    }

    /// The groups of `column`: subject (without `sub-`) to group.
    pub fn from_groups(column: &str, groups: BTreeMap<String, String>) -> Self {
        Self { column: Some(column.to_string()), groups }
    }

    /// The groups in `column` of `dir/participants.tsv`
    /// ([`boldcast_data::groups::read_groups`]; a subject with no value is its own group).
    pub fn read(dir: &Path, column: &str) -> Result<Self, AnalysisError> {
        Ok(Self::from_groups(column, read_groups(dir, column)?))
    }

    /// The group column, when there is one.
    pub fn column(&self) -> Option<&str> {
        self.column.as_deref()
    }

    /// Whether `a` and `b` are different subjects of one group.
    pub fn related(&self, a: &str, b: &str) -> bool {
        a != b && matches!((self.groups.get(a), self.groups.get(b)), (Some(x), Some(y)) if x == y)
    }

    /// Each subject of `subjects` has a row (with a group column); `dir` names the file in
    /// the error.
    pub fn check(&self, subjects: &[String], dir: &Path) -> Result<(), AnalysisError> {
        match subjects.iter().find(|s| self.column.is_some() && !self.groups.contains_key(*s)) {
            Some(s) => Err(SplitError::NoParticipantRow { path: dir.join(PARTICIPANTS), subject: s.clone() }.into()),
            None => Ok(()),
        }
    }

    /// Whether samples `i` and `j` of `subjects` are of related subjects (left out of each
    /// other's comparisons).
    pub fn kin(&self, subjects: &[String], i: usize, j: usize) -> bool {
        self.related(&subjects[i], &subjects[j])
    }

    /// Pairs of `subjects`' samples (each pair once) of related subjects.
    pub fn related_pairs(&self, subjects: &[String]) -> usize {
        let n = subjects.len();
        (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j))).filter(|&(i, j)| self.kin(subjects, i, j)).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_from_participants_and_missing_rows_named() {
        let dir = tempfile::tempdir().unwrap();
        let table = "participant_id\tfamily_id\nsub-01\tF1\nsub-02\tF1\nsub-03\tn/a\nsub-04\t\n";
        std::fs::write(dir.path().join(PARTICIPANTS), table).unwrap();
        let kin = Relatives::read(dir.path(), "family_id").unwrap();
        assert_eq!(kin.column(), Some("family_id"));
        assert!(kin.related("01", "02") && kin.related("02", "01"));
        assert!(!kin.related("03", "04"), "no value: each its own group");
        let subjects: Vec<String> = ["01", "01", "02", "03"].iter().map(|s| s.to_string()).collect();
        assert_eq!(kin.related_pairs(&subjects), 2, "both runs of 01 with 02's run");
        kin.check(&subjects, dir.path()).unwrap();
        let e = kin.check(&["05".to_string()], dir.path()).unwrap_err().to_string();
        assert!(e.contains("participants.tsv") && e.contains("05"), "{e}");
        Relatives::none().check(&["05".to_string()], dir.path()).unwrap();
        let e = Relatives::read(dir.path(), "family").unwrap_err().to_string();
        assert!(e.contains("no column `family`"), "{e}");
    }
}
