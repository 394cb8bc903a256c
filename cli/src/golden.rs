//! `bc-cli golden`: checks a backend against a golden case directory. The comparison itself
//! is [`boldcast::golden::check_case_dir`]; this module only picks the backend.

use crate::args::{Backend, GoldenArgs};
use crate::CliError;
use boldcast::golden::{check_case_dir, Report};

/// Runs every check of the case on the chosen backend and returns the report.
pub fn run(args: &GoldenArgs) -> Result<Report, CliError> {
    if !args.case_dir.is_dir() {
        return Err(CliError::Msg(format!("{}: not a golden case directory", args.case_dir.display())));
    }
    let report = match args.backend {
        // The seed is irrelevant: the case's weights replace the initialization.
        Backend::Cpu => check_case_dir(&args.case_dir, |cfg, adj| boldcast::cpu::CpuModel::<f32>::new(cfg, adj, 0))?,
    };
    Ok(report)
}
