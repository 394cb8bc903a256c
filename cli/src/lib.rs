//! The library behind `bc-cli`: argument definitions and one module per command, so the
//! commands can be tested without spawning the binary. The commands' logic is in the library
//! crates (`boldcast-train`, the core); these modules parse flags, resolve presets, print,
//! ask `boldcast-plot` for figures and choose exit codes.
//!
//! - [`args`]: the clap definitions of every command and its flags;
//! - [`synth`]: `bc-cli synth`, a synthetic dataset written as real datasets are;
//! - [`floor`]: `bc-cli floor`, the exact AR(1) or the empirical single-lag loss floor;
//! - [`overfit`]: `bc-cli overfit`: flags, step lines, the figure and the verdict line around
//!   [`boldcast_train::overfit`], generic over [`boldcast::core::Model`];
//! - [`golden`]: `bc-cli golden`, a backend checked against a PyTorch golden case;
//! - [`train`]: `bc-cli train`: flags, printing ([`progress`]), the figure and the exit status
//!   around the training library `boldcast-train`, on the subject split of
//!   [`boldcast::data::split()`];
//! - [`tune`]: `bc-cli tune`: flags, a line per trial and the table around
//!   [`boldcast_train::tune`] (a search over configuration keys on a validation split);
//! - [`distributed`]: the ranks of `mpirun`/`srun` for data-parallel `train` and `bench`, and
//!   the abort of every rank on an error;
//! - [`bench`](mod@bench): `bc-cli bench`: the preset, the measured matrix-product peak and the JSON line
//!   around [`boldcast_train::bench`] (timed training steps);
//! - [`eval`]: `bc-cli eval`: flags, `--config` and the table around [`boldcast_train::eval`]
//!   (a checkpoint's per-horizon MSE beside baselines and the floor);
//! - [`infer`]: `bc-cli forecast` and `bc-cli embed`: flags, lines and progress around
//!   [`boldcast_train::infer`] (a checkpoint's forecasts and embeddings of whole runs);
//! - [`error`]: the error every command returns, printed as `error: ...`.
#![deny(missing_docs)]

/// `println!` that never panics: when stdout is closed (`bc-cli train ... | head -1`) the line
/// is dropped and the run goes on to write its files. Every line `bc-cli` prints goes through
/// this macro or [`errln!`].
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `print!` that never panics (see [`outln!`]).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

/// `eprintln!` that never panics (see [`outln!`]).
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// Writes a command's result (the table or JSON that is its output) to stdout and flushes it.
/// Unlike a progress line ([`outln!`]), a result that could not be written (`> /dev/full`, a
/// full disk, a closed pipe) is an error, so the command exits 2 instead of 0 without it.
pub fn write_result(text: &str) -> Result<(), CliError> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(CliError::io("standard output"))
}

pub mod args;
pub mod bench;
pub mod distributed;
pub mod error;
pub mod eval;
pub mod fingerprint;
pub mod floor;
pub mod golden;
pub mod infer;
pub mod overfit;
pub mod progress;
pub mod synth;
pub mod train;
pub mod tune;

pub use error::CliError;
