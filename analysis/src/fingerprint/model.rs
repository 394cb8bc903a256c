//! Fingerprinting with a model: the pooled embeddings of each run (or half run) as samples
//! ([`embedding_samples`]), and the report of a checkpoint's embeddings against the
//! functional-connectivity fingerprint of the same runs ([`fingerprint_model`]), what
//! `bc-cli fingerprint` prints.
//!
//! # Pooling
//!
//! A run's final-norm embeddings `(n_tokens, P, M)` become one sample by a [`Pool`]:
//!
//! - [`Pool::Corr`] (the default of `bc-cli fingerprint`): the parcel-by-parcel correlation of
//!   the embeddings over the tokens ([`crate::infer::pool_corr`]), its upper triangle Fisher
//!   z-transformed and compared by Pearson correlation: the functional-connectivity
//!   fingerprint, with each parcel's BOLD value replaced by its embedding;
//! - [`Pool::Mean`]: the mean over tokens, `(P, M)` flattened, compared by cosine similarity.
//!
//! Neither looks at the subjects' labels: each run's features are its own. The mean carries
//! almost no identity: the embeddings are close to linear in the recent inputs and the runs
//! are standardized, so every run's mean is nearly one common offset plus noise. Measured on
//! `IdentitySpec` datasets of 10 subjects x 2 runs x 300 TRs x 12 parcels, from the per-token
//! embeddings `bc-cli embed` wrote (the `quick` preset's model trained on the planted runs;
//! the poolings other than these two computed from them offline), top-1 correct of the 20
//! queries of each dataset:
//!
//! | pooling                                        | 20 steps, seeds 1-5 | 200, 600 steps, seed 4 |
//! |------------------------------------------------|---------------------|------------------------|
//! | mean, cosine                                   | 7 / 100             | 0, 0                   |
//! | mean, each feature centred over the runs       | 3 / 100             | 0, 1                   |
//! | mean, each feature z-scored over the runs      | 7 / 100             | 1, 4                   |
//! | sd over tokens per (parcel, feature), cosine   | 34 / 100            | 7, 3                   |
//! | the same sd, centred / z-scored over the runs  | 42 / 100, 44 / 100  | 12, 2 / 8, 4           |
//! | corr (this module's default)                   | 100 / 100           | 20, 20                 |
//! | corr, identical subjects                       | 5 / 100             | 0, 1                   |
//!
//! (Chance is 1/19 of the queries; the CPU and dfdx-cpu backends gave the same counts.) The
//! correlation pooling identified every subject after a single training step as well: it
//! passes on the coupling of the BOLD it is given, which the FC fingerprint beside it measures
//! directly, so on these data it shows that the embeddings keep that coupling rather than
//! that training learned an identity; the McNemar test of the two says whether the model's
//! view adds to FC or loses from it.

use super::{
    cut_segments, fc_samples, fingerprint_cut, fisher_z, Cut, FcEdges, FingerprintReport, Method, Relatives, Sample,
    Segment, Similarity,
};
use crate::infer::{pool_corr, pool_mean, run_embeddings, Context, Pool};
use crate::AnalysisError;
use boldcast_core::Model;
use boldcast_data::{Dataset, Run};
use boldcast_fixtures::SynthRun;

/// The name of the embedding method in a report.
pub const EMBEDDING: &str = "embedding";
/// The name of the functional-connectivity method.
pub const FC: &str = "fc";
/// What the functional-connectivity features are, in words.
pub const FC_FEATURES: &str =
    "the parcel-by-parcel Pearson correlation of the BOLD over TRs, upper triangle, Fisher z (Finn et al. 2015)";

/// The fewest tokens a segment's embeddings are pooled over: a correlation over two tokens
/// is ±1 whatever the data.
pub const MIN_SEGMENT_TOKENS: usize = 3;

/// The fewest TRs `--segment` accepts for `model`: [`MIN_SEGMENT_TOKENS`] tokens of `d_in`
/// TRs, and never fewer than FC needs ([`super::fc::MIN_HALF_TRS`]).
pub fn min_segment_trs(cfg: &boldcast_core::ModelConfig) -> usize {
    (MIN_SEGMENT_TOKENS * cfg.d_in).max(super::fc::MIN_HALF_TRS)
}

/// The similarity an embedding pooling is compared by and its features in words; an error for
/// [`Pool::None`] (per-token embeddings are not one sample per run).
pub fn embedding_method(pool: Pool) -> Result<(Similarity, &'static str), AnalysisError> {
    match pool {
        Pool::Corr => Ok((
            Similarity::Pearson,
            "the parcel-by-parcel Pearson correlation of the final-norm embeddings over tokens (each parcel's \
             d_model-vector, centred per feature), upper triangle, Fisher z",
        )),
        Pool::Mean => {
            Ok((Similarity::Cosine, "the mean of the final-norm embeddings over tokens, (P, d_model) flattened"))
        }
        Pool::None => Err(unpooled()),
    }
}

/// The error of [`Pool::None`].
fn unpooled() -> AnalysisError {
    let reason = "pooling `none` keeps every token: a fingerprint needs one sample per run (`mean` or `corr`)";
    AnalysisError::Fingerprint { reason: reason.into() }
}

/// One run's features under `pool`.
fn run_features<M: Model<f32>>(model: &M, run: &Run, ctx: &Context, pool: Pool) -> Result<Vec<f64>, AnalysisError> {
    if pool == Pool::None {
        return Err(unpooled());
    }
    let e = run_embeddings(model, run, ctx)?;
    Ok(match pool {
        Pool::Corr => pool_corr(&e).upper().into_iter().map(fisher_z).collect(),
        Pool::Mean | Pool::None => pool_mean(&e).data.iter().map(|&x| f64::from(x)).collect(),
    })
}

/// How runs are embedded for fingerprinting: the context, the pooling, and an optional
/// progress report `(tokens done, tokens in all)` called after each run or segment.
#[derive(Clone, Copy)]
pub struct Embedding<'a> {
    /// The context of each output.
    pub ctx: &'a Context,
    /// How a run's embeddings become one vector.
    pub pool: Pool,
    /// Called after each run or segment.
    pub progress: Option<&'a (dyn Fn(usize, usize) + Sync)>,
}

impl<'a> From<(&'a Context, Pool)> for Embedding<'a> {
    fn from((ctx, pool): (&'a Context, Pool)) -> Self {
        Self { ctx, pool, progress: None }
    }
}

/// The embedding features of each segment under `ctx` and `pool`, as samples. A whole run's
/// are the run's own; a half run or a run's first TRs are made a run of their own first (the
/// values are standardized over the segment, and standardizing them again changes them only
/// by rounding), so the model sees nothing of the run past the segment.
pub fn embedding_samples<M: Model<f32>>(
    model: &M,
    ds: &Dataset,
    runs: &[usize],
    segs: &[Segment],
    cut: Cut,
    how: Embedding<'_>,
) -> Result<Vec<Sample>, AnalysisError> {
    let (ctx, pool) = (how.ctx, how.pool);
    embedding_method(pool)?;
    let sample = |seg: &Segment, features| Sample { subject: seg.subject.clone(), label: seg.label.clone(), features };
    let d_in = model.config().d_in.max(1);
    let total: usize = segs.iter().map(|s| s.n_tr / d_in).sum();
    let mut done = 0;
    let mut report = |seg: &Segment| {
        done += seg.n_tr / d_in;
        if let Some(f) = how.progress {
            f(done, total);
        }
    };
    if cut == Cut::Whole {
        return runs
            .iter()
            .zip(segs)
            .map(|(&i, seg)| {
                let features = run_features(model, &ds.runs[i], ctx, pool)?;
                report(seg);
                Ok(sample(seg, features))
            })
            .collect();
    }
    segs.iter()
        .map(|seg| {
            let run = SynthRun {
                subject: seg.subject.clone(),
                run: "1".into(),
                n_tr: seg.n_tr,
                parcels: seg.parcels,
                data: seg.data.clone(),
            };
            let one = Dataset::from_synth_owned(vec![run], None)?;
            let features = run_features(model, &one.runs[0], ctx, pool)?;
            report(seg);
            Ok(sample(seg, features))
        })
        .collect()
}

/// Identifies the subjects of `runs` (indices into `ds.runs`) from `model`'s embeddings pooled
/// by `pool` (see the module documentation) and from their functional connectivity (Pearson
/// correlation of Fisher-z edges, Finn et al. 2015), with the paired McNemar test of the two.
/// With `segment = Some(n)` each run's first `n` TRs (refused below [`min_segment_trs`] or
/// above the shortest run), else whole runs when some subject has two of them, else halves
/// of runs ([`cut_segments`]). Runs of related subjects (`kin`) are never compared.
pub fn fingerprint_model<M: Model<f32>>(
    model: &M,
    ds: &Dataset,
    runs: &[usize],
    how: Embedding<'_>,
    segment: Option<usize>,
    kin: &Relatives,
) -> Result<FingerprintReport, AnalysisError> {
    let pool = how.pool;
    let (similarity, words) = embedding_method(pool)?;
    let min = min_segment_trs(model.config());
    if let Some(n) = segment.filter(|&n| n < min) {
        let d_in = model.config().d_in;
        let reason = format!(
            "--segment {n}: the model needs at least {min} TRs ({MIN_SEGMENT_TOKENS} tokens of d_in = {d_in} TRs; \
             FC needs {})",
            super::fc::MIN_HALF_TRS
        );
        return Err(AnalysisError::Fingerprint { reason });
    }
    let (segs, cut) = cut_segments(ds, runs, segment)?;
    let emb = embedding_samples(model, ds, runs, &segs, cut, how)?;
    let fc = fc_samples(&segs, FcEdges::FisherZ);
    fingerprint_cut(
        &[
            Method::new(EMBEDDING, &emb, similarity).described(words, Some(pool)),
            Method::new(FC, &fc, Similarity::Pearson).described(FC_FEATURES, None),
        ],
        cut,
        kin,
    )
}
