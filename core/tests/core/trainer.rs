//! The trainer's step order (MODEL.md, "one step") checked on a tiny quadratic model whose
//! gradient is known in closed form: loss, stop on non-finite loss naming the step, clipping
//! by the pre-clip global norm, update with `lr(step)`, one record per step.

use boldcast_core::model::{check_state, NamedTensor};
use boldcast_core::optim::{Adam, OptimConfig, Optimizer, ParamMut};
use boldcast_core::schedule::ScheduleConfig;
use boldcast_core::{Embeddings, Error, Forecasts, Model, ModelConfig, StepRecord, Tokens, Trainer};

/// loss = sum_i (w_i - c_i)^2 over a 2x2 "weight" and a 2-vector "bias", so the gradient is
/// 2 (w - c). `poison` makes the loss NaN at one call to test the non-finite stop.
struct Quadratic {
    cfg: ModelConfig,
    w: Vec<f64>,
    b: Vec<f64>,
    gw: Vec<f64>,
    gb: Vec<f64>,
    calls: u64,
    poison_at: Option<u64>,
}

const TARGET: f64 = 3.0;

impl Quadratic {
    fn new() -> Self {
        let mut cfg = ModelConfig::boldcast_demo();
        cfg.n_layers = 0;
        Self {
            cfg,
            w: vec![1.0, -1.0, 0.5, 2.0],
            b: vec![0.25, -0.75],
            gw: vec![0.0; 4],
            gb: vec![0.0; 2],
            calls: 0,
            poison_at: None,
        }
    }
}

impl Model<f64> for Quadratic {
    fn config(&self) -> &ModelConfig {
        &self.cfg
    }
    fn forward(&self, _: &Tokens<f64>) -> Result<Forecasts<f64>, Error> {
        Err(Error::Backend("not used".into()))
    }
    fn embed(&self, _: &Tokens<f64>) -> Result<Embeddings<f64>, Error> {
        Err(Error::Backend("not used".into()))
    }
    fn loss(&self, _: &Tokens<f64>) -> Result<f64, Error> {
        Ok(self.w.iter().chain(&self.b).map(|x| (x - TARGET).powi(2)).sum())
    }
    fn loss_and_grads(&mut self, t: &Tokens<f64>) -> Result<f64, Error> {
        let call = self.calls;
        self.calls += 1;
        for (g, x) in self.gw.iter_mut().zip(&self.w) {
            *g = 2.0 * (x - TARGET);
        }
        for (g, x) in self.gb.iter_mut().zip(&self.b) {
            *g = 2.0 * (x - TARGET);
        }
        if self.poison_at == Some(call) {
            return Ok(f64::NAN);
        }
        self.loss(t)
    }
    fn grad_sq_norm(&self) -> f64 {
        self.gw.iter().chain(&self.gb).map(|g| g * g).sum()
    }
    fn scale_grads(&mut self, f: f64) {
        self.gw.iter_mut().chain(self.gb.iter_mut()).for_each(|g| *g *= f);
    }
    fn apply_optimizer(&mut self, opt: &mut dyn Optimizer<f64>, lr: f64) -> Result<(), Error> {
        opt.begin_step();
        opt.update(ParamMut { index: 0, name: "head.weight", shape: &[2, 2], value: &mut self.w, grad: &self.gw }, lr);
        opt.update(ParamMut { index: 1, name: "head.bias", shape: &[2], value: &mut self.b, grad: &self.gb }, lr);
        Ok(())
    }
    fn state(&self) -> Vec<NamedTensor<f64>> {
        vec![
            NamedTensor { name: "head.weight".into(), shape: vec![2, 2], data: self.w.clone() },
            NamedTensor { name: "head.bias".into(), shape: vec![2], data: self.b.clone() },
        ]
    }
    fn grads(&self) -> Vec<NamedTensor<f64>> {
        vec![
            NamedTensor { name: "head.weight".into(), shape: vec![2, 2], data: self.gw.clone() },
            NamedTensor { name: "head.bias".into(), shape: vec![2], data: self.gb.clone() },
        ]
    }
    fn load_state(&mut self, t: &[NamedTensor<f64>]) -> Result<(), Error> {
        let specs: Vec<_> =
            self.state().into_iter().map(|n| boldcast_core::ParamSpec { name: n.name, shape: n.shape }).collect();
        check_state(&specs, t)?;
        for n in t {
            match n.name.as_str() {
                "head.weight" => self.w.clone_from(&n.data),
                _ => self.b.clone_from(&n.data),
            }
        }
        Ok(())
    }
}

fn tokens() -> Tokens<f64> {
    Tokens::zeros(boldcast_core::TokenShape::new(1, 8, 1, 1))
}

/// torch's AdamW on one scalar, written out independently of the core.
#[allow(clippy::too_many_arguments)]
fn adamw_scalar(p: &mut f64, m: &mut f64, v: &mut f64, g: f64, t: i32, lr: f64, wd: f64, b: (f64, f64)) {
    *p *= 1.0 - lr * wd;
    *m = b.0 * *m + (1.0 - b.0) * g;
    *v = b.1 * *v + (1.0 - b.1) * g * g;
    let mh = *m / (1.0 - b.0.powi(t));
    let vh = *v / (1.0 - b.1.powi(t));
    *p -= lr * mh / (vh.sqrt() + 1e-8);
}

#[test]
fn steps_clip_decay_and_log_in_order() {
    let sched = ScheduleConfig::Cosine { lr: 0.1, warmup_steps: 2, max_steps: 5, min_lr: 0.01 };
    let opt = Adam::new(OptimConfig::adamw(0.1, (0.9, 0.95))).unwrap();
    let max_norm = 1.0;
    let mut tr = Trainer::new(Quadratic::new(), opt, sched.clone(), Vec::<StepRecord>::new(), Some(max_norm));

    // The same steps by hand.
    let (mut w, mut b) = (Quadratic::new().w, Quadratic::new().b);
    let (mut mw, mut vw, mut mb, mut vb) = (vec![0.0; 4], vec![0.0; 4], vec![0.0; 2], vec![0.0; 2]);
    for s in 0..5u64 {
        let loss: f64 = w.iter().chain(&b).map(|x| (x - TARGET).powi(2)).sum();
        let gw: Vec<f64> = w.iter().map(|x| 2.0 * (x - TARGET)).collect();
        let gb: Vec<f64> = b.iter().map(|x| 2.0 * (x - TARGET)).collect();
        let norm = gw.iter().chain(&gb).map(|g| g * g).sum::<f64>().sqrt();
        let f = (max_norm / (norm + 1e-6)).min(1.0);
        let lr = if s < 2 {
            0.1 * (0.5 + 0.5 * s as f64 / 2.0)
        } else {
            0.01 + 0.09 * (1.0 + (std::f64::consts::PI * (s as f64 - 2.0) / 3.0).cos()) / 2.0
        };
        let t = s as i32 + 1;
        for i in 0..4 {
            adamw_scalar(&mut w[i], &mut mw[i], &mut vw[i], gw[i] * f, t, lr, 0.1, (0.9, 0.95));
        }
        for i in 0..2 {
            // Biases are 1-D: no decay.
            adamw_scalar(&mut b[i], &mut mb[i], &mut vb[i], gb[i] * f, t, lr, 0.0, (0.9, 0.95));
        }
        let rec = tr.step(&tokens()).unwrap();
        assert_eq!(rec.step, s);
        assert!((rec.loss - loss).abs() < 1e-12, "step {s}: loss {} vs {loss}", rec.loss);
        assert!((rec.grad_norm - norm).abs() < 1e-12, "step {s}: pre-clip norm");
        assert!((rec.lr - lr).abs() < 1e-15, "step {s}: lr {} vs {lr}", rec.lr);
        assert!(norm > max_norm, "the test must exercise clipping");
    }
    for (a, e) in tr.model.w.iter().zip(&w).chain(tr.model.b.iter().zip(&b)) {
        assert!((a - e).abs() < 1e-12, "{a} vs {e}");
    }
    assert_eq!(tr.logger.len(), 5);
    assert_eq!(tr.step_index(), 5);
}

#[test]
fn non_finite_loss_stops_before_any_update_and_names_the_step() {
    let mut model = Quadratic::new();
    model.poison_at = Some(2);
    let opt = Adam::new(OptimConfig::adamw(0.0, (0.9, 0.999))).unwrap();
    let mut tr = Trainer::new(model, opt, ScheduleConfig::Constant { lr: 0.01 }, Vec::new(), None);
    tr.step(&tokens()).unwrap();
    tr.step(&tokens()).unwrap();
    let before = tr.model.state();
    let err = tr.step(&tokens()).unwrap_err();
    assert!(matches!(err, Error::NonFinite { step: 2, what: "loss", .. }), "{err:?}");
    assert!(err.to_string().contains("step 2"), "{err}");
    assert_eq!(tr.model.state(), before, "no update after a non-finite loss");
    assert_eq!(tr.logger.len(), 2);
    assert_eq!(tr.optimizer.steps(), 2);
}

#[test]
fn load_state_rejects_missing_extra_and_misshaped_tensors() {
    let mut m = Quadratic::new();
    let good = m.state();
    let mut missing = good.clone();
    missing.pop();
    assert!(m.load_state(&missing).unwrap_err().to_string().contains("head.bias"));
    let mut extra = good.clone();
    extra.push(NamedTensor { name: "layers.9.x".into(), shape: vec![1], data: vec![0.0] });
    assert!(m.load_state(&extra).unwrap_err().to_string().contains("layers.9.x"));
    let mut bad = good.clone();
    bad[0].shape = vec![4];
    assert!(m.load_state(&bad).unwrap_err().to_string().contains("head.weight"));
    assert_eq!(m.state(), good, "nothing changed");
}
