//! `bc-cli golden`: checks a backend against a golden case directory. The comparison itself
//! is [`boldcast_testkit::golden::check_case_dir`]; this module only picks the backend.

use crate::args::GoldenArgs;
use crate::CliError;
use boldcast::backend::{dispatch, Builder, Job};
use boldcast_testkit::golden::{check_case_dir, Report};
use std::path::Path;

struct Golden<'a>(&'a Path);

impl Job for Golden<'_> {
    type Output = Report;
    type Error = CliError;
    fn run<M: boldcast::core::DataParallel<f32>>(self, _: &str, build: Builder<M>) -> Result<Report, CliError> {
        // The seed is irrelevant: the case's weights replace the initialization.
        Ok(check_case_dir(self.0, |cfg, adj| build(cfg, adj, 0))?)
    }
}

/// Runs every check of the case on the chosen backend and returns the report.
pub fn run(args: &GoldenArgs) -> Result<Report, CliError> {
    if !args.case_dir.is_dir() {
        return Err(CliError::Msg(format!("{}: not a golden case directory", args.case_dir.display())));
    }
    dispatch(args.backend, Golden(&args.case_dir))
}
