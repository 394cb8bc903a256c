//! [`CpuModel`]: the BOLDcast forecaster of MODEL.md assembled from the blocks of this crate,
//! with the [`Model`] trait's forward, loss, hand-written backward, optimizer step and state
//! dictionary.
//!
//! ```text
//! tokens (B,T,P,D) -> embed_proj -> n_layers x [ x += Temporal(LayerNorm(x))  per parcel over time
//!                                                x += KnnAttention(x)       per (b, t) over parcels ]
//!                  -> final_norm (= embed) -> head -> (B,T,P,H,D)
//! ```
//!
//! The temporal mixer is the config's `temporal`: Mamba-1 (`"mamba"`, [`crate::mamba1`]) or
//! Mamba-2 / SSD (`"mamba2"`, [`crate::mamba2`]). Both have the same entry points (zeros,
//! tensors in state-dict order, forward, backward), so the model holds one `Mixer` per layer
//! and the layer loop does not know which it is: each operation dispatches with one `match`.
//!
//! Memory (per-layer recomputation): the backward needs, per layer, only the activation that
//! enters the layer and the one between its temporal and spatial halves (both `(B,T,P,M)`),
//! plus the final one; everything inside a layer (the LayerNorm outputs, the mixer's scan
//! states, the attention's q/k/v and weights) is recomputed in the backward, layer by layer,
//! and freed as soon as that layer is done. The mixer recomputes its own internals
//! ([`crate::mamba1::backward`], [`crate::mamba2::backward`]); the attention recomputes per
//! `(b, t)` group ([`crate::knn::backward`]). Keeping the middle activation costs one
//! `(B,T,P,M)` tensor per layer and saves a second mixer forward per layer in the backward.
//! While they fit a budget of 256 MiB for all layers, a Mamba-1 forward also leaves its scan
//! state every few steps ([`crate::mamba1::ScanCheckpoints`]), which spares the backward its
//! own pass over the states, and (within a second 256 MiB) its in_proj and x_proj outputs,
//! which spare it those two products; within a third, the attention leaves its activations
//! ([`crate::knn::KnnKept`]), which spare the backward the attention's forward. The gradients
//! are the same bits either way; only shapes over the budgets (`boldcast-demo`) recompute.
//!
//! Determinism: every parallel reduction uses the fixed block partitions of [`crate::par`]
//! (and the mixers' own); the contract this gives is stated in README.md, "Determinism".

use crate::knn::{self, KnnParams};
use crate::mamba1::{self, Mamba1Dims, Mamba1Params};
use crate::mamba2::{self, Mamba2Dims, Mamba2Params};
use crate::mixer::{BackwardIo, Seqs};
use crate::ops::linear::{Weight, WeightGrads};
use crate::ops::{layernorm, CpuElem};
use crate::par;
use boldcast_core::collective::{all_reduce_mean, Collective, Reduce};
use boldcast_core::memory::{ATTENTION_BUDGET, PROJECTION_BUDGET, SCAN_CHECKPOINT_BUDGET};
use boldcast_core::model::NamedTensor;
use boldcast_core::params::{ModelParams, ParamStore, WeightBias};
use boldcast_core::{
    Adjacency, DataParallel, EmbedShape, Embeddings, Error, ForecastShape, Forecasts, Model, ModelConfig, Optimizer,
    ParamMut, ParamSpec, Temporal, Tokens,
};

/// The sizes of the configured temporal mixer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum MixerDims {
    Mamba1(Mamba1Dims),
    Mamba2(Mamba2Dims),
}

/// One layer's temporal-mixer tensors (or gradients): `layers.{i}.mamba.mamba.*`.
#[derive(Debug)]
enum Mixer<S> {
    Mamba1(Mamba1Params<S>),
    Mamba2(Mamba2Params<S>),
}

impl MixerDims {
    fn from_config(cfg: &ModelConfig) -> Self {
        match cfg.temporal {
            Temporal::Mamba => Self::Mamba1(Mamba1Dims::from_config(cfg)),
            Temporal::Mamba2 => Self::Mamba2(Mamba2Dims::from_config(cfg)),
        }
    }

    /// `y = mixer(u)` over every parcel's sequence of the `(B, T, P, M)` activation `u`; with
    /// `keep` (what to keep and a buffer to reuse), a Mamba-1 mixer also returns its scan
    /// checkpoints for [`MixerDims::backward`].
    fn forward<E: CpuElem>(
        self,
        p: &Mixer<&[E]>,
        u: &[E],
        seqs: Seqs,
        y: &mut [E],
        keep: Option<(mamba1::Keep, Vec<E>)>,
    ) -> Option<mamba1::ScanCheckpoints<E>> {
        match (self, p) {
            (Self::Mamba1(d), Mixer::Mamba1(p)) => match keep {
                Some((what, reuse)) => Some(mamba1::forward_keeping(d, p, (u, y), seqs, what, reuse)),
                None => {
                    mamba1::forward(d, p, u, seqs, y);
                    None
                }
            },
            (Self::Mamba2(d), Mixer::Mamba2(p)) => {
                mamba2::forward(d, p, u, seqs, y);
                None
            }
            _ => unreachable!("every layer holds the mixer of the model's dims"),
        }
    }

    /// Bytes of scan checkpoints one layer's forward keeps (see [`Trace::scans`]).
    fn checkpoint_bytes<E>(self, seqs: Seqs) -> usize {
        match self {
            Self::Mamba1(d) => mamba1::checkpoint_bytes::<E>(d, seqs),
            Self::Mamba2(_) => 0,
        }
    }

    /// Bytes of projections one layer's forward keeps with [`mamba1::Keep::projections`].
    fn projection_bytes<E>(self, seqs: Seqs) -> usize {
        match self {
            Self::Mamba1(d) => mamba1::projection_bytes::<E>(d, seqs),
            Self::Mamba2(_) => 0,
        }
    }

    /// Overwrites `io.g_u` and accumulates the parameter gradients into `g` (the mixers' contract).
    fn backward<E: CpuElem>(
        self,
        p: &Mixer<&[E]>,
        seqs: Seqs,
        io: BackwardIo<'_, E>,
        g: &mut Mixer<&mut [E]>,
        ck: Option<&mamba1::ScanCheckpoints<E>>,
    ) {
        match (self, p, g) {
            (Self::Mamba1(d), Mixer::Mamba1(p), Mixer::Mamba1(g)) => mamba1::backward(d, p, seqs, io, g, ck),
            (Self::Mamba2(d), Mixer::Mamba2(p), Mixer::Mamba2(g)) => mamba2::backward(d, p, seqs, io, g),
            _ => unreachable!("every layer holds the mixer of the model's dims"),
        }
    }
}

/// One layer's tensors (or gradients).
struct LayerParams<S> {
    /// `layers.{i}.mamba.norm.{weight,bias}`.
    norm: WeightBias<S>,
    /// `layers.{i}.mamba.mamba.*`.
    mamba: Mixer<S>,
    /// `layers.{i}.knn.*`, absent when `k_neighbors == 0`.
    knn: Option<KnnParams<S>>,
}

/// Every tensor of the model (or its gradient) as the layers read it: views of a
/// [`ParamStore`], PyTorch layouts.
type Params<S> = ModelParams<S, LayerParams<S>>;

/// The groups of `tensors`, given in state-dict order ([`ModelConfig::param_specs`]).
fn groups<S>(cfg: &ModelConfig, dims: MixerDims, tensors: impl Iterator<Item = S>) -> Params<S> {
    ModelParams::take(cfg.n_layers, tensors, |it| {
        let norm = WeightBias::take(it);
        let mamba = match dims {
            MixerDims::Mamba1(_) => Mixer::Mamba1(Mamba1Params::take(it)),
            MixerDims::Mamba2(_) => Mixer::Mamba2(Mamba2Params::take(it)),
        };
        let knn = (cfg.k_neighbors > 0).then(|| KnnParams::take(it));
        LayerParams { norm, mamba, knn }
    })
}

/// What the forward keeps for the backward: per layer its input and (with attention) its
/// middle activation, each `(B,T,P,M)`, and the mixer's and the attention's own activations
/// when they fit their budgets.
struct Trace<E> {
    inputs: Vec<Vec<E>>,
    mids: Vec<Vec<E>>,
    /// Per layer, the scan checkpoints (and projections) its mixer's forward left (Mamba-1
    /// within [`SCAN_CHECKPOINT_BUDGET`] and [`PROJECTION_BUDGET`]), else `None`.
    scans: Vec<Option<mamba1::ScanCheckpoints<E>>>,
    /// Per layer with attention, the activations its forward left (within
    /// [`ATTENTION_BUDGET`]), else `None`.
    knns: Vec<Option<knn::KnnKept<E>>>,
}

/// The BOLDcast model on the CPU, generic over `f32` (training) and `f64` (gradient checks).
///
/// Built with [`CpuModel::new`]; used through [`Model`]. Either temporal mixer
/// (`"mamba"` or `"mamba2"`).
#[derive(Clone, Debug)]
pub struct CpuModel<E: CpuElem> {
    cfg: ModelConfig,
    adj: Option<Adjacency>,
    dims: MixerDims,
    /// The parameters and their gradients, state-dict order ([`ParamStore`]).
    params: ParamStore<E>,
    grads: ParamStore<E>,
    /// The large buffers of the last training step (activations, their gradients, scan
    /// checkpoints), reused by the next one.
    pool: Reused<Pool<E>>,
}

/// Buffers kept for reuse, found by length. A training step takes its `(B, T, P, M)`
/// activations and gradients (and the scan checkpoints) from here and gives them back when
/// done with them, so after the first step none is allocated, zeroed or page-faulted again:
/// above glibc's largest mmap threshold (32 MiB, `boldcast-demo`'s 512 MiB activations) every
/// fresh buffer costs a page fault per 4 KiB. Only buffers no longer needed are reused, and
/// only for a buffer of the same length, so the peak memory stays about that of the step's
/// live buffers (the few of other lengths, the predictions and the scan checkpoints, stay
/// allocated between uses).
struct Pool<E> {
    free: Vec<Vec<E>>,
}

impl<E> Default for Pool<E> {
    fn default() -> Self {
        Self { free: Vec::new() }
    }
}

impl<E: CpuElem> Pool<E> {
    /// A kept buffer of `len` values, if there is one.
    fn kept(&mut self, len: usize) -> Option<Vec<E>> {
        let i = self.free.iter().position(|v| v.len() == len)?;
        Some(self.free.swap_remove(i))
    }

    /// A buffer of `len` values with arbitrary contents (a kept one, else new zeros): for
    /// outputs that are overwritten.
    fn take(&mut self, len: usize) -> Vec<E> {
        self.kept(len).unwrap_or_else(|| par::zeros(len))
    }

    /// A buffer of `len` zeros.
    fn zeroed(&mut self, len: usize) -> Vec<E> {
        match self.kept(len) {
            Some(mut v) => {
                par::fill(&mut v, E::zero());
                v
            }
            None => par::zeros(len),
        }
    }

    /// A copy of `x`.
    fn copy_of(&mut self, x: &[E]) -> Vec<E> {
        let mut v = self.take(x.len());
        par::copy_into(x, &mut v);
        v
    }

    /// Keeps `v` for a later `take`.
    fn give(&mut self, v: Vec<E>) {
        if !v.is_empty() {
            self.free.push(v);
        }
    }
}

/// Memory a model keeps from one training step to the next for reuse; a clone of the model
/// starts without it (it holds no state), and `Debug` does not print it.
#[derive(Default)]
struct Reused<T>(T);

impl<T> std::fmt::Debug for Reused<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reused(..)")
    }
}

impl<T: Default> Clone for Reused<T> {
    fn clone(&self) -> Self {
        Self(T::default())
    }
}

impl<E: CpuElem> CpuModel<E> {
    /// A model with every parameter drawn from `ChaCha8Rng::seed_from_u64(seed)` as MODEL.md,
    /// "Initialization" (the core's [`ParamStore::initialize`]); the same seed gives the same model.
    ///
    /// Errors (each naming the value): an invalid `cfg` ([`ModelConfig::validate`], which
    /// also checks that `headdim` divides `d_inner` for Mamba-2); `k_neighbors > 0` without an
    /// adjacency or with one of another `k`; an adjacency with `k_neighbors == 0`.
    pub fn new(cfg: ModelConfig, adjacency: Option<Adjacency>, seed: u64) -> Result<Self, Error> {
        cfg.validate()?;
        match (&adjacency, cfg.k_neighbors) {
            (None, 0) => {}
            (Some(a), 0) => {
                return Err(Error::config(
                    "model.k_neighbors",
                    0,
                    format!("an adjacency with k = {} was given, but k_neighbors = 0 means no attention", a.k()),
                ))
            }
            (None, k) => {
                return Err(Error::config("model.k_neighbors", k, "needs an adjacency (P, k) for the attention"))
            }
            (Some(a), k) if a.k() != k => {
                return Err(Error::config("adjacency.k", a.k(), format!("must equal model.k_neighbors = {k}")))
            }
            _ => {}
        }
        let dims = MixerDims::from_config(&cfg);
        let mut params = ParamStore::zeros(cfg.param_specs());
        params.initialize(seed)?;
        let grads = ParamStore::zeros(cfg.param_specs());
        Ok(Self { cfg, adj: adjacency, dims, params, grads, pool: Reused::default() })
    }

    /// The parameters as the layers read them.
    fn view(&self) -> Params<&[E]> {
        groups(&self.cfg, self.dims, self.params.tensors())
    }

    /// The spatial neighbourhood the model was built with (`None` when `k_neighbors == 0`).
    pub fn adjacency(&self) -> Option<&Adjacency> {
        self.adj.as_ref()
    }

    /// The parameter names and shapes, state-dict order.
    pub fn param_specs(&self) -> &[ParamSpec] {
        self.params.specs()
    }

    /// Checks tokens against the model and returns `(B, T, P)`.
    fn check(&self, tokens: &Tokens<E>) -> Result<(usize, usize, usize), Error> {
        let s = tokens.shape();
        self.cfg.check_tokens(&s)?;
        if let Some(a) = &self.adj {
            if s.parcels != a.parcels() {
                return Err(Error::shape("tokens.parcels (the adjacency's P)", a.parcels(), s.parcels));
            }
        }
        Ok((s.batch, s.time, s.parcels))
    }

    /// embed_proj and the layers: the activation before `final_norm`, and with `keep` the
    /// per-layer activations the backward needs. Buffers come from `pool` (see [`Pool`]).
    fn trunk(&self, tokens: &[E], b: usize, t: usize, p: usize, keep: bool, pool: &mut Pool<E>) -> (Vec<E>, Trace<E>) {
        let (m, d, rows) = (self.cfg.d_model, self.cfg.d_in, b * t * p);
        let prm = self.view();
        let mut x = pool.take(rows * m);
        par::linear_forward(tokens, rows, d, prm.embed.w, Some(prm.embed.b), m, &mut x);
        let mut tr = Trace { inputs: Vec::new(), mids: Vec::new(), scans: Vec::new(), knns: Vec::new() };
        let n_layers = prm.layers.len();
        let seqs = Seqs::new(b, t, p);
        let scan_bytes = self.dims.checkpoint_bytes::<E>(seqs);
        let keep_scans = keep && scan_bytes > 0 && n_layers * scan_bytes <= SCAN_CHECKPOINT_BUDGET;
        let proj_bytes = self.dims.projection_bytes::<E>(seqs);
        let what = mamba1::Keep { projections: n_layers * proj_bytes <= PROJECTION_BUDGET };
        let kept_bytes = scan_bytes + if what.projections { proj_bytes } else { 0 };
        let knn_bytes = self.adj.as_ref().map_or(0, |adj| knn::kept_bytes::<E>(m, adj, b * t));
        let keep_knn = keep && n_layers * knn_bytes <= ATTENTION_BUDGET;
        let (mut u, mut y) = (pool.take(rows * m), pool.take(rows * m));
        // `x += y`, except that with `keep` the sum goes to a new buffer and the old `x` is
        // kept as it is (one pass instead of a copy and an addition).
        let residual = |x: &mut Vec<E>, y: &[E], kept: &mut Vec<Vec<E>>, pool: &mut Pool<E>| {
            if keep {
                let mut sum = pool.take(x.len());
                par::add(x, y, &mut sum);
                kept.push(std::mem::replace(x, sum));
            } else {
                par::add_into(x, y);
            }
        };
        for l in &prm.layers {
            layernorm::forward(&x, rows, m, l.norm.w, l.norm.b, &mut u);
            let reuse = keep_scans.then(|| (what, pool.take(kept_bytes / size_of::<E>())));
            let ck = self.dims.forward(&l.mamba, &u, seqs, &mut y, reuse);
            if keep {
                tr.scans.push(ck);
            }
            residual(&mut x, &y, &mut tr.inputs, pool);
            if let (Some(kp), Some(adj)) = (&l.knn, &self.adj) {
                if keep_knn {
                    let reuse = pool.take(knn_bytes / size_of::<E>());
                    tr.knns.push(Some(knn::forward_keeping(m, adj, kp, (&x, b * t), &mut y, reuse)));
                } else {
                    knn::forward(m, adj, kp, &x, b * t, &mut y);
                    tr.knns.push(None);
                }
                residual(&mut x, &y, &mut tr.mids, pool);
            }
        }
        pool.give(u);
        pool.give(y);
        (x, tr)
    }

    /// The final-norm embedding of the trunk output `x`.
    fn final_norm(&self, x: &[E], rows: usize, pool: &mut Pool<E>) -> Vec<E> {
        let m = self.cfg.d_model;
        let mut e = pool.take(rows * m);
        let norm = &self.view().final_norm;
        layernorm::forward(x, rows, m, norm.w, norm.b, &mut e);
        e
    }

    /// The head: `(rows, M) -> (rows, H*D)`, which is `(B,T,P,H,D)` row-major.
    fn head(&self, e: &[E], rows: usize, pool: &mut Pool<E>) -> Vec<E> {
        let (m, hd) = (self.cfg.d_model, self.cfg.n_horizons() * self.cfg.d_in);
        let mut pred = pool.take(rows * hd);
        let head = &self.view().head;
        par::linear_forward(e, rows, m, head.w, Some(head.b), hd, &mut pred);
        pred
    }

    /// The loss (MSE over `pred[:, :T_valid]`, accumulated in f64) and, with `grad`, its
    /// gradient with respect to `pred` (zero for `t >= T_valid`).
    fn loss_of(&self, pred: &[E], tokens: &[E], b: usize, t: usize, p: usize, grad: Option<&mut [E]>) -> f64 {
        let (d, hz) = (self.cfg.d_in, &self.cfg.horizons);
        let nh = hz.len();
        let tv = t - self.cfg.max_horizon();
        let count = (b * tv * p * nh * d) as f64;
        let scale = E::of(2.0 / count);
        let mut grad = grad;
        if let Some(g) = grad.as_deref_mut() {
            g.fill(E::zero());
        }
        let mut sum = 0.0f64;
        for bi in 0..b {
            for ti in 0..tv {
                for pi in 0..p {
                    let base = ((bi * t + ti) * p + pi) * nh * d;
                    for (hi, &h) in hz.iter().enumerate() {
                        let tgt = ((bi * t + ti + h) * p + pi) * d;
                        for j in 0..d {
                            let diff = pred[base + hi * d + j] - tokens[tgt + j];
                            sum += diff.f64() * diff.f64();
                            if let Some(g) = grad.as_deref_mut() {
                                g[base + hi * d + j] = scale * diff;
                            }
                        }
                    }
                }
            }
        }
        sum / count
    }

    /// The forecast rows `(B T P, H D)` of `tokens` without gradients, and `(B, T, P)`.
    fn predict(&self, tokens: &Tokens<E>) -> Result<PredRows<E>, Error> {
        let (b, t, p) = self.check(tokens)?;
        let pool = &mut Pool::default();
        let (x, _) = self.trunk(tokens.data(), b, t, p, false, pool);
        let e = self.final_norm(&x, b * t * p, pool);
        Ok((self.head(&e, b * t * p, pool), (b, t, p)))
    }

    /// Forward and backward of the forecasts plus `offset` (none: the plain loss), overwriting
    /// the gradients.
    fn grads_of(&mut self, tokens: &Tokens<E>, offset: Option<&[E]>) -> Result<f64, Error> {
        let (b, t, p) = self.check(tokens)?;
        let (m, d, hd) = (self.cfg.d_model, self.cfg.d_in, self.cfg.n_horizons() * self.cfg.d_in);
        let rows = b * t * p;
        self.grads.zero();
        let pool = &mut std::mem::take(&mut self.pool.0);
        let (x_last, mut tr) = self.trunk(tokens.data(), b, t, p, true, pool);
        let e = self.final_norm(&x_last, rows, pool);
        let mut pred = self.head(&e, rows, pool);
        for (v, &o) in pred.iter_mut().zip(offset.unwrap_or_default()) {
            *v += o;
        }
        // loss_of zeroes the gradient rows it does not write.
        let mut g_pred = pool.take(rows * hd);
        let loss = self.loss_of(&pred, tokens.data(), b, t, p, Some(&mut g_pred));
        pool.give(pred);

        let prm = groups(&self.cfg, self.dims, self.params.tensors());
        let mut grd = groups(&self.cfg, self.dims, self.grads.tensors_mut());
        // head, then final_norm: g is the gradient with respect to the trunk output.
        let mut g_e = pool.take(rows * m);
        let head = Weight { w: prm.head.w, inp: m, out: hd };
        let g_head = WeightGrads { w: grd.head.w, b: grd.head.b };
        par::linear_backward(&e, rows, head, &g_pred, g_head, Some(&mut g_e));
        pool.give(e);
        pool.give(g_pred);
        // layernorm::backward adds to its input gradient.
        let mut g = pool.zeroed(rows * m);
        let lg = layernorm::Grads { x: &mut g, w: grd.final_norm.w, b: grd.final_norm.b };
        layernorm::backward(&x_last, rows, m, prm.final_norm.w, &g_e, lg);
        pool.give(x_last);
        pool.give(g_e);

        let mut g_u = pool.take(rows * m);
        let mut u = pool.take(rows * m);
        for (li, (l, lg)) in prm.layers.iter().zip(grd.layers.iter_mut()).enumerate().rev() {
            if let (Some(kp), Some(kg), Some(adj)) = (&l.knn, &mut lg.knn, &self.adj) {
                // x_out = x_mid + attn(x_mid): g_mid = g_out + (attention path).
                let x_mid = tr.mids.pop().expect("one middle activation per layer with attention");
                let mut g_mid = pool.copy_of(&g);
                let kept = tr.knns.pop().expect("one attention entry per layer with attention");
                let io = knn::KnnGrads { g_out: &g, g_x: &mut g_mid, grads: kg };
                knn::backward_kept(m, adj, kp, (&x_mid, b * t), io, kept.as_ref());
                if let Some(kept) = kept {
                    pool.give(kept.into_buffer());
                }
                pool.give(std::mem::replace(&mut g, g_mid));
                pool.give(x_mid);
            }
            // x_mid = x_in + mixer(LN(x_in)): g_in = g_mid + LN'(mixer'(g_mid)).
            let x_in = tr.inputs.pop().expect("one input activation per layer");
            debug_assert_eq!(tr.inputs.len(), li);
            layernorm::forward(&x_in, rows, m, l.norm.w, l.norm.b, &mut u);
            let ck = tr.scans.pop().expect("one scan entry per layer");
            let io = BackwardIo { u: &u, g_y: &g, g_u: &mut g_u };
            self.dims.backward(&l.mamba, Seqs::new(b, t, p), io, &mut lg.mamba, ck.as_ref());
            if let Some(ck) = ck {
                pool.give(ck.into_buffer());
            }
            let ng = layernorm::Grads { x: &mut g, w: &mut *lg.norm.w, b: &mut *lg.norm.b };
            layernorm::backward(&x_in, rows, m, l.norm.w, &g_u, ng);
            pool.give(x_in);
        }
        let embed = Weight { w: prm.embed.w, inp: d, out: m };
        let g_embed = WeightGrads { w: grd.embed.w, b: grd.embed.b };
        par::linear_backward(tokens.data(), rows, embed, &g, g_embed, None);
        for v in [g, g_u, u] {
            pool.give(v);
        }
        self.pool.0 = std::mem::take(pool);
        Ok(loss)
    }
}

/// Forecast rows and the `(B, T, P)` they cover.
type PredRows<E> = (Vec<E>, (usize, usize, usize));

impl<E: CpuElem> Model<E> for CpuModel<E> {
    fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    fn forward(&self, tokens: &Tokens<E>) -> Result<Forecasts<E>, Error> {
        let (pred, (b, t, p)) = self.predict(tokens)?;
        Forecasts::new(ForecastShape::new(b, t, p, self.cfg.n_horizons(), self.cfg.d_in), pred)
    }

    fn embed(&self, tokens: &Tokens<E>) -> Result<Embeddings<E>, Error> {
        let (b, t, p) = self.check(tokens)?;
        let pool = &mut Pool::default();
        let (x, _) = self.trunk(tokens.data(), b, t, p, false, pool);
        Embeddings::new(EmbedShape::new(b, t, p, self.cfg.d_model), self.final_norm(&x, b * t * p, pool))
    }

    fn loss(&self, tokens: &Tokens<E>) -> Result<f64, Error> {
        let (pred, (b, t, p)) = self.predict(tokens)?;
        Ok(self.loss_of(&pred, tokens.data(), b, t, p, None))
    }

    fn loss_and_grads(&mut self, tokens: &Tokens<E>) -> Result<f64, Error> {
        self.grads_of(tokens, None)
    }

    fn loss_and_grads_offset(&mut self, tokens: &Tokens<E>, offset: &Forecasts<E>) -> Result<f64, Error> {
        boldcast_core::check_offset(&self.cfg, tokens, offset)?;
        self.grads_of(tokens, Some(offset.data()))
    }

    fn grad_sq_norm(&self) -> f64 {
        self.grads.flat().iter().map(|&v| v.f64() * v.f64()).sum()
    }

    fn scale_grads(&mut self, factor: f64) {
        let f = E::of(factor);
        for v in self.grads.flat_mut() {
            *v *= f;
        }
    }

    fn apply_optimizer(&mut self, opt: &mut dyn Optimizer<E>, lr: f64) -> Result<(), Error> {
        opt.begin_step();
        let (specs, grads) = (self.grads.specs(), self.grads.tensors());
        for (index, ((spec, value), grad)) in specs.iter().zip(self.params.tensors_mut()).zip(grads).enumerate() {
            opt.update(ParamMut { index, name: &spec.name, shape: &spec.shape, value, grad }, lr);
        }
        Ok(())
    }

    fn state(&self) -> Vec<NamedTensor<E>> {
        self.params.named()
    }

    fn grads(&self) -> Vec<NamedTensor<E>> {
        self.grads.named()
    }

    fn load_state(&mut self, tensors: &[NamedTensor<E>]) -> Result<(), Error> {
        self.params.load(tensors)
    }
}

/// The gradients are one flat buffer already, in the collective's layout: the ranks average
/// it in place, with no copy through the scratch buffer.
impl<E: CpuElem> DataParallel<E> for CpuModel<E> {
    fn all_reduce_grads(&mut self, c: &dyn Collective, _scratch: &mut Vec<E>) -> Result<(), Error>
    where
        E: Reduce,
    {
        all_reduce_mean(c, self.grads.flat_mut())
    }

    fn grads_to_flat(&self, flat: &mut Vec<E>) {
        flat.clear();
        flat.extend_from_slice(self.grads.flat());
    }

    fn grads_from_flat(&mut self, flat: &[E]) -> Result<(), Error> {
        self.grads.copy_from_flat("gradients (flat)", flat)
    }
}
