//! The Mamba-2 (SSD, one group) temporal mixer (MODEL.md, "Temporal mixer,
//! `temporal = "mamba2"`"): its parameters, the forward over every parcel's sequence of an
//! activation in the model's `(B, T, P, M)` layout, and the hand-written backward of
//! BACKWARD.md ("Mamba-2 scan", gated RMSNorm, "Memory").
//!
//! This module owns the mixer only; the LayerNorm in front of it and the residual around it
//! belong to the model assembly. Files, one job each:
//! - `mod.rs` (this file): sizes, parameters, the public entry points, and the parallel split of
//!   the `B * P` sequences into blocks with a deterministic reduction of the gradient partials;
//! - `seq.rs`: one sequence through the projections, the convolution, the time steps and the
//!   gated RMSNorm, forward and backward, in a reusable workspace;
//! - `ssd.rs`: the chunked (SSD) evaluation of the scan, the fast forward path;
//! - `scan.rs`: the sequential scan (the reference) and the backward, which recomputes each
//!   chunk's states from the chunk-entry states the SSD forward leaves behind.

mod scan;
mod seq;
mod ssd;

use crate::ops::CpuElem;
use crate::par;
use rayon::prelude::*;

/// Sizes of one Mamba-2 mixer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Mamba2Dims {
    /// M: width of the mixer's input and output.
    pub d_model: usize,
    /// Di: inner width (`expand * d_model`), `nheads * headdim`.
    pub d_inner: usize,
    /// N: state size (one group: `B` and `C` are shared by all heads).
    pub d_state: usize,
    /// Number of heads.
    pub nheads: usize,
    /// Pd: width of one head.
    pub headdim: usize,
    /// K: width of the causal depthwise convolution.
    pub d_conv: usize,
    /// Q: steps per chunk of the SSD evaluation (and between the backward's checkpoints).
    pub chunk_size: usize,
}

impl Mamba2Dims {
    /// The sizes a model configuration implies (`Di = expand * d_model`, `nheads = Di / headdim`).
    pub fn from_config(c: &boldcast_core::ModelConfig) -> Self {
        Self {
            d_model: c.d_model,
            d_inner: c.d_inner(),
            d_state: c.d_state,
            nheads: c.nheads(),
            headdim: c.headdim,
            d_conv: c.d_conv,
            chunk_size: c.chunk_size,
        }
    }

    /// Channels of the convolution: `x | B | C`, `Di + 2N`.
    fn conv_dim(&self) -> usize {
        self.d_inner + 2 * self.d_state
    }

    /// Width of the `in_proj` output: `z | xBC | dt`, `2 Di + 2N + nheads`.
    fn proj_dim(&self) -> usize {
        2 * self.d_inner + 2 * self.d_state + self.nheads
    }

    /// Panics with the offending size when one is zero or the heads do not tile `Di`: every
    /// loop below assumes non-empty rows and `Di = nheads * headdim`.
    fn check(&self) {
        let Self { d_model, d_inner, d_state, nheads, headdim, d_conv, chunk_size } = *self;
        for (name, v) in [
            ("d_model", d_model),
            ("d_inner", d_inner),
            ("d_state", d_state),
            ("nheads", nheads),
            ("headdim", headdim),
            ("d_conv", d_conv),
            ("chunk_size", chunk_size),
        ] {
            assert!(v > 0, "mamba2: {name} must be positive (dims {self:?})");
        }
        assert_eq!(nheads * headdim, d_inner, "mamba2: nheads * headdim must equal d_inner (dims {self:?})");
    }
}

/// The parameters (or their gradients) of one mixer, PyTorch layouts, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Mamba2Params<E> {
    /// `dt_bias`, `(nheads)`.
    pub dt_bias: Vec<E>,
    /// `conv1d.weight`, `(Di + 2N, 1, K)`; tap `K - 1` multiplies the current step.
    pub conv_w: Vec<E>,
    /// `conv1d.bias`, `(Di + 2N)`.
    pub conv_b: Vec<E>,
    /// `in_proj.weight`, `(2 Di + 2N + nheads, M)`: output columns `z (Di) | xBC (Di + 2N) | dt (nheads)`.
    pub in_proj: Vec<E>,
    /// `A_log`, `(nheads)`; `A = -exp(A_log)`.
    pub a_log: Vec<E>,
    /// `D`, `(nheads)`: the skip connection of the scan.
    pub d: Vec<E>,
    /// `norm.weight` of the gated RMSNorm, `(Di)`.
    pub norm_w: Vec<E>,
    /// `out_proj.weight`, `(M, Di)`.
    pub out_proj: Vec<E>,
}

impl<E: CpuElem> Mamba2Params<E> {
    /// All tensors zero (the starting point of a gradient accumulator).
    pub fn zeros(dims: Mamba2Dims) -> Self {
        let [dt_bias, conv_w, conv_b, in_proj, a_log, d, norm_w, out_proj] =
            Self::lens(dims).map(|l| vec![E::zero(); l]);
        Self { dt_bias, conv_w, conv_b, in_proj, a_log, d, norm_w, out_proj }
    }

    /// `(suffix after "layers.{i}.mamba.mamba.", slice)` in the order of
    /// `ModelConfig::param_specs`: dt_bias, conv1d.weight, conv1d.bias, in_proj.weight, A_log,
    /// D, norm.weight, out_proj.weight.
    pub fn tensors(&self) -> [(&'static str, &[E]); 8] {
        [
            ("dt_bias", &self.dt_bias),
            ("conv1d.weight", &self.conv_w),
            ("conv1d.bias", &self.conv_b),
            ("in_proj.weight", &self.in_proj),
            ("A_log", &self.a_log),
            ("D", &self.d),
            ("norm.weight", &self.norm_w),
            ("out_proj.weight", &self.out_proj),
        ]
    }

    /// The mutable counterpart of [`Mamba2Params::tensors`], same names and order.
    pub fn tensors_mut(&mut self) -> [(&'static str, &mut [E]); 8] {
        [
            ("dt_bias", &mut self.dt_bias),
            ("conv1d.weight", &mut self.conv_w),
            ("conv1d.bias", &mut self.conv_b),
            ("in_proj.weight", &mut self.in_proj),
            ("A_log", &mut self.a_log),
            ("D", &mut self.d),
            ("norm.weight", &mut self.norm_w),
            ("out_proj.weight", &mut self.out_proj),
        ]
    }

    /// Lengths of the tensors, in [`Mamba2Params::tensors`] order.
    fn lens(dims: Mamba2Dims) -> [usize; 8] {
        let Mamba2Dims { d_model: m, d_inner: di, nheads: h, d_conv: k, .. } = dims;
        let cd = dims.conv_dim();
        [h, cd * k, cd, dims.proj_dim() * m, h, h, di, m * di]
    }

    /// Panics, naming the tensor, when a length does not match `dims`.
    fn check(&self, dims: Mamba2Dims, what: &str) {
        for ((name, t), len) in self.tensors().into_iter().zip(Self::lens(dims)) {
            assert_eq!(t.len(), len, "mamba2: {what} {name} has {} elements, dims {dims:?} need {len}", t.len());
        }
    }
}

/// Where each sequence of a `(B, T, P, M)` activation lives: sequence `s = b * P + p` has its
/// step `t` at offset `((b * T + t) * P + p) * M`.
#[derive(Copy, Clone)]
struct Layout {
    time: usize,
    parcels: usize,
    m: usize,
}

impl Layout {
    /// Copies sequence `s` into the contiguous `(T, M)` buffer `dst`, so the projections run as
    /// GEMMs over contiguous rows.
    fn gather<E: Copy>(&self, src: &[E], s: usize, dst: &mut [E]) {
        let (b, p) = (s / self.parcels, s % self.parcels);
        for t in 0..self.time {
            let o = ((b * self.time + t) * self.parcels + p) * self.m;
            dst[t * self.m..(t + 1) * self.m].copy_from_slice(&src[o..o + self.m]);
        }
    }

    /// Writes the per-block outputs (block `k` holds sequences `blocks[k]`, each `(T, M)`)
    /// back into the `(B, T, P, M)` tensor `dst`. Serial: a copy, cheap next to the mixer.
    fn scatter<E: Copy>(&self, blocks: &[std::ops::Range<usize>], outs: &[Vec<E>], dst: &mut [E]) {
        let seq_len = self.time * self.m;
        for (r, out) in blocks.iter().zip(outs) {
            for (s, src) in r.clone().zip(out.chunks_exact(seq_len)) {
                let (b, p) = (s / self.parcels, s % self.parcels);
                for t in 0..self.time {
                    let o = ((b * self.time + t) * self.parcels + p) * self.m;
                    dst[o..o + self.m].copy_from_slice(&src[t * self.m..(t + 1) * self.m]);
                }
            }
        }
    }
}

/// The fixed partition of the `B * P` sequences into contiguous blocks, one workspace and one
/// gradient partial each. It depends on the number of sequences only (never on the thread
/// count or on rayon's work stealing), so reducing the partials in block order gives
/// bit-identical gradients for any number of threads.
fn blocks(n_seq: usize) -> Vec<std::ops::Range<usize>> {
    crate::par::blocks(n_seq, 1)
}

/// `A = -exp(A_log)` per head, computed once per call rather than per sequence.
fn decay_rates<E: CpuElem>(a_log: &[E]) -> Vec<E> {
    a_log.iter().map(|&v| -v.exp()).collect()
}

/// Checks every size and returns the layout, or `None` when there is nothing to compute.
fn prepare<E: CpuElem>(
    dims: Mamba2Dims,
    p: &Mamba2Params<E>,
    tensors: &[(&str, usize)],
    batch: usize,
    time: usize,
    parcels: usize,
) -> Option<Layout> {
    dims.check();
    p.check(dims, "parameter");
    let len = batch * time * parcels * dims.d_model;
    for &(name, l) in tensors {
        assert_eq!(
            l, len,
            "mamba2: {name} has {l} elements, (B, T, P, M) = ({batch}, {time}, {parcels}, {}) need {len}",
            dims.d_model
        );
    }
    (len > 0).then_some(Layout { time, parcels, m: dims.d_model })
}

/// The forward of both evaluations of the scan, parallel over blocks of sequences.
#[allow(clippy::too_many_arguments)]
fn forward_with<E: CpuElem>(
    dims: Mamba2Dims,
    p: &Mamba2Params<E>,
    u: &[E],
    batch: usize,
    time: usize,
    parcels: usize,
    y: &mut [E],
    chunked: bool,
) {
    let Some(lay) = prepare(dims, p, &[("u", u.len()), ("y", y.len())], batch, time, parcels) else {
        return;
    };
    let a = decay_rates(&p.a_log);
    let bl = blocks(batch * parcels);
    let seq_len = time * dims.d_model;
    let outs: Vec<Vec<E>> = bl
        .par_iter()
        .map(|r| {
            // The thread's cached workspace, reused by every sequence of the block and by the
            // next call (nothing is allocated per sequence or per step).
            let mut out = vec![E::zero(); r.len() * seq_len];
            seq::with_workspace(dims, time, false, |ws: &mut seq::Workspace<E>| {
                for (s, o) in r.clone().zip(out.chunks_exact_mut(seq_len)) {
                    lay.gather(u, s, &mut ws.us);
                    seq::forward(dims, p, &a, ws, o, chunked);
                }
            });
            out
        })
        .collect();
    lay.scatter(&bl, &outs, y);
}

/// Forward over all `B * P` sequences of an activation `u` in the model's `(B, T, P, M)`
/// layout: for each `(b, p)` the sequence `u[b, :, p, :]` goes through the mixer and the
/// result is written to `y[b, :, p, :]` (`y` is overwritten). The scan runs in the chunked SSD
/// form with `dims.chunk_size` steps per chunk; parallel over sequences (rayon).
pub fn forward<E: CpuElem>(
    dims: Mamba2Dims,
    p: &Mamba2Params<E>,
    u: &[E],
    batch: usize,
    time: usize,
    parcels: usize,
    y: &mut [E],
) {
    forward_with(dims, p, u, batch, time, parcels, y, true);
}

/// The same contract as [`forward`], with the scan evaluated by the sequential recurrence
/// `S_t = exp(dt_t A) S_{t-1} + dt_t x_t B_t^T`: the reference the chunked path is tested
/// against.
pub fn forward_sequential<E: CpuElem>(
    dims: Mamba2Dims,
    p: &Mamba2Params<E>,
    u: &[E],
    batch: usize,
    time: usize,
    parcels: usize,
    y: &mut [E],
) {
    forward_with(dims, p, u, batch, time, parcels, y, false);
}

/// Backward of [`forward`]: given `u` (the same input) and `g_y` `(B, T, P, M)`, writes `g_u`
/// (`(B, T, P, M)`, overwritten) and ACCUMULATES (`+=`) the parameter gradients into `grads`.
/// The forward is recomputed internally (nothing is cached between the two calls).
///
/// The SSD forward leaves the state at the start of every chunk of Q steps; the backward walks
/// the chunks from the last and recomputes each chunk's states from its checkpoint
/// (BACKWARD.md, "Memory"). Each block of sequences accumulates its own gradient partial in
/// f64; the partials are summed in block order over a split that depends on `B * P` only, so
/// the result is bit-identical from run to run and for any thread count.
#[allow(clippy::too_many_arguments)]
pub fn backward<E: CpuElem>(
    dims: Mamba2Dims,
    p: &Mamba2Params<E>,
    u: &[E],
    batch: usize,
    time: usize,
    parcels: usize,
    g_y: &[E],
    g_u: &mut [E],
    grads: &mut Mamba2Params<E>,
) {
    grads.check(dims, "gradient");
    let tensors = [("u", u.len()), ("g_y", g_y.len()), ("g_u", g_u.len())];
    let Some(lay) = prepare(dims, p, &tensors, batch, time, parcels) else {
        return;
    };
    let a = decay_rates(&p.a_log);
    let bl = blocks(batch * parcels);
    let seq_len = time * dims.d_model;
    let results: Vec<(Vec<E>, Mamba2Params<f64>)> = bl
        .par_iter()
        .map(|r| {
            // The block's partial, in f64 so that summing many sequences loses nothing. Its
            // `a_log` holds the gradient with respect to A (not A_log) until the reduction.
            let mut part = Mamba2Params::<f64>::zeros(dims);
            let mut g_out = vec![E::zero(); r.len() * seq_len];
            seq::with_workspace(dims, time, true, |ws: &mut seq::Workspace<E>| {
                for (s, gu) in r.clone().zip(g_out.chunks_exact_mut(seq_len)) {
                    lay.gather(u, s, &mut ws.us);
                    lay.gather(g_y, s, &mut ws.g_out);
                    seq::backward(dims, p, &a, ws, gu, &mut part);
                }
            });
            (g_out, part)
        })
        .collect();
    let (outs, parts): (Vec<Vec<E>>, Vec<Mamba2Params<f64>>) = results.into_iter().unzip();
    lay.scatter(&bl, &outs, g_u);
    par::reduce_mixer_partials(parts, &a, grads);
}

impl<E: CpuElem> par::NamedTensors<E> for Mamba2Params<E> {
    fn named(&self) -> Vec<(&'static str, &[E])> {
        self.tensors().into()
    }
    fn named_mut(&mut self) -> Vec<(&'static str, &mut [E])> {
        self.tensors_mut().into()
    }
}

#[cfg(test)]
mod tests;
