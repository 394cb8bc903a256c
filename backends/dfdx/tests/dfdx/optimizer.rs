//! The on-device gradient norm, clipping and Adam/AdamW update against the core's host
//! implementation on the same gradients.

use boldcast_core::optim::{global_norm, Adam, OptimConfig, Optimizer, ParamMut};
use boldcast_core::{Adjacency, Model, ModelConfig, TokenShape, Tokens};
use boldcast_dfdx::{cpu_device, Cpu, DfdxModel};

fn model() -> (DfdxModel<f32, Cpu>, Tokens<f32>) {
    let cfg =
        ModelConfig::builder().d_model(16).n_layers(1).d_state(4).k_neighbors(2).horizons(&[1, 3]).build().unwrap();
    let m = DfdxModel::new(cfg, Some(Adjacency::ring(4, 2).unwrap()), 5, cpu_device()).unwrap();
    let (b, t, p) = (2, 12, 4);
    let data = (0..b * t * p).map(|i| ((i as f32) * 0.61).sin()).collect();
    (m, Tokens::new(TokenShape::new(b, t, p, 1), data).unwrap())
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

#[test]
fn grad_norm_and_scaling_match_the_host() {
    let (mut m, tokens) = model();
    m.loss_and_grads(&tokens).unwrap();
    let host = m.grads();
    let norm = global_norm(host.iter().map(|g| g.data.as_slice()));
    let dev = m.grad_sq_norm().sqrt();
    assert!(norm > 0.0);
    assert!((dev - norm).abs() <= 1e-12 * norm.max(1.0), "device {dev}, host {norm}");
    m.scale_grads(0.25);
    for (g, h) in m.grads().iter().zip(&host) {
        let want: Vec<f32> = h.data.iter().map(|v| v * 0.25).collect();
        assert_eq!(g.data, want, "{}", g.name);
    }
}

fn run_steps(cfg: OptimConfig, lrs: &[f64]) {
    let (mut m, tokens) = model();
    let mut host_state = m.state();
    let mut host_opt = Adam::<f32>::new(cfg.clone()).unwrap();
    let mut dev_opt = Adam::<f32>::new(cfg).unwrap();
    for (s, &lr) in lrs.iter().enumerate() {
        m.loss_and_grads(&tokens).unwrap();
        if s == 1 {
            m.scale_grads(0.5); // a clipped step
        }
        let grads = m.grads();
        host_opt.begin_step();
        for (i, (p, g)) in host_state.iter_mut().zip(&grads).enumerate() {
            host_opt
                .update(ParamMut { index: i, name: &p.name, shape: &p.shape, value: &mut p.data, grad: &g.data }, lr);
        }
        m.apply_optimizer(&mut dev_opt, lr).unwrap();
        let dev_state = m.state();
        for (d, h) in dev_state.iter().zip(&host_state) {
            let diff = max_diff(&d.data, &h.data);
            assert!(diff <= 1e-6, "step {s}, {}: device and host differ by {diff:e}", d.name);
        }
        // Keep the two in lockstep exactly, so the next step compares one update only.
        m.load_state(&host_state).unwrap();
        for i in 0..host_state.len() {
            let (mh, vh) = (&host_opt.moments()[i].m, &host_opt.moments()[i].v);
            let (md, vd) = m.optimizer_moments(i).unwrap();
            assert!(max_diff(&md, mh) <= 1e-9 && max_diff(&vd, vh) <= 1e-12, "step {s}: moments of tensor {i}");
        }
    }
    assert_eq!(m.optimizer_steps(), lrs.len() as u64);
    assert_eq!(dev_opt.steps(), lrs.len() as u64);
}

#[test]
fn adamw_matches_the_host_optimizer() {
    run_steps(OptimConfig::adamw(0.05, (0.9, 0.95)), &[1e-3, 5e-3, 2e-3]);
}

#[test]
fn adam_l2_matches_the_host_optimizer() {
    run_steps(OptimConfig::adam_l2(0.1, (0.9, 0.999)), &[3e-3, 3e-3, 1e-2]);
}

#[test]
fn optimizer_state_round_trips_for_resuming() {
    let (mut a, tokens) = model();
    let cfg = OptimConfig::adamw(0.05, (0.9, 0.95));
    let mut opt = Adam::<f32>::new(cfg.clone()).unwrap();
    for _ in 0..2 {
        a.loss_and_grads(&tokens).unwrap();
        a.apply_optimizer(&mut opt, 3e-3).unwrap();
    }
    let (t, moments) = a.optimizer_state().expect("the dfdx backend holds its optimizer state");
    assert_eq!(t, 2);
    assert!(moments.iter().all(|m| !m.m.is_empty() && m.m.len() == m.v.len()));
    // A fresh model resumed from the weights and the optimizer state continues identically.
    let (mut b, _) = model();
    b.load_state(&a.state()).unwrap();
    let mut bad = moments.clone();
    bad[0].m.pop();
    assert!(b.restore_optimizer_state(t, &bad).is_err());
    b.restore_optimizer_state(t, &moments).unwrap();
    // The optimizer's step count is part of the state: the device moments follow it.
    let mut opt_b = Adam::<f32>::new(cfg.clone()).unwrap();
    opt_b.restore(t, Vec::new());
    for m in [&mut a, &mut b] {
        m.loss_and_grads(&tokens).unwrap();
    }
    a.apply_optimizer(&mut opt, 3e-3).unwrap();
    b.apply_optimizer(&mut opt_b, 3e-3).unwrap();
    assert_eq!(a.state(), b.state());
    assert_eq!(b.optimizer_steps(), 3);
    // A fresh optimizer starts from zero moments, as the host Adam would; a step count that
    // does not follow the device moments is an error, not a silently skewed bias correction.
    let mut fresh = Adam::<f32>::new(cfg.clone()).unwrap();
    b.loss_and_grads(&tokens).unwrap();
    b.apply_optimizer(&mut fresh, 3e-3).unwrap();
    assert_eq!(b.optimizer_steps(), 1);
    let mut ahead = Adam::<f32>::new(cfg).unwrap();
    ahead.restore(7, Vec::new());
    let err = b.apply_optimizer(&mut ahead, 3e-3).unwrap_err().to_string();
    assert!(err.contains("optimizer step 8") && err.contains("restore_optimizer_state"), "{err}");
}

/// A user's own optimizer: plain SGD on the host, which this backend does not implement.
struct Sgd {
    steps: u64,
}

impl Optimizer<f32> for Sgd {
    fn name(&self) -> &str {
        "my-sgd"
    }
    fn begin_step(&mut self) {
        self.steps += 1;
    }
    fn update(&mut self, p: ParamMut<'_, f32>, lr: f64) {
        for (v, g) in p.value.iter_mut().zip(p.grad) {
            *v -= lr as f32 * g;
        }
    }
    fn steps(&self) -> u64 {
        self.steps
    }
}

/// A wrapper that steps exactly as the Adam it holds and says so through `as_adam`.
struct Counted(Adam<f32>, usize);

impl Optimizer<f32> for Counted {
    fn as_adam(&self) -> Option<&Adam<f32>> {
        Some(&self.0)
    }
    fn begin_step(&mut self) {
        self.1 += 1;
        self.0.begin_step()
    }
    fn update(&mut self, p: ParamMut<'_, f32>, lr: f64) {
        self.0.update(p, lr)
    }
    fn steps(&self) -> u64 {
        self.0.steps()
    }
}

#[test]
fn an_optimizer_other_than_adam_is_refused_by_name_and_adam_still_runs() {
    let (mut m, tokens) = model();
    m.loss_and_grads(&tokens).unwrap();
    let before = m.state();
    let mut sgd = Sgd { steps: 0 };
    let e = m.apply_optimizer(&mut sgd, 1e-2).unwrap_err().to_string();
    assert!(e.contains("my-sgd") && e.contains("Adam"), "{e}");
    assert_eq!(m.state(), before, "a refused optimizer changes no parameter");
    assert_eq!((sgd.steps, m.optimizer_steps()), (0, 0), "a refused optimizer takes no step");

    // A type that does not name itself is named by its type.
    struct Anonymous;
    impl Optimizer<f32> for Anonymous {
        fn begin_step(&mut self) {}
        fn update(&mut self, _: ParamMut<'_, f32>, _: f64) {}
        fn steps(&self) -> u64 {
            0
        }
    }
    let e = m.apply_optimizer(&mut Anonymous, 1e-2).unwrap_err().to_string();
    assert!(e.contains("Anonymous"), "{e}");

    // The core's Adam, and a wrapper that is one, run; both step the same way.
    let cfg = OptimConfig::adamw(0.05, (0.9, 0.95));
    m.apply_optimizer(&mut Adam::new(cfg.clone()).unwrap(), 1e-3).unwrap();
    assert_eq!(m.optimizer_steps(), 1);
    let after_adam = m.state();
    assert_ne!(after_adam, before);
    m.load_state(&before).unwrap();
    let mut counted = Counted(Adam::new(cfg).unwrap(), 0);
    m.apply_optimizer(&mut counted, 1e-3).unwrap();
    assert_eq!((counted.1, m.state()), (1, after_adam));
}
