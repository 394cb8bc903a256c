//! A run directory written before the training library existed (by `bc-cli train --preset
//! quick --stop-after 20` with one rayon thread, the format `boldcast-train-state-v1`) still
//! resumes, and to the same numbers as that version's own resume.

use crate::common;

use std::path::Path;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

#[test]
fn an_old_run_directory_resumes_to_the_old_numbers() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/old-run-v1");
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    copy_dir(&fixture, &out);
    let old_log = std::fs::read(fixture.join("loss_log.jsonl")).unwrap();
    let state = common::json(&fixture.join("checkpoints/step-000020/state.json"));
    let kept = state["log_bytes"].as_u64().unwrap() as usize;
    let o =
        common::bc().env("RAYON_NUM_THREADS", "1").args(["train", "--resume", out.to_str().unwrap()]).output().unwrap();
    let (so, se) = common::text(&o);
    assert_eq!(o.status.code(), Some(1), "the quick preset's verdict fails; stdout:\n{so}\nstderr:\n{se}");
    assert!(so.contains("(step 20 of 60)"), "{so}");
    // A state from before the log's hash: resumed, its log_bytes unchecked, and said so.
    assert!(se.contains("from before the log's hash") && se.contains("log_bytes (2482) is used unchecked"), "{se}");
    // The numbers of the old binary's own resume of this directory (one thread).
    assert!(so.contains("finished (max_steps) at step 60: val_loss 1.343717, exact AR(1) floor 0.420661"), "{so}");
    let log = std::fs::read(out.join("loss_log.jsonl")).unwrap();
    assert_eq!(&log[..kept], &old_log[..kept], "the log continues the old one from the checkpoint's length");
    let summary = common::json(&out.join("summary.json"));
    assert_eq!((summary["steps"].as_u64(), summary["red_flags"].as_array().map(Vec::len)), (Some(60), Some(0)));
}
