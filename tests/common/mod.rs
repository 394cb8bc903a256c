//! Helpers shared by the golden tests.
#![allow(dead_code)]

use boldcast::golden::{case_dirs, GoldenCase};
use std::path::{Path, PathBuf};

/// `<workspace root>/../shared/golden`; panics (never skips) when it is missing.
pub fn golden_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/golden");
    assert!(
        root.is_dir(),
        "the golden files are missing: {} does not exist (they live in ../shared/golden beside the checkout)",
        root.display()
    );
    root
}

/// Every case directory (a subdirectory with a config.json), at least 3 of them.
pub fn all_cases() -> Vec<PathBuf> {
    let root = golden_root();
    let dirs = case_dirs(&root).unwrap_or_else(|e| panic!("listing golden cases: {e}"));
    assert!(dirs.len() >= 3, "expected at least 3 golden cases under {}, found {dirs:?}", root.display());
    dirs
}

/// Loads the case called `name`; panics naming the path on error.
pub fn load(name: &str) -> GoldenCase {
    let dir = golden_root().join(name);
    GoldenCase::load(&dir).unwrap_or_else(|e| panic!("loading golden case {}: {e}", dir.display()))
}
