//! The command line: `bc-cli <command> [flags]`, defined with clap's derive API.

use boldcast::core::Temporal;
use boldcast_analysis::infer::{ContextLen, Pool};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

pub use boldcast::backend::{Backend, Precision};

/// Train and check Mamba forecasters of fMRI BOLD data.
///
/// Exit status: 0 on success, 1 when a check's verdict fails (overfit), 2 on an error (printed
/// as `error: ...`).
#[derive(Debug, Parser)]
#[command(name = "bc-cli", version, propagate_version = true)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands that are wired.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a synthetic dataset (AR(1) or VAR(1) parcels) with its exact loss floor.
    ///
    /// Writes one file per run, `sub-<label>_run-<label>_bold.npy` (float32 by default, shape
    /// (trs, parcels)) or `.tsv` (a header row of parcel names), plus `parcels.tsv` (name x y
    /// z: parcels on a circle, so that the k nearest are ring neighbours) and `synth.json` (the
    /// generator's parameters and its exact floor for horizons 1 and 5, d_in 1). Runs are
    /// generated and written one at a time, so memory holds one run whatever the dataset's
    /// size. The directory is built under a temporary name and renamed at the end: nothing
    /// half-written on error.
    Synth(SynthArgs),
    /// Print the loss floor: exact for an AR(1) (--rho), or empirical for a dataset (--data).
    ///
    /// With --rho: `1 - rho^(2L)` averaged over horizons and token elements, L = (h-1) D + j + 1
    /// (MODEL.md, "The loss floor"). With --data: the floor of the best single-lag linear
    /// predictor, `1 - acf_p(L)^2` with each run's biased sample autocorrelation averaged over
    /// runs, on the run-wise standardized data; overall and per parcel. With --data, also the
    /// filtered-input check (a warning when the runs look low-pass or band-pass filtered;
    /// `input_spectrum` in --json).
    Floor(FloorArgs),
    /// Overfit one fixed batch of 4 windows and check that the loss drops by 30 %.
    ///
    /// 4 subjects x 1 run x 1 window, batch 4, the same batch every step; AdamW without weight
    /// decay at the constant `overfit.lr` (1e-3), clipping at `train.grad_clip_norm`,
    /// `overfit.max_steps` steps (3000 in the default preset `laptop`). Writes into --out
    /// (default `runs/overfit-<preset>`; new, empty or an earlier overfit run's, which it starts
    /// again; a train run directory or any other non-empty one is refused), locked while it
    /// runs: `loss_log.jsonl` (one line per step, flushed),
    /// `summary.json`, `config.resolved.toml` and `figures/overfit_curve.png` (and `.svg`). Prints the verdict
    /// `mean(last 50) <= 0.7 * mean(first 50)`; exit status 1 when it fails. Without --data the
    /// batch is the synthetic AR(1) fixture (rho 0.9), whose exact floor is printed beside the
    /// final loss; with --data, the directory must give exactly 4 windows (4 runs).
    Overfit(OverfitArgs),
    /// Check a backend against a golden case (reference values from PyTorch).
    ///
    /// Loads `config.json`, `weights.safetensors`, `inputs.safetensors` and
    /// `expected.safetensors` from CASE_DIR (the format of the repository's `golden/cases/`,
    /// see golden/README.md), builds the model on the chosen backend with the case's weights, and compares the
    /// forward (`pred`), `embed`, `target`, `loss`, every `grad.<param>`, the optimizer update
    /// `opt.*` and the `train.*` loss series of real training steps with the tolerances of
    /// MODEL.md. Prints, per tensor group, the worst ratio of error to tolerance, then every
    /// tensor outside it. Exit status 0 only when every tensor is within tolerance, 1 otherwise.
    Golden(GoldenArgs),
    /// Train on subject-level splits with validation, early stopping, checkpoints and resume.
    ///
    /// Without --data, on the synthetic AR(1) fixture of `[data.synthetic]` (held-out subjects
    /// included). Defaults (every preset): AdamW, lr 3e-4, weight decay 0.05, betas (0.9, 0.95),
    /// warm-up then cosine, clip 1.0, batch 4, horizons 1 and 5. Validates every `val_every`
    /// steps (loss, per-horizon loss, floor, val/train ratio), keeps the best weights in
    /// `best.safetensors`, stops early after `patience` validations without improvement, and
    /// checkpoints every `ckpt_every` steps into `checkpoints/step-NNNNNN/` (model, optimizer
    /// moments, state). Writes `loss_log.jsonl`, `summary.json`, `timing.json` (step time and
    /// the fraction spent waiting for data: the next batch is made while a step runs),
    /// `config.resolved.toml` and
    /// `figures/loss_curves.png` (and `.svg`), and prints the verdict: PASS when `mean(last 3
    /// val) <= 0.7 * mean(first 3 val)` and the last validation loss beats predicting zero,
    /// with the loss beside predicting zero and the best baseline of `eval` in words (with
    /// `model.linear_path` on, as in `--preset fmri`, the run starts at the linear fit and
    /// PASS means the last validation loss is no worse than the best baseline's); exit
    /// status 1 when it fails, 2 on an error (a non-finite loss included). Warns when the runs
    /// look low-pass or band-pass filtered (`input_spectrum` in `summary.json`).
    Train(TrainArgs),
    /// Time full training steps and print one JSON line with the speed and memory.
    ///
    /// Builds the preset's model on the backend and one fixed batch of synthetic AR(1) tokens of
    /// the preset's shape (`train.batch_size` windows x `window.window` x
    /// `data.synthetic.parcels`), runs --warmup untimed steps, then times --steps training
    /// steps (forward, backward, clipping, optimizer) one by one. Prints `backend`, `preset`,
    /// `threads`, `median_step_s`, `min_step_s`, `tokens_per_s` (B*T*P per step),
    /// `flops_per_step` (the model-FLOP formula in BENCHMARKS.md), `gflops`, `peak_gflops`
    /// (single-precision products of 2048 x 2048 matrices with the same library on the same
    /// threads, best of 10, measured in the same run), `fraction_of_peak`, `peak_rss_bytes` (VmHWM) and
    /// `rss_bytes_per_token`. Threads: RAYON_NUM_THREADS, else one per CPU.
    Bench(BenchArgs),
    /// Evaluate a checkpoint on the held-out windows beside baselines and the floor.
    ///
    /// Per-horizon MSE of the model beside predicting zero, repeating the last token, the
    /// window mean up to t, the iterated per-parcel AR(1) (`ar1_iterated`), and the linear
    /// baselines fitted on the training subjects, each directly for every horizon: per-parcel
    /// AR(p) (`ar_p`), ridge VAR(1) / VAR(p) across parcels (`var1`, `var_p`) and a
    /// PCA-reduced VAR (`var_pca`), orders, rank and penalty chosen by cross-validation over
    /// subjects; R^2 per horizon and parcel; the single-lag AR reference `1 - acf(L)^2` of the
    /// held-out runs (and the exact floor for the synthetic fixture); and the model against
    /// the best baseline at each horizon ("better than ... by 4.1 %"), with a paired bootstrap
    /// interval over held-out subjects. The configuration, split and adjacency come from the
    /// checkpoint's metadata. Prints a table, or JSON with --json; --figure draws the bars and
    /// a forecast example. Warns when the runs look low-pass or band-pass filtered
    /// (`input_spectrum` in the JSON).
    Eval(EvalArgs),
    /// Forecast whole runs with a checkpoint, at every horizon, into .npy files with their MSE.
    ///
    /// For every run (or those of --subjects), the forecast of every token at every horizon,
    /// float32 (n_tokens, H, D, P): `[i, h, j, p]` forecasts parcel p at TR
    /// `last_tr[i] + (horizons[h] - 1) D + j + 1`, where `last_tr[i] = i D + D - 1` is the last
    /// TR the forecast has seen (D = d_in; n_tokens = n_tr / D). Writes into --out (new or
    /// empty; built under a temporary name and renamed at the end, so nothing is left on an
    /// error), per run: `<run>_forecast.npy` in the run file's units (the standardization
    /// undone), `<run>_forecast_std.npy` standardized, `<run>_last_tr.npy` (int64); and
    /// `forecast.json`: the layout, the context, and per run (with its side of the training
    /// split) and pooled over all runs and each side, the standardized MSE overall, per
    /// horizon and per parcel over the targets inside the run. Prints per-run and pooled MSE,
    /// or with --json the whole of forecast.json. One run in memory at a time.
    Forecast(InferArgs),
    /// Write a checkpoint's final-norm embeddings of whole runs as .npy files.
    ///
    /// Per run (or those of --subjects), `<run>_embed.npy`, float32 (n_tokens, P, d_model):
    /// `[i, p, :]` is parcel p's embedding at token i, which has seen TRs up to
    /// `last_tr[i] = i D + D - 1` (`<run>_last_tr.npy`, int64); with --pool mean,
    /// `<run>_embed_mean.npy`, float32 (P, d_model), the mean over the run's tokens; with
    /// --pool corr, `<run>_embed_corr.npy`, float32 (P, P), the correlation of every two
    /// parcels' embeddings over the run's tokens (fingerprint's default features). Plus
    /// `embed.json` (files, shapes, context, parcel names). --out as for forecast: new or
    /// empty, complete or absent. The context rule is forecast's.
    Embed(EmbedArgs),
    /// Identify subjects from a checkpoint's embeddings, against functional connectivity.
    ///
    /// Each run (or those of --subjects) is embedded (final-norm embeddings under the context
    /// rule of forecast) and pooled over its tokens (--pool: by default the parcel-by-parcel
    /// correlation of the embeddings, Fisher z, compared by Pearson correlation; or their
    /// mean, by cosine similarity), and identified leave-one-run-out: its subject is found
    /// when the most similar other run is the subject's (top-1), or one of the 5 most similar
    /// is (top-5); the output says which pooling. Beside it, the classical
    /// functional-connectivity fingerprint of the same runs (Pearson correlation of the
    /// Fisher-z edges of the parcel-by-parcel correlation matrices, Finn et al. 2015) and the
    /// exact McNemar test of the two. Accuracies come with a 95 % Clopper-Pearson interval, a
    /// bootstrap interval over subjects (2000 resamples) and their chance level; beside them,
    /// measures that do not saturate: differential identifiability (Amico & Goni 2018, 100 x
    /// (mean same-subject - mean other-subject similarity) over pairs of different runs) and
    /// the same-vs-other margin (a run's mean similarity to its subject's other runs minus
    /// its best other-subject one: the mean, and the fraction above 0), with bootstrap
    /// intervals over subjects. --segment N uses each run's first N TRs. With one run per
    /// subject each run is split into halves (the output says so). Prints a table, or
    /// JSON with --json; --figure draws the similarity matrices and the accuracies.
    Fingerprint(FingerprintArgs),
    /// Search configuration keys on the held-out (validation) subjects of the split you give.
    ///
    /// Trains one run per candidate configuration into `--out DIR/trial-NNN/` (a full grid of
    /// the --grid values, or --random N distinct draws of it seeded with train.seed) and ranks
    /// them by their best validation loss on the configuration's held-out subjects
    /// (data.subjects_heldout, which must be named): those are the validation subjects, so give
    /// a validation split drawn from your training subjects (--subjects-train,
    /// --subjects-heldout) and keep your test subjects out of the data, or out of both lists.
    /// Writes `results.tsv` (one row per trial, val_mse in variance units of the standardized
    /// data), `results.json` and `best.toml` (the winning configuration: the lowest best
    /// validation loss, the lower trial on a tie; train it with `bc-cli train --config
    /// best.toml`). Prints a line per trial and the table (--json: the JSON). A failed trial is
    /// recorded with its error; run the same command again to continue a killed search (finished
    /// trials are kept). Exit status 2 on bad input or when every trial failed.
    Tune(TuneArgs),
}

/// Flags of `bc-cli bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The preset whose model and batch shape are timed (laptop, quick, cpu-demo,
    /// boldcast-demo).
    #[arg(long, default_value = "cpu-demo")]
    pub preset: String,
    /// The backend to time.
    #[arg(long, value_enum, default_value_t = Backend::Cpu)]
    pub backend: Backend,
    /// Precision of the matrix products: f32 or bf16 (autocast; --backend cuda only).
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    pub precision: Precision,
    /// Timed steps, 1 to 1,000,000 (the median and minimum are reported).
    #[arg(long, default_value_t = 5, value_parser = parse_at_least_one)]
    pub steps: usize,
    /// Untimed steps before them (buffers, caches, page faults), at most 1,000,000.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Temporal mixer, mamba or mamba2 (default: the preset's).
    #[arg(long, value_parser = boldcast_train::presets::parse_temporal)]
    pub temporal: Option<Temporal>,
}

/// Flags of `bc-cli golden`.
#[derive(Debug, Args)]
pub struct GoldenArgs {
    /// A golden case directory (e.g. golden/cases/tiny).
    pub case_dir: PathBuf,
    /// The backend to check.
    #[arg(long, value_enum, default_value_t = Backend::Cpu)]
    pub backend: Backend,
}

/// Flags of `bc-cli synth`: the library's request, whose fields are the flags.
pub type SynthArgs = boldcast::data::synth::SynthRequest;

/// Flags of `bc-cli floor`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["rho", "data"])))]
pub struct FloorArgs {
    /// AR(1) coefficient: print the exact floor.
    #[arg(long, allow_hyphen_values = true)]
    pub rho: Option<f64>,
    /// Dataset directory: print the empirical single-lag floor.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// How the runs of --data are picked.
    #[command(flatten)]
    pub picks: DataArgs,
    /// Forecast horizons, in tokens, comma-separated.
    #[arg(long, default_value = "1,5", value_delimiter = ',', num_args = 1..)]
    pub horizons: Vec<usize>,
    /// TRs per token (with --data, at most the shortest run's TRs).
    #[arg(long, default_value_t = 1)]
    pub d_in: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// How the runs of `--data` are picked: the library's selection, whose fields are the flags.
pub type DataArgs = boldcast::data::Selection;

/// Flags shared by the commands that resolve a run configuration (`overfit`, `train`): the
/// library's command-line layer, whose fields are the flags.
pub type RunArgs = boldcast_train::presets::Overrides;

/// A count that must be at least 1 (clap names the flag in its error).
fn parse_at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// Flags of `bc-cli overfit`.
///
/// Overfit one fixed batch: 4 subjects x 1 run x 1 window, batch 4, no shuffle, the same
/// batch every step; AdamW without weight decay at a constant learning rate, clipping at
/// `train.grad_clip_norm`. Writes `loss_log.jsonl` (one line per step), `summary.json`,
/// `config.resolved.toml` and `figures/overfit_curve.png` (and `.svg`) into --out (default
/// `runs/overfit-<preset>`: new, empty or an earlier overfit run's), and prints the verdict `mean(last 50) <= 0.7 * mean(first 50)`;
/// the exit status is 1 when it fails. Without --data the batch is the synthetic AR(1)
/// fixture (rho from `data.synthetic.rho`, 0.9 in every preset), whose exact floor is printed
/// beside the final loss.
#[derive(Debug, Args)]
pub struct OverfitArgs {
    /// The configuration layers.
    #[command(flatten)]
    pub run: RunArgs,
}

/// Flags of `bc-cli train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// The configuration layers.
    #[command(flatten)]
    pub run: RunArgs,
    /// Continue the run in DIR from its newest checkpoint, with the configuration stored there
    /// (no other configuration flag may be given); a run stopped before its first checkpoint
    /// starts again from step 0 with its config.resolved.toml; a finished run killed at its
    /// very end is completed (its figure drawn, its checkpoints pruned). Refused while another
    /// process works in DIR (it holds DIR/.lock).
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
    /// Stop cleanly after N steps of this invocation, with a checkpoint (as a job time limit
    /// would); the schedule still follows max_steps. Continue with --resume.
    #[arg(long, value_name = "N")]
    pub stop_after: Option<u64>,
    /// The subject split and the loop.
    #[command(flatten)]
    pub split: boldcast_train::presets::TrainOverrides,
}

impl TrainArgs {
    /// Whether any flag that changes the configuration is given (not allowed with --resume).
    pub fn changes_config(&self) -> bool {
        self.run.any() || self.split.any()
    }
}

/// Flags of `bc-cli tune`: those of `train` (the configuration and the split; not --resume or
/// --stop-after), the keys and how to draw from them.
#[derive(Debug, Args)]
pub struct TuneArgs {
    /// The configuration layers and the split, as for `train`.
    #[command(flatten)]
    pub train: TrainArgs,
    /// A key and its values: `model.d_model=8,16`, `train.lr=3e-4,1e-3`,
    /// `model.linear_path=off,auto`, `model.horizons=[1,5],[1,2,5]` (values are TOML, or bare
    /// words). Repeat for more keys.
    #[arg(long = "grid", value_name = "KEY=V1,V2,...", required = true)]
    pub grid: Vec<String>,
    /// Draw N distinct combinations of the grid (seeded with train.seed, --seed) instead of all.
    #[arg(long, value_name = "N")]
    pub random: Option<usize>,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `bc-cli eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// What to evaluate, and on which data.
    #[command(flatten)]
    pub req: boldcast_analysis::eval::request::EvalRequest,
    /// The backend that runs the model (checkpoints load in every backend).
    #[arg(long, value_enum, default_value_t = Backend::Cpu)]
    pub backend: Backend,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Draw the per-horizon MSE of the model, the baselines and the floor, and a forecast
    /// example, into this PNG and its SVG twin (the same path with `.svg`; for `x.svg`, the
    /// PNG is `x.png`).
    #[arg(long, value_name = "PATH.png")]
    pub figure: Option<PathBuf>,
    /// Whether --figure may replace files.
    #[command(flatten)]
    pub replace: Overwrite,
}

/// `--overwrite`, the one flag of `eval` and `fingerprint` that lets `--figure` replace files.
#[derive(Clone, Copy, Debug, Args)]
pub struct Overwrite {
    /// Replace regular files already at the --figure path and its twin (without it, an existing
    /// file is refused). A path that holds anything else (a device, a FIFO, a directory, a
    /// symbolic link) is always refused.
    #[arg(long)]
    pub overwrite: bool,
}

/// The flags `forecast`, `embed` and `fingerprint` share: the model and the runs it sees.
#[derive(Debug, Args)]
pub struct ModelDataArgs {
    /// The weights and the data.
    #[command(flatten)]
    pub open: boldcast_analysis::infer::OpenRequest,
    /// Only the runs of these subjects: `01,02,sub-03` or `@FILE` (default: every run). On
    /// the training data each run is labelled train or heldout (printed and in the JSON).
    #[arg(long, value_name = "LIST|@FILE")]
    pub subjects: Option<boldcast::data::SubjectList>,
    /// Tokens each output sees: K (the last K tokens up to it, fewer at the run's start) or
    /// `full` (the whole run as one causal sequence). Default: the training window,
    /// window.window / d_in tokens, in windows --context-stride apart (batches of
    /// train.batch_size): in training every output had seen 1 to that many tokens, and a
    /// longer context runs the scan's state past anything training saw. For a model without
    /// layers (nothing mixes time) the default is `full`, which gives the same outputs.
    #[arg(long, value_parser = parse_context)]
    pub context: Option<ContextLen>,
    /// Tokens between the ends of consecutive windows under a context of K tokens (1 to K):
    /// each output then sees from K - S + 1 to K tokens, at about 1/S of the work of S = 1,
    /// which gives every output exactly its last K tokens. Default: K / 4, rounded up. No
    /// effect with `--context full` (one window).
    #[arg(long, value_name = "S", value_parser = parse_at_least_one)]
    pub context_stride: Option<usize>,
    /// The backend that runs the model (checkpoints load in every backend).
    #[arg(long, value_enum, default_value_t = Backend::Cpu)]
    pub backend: Backend,
}

/// The flags `forecast` and `embed` share.
#[derive(Debug, Args)]
pub struct InferArgs {
    /// The model and the runs.
    #[command(flatten)]
    pub model: ModelDataArgs,
    /// Output directory: new, or empty.
    #[arg(long)]
    pub out: PathBuf,
    /// Print the JSON report (as written to --out) instead of the text.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `bc-cli fingerprint`.
#[derive(Debug, Args)]
pub struct FingerprintArgs {
    /// The model and the runs.
    #[command(flatten)]
    pub model: ModelDataArgs,
    /// How each run's embeddings become its fingerprint. `corr` (the default): the
    /// correlation of every two parcels' embeddings over the run's tokens (each parcel's
    /// d_model-vector centred per feature), upper triangle, Fisher z, compared by Pearson
    /// correlation, the functional-connectivity fingerprint with each parcel's BOLD value
    /// replaced by its embedding (it passes on the coupling that FC measures, so it can find
    /// subjects from an untrained model's embeddings too). `mean`: the mean over the run's
    /// tokens (P, d_model), compared by cosine similarity; it carries almost no identity
    /// (the embeddings of standardized runs average to nearly one common offset). Neither
    /// uses the subjects.
    #[arg(long, value_enum, default_value_t = FingerprintPool::Corr)]
    pub pool: FingerprintPool,
    /// Cut each run to its first N TRs (standardized again over them) and identify each
    /// run's segment from the other runs' segments: one segment per run, so identification
    /// is across runs, never within one (a run's other segments share its session). Short
    /// scans are where FC is noisy. Refused below 3 tokens of d_in TRs (a correlation over
    /// fewer says nothing), above the shortest selected run, and when no subject has two
    /// runs. The JSON's `segment_trs` says N.
    #[arg(long, value_name = "N", value_parser = parse_at_least_one)]
    pub segment: Option<usize>,
    /// A column of the data's participants.tsv (e.g. `family_id`, HCP's twins) whose groups
    /// are related subjects: a run is never compared with the runs of its relatives (not in
    /// its gallery, its margin's impostors or I_diff's other-subject pairs), since shared
    /// biology is neither a hit nor a fair miss. Default: the run's data.group_column, if
    /// it was trained with one. The JSON's `group_column` and `related_pairs` say what was
    /// left out.
    #[arg(long, value_name = "COLUMN")]
    pub group_column: Option<String>,
    /// Draw the similarity matrices and accuracies to this PNG (and its .svg twin; for
    /// `x.svg`, the PNG is `x.png`).
    #[arg(long, value_name = "PATH.png")]
    pub figure: Option<PathBuf>,
    /// Whether --figure may replace files.
    #[command(flatten)]
    pub replace: Overwrite,
    /// Print the JSON report instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `bc-cli embed`.
#[derive(Debug, Args)]
pub struct EmbedArgs {
    /// The shared flags.
    #[command(flatten)]
    pub infer: InferArgs,
    /// `none`: every token's embedding (n_tokens, P, d_model); `mean`: their mean over the
    /// run's tokens (P, d_model); `corr`: the correlation of every two parcels' embeddings
    /// over the run's tokens (P, P), each parcel's d_model-vector centred per feature, as
    /// fingerprint uses it.
    #[arg(long, value_enum, default_value_t = Pool::None)]
    pub pool: Pool,
}

/// `fingerprint --pool`: one sample per run.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum FingerprintPool {
    /// The parcel-by-parcel correlation over tokens, Fisher z, Pearson similarity.
    Corr,
    /// The mean over tokens, cosine similarity.
    Mean,
}

impl FingerprintPool {
    /// The library's pooling.
    pub fn pool(self) -> Pool {
        match self {
            FingerprintPool::Corr => Pool::Corr,
            FingerprintPool::Mean => Pool::Mean,
        }
    }
}

fn parse_context(s: &str) -> Result<ContextLen, String> {
    match s {
        "full" => Ok(ContextLen::Full),
        k => parse_at_least_one(k).map(ContextLen::Last).map_err(|e| format!("`{k}`: {e} (a token count, or `full`)")),
    }
}
