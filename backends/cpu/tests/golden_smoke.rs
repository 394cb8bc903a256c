//! The PyTorch golden cases `tiny`, `tiny-l2-clip` (Mamba-1) and `tiny-mamba2` (Mamba-2, chunk
//! boundaries inside the sequence) (MODEL.md, "Golden files") against
//! [`CpuModel<f32>`]: forward (`pred`, `embed`, `target`, `loss`), every `grad.*`, and the
//! `train.*` series of real training steps through the core trainer, each within
//! `1e-4 + 1e-3 |b|`. The files are read from `<workspace>/../shared/golden`; when they are
//! missing the test fails (it must not pass by skipping).

use boldcast_core::forecast::build_forecast_targets;
use boldcast_core::model::NamedTensor;
use boldcast_core::{
    Adam, Adjacency, Model, ModelConfig, OptimConfig, ScheduleConfig, Temporal, TokenShape, Tokens, Trainer,
};
use boldcast_cpu::CpuModel;
use safetensors::{Dtype, SafeTensors};
use serde_json::Value;
use std::path::PathBuf;

fn golden_dir(case: &str) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/golden");
    let dir = root.join(case);
    assert!(
        dir.join("expected.safetensors").is_file(),
        "golden case `{case}` not found at {} (the shared golden files must be present; this test fails rather than skips)",
        dir.display()
    );
    dir
}

/// A tensor as f64 values (f32, f64 and i64 files).
fn values(st: &SafeTensors<'_>, name: &str) -> (Vec<usize>, Vec<f64>) {
    let t = st.tensor(name).unwrap_or_else(|e| panic!("golden tensor `{name}`: {e:?}"));
    let d = t.data();
    let v: Vec<f64> = match t.dtype() {
        Dtype::F32 => d.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap()) as f64).collect(),
        Dtype::F64 => d.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect(),
        Dtype::I64 => d.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap()) as f64).collect(),
        other => panic!("golden tensor `{name}`: unexpected dtype {other:?}"),
    };
    (t.shape().to_vec(), v)
}

/// Worst `|a - b| / (1e-4 + 1e-3 |b|)` over a tensor; panics naming the first entry over 1.
fn compare(what: &str, got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: {} values, golden has {}", got.len(), want.len());
    let mut worst = 0.0f64;
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        let r = (a - b).abs() / (1e-4 + 1e-3 * b.abs());
        assert!(r <= 1.0 && a.is_finite(), "{what}[{i}]: got {a}, golden {b} (ratio {r:.3})");
        worst = worst.max(r);
    }
    worst
}

struct Case {
    cfg: Value,
    model: CpuModel<f32>,
    tokens: Tokens<f32>,
    expected: Vec<u8>,
}

fn load(case: &str) -> Case {
    let dir = golden_dir(case);
    let cfg: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    let u = |k: &str| cfg[k].as_u64().unwrap_or_else(|| panic!("config.json: {k}")) as usize;
    let temporal = match cfg["temporal"].as_str() {
        Some("mamba") => Temporal::Mamba,
        Some("mamba2") => Temporal::Mamba2,
        t => panic!("config.json: temporal {t:?}"),
    };
    // headdim and chunk_size only mean something for Mamba-2; absent, the config defaults.
    let or_default = |k: &str, d: usize| cfg.get(k).map_or(d, |v| v.as_u64().unwrap() as usize);
    let mc = ModelConfig {
        temporal,
        d_in: u("d_in"),
        d_model: u("d_model"),
        n_layers: u("n_layers"),
        d_state: u("d_state"),
        expand: u("expand"),
        d_conv: u("d_conv"),
        headdim: or_default("headdim", 64),
        chunk_size: or_default("chunk_size", 64),
        k_neighbors: u("k_neighbors"),
        horizons: cfg["horizons"].as_array().unwrap().iter().map(|h| h.as_u64().unwrap() as usize).collect(),
    };
    let inputs = std::fs::read(dir.join("inputs.safetensors")).unwrap();
    let inp = SafeTensors::deserialize(&inputs).unwrap();
    let adj = (mc.k_neighbors > 0).then(|| {
        let (shape, idx) = values(&inp, "adjacency");
        Adjacency::new(shape[0], shape[1], idx.iter().map(|&v| v as usize).collect()).unwrap()
    });
    let (ts, tv) = values(&inp, "tokens");
    let tokens =
        Tokens::new(TokenShape::new(ts[0], ts[1], ts[2], ts[3]), tv.iter().map(|&v| v as f32).collect()).unwrap();
    let mut model = CpuModel::<f32>::new(mc, adj, 0).unwrap();
    let weights = std::fs::read(dir.join("weights.safetensors")).unwrap();
    let w = SafeTensors::deserialize(&weights).unwrap();
    let state: Vec<NamedTensor<f32>> = w
        .names()
        .into_iter()
        .map(|n| {
            let (shape, v) = values(&w, n);
            NamedTensor { name: n.to_string(), shape, data: v.iter().map(|&x| x as f32).collect() }
        })
        .collect();
    model.load_state(&state).unwrap();
    let expected = std::fs::read(dir.join("expected.safetensors")).unwrap();
    Case { cfg, model, tokens, expected }
}

fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

fn run(case: &str) {
    let Case { cfg, mut model, tokens, expected } = load(case);
    let exp = SafeTensors::deserialize(&expected).unwrap();
    let mut report = Vec::new();
    let mut check = |what: &str, got: &[f64]| {
        let (_, want) = values(&exp, what);
        report.push((what.to_string(), compare(what, got, &want)));
    };

    let pred = model.forward(&tokens).unwrap();
    check("pred", &f64s(pred.data()));
    let emb = model.embed(&tokens).unwrap();
    check("embed", &f64s(emb.data()));
    let target =
        build_forecast_targets::<f32, usize, usize, usize, usize, usize>(&tokens, &model.config().horizons).unwrap();
    check("target", &f64s(target.data()));
    let loss = model.loss_and_grads(&tokens).unwrap();
    check("loss", &[loss]);
    check("loss", &[model.loss(&tokens).unwrap()]);
    let grads = model.grads();
    assert_eq!(grads.len(), exp.names().iter().filter(|n| n.starts_with("grad.")).count(), "number of grad.*");
    for g in &grads {
        check(&format!("grad.{}", g.name), &f64s(&g.data));
    }

    // Real training steps through the core trainer: loss before each update, lr, pre-clip norm.
    let f = |k: &str| cfg[k].as_f64().unwrap_or_else(|| panic!("config.json: {k}"));
    let betas = cfg.get("betas").and_then(Value::as_array).map(|b| (b[0].as_f64().unwrap(), b[1].as_f64().unwrap()));
    let betas = betas.unwrap_or((0.9, 0.999));
    let oc = match cfg["optimizer"].as_str().unwrap() {
        "adamw" => OptimConfig::adamw(f("weight_decay"), betas),
        "adam_l2" => OptimConfig::adam_l2(f("weight_decay"), betas),
        o => panic!("optimizer {o}"),
    };
    let schedule = match cfg["schedule"].as_str().unwrap() {
        "constant" => ScheduleConfig::Constant { lr: f("lr") },
        "cosine" => ScheduleConfig::Cosine {
            lr: f("lr"),
            warmup_steps: cfg["warmup_steps"].as_u64().unwrap(),
            max_steps: cfg["max_steps"].as_u64().unwrap(),
            min_lr: cfg.get("min_lr").and_then(Value::as_f64).unwrap_or(0.0),
        },
        s => panic!("schedule {s}"),
    };
    let steps = cfg["steps"].as_u64().unwrap();
    let mut tr = Trainer::new(model, Adam::new(oc).unwrap(), schedule, Vec::new(), Some(f("grad_clip_norm")));
    for _ in 0..steps {
        tr.step(&tokens).unwrap();
    }
    let recs = tr.logger.clone();
    check("train.loss", &recs.iter().map(|r| r.loss).collect::<Vec<_>>());
    check("train.lr", &recs.iter().map(|r| r.lr).collect::<Vec<_>>());
    check("train.grad_norm", &recs.iter().map(|r| r.grad_norm).collect::<Vec<_>>());

    report.sort_by(|a, b| b.1.total_cmp(&a.1));
    println!("{case}: {} tensors within tolerance; worst error/tolerance ratios:", report.len());
    for (name, r) in report.iter().take(5) {
        println!("  {name}: {r:.4}");
    }
    let group = |pre: &str| report.iter().filter(|(n, _)| n.starts_with(pre)).map(|x| x.1).fold(0.0f64, f64::max);
    println!(
        "  worst per group: pred {:.4}, embed {:.4}, target {:.4}, loss {:.4}, grad.* {:.4}, train.* {:.4}",
        group("pred"),
        group("embed"),
        group("target"),
        group("loss"),
        group("grad."),
        group("train.")
    );
}

#[test]
fn golden_tiny() {
    run("tiny");
}

#[test]
fn golden_tiny_l2_clip() {
    run("tiny-l2-clip");
}

#[test]
fn golden_tiny_mamba2() {
    run("tiny-mamba2");
}
