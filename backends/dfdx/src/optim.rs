//! Adam / AdamW on the device, with the arithmetic of [`boldcast_core::optim::Adam`]
//! (MODEL.md, "Optimizer"), written with dfdx tensor ops so the parameters never leave the
//! device.
//!
//! It runs the core's [`Adam`](boldcast_core::Adam) only (the model refuses any other
//! optimizer by name). The hyperparameters come from [`OptimConfig`] (the core Adam's
//! [`config`](boldcast_core::Adam::config)); the moments and the
//! bias-correction step count live here, one pair of moment tensors per parameter tensor.
//! Scalars are computed in `f64` and rounded once to `E`, in the same order as the host
//! optimizer, so a step matches it to rounding.

use crate::ops::Vector;
use boldcast_core::optim::{decays, Moments as HostMoments, OptimConfig, OptimizerKind};
use boldcast_core::{Elem, ParamSpec};
use dfdx::prelude::*;

/// First and second moments of one tensor, on the device.
type Moments<E, D> = (Vector<E, D, NoneTape>, Vector<E, D, NoneTape>);

/// Adam's state on the device: moments per tensor (zero until first used) and the step.
#[derive(Clone, Debug)]
pub struct DeviceAdam<E: Dtype, D: Device<E>> {
    moments: Vec<Option<Moments<E, D>>>,
    t: u64,
    decayed: u64,
}

impl<E: Dtype, D: Device<E>> Default for DeviceAdam<E, D> {
    fn default() -> Self {
        Self { moments: Vec::new(), t: 0, decayed: 0 }
    }
}

impl<E: Dtype + Elem, D: Device<E>> DeviceAdam<E, D> {
    /// Completed steps (the `t` of the last bias correction).
    pub fn steps(&self) -> u64 {
        self.t
    }

    /// Elements that received a non-zero weight decay in the last step.
    pub fn decayed_last_step(&self) -> u64 {
        self.decayed
    }

    /// The moments `(m, v)` of tensor `i` on the host, `None` before its first update.
    pub fn moments_host(&self, i: usize) -> Option<(Vec<E>, Vec<E>)> {
        self.moments.get(i)?.as_ref().map(|(m, v)| (m.as_vec(), v.as_vec()))
    }

    /// The step count and every tensor's moments on the host, in the core's format
    /// ([`boldcast_core::optim::Moments`], empty vectors for a tensor never updated), as
    /// [`boldcast_core::Adam::moments`] gives them: for optimizer checkpoints.
    pub fn export(&self, n_tensors: usize) -> (u64, Vec<HostMoments<E>>) {
        let moments = (0..n_tensors)
            .map(|i| match self.moments_host(i) {
                Some((m, v)) => HostMoments { m, v },
                None => HostMoments::default(),
            })
            .collect();
        (self.t, moments)
    }

    /// Restores the step count and moments (as [`DeviceAdam::export`] gives them; an empty
    /// entry means "not updated yet"). Every non-empty entry must have `numel` values of its
    /// tensor, or nothing changes and the error names the tensor.
    pub fn restore(
        &mut self,
        dev: &D,
        specs: &[ParamSpec],
        t: u64,
        moments: &[HostMoments<E>],
    ) -> Result<(), boldcast_core::Error> {
        if moments.len() != specs.len() {
            return Err(boldcast_core::Error::shape("optimizer moments (tensors)", specs.len(), moments.len()));
        }
        let mut out = Vec::with_capacity(specs.len());
        for (s, mo) in specs.iter().zip(moments) {
            if mo.m.is_empty() && mo.v.is_empty() {
                out.push(None);
                continue;
            }
            if mo.m.len() != s.numel() || mo.v.len() != s.numel() {
                return Err(boldcast_core::Error::Param {
                    name: s.name.clone(),
                    reason: format!(
                        "optimizer moments of {} and {} values, the tensor has {}",
                        mo.m.len(),
                        mo.v.len(),
                        s.numel()
                    ),
                });
            }
            let n = s.numel();
            out.push(Some((dev.tensor_from_vec(mo.m.clone(), (n,)), dev.tensor_from_vec(mo.v.clone(), (n,)))));
        }
        self.moments = out;
        self.t = t;
        Ok(())
    }

    /// One step: `t += 1`, then every parameter updated in place with its gradient.
    pub fn step(
        &mut self,
        cfg: &OptimConfig,
        lr: f64,
        specs: &[ParamSpec],
        params: &mut [Vector<E, D, NoneTape>],
        grads: &[Vector<E, D, NoneTape>],
    ) {
        self.t += 1;
        self.decayed = 0;
        if self.moments.len() < params.len() {
            self.moments.resize(params.len(), None);
        }
        let (b1, b2) = cfg.betas;
        let t = self.t as i32;
        let (bc1, bc2) = (1.0 - b1.powi(t), 1.0 - b2.powi(t));
        let step = E::of(lr / bc1);
        let sbc2 = E::of(bc2.sqrt());
        let eps = E::of(cfg.eps);
        for (i, (p, g)) in params.iter_mut().zip(grads).enumerate() {
            let wd = if decays(&specs[i].name, &specs[i].shape) { cfg.weight_decay } else { 0.0 };
            if wd != 0.0 {
                self.decayed += p.shape().0 as u64;
            }
            let (m0, v0) = self.moments[i].take().unwrap_or_else(|| {
                let dev = p.device().clone();
                let n = p.shape().0;
                (dev.zeros_like(&(n,)), dev.zeros_like(&(n,)))
            });
            let w = p.clone();
            let mut g = g.clone();
            let mut w_dec = w.clone();
            match cfg.kind {
                OptimizerKind::AdamL2 if wd != 0.0 => g = g + w.clone() * E::of(wd),
                OptimizerKind::AdamW if wd != 0.0 => w_dec = w.clone() - w.clone() * E::of(lr * wd),
                _ => {}
            }
            let m = m0 * E::of(b1) + g.clone() * E::of(1.0 - b1);
            let v = v0 * E::of(b2) + g.clone() * E::of(1.0 - b2) * g;
            let denom = v.clone().sqrt() / sbc2 + eps;
            *p = w_dec - m.clone() * step / denom;
            self.moments[i] = Some((m, v));
        }
    }
}
