//! `boldcast-train`: a training run as a library. Given a model (any [`DataParallel<f32>`](boldcast_core::DataParallel) model), the run
//! configuration (optimizer, schedule, `[train]` settings), the data with its subject split
//! and an output directory, [`Run::run`] runs the loop that `bc-cli train` runs: validation
//! every `val_every` steps with per-horizon losses, the floor and the val/train ratio; early
//! stopping; the best weights; checkpoints with their consistency checks; resume; sharding
//! over a [`Collective`](boldcast_core::Collective); the non-finite stop; red flags. What the
//! run reports goes to [`Observer`]s.
//!
//! ```no_run
//! # fn main() -> Result<(), boldcast_train::TrainError> {
//! use boldcast_train::{config::RunConfig, data, Run, Recorder};
//! let cfg = boldcast_train::presets::preset("quick")?;
//! let loaded = data::load_data(&cfg)?;
//! let n = loaded.ds.runs.len();
//! let split = data::Split {
//!     train_subjects: vec![], heldout_subjects: vec![], how: "by hand".into(),
//!     train_runs: (0..n - 1).collect(), heldout_runs: vec![n - 1],
//! };
//! let td = data::TrainData::new(loaded, split, &cfg)?;
//! let model = boldcast_cpu::CpuModel::<f32>::new(cfg.model_config(), td.adjacency.clone(), cfg.train.seed)?;
//! let mut rec = Recorder::default();
//! let report = Run::new(&cfg, &td, "runs/lib").run(model, &mut [&mut rec])?;
//! println!("{} steps, best {:?}, red flags {:?}", report.steps, report.best, report.red_flags);
//! # Ok(()) }
//! ```
//!
//! Modules: [`config`] (the run configuration and its TOML text), [`memory`] (what a run would
//! need in memory, checked against the machine's before anything is allocated), [`data`]
//! (dataset, split, windows, floor), [`order`] (epoch orders and shards), [`dist`] (the ranks),
//! [`provenance`] (what a run trained on, file by file), [`validate`], [`early_stopping`], [`log`] (`loss_log.jsonl`), [`checkpoint`] (checkpoint
//! directories and `state.json`), [`run_dir`] (the lock, fresh and existing run directories), [`observer`], [`flags`] (red flags), [`summary`]
//! (the report and `summary.json`), [`run`] (the loop) (files are written through
//! `boldcast_storage::fsutil`),
//! [`error`], [`judge`] (a finished run's validation loss against predicting zero and the best
//! baseline); and the other training jobs of `bc-cli`, generic over the model: [`overfit`]
//! (the single-batch overfit check), [`bench`](mod@bench) (timed training steps) and [`tune`]
//! (a grid or random search over configuration keys on a validation split, `bc-cli tune`).
//! What a trained model says about data (eval, forecasts, embeddings, fingerprints) is
//! `boldcast-analysis`'s; the baselines are `boldcast-baselines`'.
#![deny(missing_docs)]

pub mod bench;
pub mod checkpoint;
pub mod config;
pub mod data;
pub mod dist;
pub mod early_stopping;
pub mod error;
pub mod flags;
pub mod judge;
pub mod launch;
pub mod linear_path;
pub mod log;
pub mod memory;
pub mod observer;
pub mod order;
pub mod overfit;
pub mod presets;
pub mod provenance;
pub mod run;
pub mod run_dir;
pub mod summary;
pub mod text;
pub mod tracking;
pub mod tune;
pub mod validate;

pub use boldcast_core::Model;
pub use dist::Dist;
pub use early_stopping::EarlyStopping;
pub use error::TrainError;
pub use flags::{FlagKind, RedFlag};
pub use observer::{Observer, Recorder, RunStart, StepRecord, ValRecord};
pub use run::Run;
pub use summary::{StopReason, TrainReport};
