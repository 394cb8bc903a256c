//! Fingerprinting with a model: the pooled embeddings of each run (or half run) as samples
//! ([`embedding_samples`]), and the report of a checkpoint's embeddings against the
//! functional-connectivity fingerprint of the same runs ([`fingerprint_model`]), what
//! `bc-cli fingerprint` prints.

use super::{fc_samples, fingerprint, segments, FcEdges, FingerprintReport, Method, Sample, Segment, Similarity};
use crate::infer::{pooled_embedding, Context};
use crate::TrainError;
use boldcast_core::Model;
use boldcast_data::Dataset;
use boldcast_fixtures::SynthRun;

/// The name of the embedding method in a report.
pub const EMBEDDING: &str = "embedding";
/// The name of the functional-connectivity method.
pub const FC: &str = "fc";

/// The pooled embedding `(P, M)` of each segment under `ctx`, flattened, as samples. A whole
/// run's embedding is the run's own ([`pooled_embedding`]); a half run is made a run of its
/// own first (its values are a standardized half, and standardizing them again changes them
/// only by rounding).
pub fn embedding_samples<M: Model<f32>>(
    model: &M,
    ds: &Dataset,
    runs: &[usize],
    segs: &[Segment],
    halves: bool,
    ctx: &Context,
) -> Result<Vec<Sample>, TrainError> {
    let sample = |seg: &Segment, pooled: crate::infer::PooledEmbedding| Sample {
        subject: seg.subject.clone(),
        label: seg.label.clone(),
        features: pooled.data.iter().map(|&x| f64::from(x)).collect(),
    };
    if !halves {
        return runs
            .iter()
            .zip(segs)
            .map(|(&i, seg)| Ok(sample(seg, pooled_embedding(model, &ds.runs[i], ctx)?)))
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
            Ok(sample(seg, pooled_embedding(model, &one.runs[0], ctx)?))
        })
        .collect()
}

/// Identifies the subjects of `runs` (indices into `ds.runs`) from `model`'s pooled
/// embeddings (cosine similarity) and from their functional connectivity (Pearson
/// correlation of Fisher-z edges, Finn et al. 2015), with the paired McNemar test of the two.
/// Whole runs when some subject has two of them, else halves of runs ([`segments`]).
pub fn fingerprint_model<M: Model<f32>>(
    model: &M,
    ds: &Dataset,
    runs: &[usize],
    ctx: &Context,
) -> Result<FingerprintReport, TrainError> {
    let (segs, halves) = segments(ds, runs)?;
    let emb = embedding_samples(model, ds, runs, &segs, halves, ctx)?;
    let fc = fc_samples(&segs, FcEdges::FisherZ);
    fingerprint(&[Method::new(EMBEDDING, &emb, Similarity::Cosine), Method::new(FC, &fc, Similarity::Pearson)], halves)
}
