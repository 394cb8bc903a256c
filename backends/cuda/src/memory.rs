//! The memory model of a training step of the CUDA design (Mamba-1 or Mamba-2 trunk, by the
//! configuration's `temporal`): the peak bytes the device allocator (the [`crate::pool::Pool`])
//! must provide, term by term, as a function of the model's configuration, the step's shape
//! (batch B, window, parcels P), the scan's chunk `q`, the sequences per recompute group `S`
//! and the precision. With `rows = B T P` tokens, `T = window / D`, `a = 1` with the spatial
//! attention (k > 0), `Pn` parameters, `e` the bytes of a kept activation (4 in f32, 2 in
//! bf16: kept activations are packed, [`crate::stored`]), `u` the bytes of a group's kept
//! input unpacked for its recomputation (0 in f32, where it is read in place; 4 in bf16) and
//! `blocks = ceil(Di / 64)` (the scan's blocks per sequence, both mixers):
//!
//! ```text
//! params      16 Pn              f32 weights, gradients, Adam's two moments (f32 in both)
//! kept        e rows M L (1 + a) + 4 rows M
//!             each layer's input (and with attention its middle), kept by the forward for
//!             the backward's recomputation, and the trunk's output (f32: the loss reads it)
//! ckpts       4 S ceil(T / q) N Di   one group's chunk-start states, written by the
//!             backward's rerun of the scan (the forward keeps none)
//! grads       2 4 rows M         the gradient flowing into and out of the layer being
//!             backpropagated (g_out, g_u; f32 in both)
//! head        4 rows (2 H D + D) the predictions, their gradient and the tokens (f32)
//! workspace   the recomputation of one group of S sequences (S T rows), at its peak, the
//!             scan backward (the Mamba-1 mixer's backward), every buffer f32:
//!             4 S T (M + 10 Di + R + 4 N) + u S T M   LayerNorm out, x, z, conv pre-act,
//!                 SiLU out, dt pre-act, dt, dr, Bc, Cc, the scan's output gradient and its x,
//!                 dt, z, Bc, Cc gradients; the unpacked input
//!             + 4 S T 2 N blocks    the scan's per-block Bc/Cc gradient partials
//!             + 4 S (q + 1) N Di + 4 S Di + 8 Di N + 4 Di   the chunk's recomputed states,
//!                 the per-sequence A and D partials, A and its gradient, D's gradient
//!             with attention, its recomputation a pass of `spatial_chunk(S, T, P)` (b, t)
//!             groups at a time, Ra = P spatial_chunk(S, T, P) <= max(S T, P) rows:
//!             4 Ra (12 M + 2 k) + u Ra M   LayerNorm out, q/k/v, weights, output and their
//!                 gradients; the unpacked input
//! slack       workspace / 8      the pool's allowance for buffers lent above their request
//!                                (a size's class: the first buffer to serve it, up to twice
//!                                its size) and the last, short group
//! ```
//!
//! With Mamba-2 layers (`temporal = "mamba2"`: nh heads of `Pd = Di / nh` channels, one group
//! of Bc/Cc) `params`, `kept`, `grads` and `head` are as above; the scan's terms and the slack
//! are (the attention's workspace as above, and its eighth in the slack):
//!
//! ```text
//! ckpts       4 S ceil(T / q) N Di   one group's chunk-start states, (nh, Pd, N) = N Di per
//!             sequence and chunk: the count of Mamba-1's
//! workspace   the recomputation of one group of S sequences (S T rows), at the higher of the
//!             backward's two highs (the Mamba-2 mixer's backward), every buffer f32 (e = 4
//!             below) plus the unpacked input u S T M at both; at the scan backward:
//!             e S T (M + 7 Di + 8 N + 3 nh)   LayerNorm out, z, xBC, conv pre-act, x, Bc, Cc,
//!                 dt pre-act, dt, the gated norm's y and z gradients, the scan's x, dt, Bc, Cc
//!                 gradients
//!             + 4 S T Di + 4 S T 2 N blocks   the dt gradient's per-channel terms, the
//!                 per-block Bc/Cc gradient partials (f32)
//!             + 4 S q N Di + 8 S Di + 12 nh   the chunk's recomputed states (q steps), the
//!                 per-sequence A and D partials, A and the A and D gradients
//!             at the convolution backward (the higher only where q N Di is small against T N):
//!             e S T (M + 8 Di + 12 N + 2 nh)  LayerNorm out, z, xBC, conv pre-act, x, Bc, Cc,
//!                 dt, the z and dt pre-act gradients, the joined SiLU output gradient, the
//!                 conv pre-act and xBC gradients
//!             + 4 ceil(S T / 128) (K + 1)(Di + 2 N) + 12 nh   the convolution's per-chunk
//!                 weight and bias partials, A and the A and D gradients
//! slack       the lower high less the buffers live at both,
//!             e S T (M + 5 Di + 6 N + nh) + 12 nh   (LayerNorm out, z, xBC, conv pre-act, x,
//!                 Bc, Cc, dt, the z gradient; A and the A and D gradients)
//!             the pool keeps every buffer it lent, and the scan's states and partials and
//!             the convolution backward's (Di + 2 N)-wide gradients do not serve each other's
//!             requests, so it holds the buffers of both highs
//! ```
//!
//! The layer's other highs (the recomputation, the gated norm's backward) are below the scan
//! backward's in both precisions. The mixer's backward holds z, x, Bc, Cc and dt to its end,
//! past the convolution backward (it destructures its internals with `_` for them, which
//! does not drop them), so both highs count them: the model is of the code as written. The buffers the pool lends above their
//! request (best fit up to twice the size) are not counted: over one layer they add 0 to 6 %
//! of the workspace, and the two highs' buffers sharing some requests takes about as much off
//! (tests/cuda/memory.rs). A last group under half the others' size cannot reuse theirs and
//! allocates its own (up to its own share more); a step of `B P` a multiple of S has none.
//!
//! In bf16 the kept layer inputs and middles halve (e = 2) and each recomputation unpacks its
//! group's rows to f32; parameters, moments, scan states, the gradients flowing between layers,
//! the workspace and every reduction's partials stay f32 (the kernels compute in f32; a bf16
//! product's operands are packed into 2-byte temporaries). The parameters' term uses the count
//! of the configuration (every tensor, the attention's and the head's included).
//! `tests/cuda/memory.rs` holds a whole `CudaModel` step's pool peak to this prediction.

use crate::launch::ROWS_PER_CHUNK;
use crate::mamba1::layer::LayerDims;
use crate::mamba1::SCAN_BLOCK;
use crate::mamba2::layer::Layer2Dims;
use crate::pool::F32;
use boldcast_core::config::{ModelConfig, Temporal};

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
    let acts = F32 * rows * (m + 10 * di + z.r + 4 * n) + unpacked(rows * m, prec);
    let partials = F32 * rows * 2 * n * blocks;
    let states = F32 * (s * (z.q + 1) * n * di + s * di + 2 * di * n + di);
    acts + partials + states
}

/// Bytes of a group's kept input unpacked to f32 for its recomputation: only a bf16 one is
/// (an f32 one is read where it is kept).
fn unpacked(elems: usize, prec: Precision) -> usize {
    match prec {
        Precision::F32 => 0,
        Precision::Bf16 => F32 * elems,
    }
}

/// The Mamba-1 layer's sizes under `cfg` for a step of `time` steps.
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

/// The two highs of the Mamba-2 layer's backward over one group (bytes, the module's
/// formula): at its scan backward, at its convolution backward, and the buffers live at both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Highs2 {
    /// Live at the scan backward's high.
    pub scan: usize,
    /// Live at the convolution backward's high.
    pub conv: usize,
    /// Live at both (the recomputed internals the backward still holds, A and its gradients).
    pub shared: usize,
}

impl Highs2 {
    /// The in-use high, the higher of the two: the layer's workspace term.
    pub fn workspace(&self) -> usize {
        self.scan.max(self.conv)
    }
    /// The lower high's own buffers, which the pool holds besides: the layer's slack term.
    pub fn slack(&self) -> usize {
        self.scan.min(self.conv) - self.shared
    }
}

/// The two highs of the Mamba-2 layer's backward for one group of `s` sequences.
pub fn layer2_highs(z: &Layer2Dims, s: usize, prec: Precision) -> Highs2 {
    let rows = s * z.time;
    let (e, m, di, n, nh) = (F32, z.m, z.di, z.n, z.nh);
    let input = unpacked(rows * m, prec);
    let blocks = di.div_ceil(crate::mamba2::SCAN_BLOCK as usize);
    let params = F32 * 3 * nh;
    let scan_acts = e * rows * (m + 7 * di + 8 * n + 3 * nh);
    let scan_f32 = F32 * (rows * di + rows * 2 * n * blocks + s * z.q * n * di + 2 * s * di);
    let conv_acts = e * rows * (m + 8 * di + 12 * n + 2 * nh);
    let conv_f32 = F32 * rows.div_ceil(ROWS_PER_CHUNK) * (z.k + 1) * z.conv_dim();
    Highs2 {
        scan: params + input + scan_acts + scan_f32,
        conv: params + input + conv_acts + conv_f32,
        shared: params + input + e * rows * (m + 5 * di + 6 * n + nh),
    }
}

/// Bytes of the Mamba-2 layer's recomputation workspace for one group of `s` sequences: the
/// higher of its backward's two highs ([`Highs2::workspace`]).
pub fn layer2_workspace(z: &Layer2Dims, s: usize, prec: Precision) -> usize {
    layer2_highs(z, s, prec).workspace()
}

/// The Mamba-2 layer's sizes under `cfg` for a step of `time` steps.
pub fn layer2_dims(cfg: &ModelConfig, time: usize, shape: &StepShape) -> Layer2Dims {
    Layer2Dims {
        m: cfg.d_model,
        di: cfg.d_inner(),
        n: cfg.d_state,
        k: cfg.d_conv,
        nh: cfg.nheads(),
        time,
        q: shape.q.min(time).max(1),
        group: shape.group,
    }
}

/// One temporal layer's terms under `cfg`, by `cfg.temporal`: the elements of its
/// checkpoints for `seqs` sequences, and the bytes of its workspace and its slack for a group
/// of `s` (Mamba-1: the workspace's eighth; Mamba-2: [`Highs2::slack`]).
pub fn temporal_terms(
    cfg: &ModelConfig,
    shape: &StepShape,
    seqs: usize,
    s: usize,
    prec: Precision,
) -> (usize, usize, usize) {
    let time = shape.window / cfg.d_in.max(1);
    match cfg.temporal {
        Temporal::Mamba => {
            let z = layer_dims(cfg, time, shape);
            let ws = layer_workspace(&z, s, prec);
            (z.ckpt_len(seqs), ws, ws / 8)
        }
        Temporal::Mamba2 => {
            let z = layer2_dims(cfg, time, shape);
            let h = layer2_highs(&z, s, prec);
            (z.ckpt_len(seqs), h.workspace(), h.slack())
        }
    }
}

/// The `(b, t)` groups of P parcels the spatial mixer recomputes per pass: as many as fill the
/// `group T` rows of one group of the temporal mixer's sequences, at least one.
pub fn spatial_chunk(group: usize, time: usize, parcels: usize) -> usize {
    (group.max(1) * time / parcels.max(1)).max(1)
}

/// The scan chunk `q` in `1..=T` whose predicted step peak ([`step_peak`]) is the least for
/// this step (`shape.q` is ignored; the smallest of equal ones): checkpoints every `q` steps
/// keep `S ceil(T / q) N Di` states of the group being recomputed, one chunk's recomputation
/// holds `S (q + 1) N Di`, so the best `q` is about `sqrt(T)`. [`crate::CudaModel`] takes this
/// chunk for each batch shape; for boldcast-demo it is 16.
pub fn best_chunk(cfg: &ModelConfig, shape: &StepShape, prec: Precision) -> usize {
    let time = (shape.window / cfg.d_in.max(1)).max(1);
    (1..=time).min_by_key(|&q| (step_peak(cfg, &StepShape { q, ..*shape }, prec).total(), q)).unwrap_or(1)
}

/// The predicted peak of one training step, term by term (the module's formula), with the
/// temporal mixer's terms of `cfg.temporal`.
pub fn step_peak(cfg: &ModelConfig, shape: &StepShape, prec: Precision) -> Breakdown {
    let time = shape.window / cfg.d_in.max(1);
    let (e, l, m) = (prec.act(), cfg.n_layers, cfg.d_model);
    let seqs = shape.batch * shape.parcels;
    let rows = seqs * time;
    let attn = usize::from(cfg.k_neighbors > 0);
    let s = shape.group.clamp(1, seqs.max(1));
    let hd = cfg.horizons.len() * cfg.d_in;
    let (ckpt_len, layer_ws, layer_slack) = temporal_terms(cfg, shape, s, s, prec);
    let attn_rows = spatial_chunk(s, time, shape.parcels) * shape.parcels;
    let attn_ws = attn * (F32 * attn_rows * (12 * m + 2 * cfg.k_neighbors) + unpacked(attn_rows * m, prec));
    Breakdown {
        params: 16 * cfg.n_params(),
        kept: e * rows * m * l * (1 + attn) + F32 * rows * m,
        ckpts: F32 * ckpt_len,
        grads: 2 * F32 * rows * m,
        head: F32 * rows * (2 * hd + cfg.d_in),
        workspace: layer_ws + attn_ws,
        slack: layer_slack + attn_ws / 8,
    }
}
