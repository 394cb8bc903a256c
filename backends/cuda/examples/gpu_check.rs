//! The GPU check of the native CUDA backend (run by `scripts/gpu-check.sh run`; needs the
//! `cuda` feature and an NVIDIA GPU): opens CUDA device 0 ([`Gpu::new`]: the driver, NVRTC
//! compiling every kernel file, cuBLAS), runs the golden cases on it with [`CudaModel::on_gpu`]
//! in f32 and in bf16 autocast, times training steps of the `boldcast-demo` model in bf16 and
//! f32, and prints one JSON line on stdout (progress goes to stderr).
//!
//! - Golden, f32: every case through the test kit's checker
//!   (`boldcast_testkit::golden::check_case_dir`), MODEL.md's tolerances.
//! - Golden, bf16: the test kit's measures and judgement (`boldcast_testkit::loose`, as
//!   `tests/cuda/bf16_golden.rs`), `max |a - b| / max |b|` per tensor, held to its
//!   `BF16_AUTOCAST` tolerances (loss and series 5e-3, forecast and embedding 3e-2,
//!   gradients 1.2e-1); the bf16 forecast must also differ from the f32 one (autocast is not
//!   a no-op) and the bf16 training loss must decrease.
//! - Demo: the preset's model (d_model 128, 4 layers, d_state 16, k 8; AdamW 3e-4, clipping
//!   1.0) on AR(1) tokens, one warm-up step then the timed ones; per precision the median step,
//!   the pool's peak (bytes as counted: a bf16 activation as 2) beside the memory model's
//!   prediction (`CudaModel::predicted_peak`), the driver's used device
//!   memory (total - free) before the model and after the steps, and per timed step the
//!   counters of `boldcast_cuda::exec::Traffic` (launches, products, staged host buffers and
//!   bytes, synchronizations, uploaded bytes) and the pool's new allocations: the design
//!   holds when a step stages 0 bytes, synchronizes at most twice and allocates nothing.
//!   Each timed step ends with one more synchronization (outside the counts) so that its
//!   time covers the device's work. A failing step is an `error` in the JSON.
//!
//! `passed` is true when every golden case passes in both precisions and both demo runs
//! completed; the `targets` (bf16 step at most 0.25 s; the step's device memory at most 4 GiB
//! in bf16 and 7 GiB in f32) are
//! reported with whether they were met and do not decide `passed`. Exit status: 0 passed,
//! 1 not passed, 2 no usable device (the JSON then holds the [`DeviceError`]).
//!
//! Knobs: `GPU_CHECK_GOLDEN` (the golden folder; default the repository's `golden/cases`),
//! `GPU_CHECK_CASES` (comma-separated case names; default every case in the folder),
//! `GPU_CHECK_STEPS` (timed steps, default 5), `GPU_CHECK_CUDA_BATCH` / `_WINDOW` / `_PARCELS`
//! (the demo batch, default 4, 256, 1024: the preset's), `GPU_CHECK_BUDGET_S` (seconds,
//! default 270: golden cases start only in the first half, and a demo step starts only when
//! the last one's time still fits, so the line is printed before the script's time limit).

use boldcast_core::{Adjacency, Model, ModelConfig, TokenShape, Tokens};
use boldcast_cuda::device::Gpu;
use boldcast_cuda::timed::timed_steps;
use boldcast_cuda::{CudaModel, Precision};
use boldcast_testkit::golden::{case_dirs, check_case_dir, GoldenCase, Report};
use boldcast_testkit::loose::{judge, measure, Errors, BF16_AUTOCAST};
use serde_json::{json, Value};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The targets reported (not part of `passed`).
const BF16_STEP_S_MAX: f64 = 0.25;
/// The step's device memory (the driver's used bytes after the steps less before the model),
/// GiB, per precision: issue 31's targets, which the memory model predicts to hold.
const MEMORY_GIB_MAX_BF16: f64 = 4.0;
const MEMORY_GIB_MAX_F32: f64 = 7.0;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// `f`, with a panic turned into an error carrying its message.
fn guarded<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned());
            Err(format!("panicked: {}", msg.unwrap_or_else(|| "(no message)".into())))
        }
    }
}

fn secs(t0: Instant) -> f64 {
    (t0.elapsed().as_secs_f64() * 1e3).round() / 1e3
}

/// The case directories to run: `GPU_CHECK_CASES` in `root`, or every case there.
fn golden_dirs() -> Result<Vec<PathBuf>, String> {
    let root =
        std::env::var_os("GPU_CHECK_GOLDEN").map(PathBuf::from).unwrap_or_else(boldcast_testkit::cases::repo_cases_dir);
    match std::env::var("GPU_CHECK_CASES") {
        Ok(list) if !list.trim().is_empty() => {
            Ok(list.split(',').map(str::trim).filter(|c| !c.is_empty()).map(|c| root.join(c)).collect())
        }
        _ => case_dirs(&root).map_err(|e| e.to_string()),
    }
}

/// A report's worst check and the names of its failing tensors (at most eight).
fn summarize(report: &Report) -> Value {
    let worst = report.checks.iter().max_by(|a, b| a.worst_ratio.total_cmp(&b.worst_ratio));
    let failures: Vec<&str> = report.failures().iter().take(8).map(|c| c.tensor.as_str()).collect();
    json!({
        "pass": report.passed(),
        "worst_ratio": worst.map(|c| c.worst_ratio),
        "worst_item": worst.map(|c| c.tensor.as_str()),
        "failures": failures,
    })
}

/// One case in f32 on the device, through the kit's checker.
fn golden_f32(gpu: &Rc<Gpu>, dir: &Path) -> Value {
    let t0 = Instant::now();
    let r =
        guarded(|| check_case_dir(dir, |cfg, adj| CudaModel::on_gpu(cfg, adj, gpu.clone())).map_err(|e| e.to_string()));
    let mut v = match r {
        Ok(report) => {
            if !report.passed() {
                eprintln!("{report}");
            }
            summarize(&report)
        }
        Err(e) => json!({"pass": false, "error": e}),
    };
    v["s"] = json!(secs(t0));
    v
}

fn case_model(gpu: &Rc<Gpu>, case: &GoldenCase, p: Precision) -> Result<CudaModel, String> {
    let mut m = CudaModel::on_gpu(case.model_config(), case.adjacency(), gpu.clone())
        .map_err(|e| e.to_string())?
        .with_precision(p);
    m.load_state(&case.weights()).map_err(|e| e.to_string())?;
    Ok(m)
}

/// The test kit's bf16 measures of one case on the device (`boldcast_testkit::loose`).
fn measure_bf16(gpu: &Rc<Gpu>, case: &GoldenCase) -> Result<Errors, String> {
    let f32_pred =
        case_model(gpu, case, Precision::F32)?.forward(&case.tokens()).map_err(|e| format!("f32 forward: {e}"))?;
    measure(case, &mut case_model(gpu, case, Precision::Bf16)?, f32_pred.data())
}

/// One case in bf16 on the device: the measures, the tolerances and what failed.
fn golden_bf16(gpu: &Rc<Gpu>, dir: &Path) -> Value {
    let t0 = Instant::now();
    let r = guarded(|| {
        let case = GoldenCase::load(dir).map_err(|e| e.to_string())?;
        measure_bf16(gpu, &case)
    });
    let mut v = match r {
        Ok(e) => {
            let bad = judge(&e, &BF16_AUTOCAST);
            json!({
                "pass": bad.is_empty(), "loss": e.loss, "pred": e.pred, "embed": e.embed,
                "grad": e.grad.0, "grad_tensor": e.grad.1, "train_loss": e.train, "vs_f32_pred": e.vs_f32,
                "failures": bad,
            })
        }
        Err(e) => json!({"pass": false, "error": e}),
    };
    v["s"] = json!(secs(t0));
    v
}

/// Every golden case in both precisions until `deadline` (later cases are marked skipped);
/// the cases' JSON and whether all passed.
fn golden(gpu: &Rc<Gpu>, deadline: Instant) -> (Value, bool) {
    let dirs = match golden_dirs() {
        Ok(d) if !d.is_empty() => d,
        Ok(_) => return (json!({"error": "no golden case found"}), false),
        Err(e) => return (json!({"error": e}), false),
    };
    let (mut out, mut pass) = (serde_json::Map::new(), true);
    for dir in dirs {
        let name = dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
        if Instant::now() > deadline {
            out.insert(name, json!({"skipped": "over the golden half of GPU_CHECK_BUDGET_S"}));
            pass = false;
            continue;
        }
        let (f32, bf16) = (golden_f32(gpu, &dir), golden_bf16(gpu, &dir));
        pass &= f32["pass"] == json!(true) && bf16["pass"] == json!(true);
        eprintln!("gpu_check_cuda: golden {name}: f32 {} bf16 {}", f32["pass"], bf16["pass"]);
        out.insert(name, json!({"f32": f32, "bf16": bf16}));
    }
    (Value::Object(out), pass)
}

/// The demo batch's sizes and the timed steps.
#[derive(Clone, Copy)]
struct Sizes {
    batch: usize,
    window: usize,
    parcels: usize,
    steps: usize,
}

/// The boldcast-demo model on the device in `prec`, with the weights seed 0 draws.
fn demo_model(gpu: &Rc<Gpu>, s: Sizes, prec: Precision) -> Result<CudaModel, String> {
    let cfg = ModelConfig::boldcast_demo();
    let adj = Adjacency::ring(s.parcels, cfg.k_neighbors).map_err(|e| e.to_string())?;
    let weights = CudaModel::seeded(cfg.clone(), Some(adj.clone()), 0).map_err(|e| e.to_string())?.state();
    let mut m = CudaModel::on_gpu(cfg, Some(adj), gpu.clone()).map_err(|e| e.to_string())?.with_precision(prec);
    m.load_state(&weights).map_err(|e| e.to_string())?;
    Ok(m)
}

/// The driver's used device bytes (total - free), or null.
fn used(gpu: &Gpu) -> Value {
    gpu.memory().map_or(Value::Null, |(free, total)| json!(total - free))
}

/// The demo training step in `prec`: times, memory and the device's counts per step; skipped
/// unless `need` (the time a warm-up step is expected to take) fits before `deadline`.
fn demo(gpu: &Rc<Gpu>, s: Sizes, prec: Precision, deadline: Instant, need: Duration) -> Value {
    if Instant::now() + need > deadline {
        return json!({"error": "skipped: what is left of GPU_CHECK_BUDGET_S would not fit its warm-up step"});
    }
    let used_before = used(gpu);
    let r = guarded(|| {
        // AR(1) tokens, rho 0.9 (the fixtures' generator, seeded).
        let tokens: Tokens<f32> =
            boldcast_fixtures::ar1_tokens(TokenShape::new(s.batch, s.window, s.parcels, 1), 0.9, 7);
        let mut m = demo_model(gpu, s, prec)?;
        let predicted = m.predicted_peak(tokens.shape()).total();
        let st = timed_steps(&mut m, &tokens, s.steps, deadline);
        // While the model (and its pool's cache) is alive.
        Ok((st, m.pool().stats(), used(gpu), predicted))
    });
    let (st, pool, used_after, predicted) = match r {
        Ok(x) => x,
        Err(e) => return json!({"error": e, "driver_used_before_bytes": used_before}),
    };
    let median = st.median_s();
    let n = st.step_s.len().max(1) as u64;
    let c = st.traffic;
    let mut v = json!({
        "batch": s.batch, "window": s.window, "parcels": s.parcels, "timed_steps": st.step_s.len(),
        "warmup_s": st.warmup_s, "median_step_s": median, "step_s": st.step_s,
        "tokens_per_s": median.map(|m| ((s.batch * s.window * s.parcels) as f64 / m).round()),
        "loss": st.last.map(|r| r.loss), "grad_norm": st.last.map(|r| r.grad_norm),
        "pool_peak_bytes": pool.peak_reserved, "pool_peak_in_use_bytes": pool.peak_in_use,
        "predicted_peak_bytes": predicted,
        "pool_host_fallbacks": pool.host_fallbacks,
        "driver_used_before_bytes": used_before, "driver_used_bytes": used_after,
        "per_step": {"launches": c.launches / n, "products": c.products / n, "staged": c.staged / n,
                     "staged_bytes": c.staged_bytes / n, "syncs": c.syncs as f64 / n as f64,
                     "uploaded_bytes": c.uploaded_bytes / n, "pool_allocations": st.allocated as f64 / n as f64},
    });
    if let Some(e) = st.error {
        v["error"] = json!(e);
    }
    if let Some(n) = st.note {
        v["note"] = json!(n);
    }
    v
}

/// Whether the demo runs met the targets (null where a run gave no number).
fn targets(demo: &Value) -> Value {
    let gib = |p: &str| {
        let (after, before) = (demo[p]["driver_used_bytes"].as_f64(), demo[p]["driver_used_before_bytes"].as_f64());
        after.zip(before).map(|(a, b)| (a - b) / f64::from(1u32 << 30))
    };
    let met = |p: &str, max: f64| gib(p).map(|g| g <= max);
    json!({
        "bf16_step_s_max": BF16_STEP_S_MAX,
        "bf16_step_s_met": demo["bf16"]["median_step_s"].as_f64().map(|s| s <= BF16_STEP_S_MAX),
        "memory_gib_max": {"bf16": MEMORY_GIB_MAX_BF16, "f32": MEMORY_GIB_MAX_F32},
        "memory_gib": {"bf16": gib("bf16"), "f32": gib("f32")},
        "memory_gib_met": {"bf16": met("bf16", MEMORY_GIB_MAX_BF16), "f32": met("f32", MEMORY_GIB_MAX_F32)},
    })
}

fn main() {
    let start = Instant::now();
    let budget = Duration::from_secs(env("GPU_CHECK_BUDGET_S", 270) as u64);
    let gpu = match guarded(|| Gpu::new(0).map_err(|e| e.to_string())) {
        Ok(g) => g,
        Err(e) => {
            println!("{}", json!({"backend": "cuda", "error": e, "passed": false}));
            std::process::exit(2);
        }
    };
    let (major, minor) = gpu.capability();
    eprintln!("gpu_check_cuda: {} (sm_{major}{minor}) opened in {:.1} s", gpu.name(), start.elapsed().as_secs_f64());
    let open_s = secs(start);
    let (golden, golden_pass) = golden(&gpu, start + budget / 2);
    let s = Sizes {
        batch: env("GPU_CHECK_CUDA_BATCH", 4),
        window: env("GPU_CHECK_CUDA_WINDOW", 256),
        parcels: env("GPU_CHECK_CUDA_PARCELS", 1024),
        steps: env("GPU_CHECK_STEPS", 5).max(1),
    };
    let (mut demo_runs, mut need) = (serde_json::Map::new(), Duration::ZERO);
    for prec in [Precision::Bf16, Precision::F32] {
        let v = demo(&gpu, s, prec, start + budget, need);
        need = Duration::from_secs_f64(v["warmup_s"].as_f64().unwrap_or(0.0));
        eprintln!("gpu_check_cuda: demo {prec}: median {} s, error {}", v["median_step_s"], v["error"]);
        demo_runs.insert(prec.name().into(), v);
    }
    let demo = Value::Object(demo_runs);
    let demo_ok = demo["bf16"].get("error").is_none() && demo["f32"].get("error").is_none();
    let passed = golden_pass && demo_ok;
    let total = gpu.memory().map_or(Value::Null, |(_, t)| json!(t));
    println!(
        "{}",
        json!({
            "backend": "cuda", "device": gpu.name(), "capability": format!("{major}.{minor}"),
            "memory_total_bytes": total, "open_s": open_s,
            "golden": golden, "demo": demo, "targets": targets(&demo),
            "passed": passed, "elapsed_s": secs(start),
        })
    );
    std::process::exit(if passed { 0 } else { 1 });
}
