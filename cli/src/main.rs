//! `bc-cli`: the command-line tool of boldcast. See `bc-cli --help`.

use bc_cli::args::{Backend, Cli, Command, OverfitArgs, Precision};
use bc_cli::backend::{dispatch, dispatch_in, Builder, Job};
use bc_cli::distributed::{abort_on_error, from_env, Transport};
use bc_cli::overfit::{overfit_command, OverfitReport};
use bc_cli::CliError;
use boldcast::core::{DataParallel, Model};
use boldcast_train::presets::{resolve, Purpose, DEFAULT_PRESET};
use clap::Parser;
use std::process::ExitCode;

fn run(cli: Cli) -> Result<ExitCode, CliError> {
    match cli.command {
        Command::Synth(a) => {
            let out = bc_cli::synth::run(&a)?;
            bc_cli::outln!(
                "wrote {} runs, parcels.tsv and synth.json to {} (exact floor, horizons 1,5, d_in 1: {:.6})",
                out.files.len(),
                out.dir.display(),
                out.floor.overall
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Floor(a) => {
            let r = bc_cli::floor::run(&a)?;
            for n in &r.notes {
                bc_cli::errln!("{n}");
            }
            if a.json {
                bc_cli::write_result(&(serde_json::to_string_pretty(&r.json).expect("JSON serializes") + "\n"))?;
            } else {
                bc_cli::write_result(&r.text)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Overfit(a) => {
            let cfg = resolve(&a.run.overrides(), DEFAULT_PRESET, Purpose::Overfit)?;
            let (backend, precision) =
                (Backend::from_name(&cfg.train.backend)?, Precision::from_name(&cfg.train.precision)?);
            let rep = dispatch_in(backend, precision, Overfit(&a))?;
            Ok(if rep.verdict.passed { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Command::Train(a) => {
            let (cfg, mut req) = bc_cli::train::resolve_train_args(&a)?;
            // NCCL for a fresh run on the CUDA backend; MPI otherwise (a resumed CUDA run too:
            // its gradients then travel through host buffers).
            let cuda = cfg.as_ref().is_some_and(|c| Backend::from_name(&c.train.backend).is_ok_and(Backend::on_gpu));
            req.dist = from_env(if cuda { Transport::Nccl } else { Transport::Mpi })?;
            // With --resume the backend is the one stored in the checkpoint's configuration.
            let launch = abort_on_error(&req.dist, bc_cli::train::launch(cfg, &req))?;
            if let Some(done) = bc_cli::train::completed(&launch)? {
                bc_cli::outln!("{done}");
                return Ok(ExitCode::SUCCESS);
            }
            let backend = Backend::from_name(&launch.cfg.train.backend)?;
            let precision = Precision::from_name(&launch.cfg.train.precision)?;
            let dist = launch.dist.clone();
            let rep = abort_on_error(&dist, dispatch_in(backend, precision, Train(launch)))?;
            Ok(if rep.verdict.is_none_or(|v| v.passed) { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Command::Bench(a) => {
            let transport = if a.backend.on_gpu() { Transport::Nccl } else { Transport::Mpi };
            let dist = from_env(transport)?;
            let rep = abort_on_error(&dist, bc_cli::bench::run(&a, &dist))?;
            if dist.is_root() {
                bc_cli::write_result(&(serde_json::to_string(&rep).expect("JSON serializes") + "\n"))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Eval(a) => {
            if let Some(png) = &a.figure {
                boldcast_plot::check_figure_path(png, a.replace.overwrite)?;
            }
            let req = bc_cli::eval::EvalRequest {
                checkpoint: a.checkpoint,
                data: a.data,
                config: a.config,
                allow_other_data: a.allow_other_data,
                picks: a.picks.selection(),
                test_subjects: a.test_subjects.as_deref().map(boldcast::data::parse_subject_list).transpose()?,
                group_column: a.group_column,
            };
            let rep = dispatch(a.backend, Eval(&req))?;
            if let Some(png) = &a.figure {
                let svg = boldcast_plot::eval::eval_figure(png, &rep, a.replace.overwrite)?;
                bc_cli::errln!("figure: {} (and {})", png.display(), svg.display());
            }
            if a.json {
                bc_cli::write_result(&(serde_json::to_string_pretty(&rep).expect("JSON serializes") + "\n"))?;
            } else {
                bc_cli::write_result(&bc_cli::eval::table(&rep))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Forecast(a) => {
            boldcast::data::fsutil::remove_stages_on_signals();
            dispatch(a.infer.model.backend, Forecast(&a.infer))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Embed(a) => {
            boldcast::data::fsutil::remove_stages_on_signals();
            dispatch(a.infer.model.backend, Embed(&a.infer, a.pool))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Fingerprint(a) => {
            let rep = dispatch(a.model.backend, Fingerprint(&a))?;
            if a.json {
                bc_cli::write_result(&(serde_json::to_string_pretty(&rep).expect("JSON serializes") + "\n"))?;
            } else {
                bc_cli::write_result(&bc_cli::fingerprint::table(&rep))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Tune(a) => {
            let search = bc_cli::tune::resolve_tune_args(&a)?;
            let backend = Backend::from_name(&search.base.train.backend)?;
            let precision = Precision::from_name(&search.base.train.precision)?;
            let rep = dispatch_in(backend, precision, Tune(&search))?;
            if a.json {
                bc_cli::write_result(&(serde_json::to_string_pretty(&rep).expect("JSON serializes") + "\n"))?;
            } else {
                bc_cli::write_result(&bc_cli::tune::table(&rep, &search))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Golden(a) => {
            let report = bc_cli::golden::run(&a)?;
            bc_cli::write_result(&format!("{report}\n"))?;
            Ok(if report.passed() { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
    }
}

struct Overfit<'a>(&'a OverfitArgs);

impl Job for Overfit<'_> {
    type Output = OverfitReport;
    fn run<M: Model<f32>>(self, name: &str, build: Builder<M>) -> Result<OverfitReport, CliError> {
        overfit_command(self.0, name, build)
    }
}

struct Train(boldcast_train::launch::Launch);

impl Job for Train {
    type Output = bc_cli::train::TrainReport;
    fn run<M: DataParallel<f32>>(self, name: &str, build: Builder<M>) -> Result<Self::Output, CliError> {
        bc_cli::train::train_launched(self.0, name, build)
    }
}

struct Tune<'a>(&'a boldcast_train::tune::Search);

impl Job for Tune<'_> {
    type Output = boldcast_train::tune::TuneReport;
    fn run<M: DataParallel<f32>>(self, name: &str, build: Builder<M>) -> Result<Self::Output, CliError> {
        bc_cli::tune::tune_command(self.0, name, build)
    }
}

struct Fingerprint<'a>(&'a bc_cli::args::FingerprintArgs);

impl Job for Fingerprint<'_> {
    type Output = boldcast_train::fingerprint::FingerprintReport;
    fn run<M: Model<f32>>(self, _name: &str, build: Builder<M>) -> Result<Self::Output, CliError> {
        bc_cli::fingerprint::fingerprint_command(self.0, build)
    }
}

struct Eval<'a>(&'a bc_cli::eval::EvalRequest);

impl Job for Eval<'_> {
    type Output = bc_cli::eval::EvalReport;
    fn run<M: Model<f32>>(self, _name: &str, build: Builder<M>) -> Result<Self::Output, CliError> {
        bc_cli::eval::eval_command(self.0, build)
    }
}

struct Forecast<'a>(&'a bc_cli::args::InferArgs);

impl Job for Forecast<'_> {
    type Output = boldcast_train::infer::ForecastReport;
    fn run<M: Model<f32>>(self, _name: &str, build: Builder<M>) -> Result<Self::Output, CliError> {
        bc_cli::infer::forecast_command(self.0, build)
    }
}

struct Embed<'a>(&'a bc_cli::args::InferArgs, bc_cli::args::PoolArg);

impl Job for Embed<'_> {
    type Output = boldcast_train::infer::EmbedReport;
    fn run<M: Model<f32>>(self, _name: &str, build: Builder<M>) -> Result<Self::Output, CliError> {
        bc_cli::infer::embed_command(self.0, self.1, build)
    }
}

/// Every buffer of 64 bytes or more on a cache-line boundary, so the CPU backend's 16-lane
/// loads never straddle two lines (`boldcast::cpu::alloc::CacheAligned` says why that matters).
#[global_allocator]
static ALLOC: boldcast::cpu::alloc::CacheAligned = boldcast::cpu::alloc::CacheAligned;

fn main() -> ExitCode {
    // Training steps free and reallocate large buffers: keep them on the heap
    // (boldcast::cpu::alloc says why; BENCHMARKS.md, "Allocator policy", has the cost).
    boldcast::cpu::alloc::retain_freed_memory();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            bc_cli::errln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
