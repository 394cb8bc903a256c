//! The memory model of a training step of the CUDA design (Mamba-1 trunk): the peak bytes the
//! device allocator (the [`crate::pool::Pool`]) must provide, term by term, as a function of the
//! model's configuration, the step's shape (batch B, window, parcels P), the scan's chunk `q`,
//! the sequences per recompute group `S` and the precision. With `rows = B T P` tokens,
//! `T = window / D`, `a = 1` with the spatial attention (k > 0), `Pn` parameters, `e` the
//! bytes of an activation (4 in f32, 2 in bf16) and `blocks = ceil(Di / 64)` (the scan's
//! blocks per sequence):
//!
//! ```text
//! params      16 Pn              f32 weights, gradients, Adam's two moments (f32 in both)
//! kept        e rows M (L (1 + a) + 1)
//!             each layer's input (and with attention its middle) and the trunk's output,
//!             kept by the forward for the backward's recomputation
//! ckpts       4 L B P ceil(T / q) N Di      the scan's chunk-start states (f32 in both)
//! grads       2 e rows M         the gradient flowing into and out of the layer being
//!             backpropagated (g_out, g_u)
//! head        4 rows (2 H D + D) the predictions, their gradient and the tokens (f32)
//! workspace   the recomputation of one group of S sequences (S T rows), at its peak, the
//!             scan backward (mamba1::layer::backward_group):
//!             e S T (M + 10 Di + R + 4 N)   LayerNorm out, x, z, conv pre-act, SiLU out,
//!                 dt pre-act, dt, dr, Bc, Cc, the scan's output gradient and its x, dt, z, Bc,
//!                 Cc gradients
//!             + 4 S T 2 N blocks    the scan's per-block Bc/Cc gradient partials (f32)
//!             + 4 S (q + 1) N Di + 4 S Di + 8 Di N + 4 Di   the chunk's recomputed states,
//!                 the per-sequence A and D partials, A and its gradient, D's gradient
//!             with attention, its recomputation over the same S T rows:
//!             e S T (12 M + 2 k)    LayerNorm out, q/k/v, weights, output and their gradients
//! slack       workspace / 8      the pool's allowance for buffers lent above their request
//!                                (best fit up to twice the size) and the last, short group
//! ```
//!
//! In bf16, `kept`, `grads` and the activation part of `workspace` halve (e = 2); parameters,
//! moments, scan states and every reduction's partials stay f32. The parameters' term uses the
//! count of the configuration (every tensor, the attention's and the head's included).

use crate::mamba1::layer::LayerDims;
use crate::mamba1::SCAN_BLOCK;
use crate::pool::F32;
use boldcast_core::config::ModelConfig;

/// The precision of activations and matrix-product inputs (defined with the autocast mode,
/// re-exported here for the memory model's callers).
pub use crate::autocast::Precision;

/// The step's shape and how it is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepShape {
    /// Windows per step, B.
    pub batch: usize,
    /// TRs per window.
    pub window: usize,
    /// Parcels, P.
    pub parcels: usize,
    /// Steps per scan chunk.
    pub q: usize,
    /// Sequences per recompute group, S.
    pub group: usize,
}

/// The predicted peak, term by term (bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Breakdown {
    /// Weights, gradients, Adam's moments.
    pub params: usize,
    /// The kept layer inputs (and middles) and the trunk's output.
    pub kept: usize,
    /// Every layer's scan checkpoints.
    pub ckpts: usize,
    /// The gradient into and out of the layer being backpropagated.
    pub grads: usize,
    /// Predictions, their gradient, the tokens.
    pub head: usize,
    /// One group's recomputation at its peak.
    pub workspace: usize,
    /// The pool's allowance.
    pub slack: usize,
}

impl Breakdown {
    /// The sum of the terms: the predicted peak.
    pub fn total(&self) -> usize {
        self.params + self.kept + self.ckpts + self.grads + self.head + self.workspace + self.slack
    }
}

/// Bytes of the Mamba-1 layer's recomputation workspace for one group of `s` sequences.
pub fn layer_workspace(z: &LayerDims, s: usize, prec: Precision) -> usize {
    let rows = s * z.time;
    let (m, di, n) = (z.m, z.di, z.n);
    let blocks = di.div_ceil(SCAN_BLOCK as usize);
    let acts = prec.act() * rows * (m + 10 * di + z.r + 4 * n);
    let partials = F32 * rows * 2 * n * blocks;
    let states = F32 * (s * (z.q + 1) * n * di + s * di + 2 * di * n + di);
    acts + partials + states
}

/// The layer's sizes under `cfg` for a step of `time` steps.
pub fn layer_dims(cfg: &ModelConfig, time: usize, shape: &StepShape) -> LayerDims {
    let m = cfg.d_model;
    LayerDims {
        m,
        di: cfg.expand * m,
        n: cfg.d_state,
        k: cfg.d_conv,
        r: m.div_ceil(16),
        time,
        q: shape.q.min(time).max(1),
        group: shape.group,
    }
}

/// The predicted peak of one training step, term by term (the module's formula).
pub fn step_peak(cfg: &ModelConfig, shape: &StepShape, prec: Precision) -> Breakdown {
    let time = shape.window / cfg.d_in.max(1);
    let z = layer_dims(cfg, time, shape);
    let (e, l, m) = (prec.act(), cfg.n_layers, z.m);
    let seqs = shape.batch * shape.parcels;
    let rows = seqs * time;
    let attn = usize::from(cfg.k_neighbors > 0);
    let s = shape.group.clamp(1, seqs.max(1));
    let hd = cfg.horizons.len() * cfg.d_in;
    let mut workspace = layer_workspace(&z, s, prec);
    workspace += attn * e * s * time * (12 * m + 2 * cfg.k_neighbors);
    Breakdown {
        params: 16 * cfg.n_params(),
        kept: e * rows * m * (l * (1 + attn) + 1),
        ckpts: F32 * l * z.ckpt_len(seqs),
        grads: 2 * e * rows * m,
        head: F32 * rows * (2 * hd + cfg.d_in),
        workspace,
        slack: workspace / 8,
    }
}
