//! The GPU check (run by `scripts/gpu-check.sh`; needs the `cuda` feature and an NVIDIA GPU):
//! the golden cases `tiny`, `tiny-l2-clip` and `tiny-mamba2` on the `Cuda` device, then the
//! median time of a training step of the `boldcast-demo` model, printed as one JSON line.
//!
//! `GPU_CHECK_GOLDEN` names the golden folder (default: the repository's `golden/cases` of
//! the checkout it was built in) and `GPU_CHECK_CASES` the comma-separated cases. Each case
//! goes through the test kit's checker (`boldcast_testkit::golden::check_case_dir`).
//!
//! Sizes of the timed batch: `GPU_CHECK_BATCH` (default 1), `GPU_CHECK_WINDOW` (256, the
//! preset's window), `GPU_CHECK_PARCELS` (1024, the preset's parcels), `GPU_CHECK_STEPS` (3
//! timed steps after one warm-up). If the batch does not fit (the tape keeps every scan state
//! and its gradient), the parcels are halved and the attempt repeated; the JSON says which
//! size ran.

use boldcast_core::optim::{Adam, OptimConfig};
use boldcast_core::schedule::ScheduleConfig;
use boldcast_core::{Adjacency, ModelConfig, StepRecord, TokenShape, Tokens, Trainer};
use boldcast_dfdx::{cuda_device, DfdxModel};
use boldcast_testkit::golden::check_case_dir;
use serde_json::json;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// AR(1) tokens with rho 0.9 from a fixed LCG: no RNG crate needed, reproducible.
fn ar1_tokens(b: usize, t: usize, p: usize) -> Tokens<f32> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut normal = || {
        let mut s = 0.0f64;
        for _ in 0..12 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            s += (state >> 11) as f64 / (1u64 << 53) as f64;
        }
        s - 6.0
    };
    let rho = 0.9f64;
    let mut data = vec![0.0f32; b * t * p];
    for bi in 0..b {
        for pi in 0..p {
            let mut x = normal();
            for ti in 0..t {
                data[(bi * t + ti) * p + pi] = x as f32;
                x = rho * x + (1.0 - rho * rho).sqrt() * normal();
            }
        }
    }
    Tokens::new(TokenShape::new(b, t, p, 1), data).unwrap()
}

fn time_demo(dev: &boldcast_dfdx::Cuda, b: usize, t: usize, p: usize, steps: usize) -> serde_json::Value {
    let cfg = ModelConfig::boldcast_demo();
    let adjacency = Adjacency::ring(p, cfg.k_neighbors).unwrap();
    let model = DfdxModel::<f32, _>::new(cfg, Some(adjacency), 0, dev.clone()).unwrap();
    let opt = Adam::new(OptimConfig::adamw(0.05, (0.9, 0.95))).unwrap();
    let sched = ScheduleConfig::Constant { lr: 3e-4 };
    let mut trainer = Trainer::new(model, opt, sched, Vec::<StepRecord>::new(), Some(1.0));
    let tokens = ar1_tokens(b, t, p);
    let mut times = Vec::new();
    for s in 0..=steps {
        let t0 = Instant::now();
        trainer.step(&tokens).unwrap(); // ends with the loss copied to the host: synchronised
        if s > 0 {
            times.push(t0.elapsed().as_secs_f64());
        }
    }
    times.sort_by(f64::total_cmp);
    let med = times[times.len() / 2];
    let last = trainer.logger.last().unwrap();
    json!({
        "batch": b, "window": t, "parcels": p, "timed_steps": steps,
        "median_step_s": (med * 1e4).round() / 1e4,
        "tokens_per_s": ((b * t * p) as f64 / med).round(),
        "loss": last.loss, "grad_norm": last.grad_norm,
    })
}

fn main() {
    let dev = match cuda_device(0) {
        Ok(d) => d,
        Err(e) => {
            println!("{}", json!({"gpu_check": "failed", "error": e.to_string()}));
            std::process::exit(1);
        }
    };
    let mut golden = serde_json::Map::new();
    let mut pass = true;
    // The golden folder and cases can be named: on the GPU machine the binary runs away from
    // the checkout it was built in.
    let root = std::env::var_os("GPU_CHECK_GOLDEN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(boldcast_testkit::cases::repo_cases_dir);
    let cases = std::env::var("GPU_CHECK_CASES").unwrap_or_else(|_| "tiny,tiny-l2-clip,tiny-mamba2".into());
    for case in cases.split(',').filter(|c| !c.is_empty()) {
        let d = dev.clone();
        let dir = root.join(case);
        let r = catch_unwind(AssertUnwindSafe(|| {
            check_case_dir(&dir, |cfg, adj| DfdxModel::<f32, _>::new(cfg, adj, 0, d.clone()))
        }));
        match r {
            Ok(Ok(report)) => {
                let worst = report.checks.iter().fold(None, |w: Option<&boldcast_testkit::golden::Check>, c| match w {
                    Some(w) if !(c.worst_ratio > w.worst_ratio || c.worst_ratio.is_nan()) => Some(w),
                    _ => Some(c),
                });
                let (what, worst) = worst.map_or((String::new(), f64::INFINITY), |c| (c.tensor.clone(), c.worst_ratio));
                pass &= report.passed();
                golden.insert(case.into(), json!({"worst_ratio": worst, "worst_item": what, "pass": report.passed()}));
                if !report.passed() {
                    eprintln!("{report}");
                }
            }
            Ok(Err(e)) => {
                pass = false;
                golden.insert(case.into(), json!({"pass": false, "error": e.to_string()}));
            }
            Err(_) => {
                pass = false;
                golden.insert(case.into(), json!({"pass": false, "error": "panicked (see stderr)"}));
            }
        }
    }
    let (b, t, steps) = (env("GPU_CHECK_BATCH", 1), env("GPU_CHECK_WINDOW", 256), env("GPU_CHECK_STEPS", 3));
    let mut p = env("GPU_CHECK_PARCELS", 1024);
    let mut tried = Vec::new();
    let demo = loop {
        match catch_unwind(AssertUnwindSafe(|| time_demo(&dev, b, t, p, steps))) {
            Ok(v) => break v,
            Err(_) if p > 64 => {
                tried.push(p);
                p /= 2;
            }
            Err(_) => break json!({"error": "every size failed (see stderr)"}),
        }
    };
    println!(
        "{}",
        json!({
            "gpu_check": if pass { "ok" } else { "golden_failed" },
            "backend": "dfdx-cuda", "dtype": "f32",
            "golden": golden, "demo_step": demo, "demo_sizes_that_failed": tried,
        })
    );
    if !pass {
        std::process::exit(1);
    }
}
