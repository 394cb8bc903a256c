//! A run's final-norm embeddings ([`run_embeddings`], `(n_tokens, P, M)`, under the
//! [`Context`] rule of the forecasts), their poolings over tokens ([`Pool`]: the mean,
//! [`pool_mean`] and [`pooled_embedding`], `(P, M)`; the parcel-by-parcel correlation,
//! [`pool_corr`] and [`pooled_correlation`], `(P, P)`, what a run's fingerprint is made of),
//! and the files of `bc-cli embed` ([`embed_runs`]):
//!
//! - per token: `<run>_embed.npy`, float32 `(n_tokens, P, M)`, `[i, p, :]` the embedding of
//!   parcel `p` at token `i`, which has seen TRs up to `last_tr[i] = i D + D - 1`
//!   (`<run>_last_tr.npy`, int64);
//! - `--pool mean`: `<run>_embed_mean.npy`, float32 `(P, M)`, the mean over the run's tokens;
//! - `--pool corr`: `<run>_embed_corr.npy`, float32 `(P, P)`, the correlation of every two
//!   parcels' embeddings over the run's tokens ([`pool_corr`]);
//!
//! and `embed.json` ([`EmbedReport`]). The directory is built under a temporary name and
//! renamed at the end.
//!
//! # The correlation pooling
//!
//! With `g[t, p, m]` the embeddings centred per parcel and feature over the tokens, parcels
//! `p` and `q` correlate as `r_pq = sum_{t,m} g_tpm g_tqm / sqrt(sum_{t,m} g_tpm^2 sum_{t,m}
//! g_tqm^2)`: the functional connectivity of the BOLD with each parcel's value replaced by its
//! `M`-vector embedding. Why a second-order pooling: the embeddings are close to linear in
//! the recent (standardized) inputs, so their mean over a run is nearly the same offset for
//! every run, and a subject's coupling (what sets their functional connectivity) shows in how
//! the parcels' embeddings move together, not in where they sit on average. A parcel whose
//! embedding does not vary over the tokens correlates with nothing, itself included (its row
//! and column are 0), as a constant parcel does in the functional-connectivity fingerprint.

use super::context::{per_token, Context, Outputs};
use super::{Job, Predictor, Side};
use crate::AnalysisError;
use boldcast_core::{EmbedShape, Embeddings, Model};
use boldcast_data::write::write_npy;
use boldcast_data::Run;
use boldcast_storage::fsutil::StagedDir;
use std::path::Path;

/// Per token, or pooled over the run.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Pool {
    /// Every token's embedding, `(n_tokens, P, M)`.
    None,
    /// The mean over tokens, `(P, M)`.
    Mean,
    /// The parcel-by-parcel correlation over tokens, `(P, P)` (the module documentation).
    Corr,
}

impl Pool {
    /// Its name in the JSON and on the command line: `none`, `mean`, `corr`.
    pub fn name(self) -> &'static str {
        match self {
            Pool::None => "none",
            Pool::Mean => "mean",
            Pool::Corr => "corr",
        }
    }
}

/// The embeddings of `model` for every token of `run` under `ctx`, `(1, n_tokens, P, M)`.
pub fn run_embeddings<M: Model<f32>>(model: &M, run: &Run, ctx: &Context) -> Result<Embeddings<f32>, AnalysisError> {
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

/// The mean over tokens (and batch) of every `[p * d_model + m]`, in f64.
fn means(e: &Embeddings<f32>) -> Vec<f64> {
    let s = e.shape();
    let (rows, width) = (s.batch * s.time, s.parcels * s.d_model);
    let mut sum = vec![0f64; width];
    for row in e.data().chunks_exact(width.max(1)) {
        sum.iter_mut().zip(row).for_each(|(a, &x)| *a += x as f64);
    }
    sum.iter_mut().for_each(|a| *a /= rows.max(1) as f64);
    sum
}

/// The mean over tokens (and batch) of `e`, accumulated in f64.
pub fn pool_mean(e: &Embeddings<f32>) -> PooledEmbedding {
    let s = e.shape();
    let data = means(e).iter().map(|&a| a as f32).collect();
    PooledEmbedding { parcels: s.parcels, d_model: s.d_model, data }
}

/// `run`'s embedding pooled over its tokens: [`pool_mean`] of [`run_embeddings`].
pub fn pooled_embedding<M: Model<f32>>(model: &M, run: &Run, ctx: &Context) -> Result<PooledEmbedding, AnalysisError> {
    Ok(pool_mean(&run_embeddings(model, run, ctx)?))
}

/// One run's parcel-by-parcel correlation of embeddings, `(P, P)`, symmetric.
#[derive(Clone, Debug, PartialEq)]
pub struct ParcelCorrelation {
    /// Parcels.
    pub parcels: usize,
    /// `r_pq` at `[p * parcels + q]`.
    pub data: Vec<f64>,
}

impl ParcelCorrelation {
    /// `r_pq`.
    pub fn at(&self, p: usize, q: usize) -> f64 {
        self.data[p * self.parcels + q]
    }

    /// The upper triangle `p < q`, row by row (`P (P - 1) / 2` values), as the
    /// functional-connectivity edges are laid out.
    pub fn upper(&self) -> Vec<f64> {
        let p = self.parcels;
        (0..p).flat_map(|a| (a + 1..p).map(move |b| (a, b))).map(|(a, b)| self.at(a, b)).collect()
    }
}

/// The correlation of every two parcels' embeddings over the tokens (and batch) of `e`, in
/// f64 (the module documentation): the Gram matrix of the centred embeddings, token by token,
/// scaled by its diagonal. It costs `n_tokens P^2 M / 2` multiply-adds, less than making the
/// embeddings did.
pub fn pool_corr(e: &Embeddings<f32>) -> ParcelCorrelation {
    let s = e.shape();
    let (p, m) = (s.parcels, s.d_model);
    let mean = means(e);
    let (mut gram, mut g) = (vec![0f64; p * p], vec![0f64; p * m]);
    for row in e.data().chunks_exact((p * m).max(1)) {
        g.iter_mut().zip(row.iter().zip(&mean)).for_each(|(c, (&x, mu))| *c = x as f64 - mu);
        for a in 0..p {
            let ga = &g[a * m..(a + 1) * m];
            for b in a..p {
                gram[a * p + b] += ga.iter().zip(&g[b * m..(b + 1) * m]).map(|(x, y)| x * y).sum::<f64>();
            }
        }
    }
    let mut data = vec![0f64; p * p];
    for a in 0..p {
        for b in a..p {
            let d = (gram[a * p + a] * gram[b * p + b]).sqrt();
            // No variance, no correlation: a constant parcel's row stays 0.
            let r = if d > 0.0 { (gram[a * p + b] / d).clamp(-1.0, 1.0) } else { 0.0 };
            (data[a * p + b], data[b * p + a]) = (r, r);
        }
    }
    ParcelCorrelation { parcels: p, data }
}

/// `run`'s parcel-by-parcel correlation of embeddings: [`pool_corr`] of [`run_embeddings`].
pub fn pooled_correlation<M: Model<f32>>(
    model: &M,
    run: &Run,
    ctx: &Context,
) -> Result<ParcelCorrelation, AnalysisError> {
    Ok(pool_corr(&run_embeddings(model, run, ctx)?))
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
    /// The weights, the data, the output and the context.
    #[serde(flatten)]
    pub job: super::JobHeader,
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
    (model, weights): (&M, &Path),
    dir: &Path,
    (run, side): (&Run, Option<Side>),
    ctx: &Context,
    pool: Pool,
) -> Result<EmbedEntry, AnalysisError> {
    let id = run.id.to_string();
    let e = run_embeddings(model, run, ctx)?;
    boldcast_train::checkpoint::verify::check_outputs(weights, &format!("the embeddings of {id}"), e.data())?;
    let s = e.shape();
    let (embedding, shape, last_tr) = match pool {
        Pool::Mean => {
            let (name, pooled) = (format!("{id}_embed_mean.npy"), pool_mean(&e));
            write_npy(&dir.join(&name), &[s.parcels, s.d_model], &pooled.data)?;
            (name, vec![s.parcels, s.d_model], None)
        }
        Pool::Corr => {
            let name = format!("{id}_embed_corr.npy");
            let r: Vec<f32> = pool_corr(&e).data.iter().map(|&x| x as f32).collect();
            write_npy(&dir.join(&name), &[s.parcels, s.parcels], &r)?;
            (name, vec![s.parcels, s.parcels], None)
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
) -> Result<EmbedReport, AnalysisError> {
    let stage = StagedDir::new(job.out)?;
    let mut runs = Vec::new();
    for r in p.runs(job.runs) {
        let entry = write_run((&p.model, &p.weights), stage.path(), r, &job.context, pool)?;
        on_run(&entry);
        runs.push(entry);
    }
    let cfg = p.model.config();
    let report = EmbedReport {
        job: super::JobHeader::of(p, job),
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
