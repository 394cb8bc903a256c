//! `bc-cli fingerprint`: the table, the JSON and the figure of a subject-fingerprinting report
//! around the library's [`boldcast_analysis::fingerprint::model::fingerprint_model`] (which says
//! what is compared and how; [`boldcast_analysis::fingerprint`] documents the statistics).

use crate::args::FingerprintArgs;
use crate::error::CliError;
use crate::progress::Progress;
use boldcast::core::{Adjacency, Model, ModelConfig};
use boldcast_analysis::fingerprint::model::{fingerprint_model, Embedding};
use boldcast_analysis::fingerprint::FingerprintReport;
use std::io::IsTerminal;

/// `bc-cli fingerprint`: opens the checkpoint and the data, embeds every selected run (or half
/// run) and identifies subjects by its embeddings and by functional connectivity; draws the
/// figure when `--figure` is given (its path checked first, [`boldcast_plot::check_figure_path`]).
pub fn fingerprint_command<M, F>(a: &FingerprintArgs, build: F) -> Result<FingerprintReport, CliError>
where
    M: Model<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast::core::Error>,
{
    if let Some(path) = &a.figure {
        boldcast_plot::check_figure_path(path, a.replace.overwrite)?;
    }
    let (p, runs, context, _) = crate::infer::open(&a.model, build)?;
    let kin = p.relatives(a.group_column.as_deref(), &runs)?;
    // The tokens in all are known at the first report (the runs are cut into segments first).
    let bar = Progress::counting(std::io::stderr().is_terminal(), 0, "tokens");
    let progress = |done: usize, total: usize| {
        bar.set_len(total as u64);
        bar.advance_to(done as u64);
    };
    let how = Embedding { ctx: &context, pool: a.pool.pool(), progress: Some(&progress) };
    let report = fingerprint_model(&p.model, &p.loaded.ds, &runs, how, a.segment, &kin)?;
    bar.finish();
    if let Some(path) = &a.figure {
        let heldout = p.split.as_ref().map(|s| s.heldout_subjects.clone()).unwrap_or_default();
        let svg = boldcast_plot::fingerprint::draw_fingerprint(&report, &heldout, path, a.replace.overwrite)?;
        crate::errln!("figure: {} (and {})", path.display(), svg.display());
    }
    Ok(report)
}
