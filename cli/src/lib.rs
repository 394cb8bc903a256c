//! The library behind `bc-cli`: argument definitions and one module per command, so the
//! commands can be tested without spawning the binary.
//!
//! - [`backend`]: the one place a backend name becomes a model constructor;
//! - [`args`]: the clap definitions of every command and its flags;
//! - [`synth`]: `bc-cli synth`, a synthetic dataset written as real datasets are;
//! - [`floor`]: `bc-cli floor`, the exact AR(1) or the empirical single-lag loss floor;
//! - [`overfit`]: the single-batch overfit check, generic over [`boldcast::core::Model`];
//! - [`golden`]: `bc-cli golden`, a backend checked against a PyTorch golden case;
//! - [`train`]: `bc-cli train`, a training run with validation, early stopping and resume, on
//!   the subject split of [`boldcast::data::split()`], with [`checkpointing`] (atomic checkpoint
//!   directories) and [`runlog`] (the JSON-lines log shared with `overfit`);
//! - [`distributed`]: data-parallel `train` and `bench` across the ranks of `mpirun`/`srun`:
//!   which windows each rank trains on, validation shared between ranks;
//! - [`bench`]: `bc-cli bench`, timed training steps against the measured matrix-product peak;
//! - [`eval`]: `bc-cli eval`, a checkpoint's per-horizon MSE beside baselines and the floor;
//! - [`plot`]: the loss-curve figure (plotters, no text: see its documentation);
//! - [`fsutil`]: atomic files and directories;
//! - [`error`]: the error every command returns, printed as `error: ...`.
#![deny(missing_docs)]

pub mod args;
pub mod backend;
pub mod bench;
pub mod checkpointing;
pub mod distributed;
pub mod error;
pub mod eval;
pub mod floor;
pub mod fsutil;
pub mod golden;
pub mod overfit;
pub mod plot;
pub mod runlog;
pub mod synth;
pub mod train;

pub use error::CliError;
