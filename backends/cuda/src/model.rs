//! [`CudaModel`]: the BOLDcast forecaster of MODEL.md assembled from this crate's operations,
//! implementing [`Model`] and [`DataParallel`] in shim mode, with the CPU backend's parameter
//! names, order and layouts (so a checkpoint of any backend loads here).
//!
//! ```text
//! tokens (B,T,P,D) -> (B,P,T,D) -> embed_proj -> n_layers x [ x = MambaLayer(x)            per parcel over time
//!                                                             x = Spatial(x in (B,T,P,M)) per (b, t) over parcels ]
//!                  -> final_norm (= embed) -> head -> (B,T,P,H,D) -> loss
//! ```
//!
//! The temporal mixer is a Mamba-1 layer ([`crate::mamba1::layer`]) or a Mamba-2 layer
//! ([`crate::mamba2::layer`]), by `temporal`. The trunk keeps its activation sequence-major,
//! `(B, P, T, M)`, the layout of both layers; the spatial mixer ([`crate::spatial`]) gets it as
//! `(B, T, P, M)` through [`layout::swap_axes`] and gives it back. The forward keeps, per
//! layer, the layer input and (with attention) the middle activation, in bf16 under bf16
//! autocast ([`crate::stored`]), and the backward recomputes everything else a group at a
//! time; every activation comes from the model's counting [`Pool`].
//! The optimizer is the crate's Adam kernel ([`crate::optim`]) with its moments held by the
//! model, as they would be on the device ([`Model::optimizer_state`] exports them).
//!
//! Precision ([`CudaModel::with_precision`]): `forward`, `embed`, `loss`, `loss_and_grads` and
//! `loss_and_grads_offset` run under an [`autocast`] scope of the model's precision, so with
//! [`Precision::Bf16`] every matrix product takes bf16 operands with f32 accumulation (cuBLAS
//! GemmEx) and the activations kept for the backward are stored in bf16; everything else
//! (parameters, gradients, Adam's moments, the scan states, reductions, the loss, a forecast
//! offset, the recomputation) is f32.
//!
//! Execution: this module never calls the shim. It enters its [`Exec`] (the CPU shim, or with
//! the feature `cuda` the device of `CudaModel::on_gpu`) around each call that launches, and
//! calls the crate's host functions ([`crate::ops`], [`crate::mamba1::layer`],
//! [`crate::mamba2::layer`], [`crate::spatial`], [`crate::loss`], [`crate::optim`],
//! [`crate::gemm`]), whose launches and products run where the thread has entered.
//!
//! Residency: the parameters, gradients and Adam's moments are [`ParamStore`]s over buffers of
//! the model's [`Pool`] (on a device its memory), as are the activations, the adjacency and
//! every temporary; a step's tokens are uploaded once. So a training step stages nothing and
//! the host waits for the device twice a step: for the loss and for the gradient norm (the
//! [`crate::exec::Traffic`] counters, asserted by `tests/cuda/traffic.rs`). Host reads of
//! the stores (`state`, `grads`, `optimizer_state`, the flat gradients) synchronize first.

use crate::autocast::{self, Precision};
use crate::error::CudaError;
use crate::exec::{self, Exec, Scope, ScratchScope};
use crate::knn::Neighbours;
use crate::mamba1::layer::{LayerDims, Mamba1Params};
use crate::mamba2::layer::{Layer2Dims, Mamba2Params};
use crate::memory::{best_chunk, StepShape};
use crate::ops::{act, layernorm, layout, linear};
use crate::optim::{adam_args, adam_step, global_norm};
use crate::pool::{Buf, Pool};
use crate::shim::{LaunchError, LossShape};
use crate::spatial::{self, KnnParams, Nb};
use crate::stored::Stored;
use crate::trunk::{self, BackwardIn};
use boldcast_core::collective::{all_reduce_mean, Collective};
use boldcast_core::model::NamedTensor;
use boldcast_core::optim::{decays, Moments};
use boldcast_core::params::{ModelParams, ParamStore};
use boldcast_core::ParamSpec;
use boldcast_core::{
    Adjacency, DataParallel, EmbedShape, Embeddings, Error, ForecastShape, Forecasts, Model, ModelConfig, Optimizer,
    Temporal, Tokens,
};

/// One layer's temporal mixer (or its gradients): `layers.{i}.mamba.norm.*` and
/// `layers.{i}.mamba.mamba.*`, in state-dict order.
#[derive(Debug)]
enum Mixer<S> {
    Mamba1(Mamba1Params<S>),
    Mamba2(Mamba2Params<S>),
}

/// The sizes of the temporal mixer of either kind for one sequence length.
#[derive(Clone, Copy, Debug)]
enum Dims {
    Mamba1(LayerDims),
    Mamba2(Layer2Dims),
}

impl Mixer<&[f32]> {
    /// The layer's forward over `seqs` sequences: its output and what the backward needs.
    fn forward(&self, dims: &Dims, seqs: usize, u: &[f32], pool: &Pool) -> Result<Buf, LaunchError> {
        match (self, dims) {
            (Self::Mamba1(p), Dims::Mamba1(d)) => trunk::forward(p, d, seqs, u, pool),
            (Self::Mamba2(p), Dims::Mamba2(d)) => trunk::forward(p, d, seqs, u, pool),
            _ => unreachable!("the parameters and sizes come from the same config"),
        }
    }

    /// The layer's backward: `g_u`, the parameter gradients added to `g`.
    fn backward(
        &self,
        dims: &Dims,
        b: BackwardIn<'_>,
        g: &mut Mixer<&mut [f32]>,
        pool: &Pool,
    ) -> Result<Buf, LaunchError> {
        match (self, dims, g) {
            (Self::Mamba1(p), Dims::Mamba1(d), Mixer::Mamba1(g)) => trunk::backward(p, d, b, g, pool),
            (Self::Mamba2(p), Dims::Mamba2(d), Mixer::Mamba2(g)) => trunk::backward(p, d, b, g, pool),
            _ => unreachable!("the parameters and sizes come from the same config"),
        }
    }
}

/// One layer's tensors (or gradients).
struct LayerParams<S> {
    /// `layers.{i}.mamba.norm.*` and `layers.{i}.mamba.mamba.*`.
    mamba: Mixer<S>,
    /// `layers.{i}.knn.*`, absent when `k_neighbors == 0`.
    knn: Option<KnnParams<S>>,
}

/// Every tensor of the model (or its gradient) as the layers read it: views of a
/// [`ParamStore`], PyTorch layouts.
type Params<S> = ModelParams<S, LayerParams<S>>;

/// The groups of `tensors`, given in state-dict order ([`ModelConfig::param_specs`]).
fn groups<S>(cfg: &ModelConfig, tensors: impl Iterator<Item = S>) -> Params<S> {
    ModelParams::take(cfg.n_layers, tensors, |it| {
        let mamba = match cfg.temporal {
            Temporal::Mamba => Mixer::Mamba1(Mamba1Params::take(it)),
            Temporal::Mamba2 => Mixer::Mamba2(Mamba2Params::take(it)),
        };
        let knn = (cfg.k_neighbors > 0).then(|| KnnParams::take(it));
        LayerParams { mamba, knn }
    })
}

/// The Adam state the model holds on the device: the step count, the moments in the
/// parameters' layout, which tensors have moments (none before their first update), and the
/// decayed elements of the last step.
#[derive(Debug)]
struct AdamState {
    t: u64,
    m: Store,
    v: Store,
    held: Vec<bool>,
    decayed: u64,
    runs: Vec<AdamRun>,
}

/// Consecutive tensors that decay alike: one Adam launch, since the scalars of a step differ
/// between tensors only by their weight decay.
#[derive(Debug)]
struct AdamRun {
    /// Their entries in the stores.
    range: std::ops::Range<usize>,
    /// The first tensor's index (its name and shape give the run's scalars).
    first: usize,
    decays: bool,
}

/// The runs of tensors that decay alike in `specs`, state-dict order.
fn decay_runs(specs: &[ParamSpec]) -> Vec<AdamRun> {
    let decaying: Vec<bool> = specs.iter().map(|s| decays(&s.name, &s.shape)).collect();
    let (mut runs, mut at) = (Vec::new(), 0);
    let mut i = 0;
    while i < specs.len() {
        let j = (i..specs.len()).find(|&j| decaying[j] != decaying[i]).unwrap_or(specs.len());
        let len: usize = specs[i..j].iter().map(ParamSpec::numel).sum();
        runs.push(AdamRun { range: at..at + len, first: i, decays: decaying[i] });
        (at, i) = (at + len, j);
    }
    runs
}

/// A store of the model's tensors in a buffer of its pool.
type Store = ParamStore<f32, Buf>;

/// A zeroed store of `specs` in `pool`.
fn store(specs: Vec<ParamSpec>, pool: &Pool) -> Store {
    let n = Store::len_of(&specs);
    Store::over(specs, pool.zeros(n)).expect("a buffer of the store's length")
}

impl AdamState {
    fn new(specs: &[ParamSpec], pool: &Pool) -> Self {
        let (m, v) = (store(specs.to_vec(), pool), store(specs.to_vec(), pool));
        Self { t: 0, m, v, held: vec![false; specs.len()], decayed: 0, runs: decay_runs(specs) }
    }

    /// Back to no moments (the first step of a fresh optimizer), zeroed on the device.
    fn reset(&mut self) -> Result<(), LaunchError> {
        layout::fill(self.m.flat_mut(), 0.0)?;
        layout::fill(self.v.flat_mut(), 0.0)?;
        self.held.fill(false);
        (self.t, self.decayed) = (0, 0);
        Ok(())
    }
}

/// What the training forward keeps of one layer for the backward, in the model's precision
/// ([`crate::stored`]: bf16 under bf16 autocast).
struct Kept {
    /// The layer input, `(B, P, T, M)`.
    input: Stored,
    /// With attention, the spatial mixer's input `(B, T, P, M)`.
    mid: Option<Stored>,
}

/// Sequences per group of the Mamba layers: bounds their workspace, whatever the batch.
const LAYER_GROUP: usize = 64;

/// The BOLDcast model of this backend (Mamba-1 or Mamba-2 temporal mixer, with or without
/// attention).
///
/// Built with [`CudaModel::new`] with zero parameters; its weights come from
/// [`Model::load_state`] (a checkpoint, or the CPU backend's initialization). Its matrix
/// products run in f32 unless [`CudaModel::with_precision`] sets bf16 autocast.
#[derive(Debug)]
pub struct CudaModel {
    cfg: ModelConfig,
    adj: Option<Adjacency>,
    /// The adjacency as the kernels read it, in the pool.
    nb: Option<Nb>,
    /// The horizons as the loss kernels read them, in the pool.
    horizons: Buf<i32>,
    /// The parameters and their gradients, state-dict order, in the pool.
    params: Store,
    grads: Store,
    adam: AdamState,
    pool: Pool,
    /// Where the launches run: the shim, or the device the pool lends memory of.
    exec: Exec,
    /// The precision of the matrix products ([`crate::autocast`]).
    precision: Precision,
}

impl CudaModel {
    /// A model with every parameter zero. Errors (naming the value): an invalid `cfg`; an
    /// adjacency missing, unexpected, of another `k`, or too large for the kernels' indices.
    pub fn new(cfg: ModelConfig, adjacency: Option<Adjacency>) -> Result<Self, Error> {
        Self::build(cfg, adjacency, Pool::new(), Exec::shim())
    }

    /// [`CudaModel::new`] with its buffers in `pool`, its launches on `exec`.
    fn build(cfg: ModelConfig, adjacency: Option<Adjacency>, pool: Pool, exec: Exec) -> Result<Self, Error> {
        cfg.validate()?;
        let nb = match (&adjacency, cfg.k_neighbors) {
            (None, 0) => None,
            (Some(a), k) if k > 0 && a.k() == k => {
                Some(Neighbours::new(a).ok_or_else(|| Error::config("adjacency", a.parcels(), "P k over 2^31"))?)
            }
            (Some(a), k) => return Err(Error::config("adjacency.k", a.k(), format!("model.k_neighbors is {k}"))),
            (None, k) => return Err(Error::config("model.k_neighbors", k, "needs an adjacency (P, k)")),
        };
        // Set up on the device: the uploads and zeroing run there.
        let _on = exec.enter()?;
        let nb = nb.map(|n| n.resident(&pool));
        let horizons: Vec<i32> = cfg.horizons.iter().map(|&h| h as i32).collect();
        let horizons = pool.upload(&horizons);
        let (params, grads) = (store(cfg.param_specs(), &pool), store(cfg.param_specs(), &pool));
        let adam = AdamState::new(params.specs(), &pool);
        let precision = Precision::F32;
        Ok(Self { cfg, adj: adjacency, nb, horizons, params, grads, adam, pool, exec, precision })
    }

    /// [`CudaModel::new`] with the initial weights of `seed`, the core's draw
    /// ([`ParamStore::initialize`]), so one seed starts every backend from the same model: the
    /// `(config, adjacency, seed)` constructor the command line's backend switch takes.
    pub fn seeded(cfg: ModelConfig, adjacency: Option<Adjacency>, seed: u64) -> Result<Self, Error> {
        let mut m = Self::new(cfg, adjacency)?;
        m.init(seed)?;
        Ok(m)
    }

    /// The parameters as the layers read them.
    fn view(&self) -> Params<&[f32]> {
        groups(&self.cfg, self.params.tensors())
    }

    /// Draws the initial weights of `seed` into the parameters (on the host, after the
    /// device is idle).
    fn init(&mut self, seed: u64) -> Result<(), Error> {
        let _host = self.host()?;
        self.params.initialize(seed)
    }

    /// [`CudaModel::seeded`] on CUDA device 0 (`--backend cuda`); no usable device is an
    /// [`Error::Device`] that says why (no driver, no device, a kernel NVRTC rejects).
    #[cfg(feature = "cuda")]
    pub fn new_cuda(cfg: ModelConfig, adjacency: Option<Adjacency>, seed: u64) -> Result<Self, Error> {
        let gpu = crate::device::Gpu::new(0).map_err(CudaError::from)?;
        let mut m = Self::on_gpu(cfg, adjacency, gpu)?;
        m.init(seed)?;
        Ok(m)
    }

    /// [`CudaModel::new_cuda`] with bf16 autocast ([`CudaModel::with_precision`]):
    /// `--backend cuda --precision bf16`.
    #[cfg(feature = "cuda")]
    pub fn new_cuda_bf16(cfg: ModelConfig, adjacency: Option<Adjacency>, seed: u64) -> Result<Self, Error> {
        Ok(Self::new_cuda(cfg, adjacency, seed)?.with_precision(Precision::Bf16))
    }

    /// [`CudaModel::new`] on a device: every launch and product of the model runs on `gpu`,
    /// its activations in the device's managed memory (see [`crate::device`]).
    #[cfg(feature = "cuda")]
    pub fn on_gpu(
        cfg: ModelConfig,
        adjacency: Option<Adjacency>,
        gpu: std::rc::Rc<crate::device::Gpu>,
    ) -> Result<Self, Error> {
        Self::build(cfg, adjacency, Pool::on_gpu(gpu.clone()), Exec::gpu(gpu))
    }

    /// Where the model's launches run.
    pub fn exec(&self) -> &Exec {
        &self.exec
    }

    /// Enters [`CudaModel::exec`] for one call, temporaries from the model's pool.
    fn on(&self) -> Result<On, Error> {
        Ok(On { _scope: self.exec.enter()?, _scratch: exec::scratch_scope(&self.pool) })
    }

    /// Waits until the device has run everything queued (counted as a synchronization):
    /// what a timer needs after a step, whose last launches are queued, not run.
    pub fn wait(&self) -> Result<(), Error> {
        let _on = self.on()?;
        Ok(exec::sync()?)
    }

    /// [`CudaModel::on`] with the device idle, for host reads and writes of the stores.
    fn host(&self) -> Result<On, Error> {
        let on = self.on()?;
        exec::sync()?;
        Ok(on)
    }

    /// The model running its matrix products in `precision` ([`crate::autocast`]): with
    /// [`Precision::Bf16`] every forward, loss and backward runs under a bf16 autocast scope;
    /// parameters, gradients, moments, the loss and the scan states stay f32.
    pub fn with_precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// Sets the precision of later forwards and backwards (see [`CudaModel::with_precision`]).
    pub fn set_precision(&mut self, precision: Precision) {
        self.precision = precision;
    }

    /// The precision the model's matrix products run in ([`Precision::F32`] unless set).
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The counting pool the activations come from (its peaks are the step's device memory).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The memory model's prediction of a training step on tokens of `shape` at the chunk
    /// and group this model runs them with ([`crate::memory::step_peak`]): the peak bytes the
    /// pool must provide, term by term.
    pub fn predicted_peak(&self, shape: boldcast_core::TokenShape) -> crate::memory::Breakdown {
        let s = self.step_shape(Batch { b: shape.batch, t: shape.time, p: shape.parcels });
        let q = best_chunk(&self.cfg, &s, self.precision);
        crate::memory::step_peak(&self.cfg, &StepShape { q, ..s }, self.precision)
    }

    /// The memory model's shape of a batch (its chunk `q` not chosen yet).
    fn step_shape(&self, s: Batch) -> StepShape {
        StepShape { batch: s.b, window: s.t * self.cfg.d_in, parcels: s.p, q: 1, group: LAYER_GROUP }
    }

    /// The temporal mixer's sizes for the batch `s`: the scan chunk is the one the memory
    /// model predicts the least peak for ([`crate::memory::best_chunk`]), so the step the
    /// model runs is the one whose peak BENCHMARKS.md quotes.
    fn dims(&self, s: Batch) -> Dims {
        let shape = self.step_shape(s);
        Self::layer_dims(&self.cfg, s.t, best_chunk(&self.cfg, &shape, self.precision))
    }

    /// The temporal mixer's sizes for sequences of `time` steps, checkpoints every `q`.
    fn layer_dims(cfg: &ModelConfig, time: usize, q: usize) -> Dims {
        let (m, di, n, k, group) = (cfg.d_model, cfg.d_inner(), cfg.d_state, cfg.d_conv, LAYER_GROUP);
        match cfg.temporal {
            Temporal::Mamba => Dims::Mamba1(LayerDims { m, di, n, k, r: cfg.dt_rank(), time, q, group }),
            Temporal::Mamba2 => Dims::Mamba2(Layer2Dims { m, di, n, k, nh: cfg.nheads(), time, q, group }),
        }
    }

    /// Checks tokens against the model and returns `(B, T, P)`.
    fn check(&self, tokens: &Tokens<f32>) -> Result<(usize, usize, usize), Error> {
        let s = tokens.shape();
        self.cfg.check_tokens(&s)?;
        if let Some(a) = &self.adj {
            if s.parcels != a.parcels() {
                return Err(Error::shape("tokens.parcels (the adjacency's P)", a.parcels(), s.parcels));
            }
        }
        Ok((s.batch, s.time, s.parcels))
    }
}

/// While alive, the model's launches run on its [`Exec`] and take temporaries from its pool.
struct On {
    _scope: Scope,
    _scratch: ScratchScope,
}

/// The sizes of one batch.
#[derive(Clone, Copy, Debug)]
struct Batch {
    b: usize,
    t: usize,
    p: usize,
}

impl Batch {
    fn rows(self) -> usize {
        self.b * self.t * self.p
    }
}

impl CudaModel {
    /// `(B, T, P)` of checked tokens.
    fn batch(&self, tokens: &Tokens<f32>) -> Result<Batch, Error> {
        let (b, t, p) = self.check(tokens)?;
        Ok(Batch { b, t, p })
    }

    /// The tokens sequence-major, `(B, P, T, D)`, from their upload.
    fn tokens_seq(&self, tokens: &[f32], s: Batch) -> Result<Buf, Error> {
        let mut x = self.pool.zeros(tokens.len());
        layout::swap_axes(tokens, s.b, s.t, s.p, self.cfg.d_in, &mut x)?;
        Ok(x)
    }

    /// embed_proj and the layers on sequence-major tokens: the trunk output `(B, P, T, M)`
    /// and, with `keep`, what the backward needs of each layer.
    fn trunk(&self, tok: &[f32], s: Batch, keep: bool) -> Result<(Buf, Vec<Kept>), Error> {
        let (m, pool) = (self.cfg.d_model, &self.pool);
        let dims = self.dims(s);
        let prm = self.view();
        let mut x = pool.zeros(s.rows() * m);
        linear::forward(tok, prm.embed.w, Some(prm.embed.b), m, &mut x)?;
        let mut kept = Vec::new();
        let store = |b: Buf| Stored::keep(b, self.precision, pool);
        for l in &prm.layers {
            let out = l.mamba.forward(&dims, s.b * s.p, &x, pool)?;
            let input = std::mem::replace(&mut x, out);
            let mid = match (&l.knn, &self.nb) {
                (Some(kp), Some(nb)) => {
                    let mut xt = pool.zeros(x.len());
                    layout::swap_axes(&x, s.b, s.p, s.t, m, &mut xt)?;
                    let yt = spatial::forward(kp, Self::spatial_groups(&self.cfg, nb, s), &xt, pool)?;
                    layout::swap_axes(&yt, s.b, s.t, s.p, m, &mut x)?;
                    Some(xt)
                }
                _ => None,
            };
            if keep {
                kept.push(Kept { input: store(input)?, mid: mid.map(store).transpose()? });
            }
        }
        Ok((x, kept))
    }

    /// The spatial mixer's groups of a batch: its `(b, t)` groups, as many a pass as fill the
    /// rows of one group of the temporal mixer ([`crate::memory::spatial_chunk`]).
    fn spatial_groups<'a>(cfg: &ModelConfig, nb: &'a Nb, s: Batch) -> spatial::Groups<'a> {
        let chunk = crate::memory::spatial_chunk(LAYER_GROUP, s.t, s.p);
        spatial::Groups { nb, m: cfg.d_model, groups: s.b * s.t, chunk }
    }

    /// The final-norm embedding of the trunk output, `(B, P, T, M)`.
    fn final_norm(&self, x: &[f32], rows: usize) -> Result<Buf, Error> {
        let m = self.cfg.d_model;
        let mut e = self.pool.zeros(rows * m);
        let norm = &self.view().final_norm;
        layernorm::forward(x, rows, m, norm.w, norm.b, &mut e)?;
        Ok(e)
    }

    /// The head on the embedding: the predictions `(B, T, P, H D)` and `(B, P, T, H D)`.
    fn head(&self, e: &[f32], s: Batch) -> Result<Buf, Error> {
        let hd = self.cfg.n_horizons() * self.cfg.d_in;
        let mut ps = self.pool.zeros(s.rows() * hd);
        let head = &self.view().head;
        linear::forward(e, head.w, Some(head.b), hd, &mut ps)?;
        let mut pred = self.pool.zeros(ps.len());
        layout::swap_axes(&ps, s.b, s.p, s.t, hd, &mut pred)?;
        Ok(pred)
    }

    /// The predictions `(B, T, P, H D)` of checked tokens (uploaded, `raw`).
    fn predict(&self, raw: &[f32], s: Batch) -> Result<Buf, Error> {
        let tok = self.tokens_seq(raw, s)?;
        let (x, _) = self.trunk(&tok, s, false)?;
        let e = self.final_norm(&x, s.rows())?;
        self.head(&e, s)
    }

    /// final_norm, head and loss on the trunk output `x`, the forecasts plus `offset` (`(B, T,
    /// P, H, D)`, none: the plain loss) in the loss, and their backward: the loss (a device
    /// scalar) and the gradient with respect to `x` (the head's and final norm's gradients
    /// written). `tokens` and `offset` are device buffers.
    fn head_backward(
        &mut self,
        x: &[f32],
        tokens: &[f32],
        s: Batch,
        offset: Option<&[f32]>,
    ) -> Result<(Buf<f64>, Buf), Error> {
        let (pool, rows, m) = (self.pool.clone(), s.rows(), self.cfg.d_model);
        let hd = self.cfg.n_horizons() * self.cfg.d_in;
        let e = self.final_norm(x, rows)?;
        let mut pred = self.head(&e, s)?;
        // Added by a kernel, not a product: under autocast a product would round it to bf16.
        if let Some(o) = offset {
            act::add(o, &mut pred)?;
        }
        let ls = LossShape { b: s.b, t: s.t, p: s.p, d: self.cfg.d_in, horizons: &self.horizons };
        let mut loss = pool.zeros_of::<f64>(1);
        crate::loss::mse_into(ls, &pred, tokens, &mut loss, &pool)?;
        let mut g_pred = pool.zeros(pred.len());
        crate::loss::mse_backward(ls, &pred, tokens, &mut g_pred)?;
        drop(pred);
        let mut g_ps = pool.zeros(g_pred.len());
        layout::swap_axes(&g_pred, s.b, s.t, s.p, hd, &mut g_ps)?;
        drop(g_pred);
        let prm = groups(&self.cfg, self.params.tensors());
        let grd = groups(&self.cfg, self.grads.tensors_mut());
        linear::backward_params(rows, &e, &g_ps, grd.head.w, Some(grd.head.b))?;
        let mut g_e = pool.zeros(rows * m);
        linear::backward_input(&g_ps, prm.head.w, hd, 0.0, &mut g_e)?;
        // layernorm::backward adds to its input gradient.
        let mut g = pool.zeros(rows * m);
        layernorm::backward(
            x,
            rows,
            m,
            prm.final_norm.w,
            &g_e,
            layernorm::Grads { x: &mut g, w: grd.final_norm.w, b: grd.final_norm.b },
            &pool,
        )?;
        Ok((loss, g))
    }

    /// Forward and backward of the forecasts plus `offset` (none: the plain loss), overwriting
    /// the gradients: the tokens and the offset are uploaded, everything else stays on the
    /// device, and the host waits once, for the loss.
    fn grads_of(&mut self, tokens: &Tokens<f32>, offset: Option<&[f32]>) -> Result<f64, Error> {
        let _on = self.on()?;
        let _autocast = autocast::scope(self.precision);
        let s = self.batch(tokens)?;
        layout::fill(self.grads.flat_mut(), 0.0)?;
        let raw = self.pool.upload(tokens.data());
        let tok = self.tokens_seq(&raw, s)?;
        let (x, kept) = self.trunk(&tok, s, true)?;
        let offset = offset.map(|o| self.pool.upload(o));
        let (loss, g) = self.head_backward(&x, &raw, s, offset.as_deref())?;
        drop((x, offset, raw));
        let g = self.layers_backward(kept, g, s)?;
        let grd = groups(&self.cfg, self.grads.tensors_mut());
        linear::backward_params(s.rows(), &tok, &g, grd.embed.w, Some(grd.embed.b))?;
        Ok(exec::download(&loss)?[0])
    }

    /// The layers' backward from the trunk output's gradient `g`, last layer first: the
    /// gradient with respect to the embedding projection's output.
    fn layers_backward(&mut self, kept: Vec<Kept>, mut g: Buf, s: Batch) -> Result<Buf, Error> {
        let (pool, m) = (self.pool.clone(), self.cfg.d_model);
        let dims = self.dims(s);
        let prm = groups(&self.cfg, self.params.tensors());
        let mut grd = groups(&self.cfg, self.grads.tensors_mut());
        let layers = prm.layers.iter().zip(grd.layers.iter_mut());
        for ((l, lg), k) in layers.zip(kept).rev() {
            if let (Some(kp), Some(kg), Some(nb), Some(mid)) = (&l.knn, &mut lg.knn, &self.nb, &k.mid) {
                let mut gt = pool.zeros(g.len());
                layout::swap_axes(&g, s.b, s.p, s.t, m, &mut gt)?;
                let g_mid =
                    spatial::backward(kp, Self::spatial_groups(&self.cfg, nb, s), (mid.view(), &gt), kg, &pool)?;
                layout::swap_axes(&g_mid, s.b, s.t, s.p, m, &mut g)?;
            }
            let b = BackwardIn { seqs: s.b * s.p, u: k.input.view(), g_out: &g };
            g = l.mamba.backward(&dims, b, &mut lg.mamba, &pool)?;
        }
        Ok(g)
    }

    /// The optimizer step count `opt` will reach, checked against the held moments: a fresh
    /// optimizer (its first step) starts from zero moments; any other mismatch means the
    /// moments belong to another run, and using them would skew the bias correction.
    fn next_step(&mut self, opt: &dyn Optimizer<f32>) -> Result<u64, Error> {
        let t = opt.steps() + 1;
        if t == 1 {
            self.adam.reset()?;
        } else if self.adam.t + 1 != t {
            return Err(CudaError::StepOutOfOrder { step: t, held: self.adam.t }.into());
        }
        Ok(t)
    }
    /// The Adam step over the tensors in place: one launch per run of consecutive tensors
    /// that decay alike ([`AdamState::runs`]), on the stores' slices, so nothing is gathered
    /// or copied. Returns the elements of decaying tensors.
    fn adam_runs(&mut self, cfg: &boldcast_core::optim::OptimConfig, t: u64, lr: f64) -> Result<u64, Error> {
        let mut decayed = 0;
        for run in &self.adam.runs {
            let spec = &self.params.specs()[run.first];
            let args = adam_args(cfg, t, lr, &spec.name, &spec.shape);
            let r = run.range.clone();
            let (m, v) = (&mut self.adam.m.flat_mut()[r.clone()], &mut self.adam.v.flat_mut()[r.clone()]);
            adam_step(&mut self.params.flat_mut()[r.clone()], &self.grads.flat()[r.clone()], m, v, args)?;
            if run.decays {
                decayed += r.len() as u64;
            }
        }
        self.adam.held.fill(true);
        Ok(decayed)
    }
}

impl Model<f32> for CudaModel {
    fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    fn forward(&self, tokens: &Tokens<f32>) -> Result<Forecasts<f32>, Error> {
        let _on = self.on()?;
        let _autocast = autocast::scope(self.precision);
        let s = self.batch(tokens)?;
        let raw = self.pool.upload(tokens.data());
        let pred = self.predict(&raw, s)?;
        let shape = ForecastShape::new(s.b, s.t, s.p, self.cfg.n_horizons(), self.cfg.d_in);
        Forecasts::new(shape, exec::download(&pred)?)
    }

    fn embed(&self, tokens: &Tokens<f32>) -> Result<Embeddings<f32>, Error> {
        let _on = self.on()?;
        let _autocast = autocast::scope(self.precision);
        let s = self.batch(tokens)?;
        let m = self.cfg.d_model;
        let raw = self.pool.upload(tokens.data());
        let tok = self.tokens_seq(&raw, s)?;
        let (x, _) = self.trunk(&tok, s, false)?;
        let e = self.final_norm(&x, s.rows())?;
        let mut out = self.pool.zeros(e.len());
        layout::swap_axes(&e, s.b, s.p, s.t, m, &mut out)?;
        Embeddings::new(EmbedShape::new(s.b, s.t, s.p, m), exec::download(&out)?)
    }

    fn loss(&self, tokens: &Tokens<f32>) -> Result<f64, Error> {
        let _on = self.on()?;
        let _autocast = autocast::scope(self.precision);
        let s = self.batch(tokens)?;
        let raw = self.pool.upload(tokens.data());
        let pred = self.predict(&raw, s)?;
        let ls = LossShape { b: s.b, t: s.t, p: s.p, d: self.cfg.d_in, horizons: &self.horizons };
        let mut loss = self.pool.zeros_of::<f64>(1);
        crate::loss::mse_into(ls, &pred, &raw, &mut loss, &self.pool)?;
        Ok(exec::download(&loss)?[0])
    }

    fn loss_and_grads(&mut self, tokens: &Tokens<f32>) -> Result<f64, Error> {
        self.grads_of(tokens, None)
    }

    fn loss_and_grads_offset(&mut self, tokens: &Tokens<f32>, offset: &Forecasts<f32>) -> Result<f64, Error> {
        boldcast_core::check_offset(&self.cfg, tokens, offset)?;
        self.grads_of(tokens, Some(offset.data()))
    }

    /// The kernels' two-stage f64 sum over the flat gradient store, read back with the
    /// step's second synchronization. A failed launch gives NaN, which stops a trainer.
    fn grad_sq_norm(&self) -> f64 {
        let Ok(_on) = self.on() else { return f64::NAN };
        global_norm(self.grads.flat()).map_or(f64::NAN, |(sq, _)| sq)
    }

    /// One launch over the flat gradient store.
    fn scale_grads(&mut self, factor: f64) {
        // Entering fails only with a broken device, whose next launch or read reports it.
        let _on = self.on().ok();
        crate::optim::scale(self.grads.flat_mut(), factor).expect("an elementwise launch over the gradients is valid");
    }

    /// Only the core's Adam runs here (the crate's Adam kernel, moments held by the model);
    /// any other optimizer is refused by name before anything changes.
    fn apply_optimizer(&mut self, opt: &mut dyn Optimizer<f32>, lr: f64) -> Result<(), Error> {
        let _on = self.on()?;
        let Some(cfg) = opt.as_adam().map(|a| a.config().clone()) else {
            return Err(CudaError::Optimizer(opt.name().to_string()).into());
        };
        cfg.validate()?;
        let t = self.next_step(opt)?;
        opt.begin_step();
        let decayed = self.adam_runs(&cfg, t, lr)?;
        self.adam.t = t;
        self.adam.decayed = if cfg.weight_decay != 0.0 { decayed } else { 0 };
        Ok(())
    }

    /// The parameters, read back after the device is idle (an empty list should the device
    /// have failed: the trainer's next call reports it).
    fn state(&self) -> Vec<NamedTensor<f32>> {
        self.host().map_or_else(|_| Vec::new(), |_host| self.params.named())
    }

    fn grads(&self) -> Vec<NamedTensor<f32>> {
        self.host().map_or_else(|_| Vec::new(), |_host| self.grads.named())
    }

    fn load_state(&mut self, tensors: &[NamedTensor<f32>]) -> Result<(), Error> {
        let _host = self.host()?;
        self.params.load(tensors)
    }

    fn optimizer_state(&self) -> Option<(u64, Vec<Moments<f32>>)> {
        let _host = self.host().ok()?;
        let (m, v) = (self.adam.m.tensors(), self.adam.v.tensors());
        let entry = |((m, v), held): ((&[f32], &[f32]), &bool)| match held {
            true => Moments { m: m.to_vec(), v: v.to_vec() },
            false => Moments::default(),
        };
        Some((self.adam.t, m.zip(v).zip(&self.adam.held).map(entry).collect()))
    }

    /// One entry per parameter at most (missing or empty: not updated yet); a non-empty
    /// entry must have its tensor's size, or nothing changes and the error names it.
    fn restore_optimizer_state(&mut self, t: u64, moments: &[Moments<f32>]) -> Result<(), Error> {
        let specs = self.params.specs();
        if moments.len() > specs.len() {
            return Err(Error::shape("optimizer moments (tensors)", specs.len(), moments.len()));
        }
        for (s, mo) in specs.iter().zip(moments) {
            let empty = mo.m.is_empty() && mo.v.is_empty();
            if !empty && (mo.m.len() != s.numel() || mo.v.len() != s.numel()) {
                let reason =
                    format!("moments of {} and {} values, the tensor has {}", mo.m.len(), mo.v.len(), s.numel());
                return Err(Error::Param { name: s.name.clone(), reason });
            }
        }
        let _host = self.host()?;
        self.adam.reset()?;
        exec::sync()?;
        let (m, v) = (self.adam.m.tensors_mut(), self.adam.v.tensors_mut());
        for (((dm, dv), mo), held) in m.zip(v).zip(moments).zip(&mut self.adam.held) {
            if !mo.m.is_empty() {
                dm.copy_from_slice(&mo.m);
                dv.copy_from_slice(&mo.v);
                *held = true;
            }
        }
        self.adam.t = t;
        Ok(())
    }

    fn decayed_elements(&self) -> Option<u64> {
        Some(self.adam.decayed)
    }
}

/// The gradients are one flat buffer already, in the collective's layout. The all-reduce of
/// data-parallel training goes through a flat buffer of the model's pool, on a device its
/// memory, so that NCCL (`boldcast-comm`'s `nccl`) sums it on the device where it is; a
/// host collective (MPI, threads) reads it after a synchronization.
impl DataParallel<f32> for CudaModel {
    fn all_reduce_grads(&mut self, c: &dyn Collective, _scratch: &mut Vec<f32>) -> Result<(), Error> {
        if c.size() <= 1 {
            return Ok(());
        }
        let _host = self.host()?;
        let mut flat = self.pool.copy_of(self.grads.flat());
        exec::sync()?;
        all_reduce_mean(c, &mut flat)?;
        exec::copy(&flat, self.grads.flat_mut());
        Ok(())
    }

    fn grads_to_flat(&self, flat: &mut Vec<f32>) {
        flat.clear();
        if let Ok(_host) = self.host() {
            flat.extend_from_slice(self.grads.flat());
        }
    }

    fn grads_from_flat(&mut self, flat: &[f32]) -> Result<(), Error> {
        let _host = self.host()?;
        self.grads.copy_from_flat("gradients (flat)", flat)
    }
}
