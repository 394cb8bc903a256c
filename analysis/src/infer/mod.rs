//! Results out of a trained model: its forecasts of whole runs ([`forecast`], what
//! `bc-cli forecast` writes) and its final-norm embeddings ([`embed`], `bc-cli embed`), on any
//! backend (generic over [`Model<f32>`]) and any data the loader reads.
//!
//! [`Predictor::open`] opens the weights once ([`Weights`]: a file, a checkpoint or a run
//! directory), takes their stored configuration (`data.dir` replaced when data are given),
//! loads the data ([`load_data`]), splits it as training did when these are the training data
//! (the training runs' fingerprint is the one the weights recorded), to label each run
//! `train` or `heldout` (other data are not labelled), and builds the model.
//! Weights trained on other parcel names are refused ([`crate::AnalysisError::OtherData`]) unless
//! allowed; other subjects are the point (forecasting new data), so the training-data
//! fingerprint is not checked. [`Predictor::select`] picks runs by subject;
//! [`Predictor::runs`] walks them one at a time, and the writers keep one run's results in
//! memory at a time (the dataset itself is what [`load_data`] holds). [`context`] says how
//! much of a run each output sees.
//!
//! ```no_run
//! # fn main() -> Result<(), boldcast_analysis::AnalysisError> {
//! use boldcast_analysis::infer::{forecast_runs, pooled_embedding, Job, OpenRequest, Predictor};
//! let req = OpenRequest { checkpoint: "runs/train".into(), data: Some("data/new".into()), ..Default::default() };
//! let p = Predictor::open(&req, boldcast_cpu::CpuModel::<f32>::new)?;
//! let (context, context_rule) = p.context(None, None);
//! for (run, _side) in p.runs(&p.select(None, "subjects")?) {
//!     let mean = pooled_embedding(&p.model, run, &context)?; // (P, d_model)
//!     println!("{}: {:?}", run.id, &mean.parcel(0)[..2]);
//! }
//! let runs = p.select(Some(&["01".to_string()]), "subjects")?;
//! let job = Job { runs: &runs, context, context_rule, out: "runs/forecast".as_ref() };
//! let report = forecast_runs(&p, &job, &mut |_| {})?;
//! println!("{:?}", report.totals[0].mse.per_horizon);
//! # Ok(()) }
//! ```

pub mod context;
pub mod embed;
pub mod forecast;
pub mod mse;
#[cfg(test)]
mod tests;

pub use context::{Context, ContextLen};
pub use embed::{
    embed_runs, pool_corr, pool_mean, pooled_correlation, pooled_embedding, run_embeddings, EmbedReport,
    ParcelCorrelation, Pool, PooledEmbedding,
};
pub use forecast::{forecast_runs, run_forecasts, ForecastReport, RunForecast};
pub use mse::{Mse, MseSums};

use crate::eval::Weights;
use crate::AnalysisError;
use boldcast_core::{Adjacency, Model, ModelConfig};
use boldcast_data::Run;
use boldcast_storage::io_err;
use boldcast_train::config::RunConfig;
use boldcast_train::data::{load_data, DataIdentity, LoadedData, Split};
use boldcast_train::linear_path::LinearPathModel;
use std::path::PathBuf;

/// What to open: the weights and, optionally, other data.
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct OpenRequest {
    /// A weights file (`.safetensors`), a checkpoint directory, or a run directory (its
    /// best.safetensors, else its newest checkpoint); the configuration and adjacency stored
    /// in it are used.
    #[cfg_attr(feature = "clap", arg(long))]
    pub checkpoint: PathBuf,
    /// Dataset directory, in any format the loader reads (default: the configuration's, else
    /// its synthetic fixture). Other subjects than the training ones are fine; other parcel
    /// names are refused unless --allow-other-data.
    #[cfg_attr(feature = "clap", arg(long))]
    pub data: Option<PathBuf>,
    /// Run on data with other parcel names than the weights were trained on (with a warning).
    #[cfg_attr(feature = "clap", arg(long))]
    pub allow_other_data: bool,
    /// How the runs of --data are picked and read (default: the training configuration's
    /// picks; those given replace them).
    #[cfg_attr(feature = "clap", command(flatten))]
    pub picks: boldcast_data::Selection,
}

/// Which side of the training split a run's subject was on.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// A training subject: its forecasts are in-sample.
    Train,
    /// A held-out subject.
    Heldout,
    /// In neither list of an explicit split.
    Unused,
}

/// A model with its weights loaded, its configuration and the data to run it on.
pub struct Predictor<M> {
    /// The model, weights loaded.
    pub model: M,
    /// The stored configuration (`data.dir` replaced as asked).
    pub cfg: RunConfig,
    /// The weights file.
    pub weights: PathBuf,
    /// The data.
    pub loaded: LoadedData,
    /// The training split on these data, when it applies to them.
    pub split: Option<Split>,
    /// Notes and warnings for the user (the data's, then the predictor's).
    pub notes: Vec<String>,
}

impl<B: Model<f32>> Predictor<LinearPathModel<B>> {
    /// Opens `req` and builds the model with `build`, with the linear path its configuration
    /// names (see the module documentation).
    pub fn open<F>(req: &OpenRequest, build: F) -> Result<Self, AnalysisError>
    where
        F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<B, boldcast_core::Error>,
    {
        let weights = Weights::open(&req.checkpoint)?;
        let mut cfg = weights.config()?;
        if let Some(d) = &req.data {
            cfg.data.dir = Some(d.clone());
        }
        cfg.data.pick(&req.picks);
        Self::open_weights(&weights, cfg, req.allow_other_data, build)
    }

    /// [`Predictor::open`] of weights already opened, on the data of `cfg` (their stored
    /// configuration with its `[data]` set as the caller wants: the Python package's datasets).
    pub fn open_weights<F>(
        weights: &Weights,
        cfg: RunConfig,
        allow_other_data: bool,
        build: F,
    ) -> Result<Self, AnalysisError>
    where
        F: FnOnce(ModelConfig, Option<Adjacency>, u64) -> Result<B, boldcast_core::Error>,
    {
        cfg.validate()?;
        let loaded = load_data(&cfg)?;
        let mut notes = loaded.notes.clone();
        let trained = weights.trained_identity()?;
        if let Some(t) = &trained {
            let names = |parcels: &[String]| DataIdentity {
                parcels: parcels.to_vec(),
                fingerprint: String::new(),
                provenance: None,
            };
            if let Some(why) = names(&t.parcels).differs_from(&names(&loaded.ds.parcel_names)) {
                if !allow_other_data {
                    return Err(AnalysisError::OtherData { path: weights.path().to_path_buf(), reason: why });
                }
                notes.push(format!("warning: {}: {why}; running anyway, as asked", weights.path().display()));
            }
        }
        let split = training_split(&cfg, &loaded, trained.as_ref(), &mut notes);
        let train_runs = split.as_ref().map(|s| &s.train_runs[..]);
        let model = weights.build_model(&cfg, &loaded.ds, train_runs, build)?;
        Ok(Predictor { model, cfg, weights: weights.path().to_path_buf(), loaded, split, notes })
    }
}

impl<M: Model<f32>> Predictor<M> {
    /// The runs (indices into the dataset's runs, in file-name order) of `subjects` (labels
    /// with or without `sub-`; `None`: every run). A subject the data lacks is an error
    /// naming it, `field` (what the caller calls the list) and the data's subjects; a subject
    /// listed twice is an error naming it.
    pub fn select(&self, subjects: Option<&[String]>, field: &'static str) -> Result<Vec<usize>, AnalysisError> {
        let ds = &self.loaded.ds;
        let Some(list) = subjects else { return Ok((0..ds.runs.len()).collect()) };
        let all = ds.subjects();
        let bare: Vec<String> = list.iter().map(|s| s.strip_prefix("sub-").unwrap_or(s).to_string()).collect();
        if let Some((_, s)) = bare.iter().enumerate().find(|(i, s)| bare[..*i].contains(s)) {
            return Err(boldcast_data::SplitError::ListedTwice { field, subject: s.clone() }.into());
        }
        if let Some(s) = bare.iter().find(|s| !all.contains(s)) {
            return Err(boldcast_data::SplitError::UnknownSubject { field, subject: s.clone(), subjects: all }.into());
        }
        Ok((0..ds.runs.len()).filter(|&i| bare.contains(&ds.runs[i].id.subject)).collect())
    }

    /// The related subjects of `runs` by `column` of the data's `participants.tsv`, or by the
    /// run's own `data.group_column` when `column` is `None` ([`crate::fingerprint::Relatives`];
    /// none when neither is set). Errors: a column but no data directory, the file or column
    /// missing, a subject of `runs` without a row.
    pub fn relatives(
        &self,
        column: Option<&str>,
        runs: &[usize],
    ) -> Result<crate::fingerprint::Relatives, AnalysisError> {
        let Some(column) = column.or(self.cfg.data.group_column.as_deref()) else {
            return Ok(crate::fingerprint::Relatives::none());
        };
        let Some(dir) = &self.cfg.data.dir else {
            return Err(boldcast_data::SplitError::GroupsNeedDir { column: column.into() }.into());
        };
        let kin = crate::fingerprint::Relatives::read(dir, column)?;
        let ds = &self.loaded.ds;
        let mut subjects: Vec<String> = runs.iter().map(|&i| ds.runs[i].id.subject.clone()).collect();
        subjects.dedup();
        kin.check(&subjects, dir)?;
        Ok(kin)
    }

    /// The runs `selected`, one at a time, with their side of the split.
    pub fn runs<'a>(&'a self, selected: &'a [usize]) -> impl Iterator<Item = (&'a Run, Option<Side>)> + 'a {
        selected.iter().map(move |&i| (&self.loaded.ds.runs[i], self.side(i)))
    }

    /// The side of the split of run `i` (`None` without a split).
    pub fn side(&self, i: usize) -> Option<Side> {
        let s = self.split.as_ref()?;
        Some(if s.train_runs.contains(&i) {
            Side::Train
        } else if s.heldout_runs.contains(&i) {
            Side::Heldout
        } else {
            Side::Unused
        })
    }

    /// `runs: N of subjects a, b (held out in training: b)`: what `selected` covers, in words.
    pub fn selection_line(&self, selected: &[usize]) -> String {
        let ds = &self.loaded.ds;
        let mut subjects: Vec<&str> = selected.iter().map(|&i| ds.runs[i].id.subject.as_str()).collect();
        subjects.dedup();
        let held = match &self.split {
            Some(s) => format!("held out in training: {}", s.heldout_subjects.join(", ")),
            None => "not the training data: no run is labelled train or heldout".into(),
        };
        format!("runs: {} of subjects {} ({held})", selected.len(), subjects.join(", "))
    }

    /// The whole tokens of each run of `selected` (`n_tr / d_in`): what the work on it costs.
    pub fn token_counts(&self, selected: &[usize]) -> Vec<u64> {
        let d_in = self.cfg.model.d_in.max(1);
        selected.iter().map(|&i| (self.loaded.ds.runs[i].n_tr / d_in) as u64).collect()
    }

    /// The training window in tokens, `window.window / d_in`.
    pub fn training_tokens(&self) -> usize {
        self.cfg.window.window / self.cfg.model.d_in
    }

    /// The context of `asked` under this configuration ([`context_of`]).
    pub fn context(&self, asked: Option<ContextLen>, stride: Option<usize>) -> (Context, String) {
        context_of(&self.cfg, asked, stride)
    }
}

/// The context of `asked` for a model of `cfg` (`None`: the default) with windows `stride` tokens apart (1:
/// exact; `None`: [`default_stride`] of the context), in batches of `train.batch_size`
/// windows (training held that many with their gradients, so the forward fits), and why,
/// in words.
/// The default is the training window, `N` tokens: training never ran the scan's state
/// past `N` tokens, so a longer context asks the model something it never learned; a model
/// without layers mixes no time, so there the default is the whole run (the same outputs,
/// in one call).
pub fn context_of(cfg: &RunConfig, asked: Option<ContextLen>, stride: Option<usize>) -> (Context, String) {
    let n = cfg.window.window / cfg.model.d_in;
    let (len, why) = match asked {
        Some(ContextLen::Full) => (ContextLen::Full, "the whole run as one sequence, as asked".to_string()),
        Some(ContextLen::Last(k)) => {
            (ContextLen::Last(k), format!("the last {k} tokens, as asked (the training window is {n} tokens)"))
        }
        None if cfg.model.n_layers == 0 => (
            ContextLen::Full,
            "the whole run as one sequence: a model without layers mixes no time, so every context gives the same \
             outputs"
                .to_string(),
        ),
        None => (
            ContextLen::Last(n),
            format!(
                "the last {n} tokens, the training window (window.window / d_in): in training every output had seen \
                 1 to {n} tokens, and a longer context runs the scan's state past anything training saw"
            ),
        ),
    };
    let stride = match (stride, len) {
        (Some(s), _) => s.max(1),
        (None, ContextLen::Last(k)) => default_stride(k),
        (None, ContextLen::Full) => 1,
    };
    let ctx = Context { len, stride, batch: cfg.train.batch_size.max(1) };
    let why = match (ctx.len, ctx.stride_tokens()) {
        (ContextLen::Last(k), Some(s)) if s > 1 => {
            format!("{why}; windows {s} tokens apart, so each output sees {} to {k} tokens", k + 1 - s)
        }
        _ => why,
    };
    (ctx, why)
}

/// The default stride of a context of `k` tokens: a quarter of it, rounded up. Every output
/// then sees at least three quarters of `k` tokens, and each window gives `k / 4` outputs
/// where the exact rule (stride 1) gives one. Chosen on ds000140's validation runs
/// (BENCHMARKS.md, "Inference context"): there its forecasts equal the exact ones within 1e-5.
pub fn default_stride(k: usize) -> usize {
    k.div_ceil(4).max(1)
}

/// The training split of `loaded`, when these are the training data: the stored rule splits
/// them, and their training runs have the fingerprint the weights recorded (unchecked for
/// weights without one). Else `None`, with a note saying why the runs are not labelled.
fn training_split(
    cfg: &RunConfig,
    loaded: &LoadedData,
    trained: Option<&DataIdentity>,
    notes: &mut Vec<String>,
) -> Option<Split> {
    let unlabelled = "runs are not labelled train or heldout";
    match boldcast_data::split(&loaded.ds, &cfg.data, cfg.train.seed) {
        Err(e) => notes.push(format!("note: the training split does not apply to these data ({e}): {unlabelled}")),
        Ok(s) if trained.is_some_and(|t| loaded.ds.fingerprint(&s.train_runs).map_or(true, |f| f != t.fingerprint)) => {
            notes.push(format!("note: these are not the data the weights were trained on: {unlabelled}"))
        }
        Ok(s) => return Some(s),
    }
    None
}

/// What [`forecast_runs`] and [`embed_runs`] do: which runs, under which context, into which
/// directory (new, or empty).
#[derive(Clone, Debug)]
pub struct Job<'a> {
    /// The runs ([`Predictor::select`]).
    pub runs: &'a [usize],
    /// The context ([`Predictor::context`]).
    pub context: Context,
    /// Why that context, in words (written into the JSON).
    pub context_rule: String,
    /// The output directory.
    pub out: &'a std::path::Path,
}

/// What `forecast.json` and `embed.json` open with: the weights, the data, the output and the
/// context (flattened into each report).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct JobHeader {
    /// The weights file.
    pub weights: PathBuf,
    /// The data, in words.
    pub data: String,
    /// The output directory.
    pub out: PathBuf,
    /// Tokens each output sees (`null`: the whole run).
    pub context: Option<usize>,
    /// Tokens between the ends of consecutive windows (`null`: the whole run): each output
    /// sees from `context - context_stride + 1` to `context` tokens.
    pub context_stride: Option<usize>,
    /// Why that context.
    pub context_rule: String,
}

impl JobHeader {
    /// The header of `job` run by `p`.
    fn of<M: Model<f32>>(p: &Predictor<M>, job: &Job) -> JobHeader {
        JobHeader {
            weights: p.weights.clone(),
            data: p.loaded.source.clone(),
            out: job.out.to_path_buf(),
            context: job.context.tokens(),
            context_stride: job.context.stride_tokens(),
            context_rule: job.context_rule.clone(),
        }
    }
}

/// Writes `value` as pretty JSON to `path` with its `made_by`, atomically.
fn write_json(path: &std::path::Path, value: &impl serde::Serialize) -> Result<(), AnalysisError> {
    let mut text = serde_json::to_vec_pretty(&boldcast_storage::made_by::stamp(value))
        .map_err(|e| io_err(path)(std::io::Error::other(e)))?;
    text.push(b'\n');
    Ok(boldcast_storage::fsutil::write_atomic(path, &text).map_err(io_err(path))?)
}
