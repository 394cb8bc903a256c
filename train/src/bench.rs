//! Timed training steps: [`bench_model`] runs the steps `bc-cli bench` times and measures them
//! (the median and fastest step, CPU time per step, the resident-set high-water mark), for any
//! backend's [`DataParallel<f32>`] model.
//!
//! A step is what a run takes per batch: forward, loss, backward, global-norm clipping and the
//! optimizer update ([`boldcast_core::Trainer::step`]), with the configuration's optimizer,
//! schedule and clipping, on one fixed batch of synthetic AR(1) tokens of the configuration's
//! shape (`train.batch_size` windows of `window.window / d_in` tokens and
//! `data.synthetic.parcels` parcels, ring adjacency). After `warmup` untimed steps, `steps`
//! steps are timed one by one.
//!
//! Beside the times: `flops_per_step` ([`ModelConfig::flops_per_step`]), `peak_rss_bytes`
//! (`VmHWM` of `/proc/self/status`, [`peak_rss_bytes`]) and that divided by the tokens of a
//! step, `cpu_s_per_step` ([`process_cpu_s`]). The matrix-product peak is the backend's to
//! measure: the caller sets it with [`BenchReport::set_peak`] after the steps (so its buffers
//! do not raise the step's RSS figure).
//!
//! Over several ranks of `dist` the batch is the global batch: each rank steps on its shard and
//! the gradients are all-reduced, as in a run; afterwards rank 0 times the same global batch
//! alone (the other ranks waiting) and reports `single_process_step_s`, `speedup` (single /
//! data-parallel step time) and `scaling_efficiency` (`speedup / ranks`).

use crate::config::RunConfig;
use crate::error::TrainError;
use crate::Dist;
use boldcast_core::collective::shard_range;
use boldcast_core::{Adam, Adjacency, DataParallel, ModelConfig, TokenShape, Tokens, Trainer};
use serde::Serialize;
use std::time::Instant;

/// What a bench reports (`bc-cli bench` prints it as one JSON object, keys in this order).
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// The backend (`"cpu"`).
    pub backend: String,
    /// The precision of the matrix products (`train.precision`: `f32`, `bf16`).
    pub precision: String,
    /// The preset whose shape and model were timed.
    pub preset: String,
    /// The temporal mixer (`"mamba"` or `"mamba2"`).
    pub temporal: String,
    /// Worker threads of the backend (the CPU backend: rayon's pool).
    pub threads: usize,
    /// Timed steps.
    pub steps: usize,
    /// Untimed warm-up steps before them.
    pub warmup: usize,
    /// `(B, T, P)` of the batch.
    pub batch: usize,
    /// Tokens per window.
    pub time: usize,
    /// Parcels.
    pub parcels: usize,
    /// Median wall time of one step, seconds.
    pub median_step_s: f64,
    /// Fastest step, seconds.
    pub min_step_s: f64,
    /// `B * T * P / median_step_s`.
    pub tokens_per_s: f64,
    /// Model FLOPs of one training step ([`ModelConfig::flops_per_step`]).
    pub flops_per_step: f64,
    /// `flops_per_step / median_step_s / 1e9`.
    pub gflops: f64,
    /// Measured matrix-product peak on the same threads ([`BenchReport::set_peak`]; NaN, which
    /// serializes as `null`, until set).
    pub peak_gflops: f64,
    /// `gflops / peak_gflops`.
    pub fraction_of_peak: f64,
    /// Peak resident set of the process, bytes (None where `/proc` is missing).
    pub peak_rss_bytes: Option<u64>,
    /// `peak_rss_bytes / (B * T * P)`.
    pub rss_bytes_per_token: Option<f64>,
    /// CPU time (user + system, every thread) of the process per timed step, seconds: with the
    /// machine shared, `cpu_s_per_step / threads` is a steadier speed figure than wall time.
    pub cpu_s_per_step: Option<f64>,
    /// The loss of the last timed step (a sanity check: finite, near 1 at the start).
    pub last_loss: f64,
    /// Data-parallel ranks (1 without a launcher); `batch` is the global batch.
    pub ranks: usize,
    /// The collective (`single`, `mpi`, `nccl`).
    pub collective: String,
    /// With several ranks: the median step time of rank 0 alone on the global batch.
    pub single_process_step_s: Option<f64>,
    /// `single_process_step_s / median_step_s`.
    pub speedup: Option<f64>,
    /// `speedup / ranks` (1.0 is perfect scaling).
    pub scaling_efficiency: Option<f64>,
}

impl BenchReport {
    /// Sets the measured matrix-product peak (GFLOP/s) and `fraction_of_peak` from it.
    pub fn set_peak(&mut self, peak_gflops: f64) {
        self.peak_gflops = peak_gflops;
        self.fraction_of_peak = self.gflops / peak_gflops;
    }
}

/// What to time, beside the configuration.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// The backend's name, for the report.
    pub backend: String,
    /// The preset's name, for the report.
    pub preset: String,
    /// Timed steps, at least 1 (0 is an error).
    pub steps: usize,
    /// Untimed steps before them.
    pub warmup: usize,
    /// The backend's worker threads, for the report.
    pub threads: usize,
}

/// The median of `times` (sorted in place).
fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    if times.len() % 2 == 1 {
        times[times.len() / 2]
    } else {
        0.5 * (times[times.len() / 2 - 1] + times[times.len() / 2])
    }
}

/// The resident-set high-water mark of this process in bytes (`VmHWM`), if `/proc` has it.
pub fn peak_rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// CPU time (user + system) of this process so far in seconds, from `/proc/self/stat` (fields
/// 14 and 15, in the kernel's fixed 100 Hz user ticks).
pub fn process_cpu_s() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let (u, k): (f64, f64) = (f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?);
    Some((u + k) / 100.0)
}

/// The timed steps of one model: step times (sorted), their median, the last loss, CPU
/// seconds per step.
struct Timed {
    times: Vec<f64>,
    median: f64,
    last_loss: f64,
    cpu_s_per_step: Option<f64>,
}

/// The fixed batch: the global one and this rank's windows of it (all of it for one process).
fn bench_tokens(cfg: &RunConfig, mc: &ModelConfig, dist: &Dist) -> Result<(Tokens<f32>, Tokens<f32>), TrainError> {
    let (batch, parcels) = (cfg.train.batch_size, cfg.data.synthetic.parcels);
    let time = cfg.window.window / mc.d_in.max(1);
    let tokens: Tokens<f32> =
        boldcast_fixtures::ar1_tokens(TokenShape::new(batch, time, parcels, mc.d_in), 0.9, cfg.train.seed);
    let shard = shard_range(batch, dist.rank(), dist.size())?;
    let per = time * parcels * mc.d_in;
    let mine: Tokens<f32> = Tokens::new(
        TokenShape::new(shard.len(), time, parcels, mc.d_in),
        tokens.data()[shard.start * per..shard.end * per].to_vec(),
    )?;
    Ok((tokens, mine))
}

/// Builds a model with `make`, takes `warmup` steps on `tokens`, then times `steps` (at least
/// one), all ranks of `dist` starting each step together when given.
fn time_steps<M: DataParallel<f32>>(
    cfg: &RunConfig,
    opts: &BenchOptions,
    make: &impl Fn(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast_core::Error>,
    tokens: &Tokens<f32>,
    dist: Option<&Dist>,
) -> Result<Timed, TrainError> {
    let mc = cfg.model_config();
    let parcels = cfg.data.synthetic.parcels;
    let adjacency = if mc.k_neighbors > 0 { Some(Adjacency::ring(parcels, mc.k_neighbors)?) } else { None };
    let model = make(mc, adjacency, cfg.train.seed)?;
    let mut trainer =
        Trainer::new(model, Adam::<f32>::new(cfg.optim_config())?, cfg.schedule_config(), (), cfg.max_norm());
    if let Some(d) = dist {
        trainer = trainer.with_collective(d.0.clone());
    }
    for _ in 0..opts.warmup {
        trainer.step(tokens)?;
    }
    let mut times = Vec::with_capacity(opts.steps);
    let mut last_loss = f64::NAN;
    let cpu0 = process_cpu_s();
    for _ in 0..opts.steps {
        if let Some(d) = dist {
            // Every rank starts the step together; the step's all-reduce ends it together.
            d.collective().barrier()?;
        }
        let t0 = Instant::now();
        let rec = trainer.step(tokens)?;
        times.push(t0.elapsed().as_secs_f64());
        last_loss = rec.loss;
    }
    let cpu_s_per_step = process_cpu_s().zip(cpu0).map(|(b, a)| (b - a) / times.len() as f64);
    let median = median(&mut times);
    Ok(Timed { times, median, last_loss, cpu_s_per_step })
}

/// The most timed or warm-up steps one bench takes: a bound on its time (and on the memory of
/// the step times), far above what a median needs.
pub const MAX_BENCH_STEPS: usize = 1_000_000;

/// `opts.steps` is at least 1, and both counts at most [`MAX_BENCH_STEPS`]; an error names the
/// field and its value.
fn check_counts(opts: &BenchOptions) -> Result<(), TrainError> {
    let bad = |field: &str, value: usize, reason: String| -> TrainError {
        crate::config::ConfigError::Invalid { field: field.into(), value: value.to_string(), reason }.into()
    };
    if opts.steps == 0 {
        return Err(bad("steps", 0, "must be at least 1: the report is the median of the timed steps".into()));
    }
    for (field, value) in [("steps", opts.steps), ("warmup", opts.warmup)] {
        if value > MAX_BENCH_STEPS {
            return Err(bad(field, value, format!("at most {MAX_BENCH_STEPS} steps: a bench is a measurement")));
        }
    }
    Ok(())
}

/// Times `opts.steps` training steps of the model `make` builds for `cfg`, after
/// `opts.warmup` steps, data-parallel over the ranks of `dist` (see the module documentation).
/// The report's `peak_gflops` is NaN until [`BenchReport::set_peak`].
pub fn bench_model<M: DataParallel<f32>>(
    cfg: &RunConfig,
    opts: &BenchOptions,
    make: impl Fn(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast_core::Error>,
    dist: &Dist,
) -> Result<BenchReport, TrainError> {
    check_counts(opts)?;
    let mc = cfg.model_config();
    let (global, mine) = bench_tokens(cfg, &mc, dist)?;
    let timed = time_steps(cfg, opts, &make, &mine, Some(dist))?;
    let single = if dist.size() > 1 {
        dist.collective().barrier()?;
        let single = match dist.is_root() {
            true => Some(time_steps(cfg, opts, &make, &global, None)?.median),
            false => None,
        };
        dist.collective().barrier()?;
        single
    } else {
        None
    };
    let s = global.shape();
    Ok(report(cfg, opts, &mc, (s.batch, s.time, s.parcels), timed, single, dist))
}

/// The report of the timed steps (`shape`: `(B, T, P)` of the global batch).
fn report(
    cfg: &RunConfig,
    opts: &BenchOptions,
    mc: &ModelConfig,
    shape: (usize, usize, usize),
    timed: Timed,
    single: Option<f64>,
    dist: &Dist,
) -> BenchReport {
    let (batch, time, parcels) = shape;
    let median = timed.median;
    let ntok = (batch * time * parcels) as f64;
    let flops = mc.flops_per_step(batch, time, parcels);
    let rss = peak_rss_bytes();
    let gflops = flops / median / 1e9;
    BenchReport {
        backend: opts.backend.clone(),
        precision: cfg.train.precision.clone(),
        preset: opts.preset.clone(),
        temporal: cfg.model.temporal.as_str().to_string(),
        threads: opts.threads,
        steps: timed.times.len(),
        warmup: opts.warmup,
        batch,
        time,
        parcels,
        median_step_s: median,
        min_step_s: timed.times[0],
        tokens_per_s: ntok / median,
        flops_per_step: flops,
        gflops,
        peak_gflops: f64::NAN,
        fraction_of_peak: f64::NAN,
        peak_rss_bytes: rss,
        rss_bytes_per_token: rss.map(|r| r as f64 / ntok),
        cpu_s_per_step: timed.cpu_s_per_step,
        last_loss: timed.last_loss,
        ranks: dist.size(),
        collective: dist.0.name().to_string(),
        single_process_step_s: single,
        speedup: single.map(|s| s / median),
        scaling_efficiency: single.map(|s| s / median / dist.size() as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_timed_steps_are_an_error_naming_steps() {
        let cfg = crate::presets::preset("quick").unwrap();
        let opts = BenchOptions { backend: "cpu".into(), preset: "quick".into(), steps: 0, warmup: 0, threads: 1 };
        let make = |c, a, _| boldcast_cpu::CpuModel::<f32>::new(c, a, 1);
        let e = bench_model(&cfg, &opts, make, &Dist::default()).unwrap_err().to_string();
        assert!(e.contains("steps") && e.contains("at least 1"), "{e}");
    }

    #[test]
    fn rss_and_cpu_time_are_measured() {
        assert!(peak_rss_bytes().is_some_and(|b| b > 0));
        assert!(process_cpu_s().is_some_and(|s| s >= 0.0));
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
