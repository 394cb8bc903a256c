//! The fuzz harness of `cargo test` (issue 17): every parser of outside bytes on a fixed,
//! deterministic set of mutated valid files, each case checked for panics, hangs and
//! allocation beyond its bound (`boldcast_testkit::fuzz`). One line per target,
//! `fuzz <target>: N cases, 0 panics, E errors, V valid; ...`, then `fuzz: N passed, M failed`;
//! the exit status is non-zero on any failure.
//!
//! Targets: the data crate's (`.npy`, `.tsv`, `.csv`, `parcels.tsv`, safetensors, CIFTI-2
//! `.ptseries.nii`, `.dtseries.nii`, `.dlabel.nii`, a BIDS sidecar and file name, a conversion
//! cache entry, label tables at scale, the `--format` pick), the golden cases' (`config.json`,
//! `inputs.safetensors`) and the training crate's (a run's TOML,
//! `state.json`, the configuration stored in it, `model.safetensors`,
//! `optimizer.safetensors`, the `latest` pointer, a run directory's `.lock`) in
//! `train_targets.rs`. The `--config`
//! layers of the command line are `cli/tests/fuzz_config/`.
//!
//! `BOLDCAST_FUZZ_ONLY=<target>` runs one target, `BOLDCAST_FUZZ_CASE=<n>` one case of it.

mod train_targets;

use boldcast_testkit::fuzz::{reader_targets, run_all, targets, CountingAlloc, Limits};
use std::process::ExitCode;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn main() -> ExitCode {
    let mut all = targets::data_targets();
    all.extend(reader_targets::reader_targets());
    all.extend(train_targets::train_targets());
    let ok = run_all(&all, &Limits::default());
    targets::remove_scratch();
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
