//! Fuzzing that stays: every parser of outside bytes gets a harness that runs on the stable
//! toolchain inside `cargo test`, on a fixed, bounded set of cases made by mutating valid
//! files, and asserts that the parser returns an error or a valid value and never panics,
//! hangs or allocates more than its input justifies.
//!
//! - [`mutate`]: the deterministic mutation engine ([`Seed`], [`Plan`], [`cases`]):
//!   truncation at every length, byte flips, huge numbers, and structured mutations of each
//!   format's fields;
//! - [`check`]: the checker ([`Target`], [`Limits`], [`run_all`]): each case under
//!   `catch_unwind`, timed, its peak allocation counted by [`CountingAlloc`], and one line per
//!   target, `fuzz <target>: N cases, 0 panics, E errors, V valid; ...`;
//! - [`targets`]: the targets of the data crate (`.npy`, `.tsv`, `.csv`, `parcels.tsv`,
//!   safetensors, the CIFTI-2 `.ptseries.nii`, `.dtseries.nii` and `.dlabel.nii`) and of the
//!   golden cases (`config.json`, `inputs.safetensors`), with their seeds
//!   ([`targets::data_targets`]);
//! - [`reader_targets`]: label tables at scale (a recipe of up to 50,000 labels: the CIFTI
//!   reader must stay linear) and the `--format` pick ([`reader_targets::reader_targets`]).
//!
//! The harnesses are `testkit/tests/fuzz` (these targets and those of the training crate:
//! run TOML, `state.json`, checkpoints) and `cli/tests/fuzz_config/` (the `--config` layers);
//! `fuzz/` runs the same target functions under `cargo fuzz` (README, "Fuzzing").

mod alloc;
pub mod check;
pub mod mutate;
pub mod reader_targets;
pub mod targets;

pub use alloc::{installed, CountingAlloc, HARD_CAP_SLACK};
pub use check::{run_all, run_target, self_check, Failure, FailureKind, Limits, Outcome, Summary, Target, TargetFn};
pub use mutate::{cases, Case, Format, Plan, Seed};
