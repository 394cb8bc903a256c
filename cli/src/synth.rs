//! `bc-cli synth`: the flags of a synthetic dataset, written by
//! [`boldcast::data::synth::write_synthetic`] as real datasets are, with its exact floor.

use crate::args::{Format, SynthArgs};
use crate::error::CliError;
use crate::progress::Progress;
use boldcast::data::synth::{write_synthetic, Dtype, Generator};
use boldcast::data::RunFormat;
use boldcast::fixtures::{Ar1Spec, Layout, Var1Spec};
use std::io::IsTerminal;

pub use boldcast::data::synth::{SynthOutput, CIRCLE_RADIUS, FLOOR_D_IN, FLOOR_HORIZONS};

/// Generates and writes the dataset of `args` (see [`crate::args::Command::Synth`]).
pub fn run(args: &SynthArgs) -> Result<SynthOutput, CliError> {
    let layout =
        Layout { subjects: args.subjects, runs: args.runs, trs: args.trs, parcels: args.parcels, seed: args.seed };
    let generator = if args.var1 {
        Generator::Var1(Var1Spec { layout, self_coef: args.self_coef, neighbor_coef: args.neighbor_coef, k: args.k })
    } else {
        Generator::Ar1(Ar1Spec { layout, rho: args.rho.clone(), innovation_mix: args.mix, mix_k: args.k })
    };
    let format = match args.format {
        Format::Npy => RunFormat::Npy,
        Format::Tsv => RunFormat::Tsv,
    };
    let dtype = match args.dtype {
        crate::args::SynthDtype::F32 => Dtype::F32,
        crate::args::SynthDtype::F64 => Dtype::F64,
    };
    let runs = (args.subjects as u64).saturating_mul(args.runs as u64);
    let bar = Progress::counting(std::io::stderr().is_terminal(), runs, "runs");
    let out = write_synthetic(&generator, format, dtype, &args.out, |_, _| bar.inc());
    bar.finish();
    Ok(out?)
}
