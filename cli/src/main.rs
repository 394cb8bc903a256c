//! `bc-cli`: the command-line tool of boldcast. See `bc-cli --help`.

use bc_cli::args::{Backend, Cli, Command, FingerprintArgs, InferArgs, OverfitArgs};
use bc_cli::distributed::{abort_on_error, from_env, Transport};
use bc_cli::eval::{EvalReport, EvalRequest};
use bc_cli::overfit::{overfit_command, OverfitReport};
use bc_cli::CliError;
use boldcast::backend::{dispatch, dispatch_named, Builder, Job};
use boldcast::core::DataParallel;
use boldcast_analysis::fingerprint::FingerprintReport;
use boldcast_analysis::infer::{EmbedReport, ForecastReport, Pool};
use boldcast_train::launch::Launch;
use boldcast_train::presets::{resolve, Purpose, DEFAULT_PRESET};
use boldcast_train::tune::{Search, TuneReport};
use boldcast_train::TrainReport;
use clap::Parser;
use std::process::ExitCode;

fn run(cli: Cli) -> Result<ExitCode, CliError> {
    match cli.command {
        Command::Synth(a) => synth(&a),
        Command::Floor(a) => floor(&a),
        Command::Overfit(a) => {
            let cfg = resolve(&a.run, DEFAULT_PRESET, Purpose::Overfit)?;
            let rep = dispatch_named(&cfg.train.backend, &cfg.train.precision, Overfit(&a))?;
            Ok(verdict(rep.verdict.passed))
        }
        Command::Train(a) => train(&a),
        Command::Bench(a) => bench(&a),
        Command::Eval(a) => eval(a),
        Command::Forecast(a) => {
            boldcast::storage::fsutil::remove_stages_on_signals();
            dispatch(a.model.backend, Forecast(&a))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Embed(a) => {
            boldcast::storage::fsutil::remove_stages_on_signals();
            dispatch(a.infer.model.backend, Embed(&a.infer, a.pool))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Fingerprint(a) => {
            let rep = dispatch(a.model.backend, Fingerprint(&a))?;
            result(a.json, &rep, || boldcast_analysis::text::fingerprint_table(&rep))
        }
        Command::Tune(a) => {
            let search = bc_cli::tune::resolve_tune_args(&a)?;
            let rep = dispatch_named(&search.base.train.backend, &search.base.train.precision, Tune(&search))?;
            result(a.json, &rep, || boldcast_train::text::tune_table(&rep, &search))
        }
        Command::Golden(a) => {
            let report = bc_cli::golden::run(&a)?;
            bc_cli::write_result(&format!("{report}\n"))?;
            Ok(verdict(report.passed()))
        }
    }
}

/// Exit status 0 when a verdict passed, 1 when it failed.
fn verdict(passed: bool) -> ExitCode {
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Writes a command's result: its JSON with `json`, else its text.
fn result<T: serde::Serialize>(json: bool, rep: &T, text: impl FnOnce() -> String) -> Result<ExitCode, CliError> {
    if json {
        bc_cli::write_json_result(rep)?;
    } else {
        bc_cli::write_result(&text())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn synth(a: &bc_cli::args::SynthArgs) -> Result<ExitCode, CliError> {
    let out = bc_cli::synth::run(a)?;
    bc_cli::outln!(
        "wrote {} runs, parcels.tsv and synth.json to {} (exact floor, horizons 1,5, d_in 1: {:.6})",
        out.files.len(),
        out.dir.display(),
        out.floor.overall
    );
    Ok(ExitCode::SUCCESS)
}

fn floor(a: &bc_cli::args::FloorArgs) -> Result<ExitCode, CliError> {
    let r = bc_cli::floor::run(a)?;
    r.notes.iter().for_each(|n| bc_cli::errln!("{n}"));
    result(a.json, &r.json, || r.text.clone())
}

fn train(a: &bc_cli::args::TrainArgs) -> Result<ExitCode, CliError> {
    let (cfg, mut req) = bc_cli::train::resolve_train_args(a)?;
    // NCCL for a fresh run on the CUDA backend; MPI otherwise (a resumed CUDA run too: its
    // gradients then travel through host buffers).
    let cuda = cfg.as_ref().is_some_and(|c| Backend::from_name(&c.train.backend).is_ok_and(Backend::on_gpu));
    req.dist = from_env(if cuda { Transport::Nccl } else { Transport::Mpi })?;
    // With --resume the backend is the one stored in the checkpoint's configuration.
    let launch = abort_on_error(&req.dist, bc_cli::train::launch(cfg, &req))?;
    if let Some(done) = bc_cli::train::completed(&launch)? {
        bc_cli::outln!("{done}");
        return Ok(ExitCode::SUCCESS);
    }
    let (backend, precision) = (launch.cfg.train.backend.clone(), launch.cfg.train.precision.clone());
    let dist = launch.dist.clone();
    let rep = abort_on_error(&dist, dispatch_named(&backend, &precision, Train(launch)))?;
    Ok(verdict(rep.verdict.is_none_or(|v| v.passed)))
}

fn bench(a: &bc_cli::args::BenchArgs) -> Result<ExitCode, CliError> {
    let dist = from_env(if a.backend.on_gpu() { Transport::Nccl } else { Transport::Mpi })?;
    let rep = abort_on_error(&dist, bc_cli::bench::run(a, &dist))?;
    if dist.is_root() {
        bc_cli::write_result(&(serde_json::to_string(&rep).expect("JSON serializes") + "\n"))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn eval(a: bc_cli::args::EvalArgs) -> Result<ExitCode, CliError> {
    if let Some(png) = &a.figure {
        boldcast_plot::check_figure_path(png, a.replace.overwrite)?;
    }
    let rep = dispatch(a.backend, Eval(&a.req))?;
    if let Some(png) = &a.figure {
        let svg = boldcast_plot::eval::eval_figure(png, &rep, a.replace.overwrite)?;
        bc_cli::errln!("figure: {} (and {})", png.display(), svg.display());
    }
    result(a.json, &rep, || boldcast_analysis::text::eval_table(&rep))
}

/// A command as a [`Job`]: a struct of what it runs on, and the call that runs it with a
/// backend's constructor.
macro_rules! job {
    ($job:ident $(<$lt:lifetime>)? ($($arg:ty),*) -> $out:ty, |$s:ident, $name:pat, $build:ident| $body:expr) => {
        struct $job$(<$lt>)?($($arg),*);

        impl$(<$lt>)? Job for $job$(<$lt>)? {
            type Output = $out;
            type Error = CliError;
            fn run<M: DataParallel<f32>>(self, $name: &str, $build: Builder<M>) -> Result<$out, CliError> {
                let $s = self;
                $body
            }
        }
    };
}

job!(Overfit<'a>(&'a OverfitArgs) -> OverfitReport, |s, name, build| overfit_command(s.0, name, build));
job!(Train(Launch) -> TrainReport, |s, _, build| bc_cli::train::train_launched(s.0, build));
job!(Tune<'a>(&'a Search) -> TuneReport, |s, name, build| bc_cli::tune::tune_command(s.0, name, build));
job!(Fingerprint<'a>(&'a FingerprintArgs) -> FingerprintReport, |s, _, build| {
    bc_cli::fingerprint::fingerprint_command(s.0, build)
});
job!(Eval<'a>(&'a EvalRequest) -> EvalReport, |s, _, build| bc_cli::eval::eval_command(s.0, build));
job!(Forecast<'a>(&'a InferArgs) -> ForecastReport, |s, _, build| bc_cli::infer::forecast_command(s.0, build));
job!(Embed<'a>(&'a InferArgs, Pool) -> EmbedReport, |s, _, build| bc_cli::infer::embed_command(s.0, s.1, build));

/// Every buffer of 64 bytes or more on a cache-line boundary, so the CPU backend's 16-lane
/// loads never straddle two lines (`boldcast::cpu::alloc::CacheAligned` says why that matters).
#[global_allocator]
static ALLOC: boldcast::cpu::alloc::CacheAligned = boldcast::cpu::alloc::CacheAligned;

fn main() -> ExitCode {
    // Training steps free and reallocate large buffers: keep them on the heap
    // (boldcast::cpu::alloc says why; BENCHMARKS.md, "Allocator policy", has the cost).
    boldcast::cpu::alloc::retain_freed_memory();
    boldcast::storage::made_by::set_invocation(option_env!("BOLDCAST_GIT_REVISION").map(String::from), None);
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            bc_cli::errln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
