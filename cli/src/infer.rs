//! `bc-cli forecast` and `bc-cli embed`: the flags, the lines printed and the progress bar
//! around the library's [`boldcast_analysis::infer`] (which documents the files, the layouts and
//! the context rule). `--json` prints the report that is also written to `--out`.

use crate::args::{InferArgs, ModelDataArgs};
use crate::error::CliError;
use crate::progress::Progress;
use boldcast::core::{Adjacency, Model, ModelConfig};
use boldcast_analysis::infer::Pool;
use boldcast_analysis::infer::{embed_runs, forecast_runs, Context, EmbedReport, ForecastReport, Job, Predictor};
use boldcast_analysis::text;
use boldcast_analysis::AnalysisError;
use boldcast_train::linear_path::LinearPathModel;
use std::io::IsTerminal;

/// What [`open`] gives: the predictor, the runs, the context and its rule in words.
pub type Opened<M> = (Predictor<LinearPathModel<M>>, Vec<usize>, Context, String);

/// The predictor of `a` (the data's and its notes on stderr), the runs of `--subjects` and
/// the context with its rule; the selection and the context are printed on stderr.
pub fn open<M, F>(a: &ModelDataArgs, build: F) -> Result<Opened<M>, CliError>
where
    M: Model<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast::core::Error>,
{
    let p = Predictor::open(&a.open, build)?;
    for n in &p.notes {
        crate::errln!("{n}");
    }
    let runs = p.select(a.subjects.as_ref().map(|s| s.0.as_slice()), "--subjects")?;
    let (context, context_rule) = p.context(a.context, a.context_stride);
    crate::errln!("{}", p.selection_line(&runs));
    crate::errln!("context: {context_rule}");
    Ok((p, runs, context, context_rule))
}

/// The text of a job: the header before its runs (from the horizons), a run's line, and the
/// report file `--json` prints.
type Text<E> = (fn(&[usize]) -> Option<String>, fn(&E) -> String, &'static str);

/// Opens the model and the runs of `a`, then runs `work` on them with a callback that prints
/// each run's `line` (after the header `head` makes, without `--json`) and moves the progress
/// bar; with `--json` the report is printed here.
fn run_job<M, F, E, R>(
    a: &InferArgs,
    build: F,
    (head, line, report_file): Text<E>,
    work: impl FnOnce(&Predictor<LinearPathModel<M>>, &Job, &mut dyn FnMut(&E)) -> Result<R, AnalysisError>,
) -> Result<R, CliError>
where
    M: Model<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast::core::Error>,
    R: serde::Serialize,
{
    let (p, runs, context, context_rule) = open(&a.model, build)?;
    let job = Job { runs: &runs, context, context_rule, out: &a.out };
    // The bar counts tokens, so that runs of different lengths weigh what they cost.
    let tokens = p.token_counts(&runs);
    let bar = Progress::counting(std::io::stderr().is_terminal(), tokens.iter().sum(), "tokens");
    if let (false, Some(h)) = (a.json, head(&p.cfg.model.horizons)) {
        bar.println(&h);
    }
    let mut next = tokens.iter();
    let mut on_run = |e: &E| {
        if !a.json {
            bar.println(&line(e));
        }
        bar.inc_by(next.next().copied().unwrap_or(0));
    };
    let report = work(&p, &job, &mut on_run)?;
    bar.finish();
    if a.json {
        // The file as written, `made_by` included, so that both say the same.
        let path = a.out.join(report_file);
        crate::write_result(&std::fs::read_to_string(&path).map_err(boldcast::storage::io_err(&path))?)?;
    }
    Ok(report)
}

/// `bc-cli forecast`: writes the files, prints a line per run as it is done (or, with
/// `--json`, the report) and the pooled MSE.
pub fn forecast_command<M, F>(a: &InferArgs, build: F) -> Result<ForecastReport, CliError>
where
    M: Model<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast::core::Error>,
{
    let text = (|h: &[usize]| Some(text::forecast_header(h)), text::forecast_line);
    let report = run_job(a, build, (text.0, text.1, "forecast.json"), forecast_runs)?;
    if !a.json {
        text::forecast_totals(&report).iter().for_each(|l| crate::outln!("{l}"));
        crate::outln!("wrote {} (standardized MSE; per parcel in forecast.json)", a.out.display());
    }
    Ok(report)
}

/// `bc-cli embed`: writes the files, prints a line per run as it is done (or, with `--json`,
/// the report).
pub fn embed_command<M, F>(a: &InferArgs, pool: Pool, build: F) -> Result<EmbedReport, CliError>
where
    M: Model<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast::core::Error>,
{
    let report = run_job(a, build, (|_| None, text::embed_line, "embed.json"), |p, j, l| embed_runs(p, j, pool, l))?;
    if !a.json {
        crate::outln!("wrote {} (embed.json lists the files)", a.out.display());
    }
    Ok(report)
}
