//! `bc-cli tune`: the flags of a search, a line per trial and the results table, around
//! [`boldcast_train::tune`] (which documents the search: candidates, trials, the winner, the
//! files and how a killed search continues).

use crate::args::TuneArgs;
use crate::error::CliError;
use boldcast::backend::Builder;
use boldcast::core::DataParallel;
use boldcast_train::presets::DEFAULT_PRESET;
use boldcast_train::tune::{self, Axis, Candidate, Mode, Search, TrialResult, TuneObserver, TuneReport};
use std::path::PathBuf;

/// The search of `bc-cli tune`'s flags: the configuration and split of `train`'s flags, the
/// `--grid` keys, `--random N` (seeded with `train.seed`), and `--out` (default
/// `runs/tune-<preset>`) as the search's directory.
pub fn resolve_tune_args(a: &TuneArgs) -> Result<Search, CliError> {
    if a.train.resume.is_some() || a.train.stop_after.is_some() {
        return Err(CliError::Msg(
            "tune: --resume and --stop-after are train's; run the same tune command again to continue a search".into(),
        ));
    }
    let (cfg, _) = crate::train::resolve_train_args(&a.train)?;
    let mut base = cfg.ok_or_else(|| CliError::Msg("tune: no configuration".into()))?;
    let preset = base.preset.clone().unwrap_or_else(|| DEFAULT_PRESET.into());
    let out = base.train.out.take().unwrap_or_else(|| PathBuf::from(format!("runs/tune-{preset}")));
    let axes = a.grid.iter().map(|g| Axis::parse(g)).collect::<Result<Vec<_>, _>>()?;
    let mode = a.random.map_or(Mode::Grid, |n| Mode::Random { n, seed: base.train.seed });
    Ok(Search { base, axes, mode, out })
}

/// Prints one line per trial.
struct Lines {
    keys: Vec<String>,
    n: usize,
}

impl TuneObserver for Lines {
    fn on_trial_start(&mut self, _c: &Candidate, n: usize) {
        self.n = n;
    }

    fn on_trial_end(&mut self, r: &TrialResult) {
        crate::outln!("{}", boldcast_train::text::trial_line(&self.keys, self.n, r));
    }
}

/// Runs `search` with the models of `build` on `backend`, printing a line per trial; an error
/// when every trial failed.
pub fn tune_command<M: DataParallel<f32>>(
    search: &Search,
    backend: &str,
    build: Builder<M>,
) -> Result<TuneReport, CliError> {
    crate::outln!(
        "tune: {} on the validation subjects {:?} (data.subjects_heldout); trials in {}",
        search.axes.iter().map(|a| a.key.as_str()).collect::<Vec<_>>().join(", "),
        search.base.data.subjects_heldout,
        search.out.display()
    );
    let mut lines = Lines { keys: search.axes.iter().map(|a| a.key.clone()).collect(), n: 0 };
    let report = tune::run_search(search, backend, build, &mut lines)?;
    if report.best.is_none() {
        return Err(CliError::Msg(format!(
            "tune: every trial failed (their errors are in {})",
            search.out.join(tune::RESULTS_TSV).display()
        )));
    }
    Ok(report)
}
