//! Records the git revision bc-cli is built from (`BOLDCAST_GIT_REVISION`), for the
//! `made_by` of its results; nothing when git or the repository is absent (a crate download).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let Some(rev) = git(&["rev-parse", "HEAD"]) else { return };
    // Rebuild when HEAD moves: the HEAD file, the branch it names and the packed refs.
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for w in watched {
        // A path that does not exist would rerun this script on every build.
        if let Some(p) = git(&["rev-parse", "--git-path", &w]).filter(|p| std::path::Path::new(p).exists()) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rustc-env=BOLDCAST_GIT_REVISION={rev}");
}
