//! The [`Model`] trait: what a backend must provide for the trainer, the commands and the
//! conformance suite to drive it.

use crate::config::{ModelConfig, ParamSpec};
use crate::elem::Elem;
use crate::error::{Error, Result};
use crate::optim::{Moments, Optimizer};
use crate::shape::{Dim, ForecastShape};
use crate::tensor::{Embeddings, Forecasts, Tokens};
use alloc::string::String;
use alloc::vec::Vec;

/// A parameter tensor copied to the host: its MODEL.md name, shape and row-major values.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedTensor<E> {
    /// MODEL.md name.
    pub name: String,
    /// PyTorch-layout shape.
    pub shape: Vec<usize>,
    /// Row-major values.
    pub data: Vec<E>,
}

/// A BOLDcast forecaster on some backend.
///
/// # Contract for a custom backend
///
/// - `forward` maps tokens `(B, T, P, D)` to forecasts `(B, T, P, H, D)` for every `T`; the H
///   axis is present even when there is one horizon. `embed` returns the final-norm output
///   `(B, T, P, d_model)`.
/// - `loss_and_grads` runs forward and backward on one batch and leaves the gradient of the
///   forecasting loss (MODEL.md) in the backend's gradient buffers, **overwriting** any earlier
///   gradient; it returns the loss as `f64`. A non-finite loss must be returned, not hidden:
///   the trainer stops on it before any update.
/// - `grad_sq_norm`, `scale_grads` and `apply_optimizer` act on those buffers in place; the
///   parameters must not change except through `apply_optimizer` and `load_state`.
/// - `state` and `load_state` use the names and shapes of
///   [`ModelConfig::param_specs`], in that order; `load_state` rejects a missing, extra or
///   wrongly shaped tensor with [`Error::Param`] naming it, and changes nothing then.
/// - Shape mismatches between the data and the model are [`Error`]s, never panics.
/// - The adjacency (`(P, k)`, self first) is fixed when the model is built; the number of
///   parcels of the data must match it.
/// - A backend that can train data-parallel also implements
///   [`DataParallel`](crate::collective::DataParallel) (the gradients as one flat host
///   buffer); [`Trainer::with_collective`](crate::Trainer::with_collective) requires it, so a
///   backend without it is refused at compile time, not at run time.
/// - A backend that keeps the optimizer's state on its device runs in
///   [`Model::apply_optimizer`] only the optimizers it implements (recognized through
///   [`Optimizer::as_adam`]) and refuses any other with an [`Error`] naming it
///   ([`Optimizer::name`]); it never runs one optimizer's arithmetic for another.
///
/// `&mut M` is a `Model` wherever `M` is (every method forwarded), so code that must not own
/// the model (the [`Trainer`](crate::Trainer) owns its model) can be handed a borrow.
pub trait Model<E: Elem> {
    /// The sizes the model was built with.
    fn config(&self) -> &ModelConfig;

    /// Forecasts `(B, T, P, H, D)`.
    fn forward(&self, tokens: &Tokens<E>) -> Result<Forecasts<E>>;

    /// The final-norm embedding `(B, T, P, d_model)`.
    fn embed(&self, tokens: &Tokens<E>) -> Result<Embeddings<E>>;

    /// The forecasting loss of one batch without gradients (evaluation).
    fn loss(&self, tokens: &Tokens<E>) -> Result<f64>;

    /// Forward and backward on one batch: returns the loss and overwrites the gradients.
    fn loss_and_grads(&mut self, tokens: &Tokens<E>) -> Result<f64>;

    /// [`Model::loss_and_grads`] for the forecasts `forward(tokens) + offset`: a fixed
    /// additive forecast `(B, T, P, H, D)` that the model learns to correct (the linear path
    /// of `boldcast-train` is one). The loss is MODEL.md's of those forecasts; the gradients
    /// overwrite the buffers as [`Model::loss_and_grads`] does. Check the offset with
    /// [`check_offset`].
    ///
    /// The default refuses with [`Error::Backend`]: a backend opts in.
    fn loss_and_grads_offset(&mut self, tokens: &Tokens<E>, offset: &Forecasts<E>) -> Result<f64> {
        let _ = (tokens, offset);
        Err(Error::Backend("this backend cannot train with a forecast offset (loss_and_grads_offset)".into()))
    }

    /// Sum of squares of every gradient entry, accumulated in f64.
    fn grad_sq_norm(&self) -> f64;

    /// Multiplies every gradient entry by `factor` (clipping).
    fn scale_grads(&mut self, factor: f64);

    /// Applies one optimizer step with learning rate `lr` to every parameter, in state-dict
    /// order, calling [`Optimizer::begin_step`] once first. Backends with parameters on a
    /// device run the same arithmetic there for the optimizers they implement (the core's
    /// [`Adam`](crate::Adam), seen through [`Optimizer::as_adam`], reading its
    /// [`config`](crate::Adam::config)) and return an error naming any other.
    fn apply_optimizer(&mut self, opt: &mut dyn Optimizer<E>, lr: f64) -> Result<()>;

    /// The parameters, copied to the host, in state-dict order.
    fn state(&self) -> Vec<NamedTensor<E>>;

    /// The gradients, copied to the host, named like the parameters.
    fn grads(&self) -> Vec<NamedTensor<E>>;

    /// Replaces every parameter (names and shapes checked first; nothing changes on error).
    fn load_state(&mut self, tensors: &[NamedTensor<E>]) -> Result<()>;

    /// The optimizer state this backend holds itself, copied to the host: the number of steps
    /// taken and the moments of every parameter in state-dict order (an empty entry for a
    /// tensor never updated), in the format of [`crate::Adam::moments`].
    ///
    /// `None`, the default, means the backend holds none: the host optimizer passed to
    /// [`Model::apply_optimizer`] owns the moments, and a checkpoint takes them from there.
    fn optimizer_state(&self) -> Option<(u64, Vec<Moments<E>>)> {
        None
    }

    /// Restores backend-held optimizer state from [`Model::optimizer_state`] output (resuming
    /// a run; a checkpoint written by another backend gives the same format). Nothing changes
    /// on error. The default, for backends that hold none, accepts anything and does nothing:
    /// the caller restores its host optimizer as well.
    fn restore_optimizer_state(&mut self, t: u64, moments: &[Moments<E>]) -> Result<()> {
        let _ = (t, moments);
        Ok(())
    }

    /// Elements that received a non-zero weight decay in the last update of the optimizer
    /// this backend runs itself (see [`Model::optimizer_state`]), as
    /// [`crate::Adam::decayed_last_step`] counts them for the host optimizer. `None`, the
    /// default: the backend updates through the host optimizer, which reports it.
    fn decayed_elements(&self) -> Option<u64> {
        None
    }
}

/// Every method forwarded to `M`, the defaulted ones too: a borrow behaves exactly as the model.
impl<E: Elem, M: Model<E> + ?Sized> Model<E> for &mut M {
    fn config(&self) -> &ModelConfig {
        (**self).config()
    }
    fn forward(&self, tokens: &Tokens<E>) -> Result<Forecasts<E>> {
        (**self).forward(tokens)
    }
    fn embed(&self, tokens: &Tokens<E>) -> Result<Embeddings<E>> {
        (**self).embed(tokens)
    }
    fn loss(&self, tokens: &Tokens<E>) -> Result<f64> {
        (**self).loss(tokens)
    }
    fn loss_and_grads(&mut self, tokens: &Tokens<E>) -> Result<f64> {
        (**self).loss_and_grads(tokens)
    }
    fn loss_and_grads_offset(&mut self, tokens: &Tokens<E>, offset: &Forecasts<E>) -> Result<f64> {
        (**self).loss_and_grads_offset(tokens, offset)
    }
    fn grad_sq_norm(&self) -> f64 {
        (**self).grad_sq_norm()
    }
    fn scale_grads(&mut self, factor: f64) {
        (**self).scale_grads(factor)
    }
    fn apply_optimizer(&mut self, opt: &mut dyn Optimizer<E>, lr: f64) -> Result<()> {
        (**self).apply_optimizer(opt, lr)
    }
    fn state(&self) -> Vec<NamedTensor<E>> {
        (**self).state()
    }
    fn grads(&self) -> Vec<NamedTensor<E>> {
        (**self).grads()
    }
    fn load_state(&mut self, tensors: &[NamedTensor<E>]) -> Result<()> {
        (**self).load_state(tensors)
    }
    fn optimizer_state(&self) -> Option<(u64, Vec<Moments<E>>)> {
        (**self).optimizer_state()
    }
    fn restore_optimizer_state(&mut self, t: u64, moments: &[Moments<E>]) -> Result<()> {
        (**self).restore_optimizer_state(t, moments)
    }
    fn decayed_elements(&self) -> Option<u64> {
        (**self).decayed_elements()
    }
}

/// Forecasts with compile-time dims: runs [`Model::forward`] and checks the runtime result
/// against the types (a horizon count other than `H` is an [`Error::Shape`]).
pub fn forward_typed<E: Elem, M: Model<E> + ?Sized, B: Dim, T: Dim, P: Dim, H: Dim, D: Dim>(
    model: &M,
    tokens: &Tokens<E, B, T, P, D>,
) -> Result<Forecasts<E, B, T, P, H, D>> {
    let rt = tokens.clone().to_runtime();
    let out = model.forward(&rt)?;
    let s = tokens.shape();
    let h: H = crate::shape::convert_dim("forecast.horizons", out.shape().horizons)?;
    out.with_shape(ForecastShape::new(s.batch, s.time, s.parcels, h, s.d_in))
}

/// Checks that `offset` has the forecast shape of `tokens` under `cfg`: `(B, T, P, H, D)`.
pub fn check_offset<E: Copy>(cfg: &ModelConfig, tokens: &Tokens<E>, offset: &Forecasts<E>) -> Result<()> {
    let (t, o) = (tokens.shape(), offset.shape());
    let pairs = [
        ("offset.batch", t.batch, o.batch),
        ("offset.time", t.time, o.time),
        ("offset.parcels", t.parcels, o.parcels),
        ("offset.horizons", cfg.n_horizons(), o.horizons),
        ("offset.d_in", t.d_in, o.d_in),
    ];
    match pairs.into_iter().find(|&(_, want, got)| want != got) {
        Some((what, want, got)) => Err(Error::shape(what, want, got)),
        None => Ok(()),
    }
}

/// Checks a full state against the specs: every name present once, shapes equal, data
/// lengths right. Backends call this at the top of [`Model::load_state`].
pub fn check_state<E>(specs: &[ParamSpec], tensors: &[NamedTensor<E>]) -> Result<()> {
    for t in tensors {
        match specs.iter().find(|s| s.name == t.name) {
            None => {
                return Err(Error::Param {
                    name: t.name.clone(),
                    reason: "unexpected tensor (not in this model)".into(),
                })
            }
            Some(s) if s.shape != t.shape => {
                return Err(Error::Param {
                    name: t.name.clone(),
                    reason: alloc::format!("shape {:?}, the model needs {:?}", t.shape, s.shape),
                })
            }
            Some(s) if s.numel() != t.data.len() => {
                return Err(Error::Param {
                    name: t.name.clone(),
                    reason: alloc::format!("{} values for shape {:?}", t.data.len(), s.shape),
                })
            }
            _ => {}
        }
        if tensors.iter().filter(|o| o.name == t.name).count() > 1 {
            return Err(Error::Param { name: t.name.clone(), reason: "given more than once".into() });
        }
    }
    for s in specs {
        if !tensors.iter().any(|t| t.name == s.name) {
            return Err(Error::Param { name: s.name.clone(), reason: alloc::format!("missing (shape {:?})", s.shape) });
        }
    }
    Ok(())
}

/// [`Model::load_state`] for a backend whose parameters are host buffers, `dsts` in `specs`
/// order: [`check_state`] first, so an error changes nothing, then every tensor copied into
/// its buffer by name.
pub fn load_state_into<E: Copy>(specs: &[ParamSpec], dsts: Vec<&mut [E]>, tensors: &[NamedTensor<E>]) -> Result<()> {
    check_state(specs, tensors)?;
    for (spec, dst) in specs.iter().zip(dsts) {
        let src = tensors.iter().find(|t| t.name == spec.name).expect("check_state found every name");
        dst.copy_from_slice(&src.data);
    }
    Ok(())
}
