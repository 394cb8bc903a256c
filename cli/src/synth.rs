//! `bc-cli synth`: a synthetic dataset written by [`boldcast::data::synth::SynthRequest`] as
//! real datasets are, with its exact floor, and a progress bar over its runs.

use crate::args::SynthArgs;
use crate::error::CliError;
use crate::progress::Progress;
use std::io::IsTerminal;

pub use boldcast::data::synth::{SynthOutput, CIRCLE_RADIUS, FLOOR_D_IN, FLOOR_HORIZONS};

/// Generates and writes the dataset of `args` (see [`crate::args::Command::Synth`]).
pub fn run(args: &SynthArgs) -> Result<SynthOutput, CliError> {
    let runs = (args.subjects as u64).saturating_mul(args.runs as u64);
    let bar = Progress::counting(std::io::stderr().is_terminal(), runs, "runs");
    let out = args.write(|_, _| bar.inc());
    bar.finish();
    Ok(out?)
}
