//! `bc-cli bench`: the speed of full training steps, as one JSON line.
//!
//! A step is what `train` runs per batch: forward, loss, backward, global-norm clipping and the
//! optimizer update ([`boldcast::core::Trainer::step`]), with the preset's optimizer, schedule
//! and clipping, on one fixed batch of synthetic AR(1) tokens of the preset's shape
//! (`train.batch_size` windows of `window.window / d_in` tokens and `data.synthetic.parcels`
//! parcels, ring adjacency), with the preset's temporal mixer unless `--temporal` names one.
//! After `warmup` untimed steps, `steps` steps are timed one by one.
//!
//! Reported beside the times:
//! - `flops_per_step`: the model FLOPs of one step by [`flops_per_step`] (the formula is
//!   documented there and in BENCHMARKS.md; recomputation is not counted);
//! - `peak_gflops`: single-precision matrix-product speed measured in the same run with the
//!   same library (`matrixmultiply`) on the same threads
//!   ([`boldcast::cpu::ops::gemm::peak_gflops`]: 2048 x 2048 products, rows split over the
//!   threads, best of 10);
//! - `peak_rss_bytes`: the process's resident-set high-water mark (`VmHWM` of
//!   `/proc/self/status`), and that divided by the tokens of a step.
//!
//! Under `mpirun -np N` (a build with the `mpi` feature), the batch is the global batch: each
//! rank steps on its `batch / N` windows and the gradients are all-reduced, as in `train`.
//! The times are of these data-parallel steps; afterwards rank 0 times the same global batch
//! alone (the other ranks waiting), with its own thread count, and reports
//! `single_process_step_s`, `speedup` (single / data-parallel step time) and
//! `scaling_efficiency` (`speedup / N`). Only rank 0 prints.

use crate::args::BenchArgs;
use crate::error::CliError;
use boldcast::core::collective::shard_range;
use boldcast::core::{Adam, Adjacency, DataParallel, ModelConfig, Temporal, TokenShape, Tokens, Trainer};
use boldcast::cpu::ops::gemm::peak_gflops;
use boldcast_train::config::RunConfig;
use boldcast_train::Dist;

/// Timed 2048 x 2048 products behind `peak_gflops` (the best is reported).
const PEAK_REPS: usize = 10;
use serde::Serialize;
use std::time::Instant;

/// What `bench` prints (one JSON object).
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// The backend (`"cpu"`).
    pub backend: String,
    /// The preset whose shape and model were timed.
    pub preset: String,
    /// The temporal mixer (`"mamba"` or `"mamba2"`).
    pub temporal: String,
    /// Worker threads (rayon's pool: `RAYON_NUM_THREADS` or the CPU count).
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
    /// Model FLOPs of one training step ([`flops_per_step`]).
    pub flops_per_step: f64,
    /// `flops_per_step / median_step_s / 1e9`.
    pub gflops: f64,
    /// Measured matrix-product peak on the same threads ([`peak_gflops`], 2048 x 2048).
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

/// The median of `times` (sorted in place).
fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    if times.len() % 2 == 1 {
        times[times.len() / 2]
    } else {
        0.5 * (times[times.len() / 2 - 1] + times[times.len() / 2])
    }
}

/// Model FLOPs of one training step on `B * T * P` tokens, counted per token from MODEL.md
/// (a multiply and an add are two FLOPs; a transcendental function counts as one):
///
/// ```text
/// embed            2 D M
/// per layer
///   LayerNorm      8 M                                   (twice with attention)
///   Mamba-1        2 M (2 Di) + 2 K Di + 2 Di (R + 2N) + 2 R Di          in, conv, x, dt proj
///                  + 7 Di N + 2 Di                       scan (exp(dt A), a h + (dt x) B, C h) + D x
///                  + 4 Di + 2 Di M                       SiLU, softplus, gate; out_proj
///   Mamba-2        2 M (2 Di + 2N + nh) + 2 K (Di + 2N)  in_proj, conv
///                  + 7 Di N + 2 Di + 6 Di + 2 Di M       scan, D x, gate and RMSNorm, out_proj
///   kNN attention  4 (2 M M) + 4 k M + 3 k              q, k, v, out; scores and weighted sum; softmax
/// final LayerNorm  8 M
/// head             2 M H D
/// ```
///
/// The forward total `F` is tripled for the step (the backward of a product costs two
/// products; the scan's backward is counted as twice its forward too), as in the usual
/// model-FLOPs accounting: work the backend repeats to save memory (the recomputed scan and
/// activations) is not counted, so `gflops` is useful work per second.
pub fn flops_per_step(cfg: &ModelConfig, batch: usize, time: usize, parcels: usize) -> f64 {
    let (d, m, n, k) = (cfg.d_in as f64, cfg.d_model as f64, cfg.d_state as f64, cfg.d_conv as f64);
    let (di, r, h) = (cfg.d_inner() as f64, cfg.dt_rank() as f64, cfg.n_horizons() as f64);
    let mixer = match cfg.temporal {
        Temporal::Mamba => {
            2.0 * m * 2.0 * di
                + 2.0 * k * di
                + 2.0 * di * (r + 2.0 * n)
                + 2.0 * r * di
                + 7.0 * di * n
                + 2.0 * di
                + 4.0 * di
                + 2.0 * di * m
        }
        Temporal::Mamba2 => {
            let nh = cfg.nheads() as f64;
            2.0 * m * (2.0 * di + 2.0 * n + nh)
                + 2.0 * k * (di + 2.0 * n)
                + 7.0 * di * n
                + 2.0 * di
                + 6.0 * di
                + 2.0 * di * m
        }
    };
    let kn = cfg.k_neighbors as f64;
    let attention = if cfg.k_neighbors > 0 { 8.0 * m + 8.0 * m * m + 4.0 * kn * m + 3.0 * kn } else { 0.0 };
    let layer = 8.0 * m + mixer + attention;
    let forward = 2.0 * d * m + cfg.n_layers as f64 * layer + 8.0 * m + 2.0 * m * h * d;
    3.0 * forward * (batch * time * parcels) as f64
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

/// Times `steps` training steps of the model `make` builds for `cfg`, after `warmup` steps,
/// data-parallel over the ranks of `dist` (see the module documentation).
pub fn bench_model<M: DataParallel<f32>>(
    cfg: &RunConfig,
    preset: &str,
    backend: &str,
    steps: usize,
    warmup: usize,
    make: impl Fn(ModelConfig, Option<Adjacency>, u64) -> Result<M, boldcast::core::Error>,
    dist: &Dist,
) -> Result<BenchReport, CliError> {
    let mc = cfg.model_config();
    let (batch, parcels) = (cfg.train.batch_size, cfg.data.synthetic.parcels);
    let time = cfg.window.window / mc.d_in.max(1);
    let adjacency = if mc.k_neighbors > 0 { Some(Adjacency::ring(parcels, mc.k_neighbors)?) } else { None };
    let tokens: Tokens<f32> =
        boldcast::fixtures::ar1_tokens(TokenShape::new(batch, time, parcels, mc.d_in), 0.9, cfg.train.seed);
    // This rank's windows of the global batch (all of it for one process).
    let shard = shard_range(batch, dist.rank(), dist.size())?;
    let per = time * parcels * mc.d_in;
    let mine: Tokens<f32> = Tokens::new(
        TokenShape::new(shard.len(), time, parcels, mc.d_in),
        tokens.data()[shard.start * per..shard.end * per].to_vec(),
    )?;
    let time_steps = |tokens: &Tokens<f32>, c: Option<&Dist>| -> Result<(Vec<f64>, f64, Option<f64>), CliError> {
        let model = make(mc.clone(), adjacency.clone(), cfg.train.seed)?;
        let mut trainer =
            Trainer::new(model, Adam::<f32>::new(cfg.optim_config())?, cfg.schedule_config(), (), cfg.max_norm());
        if let Some(d) = c {
            trainer = trainer.with_collective(d.0.clone());
        }
        for _ in 0..warmup {
            trainer.step(tokens)?;
        }
        let mut times = Vec::with_capacity(steps);
        let mut last_loss = f64::NAN;
        let cpu0 = process_cpu_s();
        for _ in 0..steps.max(1) {
            if let Some(d) = c {
                // Every rank starts the step together; the step's all-reduce ends it together.
                d.collective().barrier()?;
            }
            let t0 = Instant::now();
            let rec = trainer.step(tokens)?;
            times.push(t0.elapsed().as_secs_f64());
            last_loss = rec.loss;
        }
        let cpu = process_cpu_s().zip(cpu0).map(|(b, a)| (b - a) / times.len() as f64);
        Ok((times, last_loss, cpu))
    };
    let (mut times, last_loss, cpu) = time_steps(&mine, Some(dist))?;
    let median = median(&mut times);
    let single = if dist.size() > 1 {
        dist.collective().barrier()?;
        let single = if dist.is_root() { Some(self::median(&mut time_steps(&tokens, None)?.0)) } else { None };
        dist.collective().barrier()?;
        single
    } else {
        None
    };
    let ntok = (batch * time * parcels) as f64;
    let flops = flops_per_step(&mc, batch, time, parcels);
    let rss = peak_rss_bytes();
    // Measured after the steps, so the product's buffers do not raise the step's RSS figure.
    // Rank 0 reports; the other ranks leave the cores to it. The best of 10 products: on a
    // shared machine a few of them run while other work holds a core, and the peak is what the
    // machine can do, not what it did once (best of 3 read anywhere from 130 to 267 GFLOP/s on
    // the project's 2-core machine within minutes).
    let peak = if dist.is_root() { peak_gflops(2048, PEAK_REPS) } else { f64::NAN };
    let gflops = flops / median / 1e9;
    Ok(BenchReport {
        backend: backend.to_string(),
        preset: preset.to_string(),
        temporal: cfg.model.temporal.as_str().to_string(),
        threads: boldcast::cpu::par::threads(),
        steps: times.len(),
        warmup,
        batch,
        time,
        parcels,
        median_step_s: median,
        min_step_s: times[0],
        tokens_per_s: ntok / median,
        flops_per_step: flops,
        gflops,
        peak_gflops: peak,
        fraction_of_peak: gflops / peak,
        peak_rss_bytes: rss,
        rss_bytes_per_token: rss.map(|r| r as f64 / ntok),
        cpu_s_per_step: cpu,
        last_loss,
        ranks: dist.size(),
        collective: dist.0.name().to_string(),
        single_process_step_s: single,
        speedup: single.map(|s| s / median),
        scaling_efficiency: single.map(|s| s / median / dist.size() as f64),
    })
}

/// `bc-cli bench`: resolves the preset and runs [`bench_model`] on the chosen backend, over
/// the ranks of `dist`.
pub fn run(args: &BenchArgs, dist: &Dist) -> Result<BenchReport, CliError> {
    let mut cfg = crate::presets::preset(&args.preset)?;
    if let Some(t) = args.temporal {
        cfg.model.temporal = t;
    }
    crate::backend::dispatch(args.backend, Bench(&cfg, args, dist))
}

struct Bench<'a>(&'a RunConfig, &'a BenchArgs, &'a Dist);

impl crate::backend::Job for Bench<'_> {
    type Output = BenchReport;
    fn run<M: DataParallel<f32>>(self, name: &str, build: crate::backend::Builder<M>) -> Result<BenchReport, CliError> {
        bench_model(self.0, &self.1.preset, name, self.1.steps, self.1.warmup, build, self.2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flop_model_of_the_demo_shape() {
        // cpu-demo: M 64, Di 128, N 16, R 4, K 4, k 8, 2 layers, H 2, D 1.
        let cfg = crate::presets::preset("cpu-demo").unwrap().model_config();
        let per_token = flops_per_step(&cfg, 1, 1, 1) / 3.0;
        let (m, di, n, r, k, kn) = (64.0, 128.0, 16.0, 4.0, 4.0, 8.0);
        let mixer = 2.0 * m * 2.0 * di
            + 2.0 * k * di
            + 2.0 * di * (r + 2.0 * n)
            + 2.0 * r * di
            + 7.0 * di * n
            + 6.0 * di
            + 2.0 * di * m;
        let attn = 8.0 * m + 8.0 * m * m + 4.0 * kn * m + 3.0 * kn;
        let want = 2.0 * m + 2.0 * (8.0 * m + mixer + attn) + 8.0 * m + 2.0 * m * 2.0;
        assert!((per_token - want).abs() < 1e-9 * want, "{per_token} vs {want}");
        assert_eq!(flops_per_step(&cfg, 4, 256, 64), 3.0 * want * 65536.0);
    }

    #[test]
    fn rss_and_cpu_time_are_measured() {
        assert!(peak_rss_bytes().is_some_and(|b| b > 0));
        assert!(process_cpu_s().is_some_and(|s| s >= 0.0));
    }
}
