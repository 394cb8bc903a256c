//! A small loader for the golden cases of `shared/golden` (MODEL.md, "Golden files"), for the
//! tests of this crate only (the facade's checker cannot be a dependency of a backend).
#![allow(dead_code)]

use boldcast_core::model::NamedTensor;
use boldcast_core::optim::{Adam, OptimConfig};
use boldcast_core::schedule::ScheduleConfig;
use boldcast_core::{Adjacency, Elem, Model, ModelConfig, StepRecord, Temporal, TokenShape, Tokens, Trainer};
use boldcast_dfdx::{DfdxDevice, DfdxModel};
use dfdx::dtypes::Dtype;
use safetensors::SafeTensors;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// `shared/golden` next to the project root; panics (fails the test) when it is missing.
pub fn golden_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/golden");
    assert!(
        root.join("tiny/config.json").is_file(),
        "the golden files are missing: expected them under {} (shared/golden beside the project root)",
        root.display()
    );
    root
}

/// One tensor from a safetensors file as f64 values, with its shape.
pub struct Loaded {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

/// Every tensor of a safetensors file, by name.
pub fn read_safetensors(path: &Path) -> Vec<(String, Loaded)> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let st = SafeTensors::deserialize(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    for (name, view) in st.tensors() {
        let raw = view.data();
        let data: Vec<f64> = match view.dtype() {
            safetensors::Dtype::F32 => {
                raw.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64).collect()
            }
            safetensors::Dtype::F64 => raw.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect(),
            safetensors::Dtype::I64 => {
                raw.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f64).collect()
            }
            other => panic!("{}: tensor {name} has dtype {other:?}", path.display()),
        };
        out.push((name, Loaded { shape: view.shape().to_vec(), data }));
    }
    out
}

/// A golden case: config, initial weights, inputs and expected values.
pub struct Case {
    pub name: String,
    pub json: Value,
    pub model: ModelConfig,
    pub weights: Vec<(String, Loaded)>,
    pub tokens: Loaded,
    pub adjacency: Option<Adjacency>,
    pub expected: Vec<(String, Loaded)>,
}

impl Case {
    pub fn load(name: &str) -> Case {
        Self::load_dir(&golden_root().join(name))
    }

    /// A case from any directory in the golden format.
    pub fn load_dir(dir: &Path) -> Case {
        assert!(dir.join("config.json").is_file(), "no golden case at {}", dir.display());
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let name = name.as_str();
        let text = std::fs::read_to_string(dir.join("config.json")).expect("config.json");
        let json: Value = serde_json::from_str(&text).expect("config.json is JSON");
        let u = |k: &str| json[k].as_u64().unwrap_or_else(|| panic!("{name}: config key {k}")) as usize;
        let temporal = match json["temporal"].as_str().unwrap_or("mamba") {
            "mamba" => Temporal::Mamba,
            "mamba2" => Temporal::Mamba2,
            t => panic!("{name}: temporal {t}"),
        };
        let horizons: Vec<usize> =
            json["horizons"].as_array().unwrap().iter().map(|h| h.as_u64().unwrap() as usize).collect();
        let model = ModelConfig::builder()
            .temporal(temporal)
            .d_in(u("d_in"))
            .d_model(u("d_model"))
            .n_layers(u("n_layers"))
            .d_state(u("d_state"))
            .expand(u("expand"))
            .d_conv(u("d_conv"))
            .headdim(json["headdim"].as_u64().unwrap_or(64) as usize)
            .chunk_size(json["chunk_size"].as_u64().unwrap_or(64) as usize)
            .k_neighbors(u("k_neighbors"))
            .horizons(&horizons)
            .build()
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let weights = read_safetensors(&dir.join("weights.safetensors"));
        let mut inputs = read_safetensors(&dir.join("inputs.safetensors"));
        let tokens = take(&mut inputs, "tokens");
        let adjacency = inputs.iter().position(|(n, _)| n == "adjacency").map(|i| {
            let a = inputs.remove(i).1;
            Adjacency::new(a.shape[0], a.shape[1], a.data.iter().map(|&v| v as usize).collect())
                .expect("valid adjacency")
        });
        let expected = read_safetensors(&dir.join("expected.safetensors"));
        Case { name: name.into(), json, model, weights, tokens, adjacency, expected }
    }

    pub fn tokens<E: Elem>(&self) -> Tokens<E> {
        let s = &self.tokens.shape;
        Tokens::new(TokenShape::new(s[0], s[1], s[2], s[3]), self.tokens.data.iter().map(|&v| E::of(v)).collect())
            .unwrap()
    }

    pub fn weights<E: Elem>(&self) -> Vec<NamedTensor<E>> {
        self.weights
            .iter()
            .map(|(n, t)| NamedTensor {
                name: n.clone(),
                shape: t.shape.clone(),
                data: t.data.iter().map(|&v| E::of(v)).collect(),
            })
            .collect()
    }

    pub fn expected(&self, name: &str) -> &Loaded {
        &self.expected.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{}: no expected {name}", self.name)).1
    }

    pub fn optim(&self) -> OptimConfig {
        let wd = self.json["weight_decay"].as_f64().unwrap();
        let betas = self.json["betas"]
            .as_array()
            .map(|b| (b[0].as_f64().unwrap(), b[1].as_f64().unwrap()))
            .unwrap_or((0.9, 0.999));
        match self.json["optimizer"].as_str().unwrap_or("adamw") {
            "adamw" => OptimConfig::adamw(wd, betas),
            "adam_l2" => OptimConfig::adam_l2(wd, betas),
            o => panic!("{}: optimizer {o}", self.name),
        }
    }

    pub fn schedule(&self) -> ScheduleConfig {
        let lr = self.json["lr"].as_f64().unwrap();
        match self.json["schedule"].as_str().unwrap() {
            "constant" => ScheduleConfig::Constant { lr },
            "cosine" => ScheduleConfig::Cosine {
                lr,
                warmup_steps: self.json["warmup_steps"].as_u64().unwrap(),
                max_steps: self.json["max_steps"].as_u64().unwrap(),
                min_lr: self.json["min_lr"].as_f64().unwrap_or(0.0),
            },
            s => panic!("{}: schedule {s}", self.name),
        }
    }

    pub fn clip(&self) -> Option<f64> {
        self.json["grad_clip_norm"].as_f64()
    }

    pub fn steps(&self) -> usize {
        self.json["steps"].as_u64().unwrap() as usize
    }
}

fn take(v: &mut Vec<(String, Loaded)>, name: &str) -> Loaded {
    let i = v.iter().position(|(n, _)| n == name).unwrap_or_else(|| panic!("no tensor {name}"));
    v.remove(i).1
}

/// Compares with `|a - b| <= abs_tol + rel_tol * |b|`; returns the worst ratio
/// `|a - b| / (abs_tol + rel_tol * |b|)` (pass when <= 1) and panics on a length mismatch.
pub fn worst_ratio(what: &str, got: &[f64], want: &[f64], abs_tol: f64, rel_tol: f64) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: {} values, expected {}", got.len(), want.len());
    let mut worst = 0.0f64;
    for (a, b) in got.iter().zip(want) {
        let r = (a - b).abs() / (abs_tol + rel_tol * b.abs());
        assert!(r.is_finite(), "{what}: non-finite value {a} (expected {b})");
        worst = worst.max(r);
    }
    worst
}

pub const ABS: f64 = 1e-4;
pub const REL: f64 = 1e-3;

pub fn model<E: Dtype + Elem, D: DfdxDevice<E>>(case: &Case, dev: &D) -> DfdxModel<E, D> {
    let mut m = DfdxModel::<E, D>::new(case.model.clone(), case.adjacency.clone(), 0, dev.clone()).unwrap();
    m.load_state(&case.weights::<E>()).unwrap();
    m
}

fn f64s<E: Elem>(v: &[E]) -> Vec<f64> {
    v.iter().map(|x| x.f64()).collect()
}

/// Checks one case in element type `E` on device `dev`; returns the worst ratio per item for the report.
pub fn check_case<E: Dtype + Elem, D: DfdxDevice<E>>(name: &str, dev: D) -> Vec<(String, f64)> {
    check_case_at(&golden_root().join(name), dev)
}

/// [`check_case`] for a case directory anywhere.
pub fn check_case_at<E: Dtype + Elem, D: DfdxDevice<E>>(dir: &Path, dev: D) -> Vec<(String, f64)> {
    let case = Case::load_dir(dir);
    let name = case.name.clone();
    let name = name.as_str();
    let tokens = case.tokens::<E>();
    let mut m = model::<E, D>(&case, &dev);
    let mut ratios = Vec::new();
    let mut check = |what: &str, got: &[f64], want: &[f64]| {
        let r = worst_ratio(&format!("{name}/{what}"), got, want, ABS, REL);
        ratios.push((what.to_string(), r));
    };

    let pred = m.forward(&tokens).unwrap();
    check("pred", &f64s(pred.data()), &case.expected("pred").data);
    let emb = m.embed(&tokens).unwrap();
    check("embed", &f64s(emb.data()), &case.expected("embed").data);
    let loss = m.loss(&tokens).unwrap();
    check("loss", &[loss], &case.expected("loss").data);

    let loss2 = m.loss_and_grads(&tokens).unwrap();
    check("loss (with grads)", &[loss2], &case.expected("loss").data);
    let grads = m.grads();
    assert_eq!(grads.len(), case.model.param_specs().len());
    for g in &grads {
        let want = case.expected(&format!("grad.{}", g.name));
        assert_eq!(g.shape, want.shape, "{name}: grad.{} shape", g.name);
        check(&format!("grad.{}", g.name), &f64s(&g.data), &want.data);
    }

    // Real training steps through the core's trainer, optimizer and schedule.
    let opt = Adam::<E>::new(case.optim()).unwrap();
    let mut trainer =
        Trainer::new(model::<E, D>(&case, &dev), opt, case.schedule(), Vec::<StepRecord>::new(), case.clip());
    for _ in 0..case.steps() {
        trainer.step(&tokens).unwrap();
    }
    let recs = &trainer.logger;
    check("train.loss", &recs.iter().map(|r| r.loss).collect::<Vec<_>>(), &case.expected("train.loss").data);
    check("train.lr", &recs.iter().map(|r| r.lr).collect::<Vec<_>>(), &case.expected("train.lr").data);
    check(
        "train.grad_norm",
        &recs.iter().map(|r| r.grad_norm).collect::<Vec<_>>(),
        &case.expected("train.grad_norm").data,
    );
    assert_eq!(trainer.model.optimizer_steps(), case.steps() as u64);
    ratios
}
