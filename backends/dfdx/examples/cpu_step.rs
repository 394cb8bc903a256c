//! Times training steps of the dfdx backend on the Cpu device and prints one JSON line.
//!
//! Sizes from the environment, defaulting to the `laptop` preset (batch 4, window 128,
//! 16 parcels, d_model 32, 2 layers, d_state 16, k 4): `STEP_BATCH`, `STEP_WINDOW`,
//! `STEP_PARCELS`, `STEP_D_MODEL`, `STEP_LAYERS`, `STEP_K`, `STEP_STEPS` (timed steps after
//! one warm-up).

use boldcast_core::optim::{Adam, OptimConfig};
use boldcast_core::schedule::ScheduleConfig;
use boldcast_core::{Adjacency, ModelConfig, StepRecord, TokenShape, Tokens, Trainer};
use boldcast_dfdx::{cpu_device, DfdxModel};
use std::time::Instant;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let (b, t, p) = (env("STEP_BATCH", 4), env("STEP_WINDOW", 128), env("STEP_PARCELS", 16));
    let cfg = ModelConfig::builder()
        .d_model(env("STEP_D_MODEL", 32))
        .n_layers(env("STEP_LAYERS", 2))
        .k_neighbors(env("STEP_K", 4))
        .build()
        .expect("a valid configuration from STEP_*");
    let steps = env("STEP_STEPS", 3);
    let adjacency = Adjacency::ring(p, cfg.k_neighbors).unwrap();
    let params = cfg.n_params();
    let model = DfdxModel::<f32, _>::new(cfg, Some(adjacency), 0, cpu_device()).unwrap();
    let opt = Adam::new(OptimConfig::adamw(0.05, (0.9, 0.95))).unwrap();
    let mut trainer =
        Trainer::new(model, opt, ScheduleConfig::Constant { lr: 1e-3 }, Vec::<StepRecord>::new(), Some(1.0));
    let data = (0..b * t * p).map(|i| ((i as f32) * 0.37).sin() + ((i % 7) as f32 - 3.0) * 0.1).collect();
    let tokens = Tokens::new(TokenShape::new(b, t, p, 1), data).unwrap();
    let mut times = Vec::new();
    for s in 0..=steps {
        let t0 = Instant::now();
        trainer.step(&tokens).unwrap();
        if s > 0 {
            times.push(t0.elapsed().as_secs_f64());
        }
    }
    times.sort_by(f64::total_cmp);
    let med = times[times.len() / 2];
    let loss = trainer.logger.last().unwrap().loss;
    println!(
        "{{\"backend\":\"dfdx-cpu\",\"batch\":{b},\"window\":{t},\"parcels\":{p},\"params\":{params},\"median_step_s\":{med:.4},\"tokens_per_s\":{:.1},\"loss\":{loss:.6}}}",
        (b * t * p) as f64 / med
    );
}
