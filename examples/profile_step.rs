//! Training steps of a preset's model on the CPU backend with nothing else in the process (no
//! peak-product measurement, no JSON): the program to run under `valgrind --tool=callgrind`
//! or `perf`, where `bc-cli bench`'s 2048 x 2048 peak product would dominate the profile.
//!
//! ```text
//! cargo build --release --example profile_step
//! RAYON_NUM_THREADS=1 valgrind --tool=callgrind target/release/examples/profile_step
//! ```
//!
//! Environment: `PRESET` (default `cpu-demo`), `TEMPORAL` (`mamba` or `mamba2`, default the
//! preset's), `BATCH` (default the preset's `train.batch_size`), `PARCELS` (default the preset's), `STEPS` (default 1). Prints
//! the last loss, the wall time and the CPU time per step, so two builds can be checked to give the same
//! loss.

use boldcast::core::{Adam, Adjacency, Temporal, TokenShape, Tokens, Trainer};
use boldcast::cpu::CpuModel;
use boldcast_train::config::RunConfig;
use std::time::Instant;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// CPU time (user + system, every thread) of this process so far, seconds (`/proc/self/stat`).
fn cpu_s() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = s.rfind(')').map_or("", |i| &s[i + 1..]);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::NAN);
    (tick(11) + tick(12)) / 100.0
}

fn main() {
    // As bc-cli does, so that the profile shows what a training run spends.
    boldcast::cpu::alloc::retain_freed_memory();
    let preset: String = env_or("PRESET", "cpu-demo".to_string());
    let path = format!("{}/configs/presets/{preset}.toml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("preset {path}: {e}"));
    let mut cfg = RunConfig::from_toml_str(&path, &text).expect("a valid preset");
    match std::env::var("TEMPORAL").as_deref() {
        Ok("mamba") => cfg.model.temporal = Temporal::Mamba,
        Ok("mamba2") => cfg.model.temporal = Temporal::Mamba2,
        _ => {}
    }
    let mc = cfg.model_config();
    let batch = env_or("BATCH", cfg.train.batch_size);
    let steps: usize = env_or("STEPS", 1);
    let parcels = env_or("PARCELS", cfg.data.synthetic.parcels);
    let time = cfg.window.window / mc.d_in.max(1);
    let adj = (mc.k_neighbors > 0).then(|| Adjacency::ring(parcels, mc.k_neighbors).expect("a valid ring"));
    let tokens: Tokens<f32> =
        boldcast::fixtures::ar1_tokens(TokenShape::new(batch, time, parcels, mc.d_in), 0.9, cfg.train.seed);
    let model = CpuModel::<f32>::new(mc, adj, cfg.train.seed).expect("the model builds");
    let opt = Adam::<f32>::new(cfg.optim_config()).expect("a valid optimizer");
    let mut trainer = Trainer::new(model, opt, cfg.schedule_config(), (), cfg.max_norm());
    let (t0, c0) = (Instant::now(), cpu_s());
    let mut loss = f64::NAN;
    for _ in 0..steps {
        loss = trainer.step(&tokens).expect("a finite step").loss;
    }
    let per = t0.elapsed().as_secs_f64() / steps as f64;
    let cpu = (cpu_s() - c0) / steps as f64;
    println!(
        "preset {preset} batch {batch} steps {steps}: last loss {loss:.17} ({per:.3} s/step, {cpu:.3} cpu-s/step)"
    );
}
