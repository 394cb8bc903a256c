//! [`DfdxModel`]: the whole forecaster (embed, layers of a Mamba-1 or Mamba-2 mixer and kNN
//! attention, final norm, head) on a dfdx device, and its [`Model`] implementation.

use crate::device::DfdxDevice;
use crate::init::init_params;
use crate::knn::{knn_attention, KnnParams};
use crate::layout::RowLayout;
use crate::mamba1::{mamba1, Mamba1Params};
use crate::mamba2::{mamba2, Mamba2Params};
use crate::ops::layernorm::layer_norm;
use crate::ops::linear::linear;
use crate::ops::rows::take_rows;
use crate::ops::tape::dup;
use crate::ops::{Index, Mat, Vector};
use crate::optim::DeviceAdam;
use crate::params::ParamTable;
use boldcast_core::model::NamedTensor;
use boldcast_core::{
    Adjacency, DataParallel, Elem, Embeddings, Error, Forecasts, Model, ModelConfig, Optimizer, Temporal, Tokens,
};
use dfdx::prelude::*;

/// The BOLDcast forecaster of MODEL.md on dfdx device `D` with element type `E`.
///
/// Parameters, gradients and Adam moments are device tensors; host copies are made only by
/// [`Model::state`], [`Model::grads`] and the forecasts.
pub struct DfdxModel<E: Dtype, D: Device<E>> {
    cfg: ModelConfig,
    dev: D,
    params: ParamTable<E, D>,
    grads: Vec<Vector<E, D, NoneTape>>,
    adam: DeviceAdam<E, D>,
    adjacency: Option<(Adjacency, Index<D>)>,
}

impl<E: Dtype + Elem, D: DfdxDevice<E>> DfdxModel<E, D> {
    /// A model with MODEL.md's initialization drawn from `seed` (the core's draw, so the CPU
    /// backend gives the same parameters for the same seed).
    ///
    /// `adjacency` is required exactly when `cfg.k_neighbors > 0`, with `k` columns.
    pub fn new(cfg: ModelConfig, adjacency: Option<Adjacency>, seed: u64, device: D) -> Result<Self, Error> {
        cfg.validate()?;
        let adjacency = match (cfg.k_neighbors, adjacency) {
            (0, None) => None,
            (0, Some(_)) => {
                return Err(Error::config("adjacency", "given", "model.k_neighbors = 0 takes no adjacency"));
            }
            (k, None) => {
                return Err(Error::config("adjacency", "missing", format!("model.k_neighbors = {k} needs one")))
            }
            (k, Some(a)) if a.k() != k => {
                return Err(Error::config("adjacency.k", a.k(), format!("model.k_neighbors is {k}")));
            }
            (_, Some(a)) => {
                let idx = device.tensor_from_vec(a.indices().to_vec(), (a.indices().len(),));
                Some((a, idx))
            }
        };
        let host = init_params::<E>(&cfg, seed)?;
        let params = ParamTable::upload(&device, cfg.param_specs(), &host)?;
        let grads = params.tensors.iter().map(|t| device.zeros_like(t.shape())).collect();
        Ok(Self { cfg, dev: device, params, grads, adam: DeviceAdam::default(), adjacency })
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.dev
    }

    /// The adjacency the model was built with.
    pub fn adjacency(&self) -> Option<&Adjacency> {
        self.adjacency.as_ref().map(|(a, _)| a)
    }

    /// Optimizer steps applied so far (the bias-correction step of the next one, minus 1).
    pub fn optimizer_steps(&self) -> u64 {
        self.adam.steps()
    }

    /// The Adam moments `(m, v)` of parameter `index` (state-dict order) on the host, `None`
    /// before its first update.
    pub fn optimizer_moments(&self, index: usize) -> Option<(Vec<E>, Vec<E>)> {
        self.adam.moments_host(index)
    }

    /// Replaces the gradient buffers with host tensors named and shaped like the parameters
    /// (checked as in [`Model::load_state`]; nothing changes on error). For checks of the
    /// optimizer on a fixed gradient, such as the golden files' `opt.*`.
    pub fn load_grads(&mut self, grads: &[NamedTensor<E>]) -> Result<(), Error> {
        let table = ParamTable::upload(&self.dev, self.cfg.param_specs(), grads)?;
        self.grads = table.tensors;
        Ok(())
    }

    /// Checks a batch against the model and returns its layout.
    fn layout(&self, tokens: &Tokens<E>) -> Result<RowLayout, Error> {
        self.cfg.check_tokens(&tokens.shape())?;
        if let Some((a, _)) = &self.adjacency {
            if a.parcels() != tokens.shape().parcels {
                return Err(Error::shape("tokens.parcels", a.parcels(), tokens.shape().parcels));
            }
        }
        Ok(RowLayout::of(tokens))
    }

    /// The tokens as a `(T * B * P, D)` device matrix.
    fn upload_tokens(&self, l: &RowLayout, tokens: &Tokens<E>) -> Mat<E, D, NoneTape> {
        self.dev.tensor_from_vec(l.tokens_to_rows(tokens), (l.rows(), l.d_in))
    }

    /// The final-norm embedding `(T * B * P, M)` of token rows `x (T * B * P, D)`.
    fn embed_rows<T: Tape<E, D>>(&self, x: Mat<E, D, T>, l: &RowLayout) -> Mat<E, D, T> {
        // Every tensor is taken in state-dict order (`ModelConfig::param_specs`).
        let c = &mut self.params.cursor(0);
        let (w, b) = c.linear();
        let mut h = linear(x, w, b);
        for _ in 0..self.cfg.n_layers {
            let (res, inp) = dup(h);
            let (w, b) = c.norm();
            let u = layer_norm(inp, w, b);
            let mixed = match self.cfg.temporal {
                Temporal::Mamba => {
                    let mp = Mamba1Params {
                        conv_w: c.matrix(),
                        conv_b: c.vector(),
                        in_proj: c.matrix(),
                        x_proj: c.matrix(),
                        dt_w: c.matrix(),
                        dt_b: c.vector(),
                        a_log: c.matrix(),
                        d: c.vector(),
                        out_proj: c.matrix(),
                    };
                    mamba1(u, mp, l.time, l.seqs())
                }
                Temporal::Mamba2 => {
                    let mp = Mamba2Params {
                        dt_bias: c.vector(),
                        conv_w: c.matrix(),
                        conv_b: c.vector(),
                        in_proj: c.matrix(),
                        a_log: c.vector(),
                        d: c.vector(),
                        norm_w: c.vector(),
                        out_proj: c.matrix(),
                    };
                    mamba2(u, mp, self.cfg.chunk_size, l.time, l.seqs())
                }
            };
            h = res + mixed;
            if let Some((_, adj)) = &self.adjacency {
                let kp = KnnParams { norm: c.norm(), q: c.linear(), k: c.linear(), v: c.linear(), out: c.linear() };
                let (res, inp) = dup(h);
                h = res + knn_attention(inp, kp, l.parcels, adj);
            }
        }
        let (w, b) = c.norm();
        layer_norm(h, w, b)
    }

    /// Forecast rows `(T * B * P, H * D)` from embedding rows.
    fn head_rows<T: Tape<E, D>>(&self, emb: Mat<E, D, T>) -> Mat<E, D, T> {
        // The head is the last two tensors of the state dict.
        let (w, b) = self.params.cursor(self.params.tensors.len() - 2).linear();
        linear(emb, w, b)
    }

    /// The forecasting loss of forecast rows against the batch's targets.
    fn loss_of<T: Tape<E, D>>(&self, pred: Mat<E, D, T>, l: &RowLayout, tokens: &Tokens<E>) -> Tensor<(), E, D, T> {
        let tv = l.time - self.cfg.max_horizon();
        let width = self.cfg.n_horizons() * l.d_in;
        let target = self.dev.tensor_from_vec(l.targets_to_rows(tokens, &self.cfg.horizons), (tv * l.seqs(), width));
        (take_rows(pred, 0, tv * l.seqs()) - target).square().mean::<(), Axes2<0, 1>>()
    }

    /// Forward and backward of the forecasts plus `offset` (none: the plain loss), overwriting
    /// the gradients. The offset is a constant of the graph: it gets no gradient.
    fn grads_of(&mut self, tokens: &Tokens<E>, offset: Option<&Forecasts<E>>) -> Result<f64, Error> {
        let l = self.layout(tokens)?;
        let x = self.upload_tokens(&l, tokens).leaky_traced();
        let mut pred = self.head_rows(self.embed_rows(x, &l));
        if let Some(off) = offset {
            let width = self.cfg.n_horizons() * l.d_in;
            pred = pred + self.dev.tensor_from_vec(l.forecasts_to_rows(off), (l.rows(), width));
        }
        let loss = self.loss_of(pred, &l, tokens);
        let value = scalar(&loss).f64();
        let mut g = loss.backward();
        let mut grads = Vec::with_capacity(self.params.tensors.len());
        for p in &self.params.tensors {
            // Present for every parameter the loss depends on; zeros otherwise.
            g.get_or_alloc_mut(p).map_err(|e| Error::Backend(format!("gradient allocation: {e:?}")))?;
            grads.push(g.get(p));
        }
        self.grads = grads;
        Ok(value)
    }
}

impl<E: Dtype + Elem> DfdxModel<E, Cpu>
where
    Cpu: DfdxDevice<E>,
{
    /// [`DfdxModel::new`] on a fresh [`Cpu`] device: the `(config, adjacency, seed)`
    /// constructor shape the command line's backend switch takes (`--backend dfdx-cpu`).
    pub fn new_cpu(cfg: ModelConfig, adjacency: Option<Adjacency>, seed: u64) -> Result<Self, Error> {
        Self::new(cfg, adjacency, seed, crate::device::cpu_device())
    }
}

#[cfg(feature = "cuda")]
impl<E: Dtype + Elem> DfdxModel<E, dfdx::tensor::Cuda>
where
    dfdx::tensor::Cuda: DfdxDevice<E>,
{
    /// [`DfdxModel::new`] on CUDA device 0 (`--backend dfdx-cuda`); no usable GPU is an
    /// [`Error::Backend`] (see [`crate::cuda_device`]).
    pub fn new_cuda(cfg: ModelConfig, adjacency: Option<Adjacency>, seed: u64) -> Result<Self, Error> {
        Self::new(cfg, adjacency, seed, crate::device::cuda_device(0)?)
    }
}

/// The Adam arithmetic of this backend runs on the device: [`Model::apply_optimizer`] accepts
/// only an optimizer that is the core's Adam ([`Optimizer::as_adam`]; any other is an
/// [`Error::Backend`] naming it, [`Optimizer::name`]), reads only its hyperparameters
/// ([`boldcast_core::Adam::config`]) and calls its [`Optimizer::begin_step`] once per step (so
/// its step count stays meaningful); the moments and the bias-correction step are this
/// model's own device state ([`DfdxModel::optimizer_steps`], [`DfdxModel::optimizer_moments`]).
/// The optimizer's own `update` is never called, so its host moments stay empty.
impl<E: Dtype + Elem, D: DfdxDevice<E>> Model<E> for DfdxModel<E, D> {
    fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    fn forward(&self, tokens: &Tokens<E>) -> Result<Forecasts<E>, Error> {
        let l = self.layout(tokens)?;
        let x = self.upload_tokens(&l, tokens);
        let pred = self.head_rows(self.embed_rows(x, &l));
        Ok(l.rows_to_forecasts(&pred.as_vec(), self.cfg.n_horizons()))
    }

    fn embed(&self, tokens: &Tokens<E>) -> Result<Embeddings<E>, Error> {
        let l = self.layout(tokens)?;
        let x = self.upload_tokens(&l, tokens);
        let emb = self.embed_rows(x, &l);
        Ok(l.rows_to_embeddings(&emb.as_vec(), self.cfg.d_model))
    }

    fn loss(&self, tokens: &Tokens<E>) -> Result<f64, Error> {
        let l = self.layout(tokens)?;
        let x = self.upload_tokens(&l, tokens);
        let pred = self.head_rows(self.embed_rows(x, &l));
        Ok(scalar(&self.loss_of(pred, &l, tokens)).f64())
    }

    fn loss_and_grads(&mut self, tokens: &Tokens<E>) -> Result<f64, Error> {
        self.grads_of(tokens, None)
    }

    fn loss_and_grads_offset(&mut self, tokens: &Tokens<E>, offset: &Forecasts<E>) -> Result<f64, Error> {
        boldcast_core::check_offset(&self.cfg, tokens, offset)?;
        self.grads_of(tokens, Some(offset))
    }
    fn grad_sq_norm(&self) -> f64 {
        let mut acc: Option<Tensor<(), f64, D>> = None;
        for g in &self.grads {
            let s = g.clone().to_dtype::<f64>().square().sum::<(), Axis<0>>();
            acc = Some(match acc {
                None => s,
                Some(a) => a + s,
            });
        }
        acc.map(|a| scalar(&a)).unwrap_or(0.0)
    }

    fn scale_grads(&mut self, factor: f64) {
        let f = E::of(factor);
        for g in &mut self.grads {
            *g = g.clone() * f;
        }
    }

    fn apply_optimizer(&mut self, opt: &mut dyn Optimizer<E>, lr: f64) -> Result<(), Error> {
        // Only the core's Adam runs here (its update is device arithmetic of this crate); any
        // other optimizer is refused by name before anything changes, never run as Adam.
        let cfg = match opt.as_adam() {
            Some(adam) => adam.config().clone(),
            None => {
                return Err(Error::Backend(format!(
                    "the dfdx backend keeps its optimizer on the device and runs only the core's Adam \
                     (AdamW or coupled-L2 Adam); it cannot run the optimizer `{}`",
                    opt.name()
                )))
            }
        };
        cfg.validate()?;
        opt.begin_step();
        // The step count is the optimizer's, as with the core's host Adam: a fresh optimizer
        // (its first step) starts from zero moments even if another optimizer stepped this
        // model before; any other mismatch means the device moments belong to a different
        // optimizer run, and using them would silently skew the bias correction.
        let t = opt.steps();
        if t == 1 {
            self.adam = Default::default();
        } else if self.adam.steps() + 1 != t {
            return Err(Error::Backend(format!(
                "optimizer step {t} does not follow the {} steps of the device moments; \
                 restore them with `restore_optimizer_state` when resuming",
                self.adam.steps()
            )));
        }
        let specs = self.params.specs().to_vec();
        self.adam.step(&cfg, lr, &specs, &mut self.params.tensors, &self.grads);
        Ok(())
    }

    fn state(&self) -> Vec<NamedTensor<E>> {
        self.params.to_host(&self.params.tensors)
    }

    fn grads(&self) -> Vec<NamedTensor<E>> {
        self.params.to_host(&self.grads)
    }

    fn load_state(&mut self, tensors: &[NamedTensor<E>]) -> Result<(), Error> {
        let table = ParamTable::upload(&self.dev, self.cfg.param_specs(), tensors)?;
        self.params = table;
        Ok(())
    }

    /// The device Adam's step count and moments, copied to the host in the core's format.
    fn optimizer_state(&self) -> Option<(u64, Vec<boldcast_core::optim::Moments<E>>)> {
        Some(self.adam.export(self.params.tensors.len()))
    }

    fn decayed_elements(&self) -> Option<u64> {
        Some(self.adam.decayed_last_step())
    }

    /// Uploads the moments (one entry per parameter; an empty entry means "not updated yet")
    /// and the step count; a host [`boldcast_core::Adam`]'s checkpoint restores the same way.
    fn restore_optimizer_state(&mut self, t: u64, moments: &[boldcast_core::optim::Moments<E>]) -> Result<(), Error> {
        let specs = self.params.specs().to_vec();
        self.adam.restore(&self.dev, &specs, t, moments)
    }
}

/// The flat buffer goes through the host: [`Model::grads`] out, [`DfdxModel::load_grads`] in.
impl<E: Dtype + Elem, D: DfdxDevice<E>> DataParallel<E> for DfdxModel<E, D> {
    fn grads_from_flat(&mut self, flat: &[E]) -> Result<(), Error> {
        let specs = self.cfg.param_specs();
        let n: usize = specs.iter().map(|s| s.numel()).sum();
        if flat.len() != n {
            return Err(Error::shape("gradients (flat)", n, flat.len()));
        }
        let mut rest = flat;
        let mut named = Vec::with_capacity(specs.len());
        for s in specs {
            let (head, tail) = rest.split_at(s.numel());
            named.push(NamedTensor { name: s.name, shape: s.shape, data: head.to_vec() });
            rest = tail;
        }
        self.load_grads(&named)
    }
}

/// The value of a 0-d device tensor.
fn scalar<F: Dtype, D: Device<F>, T>(t: &Tensor<(), F, D, T>) -> F {
    t.as_vec()[0]
}
