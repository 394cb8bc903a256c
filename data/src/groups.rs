//! Groups of related subjects (families, twins) from a BIDS `participants.tsv`
//! ([`read_groups`]), and the rule that keeps each group on one side of a split
//! ([`keep_together`], used by [`crate::split()`] when `data.group_column` is set).
//!
//! Related subjects share much of their brain organisation, so a model trained on one twin and
//! scored on the other is scored on data it has partly seen. With a group column, subjects
//! with the same value in it never straddle training and held out: explicit subject lists
//! that would split a group are an error naming the group and its subjects; the automatic
//! rules (`heldout_fraction`, `val_subjects`) hold out the whole group of every subject they
//! pick.
//!
//! The file is tab-separated with a header row holding `participant_id` (`sub-01` or `01`)
//! and the column. An empty value or `n/a` makes the subject a group of its own.

use crate::error::SplitError;
use std::collections::BTreeMap;
use std::path::Path;

/// The file name of the participants table, at the root of the data directory.
pub const PARTICIPANTS: &str = "participants.tsv";

/// Each subject (without `sub-`) and its group in `column` of `dir/participants.tsv`
/// (subjects with no value get their own label, `sub-XX`). Errors name the file when it is
/// missing or unreadable, the column when the header lacks it (with the columns it has), and
/// the line of a row without a participant.
pub fn read_groups(dir: &Path, column: &str) -> Result<BTreeMap<String, String>, SplitError> {
    let path = dir.join(PARTICIPANTS);
    let text =
        std::fs::read_to_string(&path).map_err(|source| SplitError::Participants { path: path.clone(), source })?;
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let header: Vec<&str> = lines.next().map(|(_, l)| l.split('\t').map(str::trim).collect()).unwrap_or_default();
    let find = |name: &str| header.iter().position(|h| *h == name);
    let missing = |name: &str| SplitError::NoColumn {
        path: path.clone(),
        column: name.to_string(),
        columns: header.iter().map(|h| h.to_string()).collect(),
    };
    let id = find("participant_id").ok_or_else(|| missing("participant_id"))?;
    let col = find(column).ok_or_else(|| missing(column))?;
    let mut out = BTreeMap::new();
    for (i, line) in lines {
        let cells: Vec<&str> = line.split('\t').map(str::trim).collect();
        let subject = cells.get(id).map(|s| s.strip_prefix("sub-").unwrap_or(s)).unwrap_or("");
        if subject.is_empty() {
            return Err(SplitError::NoParticipant { path: path.clone(), line: i + 1 });
        }
        let group = cells.get(col).copied().filter(|g| !g.is_empty() && *g != "n/a");
        out.insert(subject.to_string(), group.map_or_else(|| format!("sub-{subject}"), str::to_string));
    }
    Ok(out)
}

/// The group of every subject of `subjects`; a subject without a row is an error naming it.
fn group_of<'a>(
    groups: &'a BTreeMap<String, String>,
    subjects: &[String],
    dir: &Path,
) -> Result<Vec<&'a str>, SplitError> {
    subjects
        .iter()
        .map(|s| {
            groups
                .get(s)
                .map(String::as_str)
                .ok_or_else(|| SplitError::NoParticipantRow { path: dir.join(PARTICIPANTS), subject: s.clone() })
        })
        .collect()
}

/// Which subjects a split keeps together, and how the split was chosen.
#[derive(Clone, Copy, Debug)]
pub struct GroupRule<'a> {
    /// The column of `participants.tsv`.
    pub column: &'a str,
    /// The data directory holding `participants.tsv`.
    pub dir: &'a Path,
    /// Whether the lists were given explicitly (a straddling group is then an error, not
    /// moved).
    pub explicit: bool,
}

/// Keeps the groups of `rule` on one side: with explicit lists, a group with subjects both in
/// `train` and in `held` is an error naming it and them; otherwise every subject of a held-out
/// subject's group is moved from `train` to `held`. `subjects` are the data's. Returns the
/// subjects moved, for the split's description.
pub fn keep_together(
    rule: &GroupRule<'_>,
    subjects: &[String],
    train: &mut Vec<String>,
    held: &mut Vec<String>,
) -> Result<Vec<String>, SplitError> {
    let groups = read_groups(rule.dir, rule.column)?;
    let of = group_of(&groups, subjects, rule.dir)?;
    let group = |s: &String| subjects.iter().position(|x| x == s).map(|i| of[i]);
    let held_groups: Vec<&str> = held.iter().filter_map(group).collect();
    let straddling: Vec<String> =
        train.iter().filter(|s| group(s).is_some_and(|g| held_groups.contains(&g))).cloned().collect();
    if straddling.is_empty() {
        return Ok(Vec::new());
    }
    if rule.explicit {
        let g = group(&straddling[0]).unwrap_or_default().to_string();
        let in_group = |v: &[String]| v.iter().filter(|s| group(s) == Some(g.as_str())).cloned().collect::<Vec<_>>();
        return Err(SplitError::GroupSplit {
            column: rule.column.to_string(),
            group: g.clone(),
            train: in_group(train),
            held: in_group(held),
        });
    }
    train.retain(|s| !straddling.contains(s));
    held.extend(straddling.iter().cloned());
    held.sort();
    Ok(straddling)
}
