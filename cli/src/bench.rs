//! `bc-cli bench`: the speed of full training steps, as one JSON line.
//!
//! The flags pick the preset (its shape, model, optimizer, schedule and clipping), the backend,
//! the temporal mixer (`--temporal`, else the preset's), `--steps` and `--warmup`; the library
//! times the steps ([`boldcast_train::bench::bench_model`], which documents what a step is and
//! every figure of the report, and [`boldcast::core::ModelConfig::flops_per_step`], the FLOPs
//! model, also in BENCHMARKS.md). Beside them this command measures `peak_gflops`:
//! single-precision matrix-product speed in the same run with the same library
//! (`matrixmultiply`) on the same threads ([`boldcast::cpu::ops::gemm::peak_gflops`]:
//! 2048 x 2048 products, rows split over the threads, best of 10), after the steps.
//!
//! Under `mpirun -np N` (a build with the `mpi` feature), the batch is the global batch: each
//! rank steps on its `batch / N` windows and the gradients are all-reduced, as in `train`;
//! rank 0 then times the same global batch alone with its own thread count
//! (`single_process_step_s`, `speedup`, `scaling_efficiency`). Only rank 0 prints.

use crate::args::BenchArgs;
use crate::error::CliError;
use boldcast::core::DataParallel;
use boldcast::cpu::ops::gemm::peak_gflops;
use boldcast_train::bench::{bench_model, BenchOptions};
use boldcast_train::config::RunConfig;
use boldcast_train::Dist;

pub use boldcast_train::bench::BenchReport;

/// Timed 2048 x 2048 products behind `peak_gflops` (the best is reported).
const PEAK_REPS: usize = 10;

/// `bc-cli bench`: resolves the preset and runs [`bench_model`] on the chosen backend, over
/// the ranks of `dist`; rank 0 then measures the matrix-product peak.
pub fn run(args: &BenchArgs, dist: &Dist) -> Result<BenchReport, CliError> {
    let mut cfg = boldcast_train::presets::preset(&args.preset)?;
    if let Some(t) = args.temporal {
        cfg.model.temporal = t;
    }
    // The report's precision is the configuration's; dispatch_in refuses bf16 off cuda.
    cfg.train.precision = if args.precision == crate::args::Precision::Bf16 { "bf16" } else { "f32" }.into();
    let mut rep = boldcast::backend::dispatch_in(args.backend, args.precision, Bench(&cfg, args, dist))?;
    // Rank 0 reports; the other ranks leave the cores to it. The best of 10 products: on a
    // shared machine a few of them run while other work holds a core, and the peak is what the
    // machine can do, not what it did once (BENCHMARKS.md, CPU backend, "Peak", has how far a
    // best of 3 scattered).
    if dist.is_root() {
        rep.set_peak(peak_gflops(2048, PEAK_REPS));
    }
    Ok(rep)
}

struct Bench<'a>(&'a RunConfig, &'a BenchArgs, &'a Dist);

impl boldcast::backend::Job for Bench<'_> {
    type Output = BenchReport;
    type Error = CliError;
    fn run<M: DataParallel<f32>>(
        self,
        name: &str,
        build: boldcast::backend::Builder<M>,
    ) -> Result<BenchReport, CliError> {
        let opts = BenchOptions {
            backend: name.to_string(),
            preset: self.1.preset.clone(),
            steps: self.1.steps,
            warmup: self.1.warmup,
            threads: boldcast::cpu::par::threads(),
        };
        Ok(bench_model(self.0, &opts, build, self.2)?)
    }
}
