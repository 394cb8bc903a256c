//! `bc-cli eval`: the library's evaluation ([`boldcast_analysis::eval::request`]) with the flags'
//! names in its errors; `main` prints the table ([`boldcast_analysis::text::eval_table`]) or
//! the JSON and draws `--figure` ([`boldcast_plot::eval`]).

use crate::error::CliError;
use boldcast::core::{Adjacency, Model, ModelConfig};
use boldcast_analysis::eval::request::evaluate_request;

pub use boldcast_analysis::eval::request::EvalRequest;
pub use boldcast_analysis::eval::{EvalReport, Row};

/// `bc-cli eval`: [`evaluate_request`], its notes and warnings on stderr.
pub fn eval_command<M, F>(req: &EvalRequest, build: F) -> Result<EvalReport, CliError>
where
    M: Model<f32>,
    F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast::core::Error>,
{
    Ok(evaluate_request(req, build, &mut |n| crate::errln!("{n}"))?)
}
