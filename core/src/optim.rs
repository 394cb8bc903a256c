//! Optimizers (AdamW and Adam with coupled L2), the weight-decay parameter groups and
//! global-norm gradient clipping, exactly as MODEL.md, "Optimizer, clipping, schedule".
//!
//! The update works on host slices one parameter tensor at a time ([`ParamMut`]); a backend
//! whose parameters live on a device implements the same arithmetic there for the optimizers
//! it knows (the core's [`Adam`], recognized through [`Optimizer::as_adam`], whose
//! hyperparameters it reads from [`Adam::config`]) and refuses any other by its
//! [`Optimizer::name`] (see [`crate::model::Model::apply_optimizer`]).

use crate::elem::Elem;
use crate::error::{Error, Result};
use alloc::vec;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// Whether weight decay applies to a tensor: two or more dimensions, and not `A_log`.
pub fn decays(name: &str, shape: &[usize]) -> bool {
    shape.len() >= 2 && !name.ends_with("A_log")
}

/// Which Adam.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OptimizerKind {
    /// Decoupled weight decay, as `torch.optim.AdamW`.
    #[serde(rename = "adamw", alias = "adam_w")]
    AdamW,
    /// Coupled L2 (`g += wd * p` before the moments), as `torch.optim.Adam(weight_decay=wd)`.
    AdamL2,
}

/// Optimizer hyperparameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptimConfig {
    /// Which Adam.
    pub kind: OptimizerKind,
    /// Weight decay for the decaying group (see [`decays`]).
    pub weight_decay: f64,
    /// `(beta1, beta2)`.
    pub betas: (f64, f64),
    /// Added to the denominator; MODEL.md fixes it at 1e-8.
    pub eps: f64,
}

impl OptimConfig {
    /// AdamW with the given decay and betas, eps 1e-8.
    pub fn adamw(weight_decay: f64, betas: (f64, f64)) -> Self {
        Self { kind: OptimizerKind::AdamW, weight_decay, betas, eps: 1e-8 }
    }
    /// Adam with coupled L2 decay, eps 1e-8.
    pub fn adam_l2(weight_decay: f64, betas: (f64, f64)) -> Self {
        Self { kind: OptimizerKind::AdamL2, weight_decay, betas, eps: 1e-8 }
    }
    /// Checks the values; the error names the field.
    pub fn validate(&self) -> Result<()> {
        let (b1, b2) = self.betas;
        if !(0.0..1.0).contains(&b1) || !(0.0..1.0).contains(&b2) {
            return Err(Error::config("train.betas", alloc::format!("({b1}, {b2})"), "each beta must be in [0, 1)"));
        }
        if !(self.weight_decay >= 0.0 && self.weight_decay.is_finite()) {
            return Err(Error::config("train.weight_decay", self.weight_decay, "must be finite and >= 0"));
        }
        if self.eps.is_nan() || self.eps <= 0.0 {
            return Err(Error::config("train.eps", self.eps, "must be > 0"));
        }
        Ok(())
    }
}

/// One parameter tensor handed to an optimizer: its index in state-dict order, name, shape,
/// value and gradient. The gradient is already clipped.
pub struct ParamMut<'a, E> {
    /// Position in [`crate::ModelConfig::param_specs`] order; optimizers key their state on it.
    pub index: usize,
    /// MODEL.md name.
    pub name: &'a str,
    /// PyTorch-layout shape.
    pub shape: &'a [usize],
    /// The values, updated in place.
    pub value: &'a mut [E],
    /// The gradient.
    pub grad: &'a [E],
}

/// An optimizer over named parameter tensors.
///
/// Contract for implementors: [`Optimizer::begin_step`] is called once per training step before
/// the parameters are visited; [`Optimizer::update`] is then called once per parameter tensor,
/// in the same order every step; the update must depend only on the tensor, its state and `lr`.
///
/// A backend that updates on the host calls `update`, so any optimizer runs there. A backend
/// that keeps the optimizer's state on its device never calls `update`: it runs its own
/// arithmetic for the optimizers it implements, recognized through [`Optimizer::as_adam`],
/// and refuses any other with an error naming it ([`Optimizer::name`]).
pub trait Optimizer<E: Elem> {
    /// What this optimizer is, for messages (a device backend that cannot run it names it).
    /// The default is the implementing type's name.
    fn name(&self) -> &str {
        core::any::type_name::<Self>()
    }
    /// This optimizer as the core's [`Adam`], if it is one (or a wrapper that steps exactly as
    /// the `Adam` it returns): how a device backend learns that it may run its own Adam with
    /// [`Adam::config`]'s hyperparameters instead of calling [`Optimizer::update`]. `None`, the
    /// default, means "only `update` implements me".
    fn as_adam(&self) -> Option<&Adam<E>> {
        None
    }
    /// Starts a step (advances the bias-correction counter).
    fn begin_step(&mut self);
    /// Updates one tensor with learning rate `lr`.
    fn update(&mut self, p: ParamMut<'_, E>, lr: f64);
    /// Completed steps (`t` of the bias correction after the current step).
    fn steps(&self) -> u64;
}

/// Adam's state for one tensor: first and second moments.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Moments<E> {
    /// First moment.
    pub m: Vec<E>,
    /// Second moment.
    pub v: Vec<E>,
}

/// AdamW or Adam with coupled L2, chosen by [`OptimConfig::kind`].
#[derive(Clone, Debug)]
pub struct Adam<E> {
    cfg: OptimConfig,
    t: u64,
    state: Vec<Moments<E>>,
    decayed: u64,
}

impl<E: Elem> Adam<E> {
    /// A fresh optimizer (all moments zero, `t = 0`).
    pub fn new(cfg: OptimConfig) -> Result<Self> {
        cfg.validate()?;
        Ok(Self { cfg, t: 0, state: Vec::new(), decayed: 0 })
    }
    /// The hyperparameters (validated by [`Adam::new`]), for backends that run the update on a
    /// device.
    pub fn config(&self) -> &OptimConfig {
        &self.cfg
    }
    /// The moments per tensor index, for checkpoints.
    pub fn moments(&self) -> &[Moments<E>] {
        &self.state
    }
    /// Elements that received a non-zero weight decay in the current (last) step: the sizes
    /// of the tensors of the decaying group updated since the last [`Optimizer::begin_step`]
    /// when `weight_decay > 0`, else 0. A run can check from it that its decay reaches a tensor.
    pub fn decayed_last_step(&self) -> u64 {
        self.decayed
    }
    /// Restores moments and step count from a checkpoint.
    pub fn restore(&mut self, t: u64, state: Vec<Moments<E>>) {
        self.t = t;
        self.state = state;
    }
}

impl<E: Elem> Optimizer<E> for Adam<E> {
    fn name(&self) -> &str {
        match self.cfg.kind {
            OptimizerKind::AdamW => "AdamW",
            OptimizerKind::AdamL2 => "Adam (coupled L2)",
        }
    }

    fn as_adam(&self) -> Option<&Adam<E>> {
        Some(self)
    }

    fn begin_step(&mut self) {
        self.t += 1;
        self.decayed = 0;
    }

    fn update(&mut self, p: ParamMut<'_, E>, lr: f64) {
        if self.state.len() <= p.index {
            self.state.resize_with(p.index + 1, Moments::default);
        }
        let st = &mut self.state[p.index];
        if st.m.len() != p.value.len() {
            st.m = vec![E::zero(); p.value.len()];
            st.v = vec![E::zero(); p.value.len()];
        }
        let (b1, b2) = self.cfg.betas;
        let t = self.t.max(1) as i32;
        // Bias corrections in f64: 1 - b2^t is tiny for small t and loses digits in f32.
        let bc1 = 1.0 - libm_powi(b1, t);
        let bc2 = 1.0 - libm_powi(b2, t);
        let wd = if decays(p.name, p.shape) { self.cfg.weight_decay } else { 0.0 };
        if wd != 0.0 {
            self.decayed += p.value.len() as u64;
        }
        let (coupled, decoupled) = match self.cfg.kind {
            OptimizerKind::AdamW => (E::zero(), E::of(lr * wd)),
            OptimizerKind::AdamL2 => (E::of(wd), E::zero()),
        };
        let (eb1, eb2) = (E::of(b1), E::of(b2));
        let (ob1, ob2) = (E::of(1.0 - b1), E::of(1.0 - b2));
        let step = E::of(lr / bc1);
        let sbc2 = E::of(num_traits::Float::sqrt(bc2));
        let eps = E::of(self.cfg.eps);
        for i in 0..p.value.len() {
            let w = p.value[i];
            let g = p.grad[i] + coupled * w;
            let w = w - decoupled * w;
            let m = eb1 * st.m[i] + ob1 * g;
            let v = eb2 * st.v[i] + ob2 * g * g;
            st.m[i] = m;
            st.v[i] = v;
            // torch: denom = sqrt(v) / sqrt(bc2) + eps; p -= (lr / bc1) * m / denom.
            p.value[i] = w - step * m / (v.sqrt() / sbc2 + eps);
        }
    }

    fn steps(&self) -> u64 {
        self.t
    }
}

fn libm_powi(x: f64, n: i32) -> f64 {
    num_traits::Float::powi(x, n)
}

/// Global-norm clipping factor: `min(1, max_norm / (norm + 1e-6))`, as
/// `torch.nn.utils.clip_grad_norm_`.
pub fn clip_factor(norm: f64, max_norm: f64) -> f64 {
    let f = max_norm / (norm + 1e-6);
    if f < 1.0 {
        f
    } else {
        1.0
    }
}

/// Global L2 norm of several gradient slices, accumulated in f64.
pub fn global_norm<'a, E: Elem>(grads: impl IntoIterator<Item = &'a [E]>) -> f64 {
    let mut s = 0.0f64;
    for g in grads {
        for &x in g {
            let x = x.f64();
            s += x * x;
        }
    }
    num_traits::Float::sqrt(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(kind: OptimizerKind, name: &str, shape: &[usize]) -> f64 {
        let cfg = OptimConfig { kind, weight_decay: 0.5, betas: (0.9, 0.999), eps: 1e-8 };
        let mut opt = Adam::<f64>::new(cfg).unwrap();
        let mut w = vec![1.0f64];
        let g = vec![0.0f64];
        opt.begin_step();
        opt.update(ParamMut { index: 0, name, shape, value: &mut w, grad: &g }, 0.1);
        w[0]
    }

    #[test]
    fn adamw_decays_matrices_only() {
        // Zero gradient: AdamW's only change is the decoupled decay p *= 1 - lr * wd.
        assert!((run(OptimizerKind::AdamW, "head.weight", &[1, 1]) - 0.95).abs() < 1e-12);
        assert_eq!(run(OptimizerKind::AdamW, "head.bias", &[1]), 1.0);
        assert_eq!(run(OptimizerKind::AdamW, "layers.0.mamba.mamba.A_log", &[1, 1]), 1.0);
    }

    #[test]
    fn adam_reports_the_elements_it_decayed() {
        let cfg = OptimConfig { kind: OptimizerKind::AdamW, weight_decay: 0.5, betas: (0.9, 0.999), eps: 1e-8 };
        let mut opt = Adam::<f64>::new(cfg.clone()).unwrap();
        let (mut w, mut b, g) = (vec![1.0f64; 6], vec![1.0f64; 3], vec![0.0f64; 6]);
        for _ in 0..2 {
            opt.begin_step();
            opt.update(ParamMut { index: 0, name: "head.weight", shape: &[2, 3], value: &mut w, grad: &g }, 0.1);
            opt.update(ParamMut { index: 1, name: "head.bias", shape: &[3], value: &mut b, grad: &g[..3] }, 0.1);
            assert_eq!(opt.decayed_last_step(), 6);
        }
        let mut none = Adam::<f64>::new(OptimConfig { weight_decay: 0.0, ..cfg }).unwrap();
        none.begin_step();
        none.update(ParamMut { index: 0, name: "head.weight", shape: &[2, 3], value: &mut w, grad: &g }, 0.1);
        assert_eq!(none.decayed_last_step(), 0);
    }

    #[test]
    fn adam_l2_is_coupled() {
        // Coupled: g = wd * p = 0.5, so the first Adam step moves by about lr, not lr * wd * p.
        let w = run(OptimizerKind::AdamL2, "head.weight", &[1, 1]);
        assert!((w - 0.9).abs() < 1e-6, "{w}");
        assert_eq!(run(OptimizerKind::AdamL2, "head.bias", &[1]), 1.0);
    }

    #[test]
    fn clip_factor_matches_torch() {
        assert_eq!(clip_factor(0.5, 1.0), 1.0);
        assert!((clip_factor(4.0, 1.0) - 1.0 / (4.0 + 1e-6)).abs() < 1e-15);
    }
}
