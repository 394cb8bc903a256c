//! Helpers shared by the golden tests.
#![allow(dead_code)]

use boldcast_testkit::cases::{repo_case, CaseSet};
use boldcast_testkit::golden::GoldenCase;
use std::path::PathBuf;

/// Every case directory: the repository's `golden/cases` (at least 6 cases), then the cases
/// of `../shared/golden` when present and not byte-identical to one of them (the line saying
/// which ran is printed). Panics (never skips) when the repository's cases are missing.
pub fn all_cases() -> Vec<PathBuf> {
    let set = CaseSet::repository();
    assert!(set.primary.len() >= 6, "expected at least 6 golden cases in golden/cases, found {:?}", set.primary);
    set.all()
}

/// Loads the repository's case called `name`; panics naming the path on error.
pub fn load(name: &str) -> GoldenCase {
    let dir = repo_case(name);
    GoldenCase::load(&dir).unwrap_or_else(|e| panic!("loading golden case {}: {e}", dir.display()))
}
