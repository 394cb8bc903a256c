//! Where the golden cases are: the repository's own `golden/cases/<case>/`, which every test
//! reads (a clone passes its own tests), and `../shared/golden` beside the checkout, a place
//! where more cases may appear.
//!
//! [`CaseSet::repository`] is what the tests call: the repository's cases, which must exist,
//! and, when `../shared/golden` is present, its cases too. A shared case whose name is also a
//! repository case is left out only when its files are byte-identical to the repository's;
//! otherwise both run. When the shared folder is present the set says so in one line
//! ([`CaseSet::note`], printed by [`CaseSet::repository`]):
//! `golden: also ran N case(s) from ../shared/golden: ...`. When it is absent nothing fails.

use crate::golden::{case_dirs, GoldenError};
use boldcast_storage::io_err;
use std::path::{Path, PathBuf};

/// The repository's root (the folder above this crate's manifest).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the test kit lives in a folder of the repository").into()
}

/// The repository's golden cases: `<repo>/golden/cases`.
pub fn repo_cases_dir() -> PathBuf {
    repo_root().join("golden/cases")
}

/// The optional shared golden folder beside the checkout: `<repo>/../shared/golden`.
pub fn shared_cases_dir() -> PathBuf {
    repo_root().join("../shared/golden")
}

/// The directory of the repository's case `name`; panics, naming the path, when it is missing.
pub fn repo_case(name: &str) -> PathBuf {
    let dir = repo_cases_dir().join(name);
    assert!(dir.join("config.json").is_file(), "no golden case at {} (the repository's golden/cases)", dir.display());
    dir
}

/// The golden cases to run: a primary folder's and, when present, an extra folder's.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseSet {
    /// The primary folder's case directories, sorted.
    pub primary: Vec<PathBuf>,
    /// The extra folder's case directories that run too, sorted.
    pub extra: Vec<PathBuf>,
    /// The extra folder's cases left out because they are byte-identical to a primary case.
    pub identical: Vec<String>,
    /// The extra folder as named in the note (`None`: it was absent).
    pub extra_label: Option<String>,
}

impl CaseSet {
    /// The cases of `primary` (which must exist and hold at least one case) and of `extra`
    /// when that folder exists (`label` names it in [`note`](CaseSet::note)). An extra case
    /// named like a primary case is left out only when both folders hold the same files
    /// with the same bytes.
    pub fn find(primary: &Path, extra: &Path, label: &str) -> Result<CaseSet, GoldenError> {
        let primary_dirs = case_dirs(primary)?;
        if primary_dirs.is_empty() {
            let none = std::io::Error::new(std::io::ErrorKind::NotFound, "no golden case (a folder with config.json)");
            return Err(io_err(primary)(none).into());
        }
        let mut set = CaseSet { primary: primary_dirs, extra: Vec::new(), identical: Vec::new(), extra_label: None };
        if !extra.is_dir() {
            return Ok(set);
        }
        set.extra_label = Some(label.to_string());
        for dir in case_dirs(extra)? {
            let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            match set.primary.iter().find(|p| p.file_name() == dir.file_name()) {
                Some(twin) if same_files(twin, &dir)? => set.identical.push(name),
                _ => set.extra.push(dir),
            }
        }
        Ok(set)
    }

    /// The repository's cases and, when present, those of `../shared/golden`; prints
    /// [`note`](CaseSet::note) when there is one. Panics, naming the folder, when the
    /// repository's cases cannot be read: the tests fail rather than skip.
    pub fn repository() -> CaseSet {
        let set = CaseSet::find(&repo_cases_dir(), &shared_cases_dir(), "../shared/golden")
            .unwrap_or_else(|e| panic!("the repository's golden cases: {e}"));
        if let Some(note) = set.note() {
            // Straight to the process's stderr, past the test harness's capture of `println!`:
            // the line must show in every test log, passing or not.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "{note}");
        }
        set
    }

    /// Every case directory to run: the primary ones, then the extra ones.
    pub fn all(&self) -> Vec<PathBuf> {
        self.primary.iter().chain(&self.extra).cloned().collect()
    }

    /// `golden: also ran N case(s) from <extra>: a, b` (with the identical ones left out
    /// named), or `None` when the extra folder is absent.
    pub fn note(&self) -> Option<String> {
        let label = self.extra_label.as_ref()?;
        let names: Vec<String> =
            self.extra.iter().map(|d| d.file_name().unwrap_or_default().to_string_lossy().into_owned()).collect();
        let mut line = format!(
            "golden: also ran {} case(s) from {label}: {}",
            names.len(),
            if names.is_empty() { "none".to_string() } else { names.join(", ") }
        );
        if !self.identical.is_empty() {
            line.push_str(&format!(
                " ({} left out, byte-identical to golden/cases: {})",
                self.identical.len(),
                self.identical.join(", ")
            ));
        }
        Some(line)
    }
}

/// Whether two case directories hold the same file names with the same bytes.
fn same_files(a: &Path, b: &Path) -> Result<bool, GoldenError> {
    let list = |dir: &Path| -> Result<Vec<PathBuf>, GoldenError> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).map_err(io_err(dir))? {
            let p = e.map_err(io_err(dir))?.path();
            if p.is_file() {
                out.push(p);
            }
        }
        out.sort();
        Ok(out)
    };
    let (fa, fb) = (list(a)?, list(b)?);
    if fa.len() != fb.len() || fa.iter().zip(&fb).any(|(x, y)| x.file_name() != y.file_name()) {
        return Ok(false);
    }
    for (x, y) in fa.iter().zip(&fb) {
        let read = |p: &Path| std::fs::read(p).map_err(io_err(p));
        if read(x)? != read(y)? {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy_case(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let p = e.unwrap().path();
            std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        }
    }

    #[test]
    fn the_repository_holds_the_seven_cases() {
        let set = CaseSet::find(&repo_cases_dir(), Path::new("/nonexistent/shared/golden"), "x").unwrap();
        let names: Vec<String> =
            set.primary.iter().map(|d| d.file_name().unwrap().to_string_lossy().into_owned()).collect();
        for n in ["deep-k0", "flat-d3", "linear-offset", "mamba2-full-k", "tiny", "tiny-l2-clip", "tiny-mamba2"] {
            assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
        }
        assert!(set.extra.is_empty() && set.note().is_none());
    }

    #[test]
    fn extra_cases_run_unless_byte_identical_and_the_note_says_so() {
        let tmp = tempfile::tempdir().unwrap();
        let extra = tmp.path().join("shared");
        // A byte-identical copy of `tiny` (left out), a changed `tiny-mamba2` (kept) and a new
        // case (kept).
        copy_case(&repo_case("tiny"), &extra.join("tiny"));
        copy_case(&repo_case("tiny-mamba2"), &extra.join("tiny-mamba2"));
        let cfg = extra.join("tiny-mamba2/config.json");
        let text = std::fs::read_to_string(&cfg).unwrap();
        std::fs::write(&cfg, format!("{text}\n")).unwrap();
        copy_case(&repo_case("flat-d3"), &extra.join("new-case"));
        std::fs::create_dir_all(extra.join("not-a-case")).unwrap();

        let set = CaseSet::find(&repo_cases_dir(), &extra, "../shared/golden").unwrap();
        assert_eq!(set.identical, vec!["tiny".to_string()]);
        assert_eq!(set.extra, vec![extra.join("new-case"), extra.join("tiny-mamba2")]);
        assert_eq!(set.all().len(), set.primary.len() + 2);
        let note = set.note().unwrap();
        assert!(note.starts_with("golden: also ran 2 case(s) from ../shared/golden: new-case, tiny-mamba2"), "{note}");
        assert!(note.contains("1 left out") && note.contains("tiny"), "{note}");

        // Present but all identical: still a note, with none run.
        let only = tmp.path().join("only");
        copy_case(&repo_case("tiny"), &only.join("tiny"));
        let note = CaseSet::find(&repo_cases_dir(), &only, "S").unwrap().note().unwrap();
        assert!(note.starts_with("golden: also ran 0 case(s) from S: none"), "{note}");

        // The primary folder must exist and hold a case.
        assert!(CaseSet::find(&tmp.path().join("absent"), &extra, "x").is_err());
        assert!(CaseSet::find(&extra.join("not-a-case"), &extra, "x").is_err());
    }
}
