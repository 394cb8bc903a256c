//! The library behind `bc-cli`: the flags ([`args`]) and one module per command, each a thin
//! layer over the library crates (`boldcast-train`, `boldcast-plot`, the backend registry
//! `boldcast::backend`): it turns flags into the library's requests, prints what the library
//! returns and chooses the exit status. [`error`] is the error every command returns, printed
//! as `error: ...`; [`progress`] is the progress bar on a terminal.
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
    let stdout = std::path::Path::new("standard output");
    Ok(out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(boldcast::storage::io_err(stdout))?)
}

/// Writes a command's JSON result with its `made_by` ([`boldcast::storage::made_by`]).
pub fn write_json_result<T: serde::Serialize + ?Sized>(rep: &T) -> Result<(), CliError> {
    let stamped = boldcast::storage::made_by::stamp(rep);
    write_result(&(serde_json::to_string_pretty(&stamped).expect("JSON serializes") + "\n"))
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
