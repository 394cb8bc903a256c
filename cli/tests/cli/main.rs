//! bc-cli's end-to-end tests, one module per command or concern, in one test binary (one
//! link instead of one per file). The data-parallel tests (`train_mpi`, `launcher`) are
//! binaries of their own: CI runs them under `mpirun` with the feature `mpi`.

#[path = "../common/mod.rs"]
mod common;

mod cli_bench;
mod cli_floor;
mod cli_overfit;
mod cli_synth;
mod cli_tune;
mod closed_output;
mod command_reliability;
mod data_formats;
mod eval_baselines;
mod figures;
mod fingerprint_cli;
mod forecast_embed;
mod golden_cli;
mod huge_config;
mod run_dir_integrity;
mod tracking;
mod train_acceptance;
mod train_checkpointing;
mod train_cuda;
mod train_dfdx;
mod train_linear_path;
mod train_old_run;
mod train_resume;
mod train_split;
mod train_stops;
