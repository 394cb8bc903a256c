//! Each red flag raised by a short run built to raise it, and none by an ordinary run: the
//! CPU backend on the `quick` preset, wrapped by [`Rigged`] where a flag needs a pathology.

use boldcast_core::model::NamedTensor;
use boldcast_core::{DataParallel, Embeddings, Forecasts, Model, ModelConfig, Optimizer, Tokens};
use boldcast_cpu::CpuModel;
use boldcast_train::config::RunConfig;
use boldcast_train::data::{load_data, Split, TrainData};
use boldcast_train::{FlagKind, Recorder, Run, TrainReport};

/// The CPU model with knobs: `frozen` ignores the optimizer (as a backend that never updates
/// would: nothing decays, nothing is learned), `train_decay` scales the reported training loss
/// by `train_decay^step` (the training loss falls while the validation loss does not), and
/// `grad_growth` scales the reported gradient norm by `grad_growth^step`.
struct Rigged {
    inner: CpuModel<f32>,
    frozen: bool,
    train_decay: f64,
    grad_growth: f64,
    steps: i32,
}

impl Model<f32> for Rigged {
    fn config(&self) -> &ModelConfig {
        self.inner.config()
    }
    fn forward(&self, t: &Tokens<f32>) -> boldcast_core::error::Result<Forecasts<f32>> {
        self.inner.forward(t)
    }
    fn embed(&self, t: &Tokens<f32>) -> boldcast_core::error::Result<Embeddings<f32>> {
        self.inner.embed(t)
    }
    fn loss(&self, t: &Tokens<f32>) -> boldcast_core::error::Result<f64> {
        self.inner.loss(t)
    }
    fn loss_and_grads(&mut self, t: &Tokens<f32>) -> boldcast_core::error::Result<f64> {
        let l = self.inner.loss_and_grads(t)?;
        self.steps += 1;
        Ok(l * self.train_decay.powi(self.steps))
    }
    fn grad_sq_norm(&self) -> f64 {
        self.inner.grad_sq_norm() * self.grad_growth.powi(2 * self.steps)
    }
    fn scale_grads(&mut self, factor: f64) {
        self.inner.scale_grads(factor)
    }
    fn apply_optimizer(&mut self, opt: &mut dyn Optimizer<f32>, lr: f64) -> boldcast_core::error::Result<()> {
        if self.frozen {
            opt.begin_step();
            return Ok(());
        }
        self.inner.apply_optimizer(opt, lr)
    }
    fn state(&self) -> Vec<NamedTensor<f32>> {
        self.inner.state()
    }
    fn grads(&self) -> Vec<NamedTensor<f32>> {
        self.inner.grads()
    }
    fn load_state(&mut self, t: &[NamedTensor<f32>]) -> boldcast_core::error::Result<()> {
        self.inner.load_state(t)
    }
}

impl DataParallel<f32> for Rigged {
    fn grads_from_flat(&mut self, flat: &[f32]) -> boldcast_core::error::Result<()> {
        self.inner.grads_from_flat(flat)
    }
}

fn config(max_steps: u64, val_every: u64) -> RunConfig {
    let mut cfg = boldcast_train::presets::preset("quick").unwrap();
    cfg.train.max_steps = max_steps;
    cfg.train.val_every = val_every;
    cfg.train.ckpt_every = max_steps;
    cfg.train.patience = 0;
    cfg.train.warmup_steps = 1;
    cfg
}

fn data(cfg: &RunConfig) -> TrainData {
    let loaded = load_data(cfg).unwrap();
    let n = loaded.ds.runs.len();
    let split = Split {
        train_subjects: vec![],
        heldout_subjects: vec![],
        train_runs: (0..n - 1).collect(),
        heldout_runs: vec![n - 1],
        how: "the last run".into(),
    };
    TrainData::new(loaded, split, cfg).unwrap()
}

fn run(cfg: &RunConfig, rig: impl FnOnce(CpuModel<f32>) -> Rigged) -> (TrainReport, Recorder, serde_json::Value) {
    let td = data(cfg);
    let dir = tempfile::tempdir().unwrap();
    let model = CpuModel::<f32>::new(cfg.model_config(), td.adjacency.clone(), cfg.train.seed).unwrap();
    let mut rec = Recorder::default();
    let report = Run::new(cfg, &td, dir.path()).run(rig(model), &mut [&mut rec]).unwrap();
    let summary = std::fs::read_to_string(dir.path().join("summary.json")).unwrap();
    (report, rec, serde_json::from_str(&summary).unwrap())
}

fn plain(inner: CpuModel<f32>) -> Rigged {
    Rigged { inner, frozen: false, train_decay: 1.0, grad_growth: 1.0, steps: 0 }
}

fn kinds(r: &TrainReport) -> Vec<FlagKind> {
    r.red_flags.iter().map(|f| f.kind).collect()
}

#[test]
fn an_ordinary_run_raises_none_and_reports_every_event() {
    let cfg = config(12, 4);
    let (report, rec, summary) = run(&cfg, plain);
    assert_eq!(kinds(&report), vec![], "{:?}", report.red_flags);
    assert_eq!(summary["red_flags"], serde_json::json!([]));
    assert_eq!(summary["input_spectrum"]["verdict"], "not_filtered");
    assert_eq!((rec.steps.len(), rec.validations.len(), rec.checkpoints.len(), rec.ended), (12, 4, 1, true));
    assert_eq!(rec.validations.last().unwrap().step, 12);
}

#[test]
fn a_frozen_model_raises_best_at_start_and_unused_weight_decay() {
    let cfg = config(8, 4);
    assert!(cfg.train.weight_decay > 0.0);
    let (report, rec, summary) = run(&cfg, |inner| Rigged { frozen: true, ..plain(inner) });
    let k = kinds(&report);
    assert!(k.contains(&FlagKind::BestAtStart) && k.contains(&FlagKind::WeightDecayUnused), "{k:?}");
    assert_eq!(rec.flags, report.red_flags, "the observers saw every flag");
    let words: Vec<&str> =
        summary["red_flags"].as_array().unwrap().iter().map(|f| f["kind"].as_str().unwrap()).collect();
    assert!(words.contains(&"best_at_start") && words.contains(&"weight_decay_unused"), "{words:?}");
}

#[test]
fn a_falling_training_loss_raises_overfitting() {
    let mut cfg = config(12, 2);
    cfg.train.overfit_ratio = 1.5;
    let (report, _, _) = run(&cfg, |inner| Rigged { train_decay: 0.7, ..plain(inner) });
    let f = report.red_flags.iter().find(|f| f.kind == FlagKind::Overfitting).expect("raised");
    assert!(f.message.contains("train.overfit_ratio = 1.5"), "{}", f.message);
    assert_eq!(kinds(&report).iter().filter(|k| **k == FlagKind::Overfitting).count(), 1, "raised once");
}

#[test]
fn a_growing_gradient_norm_raises_gradient_growth() {
    let cfg = config(14, 7);
    let (report, _, _) = run(&cfg, |inner| Rigged { grad_growth: 10.0, ..plain(inner) });
    let f = report.red_flags.iter().find(|f| f.kind == FlagKind::GradientGrowth).expect("raised");
    assert_eq!(f.step, 14);
}
