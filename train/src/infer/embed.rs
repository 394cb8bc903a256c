//! A run's final-norm embeddings ([`run_embeddings`], `(n_tokens, P, M)`, under the
//! [`Context`] rule of the forecasts), their mean over tokens ([`pooled_embedding`], `(P, M)`,
//! a run's fingerprint), and the files of `bc-cli embed` ([`embed_runs`]):
//!
//! - per token: `<run>_embed.npy`, float32 `(n_tokens, P, M)`, `[i, p, :]` the embedding of
//!   parcel `p` at token `i`, which has seen TRs up to `last_tr[i] = i D + D - 1`
//!   (`<run>_last_tr.npy`, int64);
//! - `--pool mean`: `<run>_embed_mean.npy`, float32 `(P, M)`, the mean over the run's tokens;
//!
//! and `embed.json` ([`EmbedReport`]). The directory is built under a temporary name and
//! renamed at the end.

use super::context::{per_token, Context, Outputs};
use super::{Job, Predictor, Side};
use crate::error::TrainError;
use boldcast_core::{EmbedShape, Embeddings, Model};
use boldcast_data::fsutil::StagedDir;
use boldcast_data::write::write_npy;
use boldcast_data::Run;
use std::path::{Path, PathBuf};

/// Per token, or pooled over the run.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pool {
    /// Every token's embedding, `(n_tokens, P, M)`.
    None,
    /// The mean over tokens, `(P, M)`.
    Mean,
}

/// The embeddings of `model` for every token of `run` under `ctx`, `(1, n_tokens, P, M)`.
pub fn run_embeddings<M: Model<f32>>(model: &M, run: &Run, ctx: &Context) -> Result<Embeddings<f32>, TrainError> {
    let (m, p) = (model.config().d_model, run.stats.len());
    let out = per_token(run, Outputs::of(model.config(), m), ctx, |t| model.embed(t).map(|e| e.into_data()))?;
    let n = out.len() / (p * m).max(1);
    Ok(Embeddings::new(EmbedShape::new(1, n, p, m), out)?)
}

/// One run's embedding pooled over its tokens, `(P, M)`.
#[derive(Clone, Debug, PartialEq)]
pub struct PooledEmbedding {
    /// Parcels.
    pub parcels: usize,
    /// `d_model`.
    pub d_model: usize,
    /// `[p * d_model + m]`.
    pub data: Vec<f32>,
}

impl PooledEmbedding {
    /// Parcel `p`'s embedding.
    pub fn parcel(&self, p: usize) -> &[f32] {
        &self.data[p * self.d_model..(p + 1) * self.d_model]
    }
}

/// The mean over tokens (and batch) of `e`, accumulated in f64.
pub fn pool_mean(e: &Embeddings<f32>) -> PooledEmbedding {
    let s = e.shape();
    let (rows, width) = (s.batch * s.time, s.parcels * s.d_model);
    let mut sum = vec![0f64; width];
    for row in e.data().chunks_exact(width.max(1)) {
        sum.iter_mut().zip(row).for_each(|(a, &x)| *a += x as f64);
    }
    let data = sum.iter().map(|&a| (a / rows.max(1) as f64) as f32).collect();
    PooledEmbedding { parcels: s.parcels, d_model: s.d_model, data }
}

/// `run`'s embedding pooled over its tokens: [`pool_mean`] of [`run_embeddings`] (a subject
/// fingerprint is a function of these).
pub fn pooled_embedding<M: Model<f32>>(model: &M, run: &Run, ctx: &Context) -> Result<PooledEmbedding, TrainError> {
    Ok(pool_mean(&run_embeddings(model, run, ctx)?))
}

/// One run in `embed.json`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct EmbedEntry {
    /// The run's entities, `sub-01_run-1`.
    pub id: String,
    /// Its subject, without `sub-`.
    pub subject: String,
    /// Its side of the training split (`null` without one).
    pub side: Option<Side>,
    /// Its TRs.
    pub n_tr: usize,
    /// Its tokens, `n_tr / d_in`.
    pub tokens: usize,
    /// The embedding file.
    pub embedding: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// `last_tr` (per-token embeddings only).
    pub last_tr: Option<String>,
}

/// What `embed` did: `embed.json`, and what `bc-cli embed --json` prints.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct EmbedReport {
    /// The weights file.
    pub weights: PathBuf,
    /// The data, in words.
    pub data: String,
    /// The output directory.
    pub out: PathBuf,
    /// Tokens each embedding sees (`null`: the whole run).
    pub context: Option<usize>,
    /// Why that context.
    pub context_rule: String,
    /// Per token or pooled.
    pub pool: Pool,
    /// TRs per token.
    pub d_in: usize,
    /// M.
    pub d_model: usize,
    /// The parcel names (the P axis).
    pub parcels: Vec<String>,
    /// Per run, in file-name order.
    pub runs: Vec<EmbedEntry>,
}

/// Writes one run's embedding file(s) into `dir`.
fn write_run<M: Model<f32>>(
    model: &M,
    dir: &Path,
    (run, side): (&Run, Option<Side>),
    ctx: &Context,
    pool: Pool,
) -> Result<EmbedEntry, TrainError> {
    let id = run.id.to_string();
    let e = run_embeddings(model, run, ctx)?;
    let s = e.shape();
    let (embedding, shape, last_tr) = match pool {
        Pool::Mean => {
            let (name, pooled) = (format!("{id}_embed_mean.npy"), pool_mean(&e));
            write_npy(&dir.join(&name), &[s.parcels, s.d_model], &pooled.data)?;
            (name, vec![s.parcels, s.d_model], None)
        }
        Pool::None => {
            let (name, last) = (format!("{id}_embed.npy"), format!("{id}_last_tr.npy"));
            let d = model.config().d_in;
            let trs: Vec<i64> = (0..s.time).map(|i| (i * d + d - 1) as i64).collect();
            write_npy(&dir.join(&name), &[s.time, s.parcels, s.d_model], e.data())?;
            write_npy(&dir.join(&last), &[s.time], &trs)?;
            (name, vec![s.time, s.parcels, s.d_model], Some(last))
        }
    };
    let (subject, n_tr, tokens) = (run.id.subject.clone(), run.n_tr, s.time);
    Ok(EmbedEntry { id, subject, side, n_tr, tokens, embedding, shape, last_tr })
}

/// Embeds the runs of `job` (per token or pooled), one run at a time, calling `on_run` after
/// each.
pub fn embed_runs<M: Model<f32>>(
    p: &Predictor<M>,
    job: &Job<'_>,
    pool: Pool,
    on_run: &mut dyn FnMut(&EmbedEntry),
) -> Result<EmbedReport, TrainError> {
    let stage = StagedDir::new(job.out)?;
    let mut runs = Vec::new();
    for r in p.runs(job.runs) {
        let entry = write_run(&p.model, stage.path(), r, &job.context, pool)?;
        on_run(&entry);
        runs.push(entry);
    }
    let cfg = p.model.config();
    let report = EmbedReport {
        weights: p.weights.clone(),
        data: p.loaded.source.clone(),
        out: job.out.to_path_buf(),
        context: job.context.tokens(),
        context_rule: job.context_rule.clone(),
        pool,
        d_in: cfg.d_in,
        d_model: cfg.d_model,
        parcels: p.loaded.ds.parcel_names.clone(),
        runs,
    };
    super::write_json(&stage.path().join("embed.json"), &report)?;
    stage.commit()?;
    Ok(report)
}
