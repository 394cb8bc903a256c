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

use crate::mixer::{self, BackwardIo, Layout, MixerSizes, Seqs};
use crate::ops::CpuElem;
use crate::par;

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
}

impl MixerSizes for Mamba2Dims {
    const NAME: &'static str = "mamba2";
    /// Panics with the offending size when one is zero or the heads do not tile `Di`: every
    /// loop assumes non-empty rows and `Di = nheads * headdim`.
    fn check(&self) {
        mixer::check_sizes(*self);
        let Self { d_inner, nheads, headdim, .. } = *self;
        assert_eq!(nheads * headdim, d_inner, "mamba2: nheads * headdim must equal d_inner (dims {self:?})");
    }
    fn d_model(&self) -> usize {
        self.d_model
    }
    fn named_sizes(&self) -> Vec<(&'static str, usize)> {
        let Self { d_model, d_inner, d_state, nheads, headdim, d_conv, chunk_size } = *self;
        vec![
            ("d_model", d_model),
            ("d_inner", d_inner),
            ("d_state", d_state),
            ("nheads", nheads),
            ("headdim", headdim),
            ("d_conv", d_conv),
            ("chunk_size", chunk_size),
        ]
    }
    fn lens(&self) -> Vec<usize> {
        let Self { d_model: m, d_inner: di, nheads: h, d_conv: k, .. } = *self;
        let cd = self.conv_dim();
        vec![h, cd * k, cd, self.proj_dim() * m, h, h, di, m * di]
    }
}

boldcast_core::param_group! {
    /// The parameters (or their gradients) of one mixer, PyTorch layouts, row-major, in
    /// state-dict order ([`boldcast_core::MAMBA2_PARAMS`]). `S` is `Vec<E>` (owned), `&[E]` (a
    /// view of the model's store) or `&mut [E]` (gradients to add to).
    pub struct Mamba2Params names boldcast_core::MAMBA2_PARAMS {
        /// `dt_bias`, `(nheads)`.
        dt_bias,
        /// `conv1d.weight`, `(Di + 2N, 1, K)`; tap `K - 1` multiplies the current step.
        conv_w,
        /// `conv1d.bias`, `(Di + 2N)`.
        conv_b,
        /// `in_proj.weight`, `(2 Di + 2N + nheads, M)`: output columns `z (Di) | xBC (Di + 2N) | dt (nheads)`.
        in_proj,
        /// `A_log`, `(nheads)`; `A = -exp(A_log)`.
        a_log,
        /// `D`, `(nheads)`: the skip connection of the scan.
        d,
        /// `norm.weight` of the gated RMSNorm, `(Di)`.
        norm_w,
        /// `out_proj.weight`, `(M, Di)`.
        out_proj,
    }
}

mixer::mixer_params!(Mamba2Params, Mamba2Dims);

/// The fixed partition of the `B * P` sequences into contiguous blocks, one workspace and one
/// gradient partial each. It depends on the number of sequences only (never on the thread
/// count or on rayon's work stealing), so reducing the partials in block order gives
/// bit-identical gradients for any number of threads.
fn blocks(n_seq: usize) -> Vec<std::ops::Range<usize>> {
    crate::par::blocks(n_seq, 1)
}

/// The forward of both evaluations of the scan, parallel over blocks of sequences.
fn forward_with<E: CpuElem>(dims: Mamba2Dims, p: &Mamba2Params<&[E]>, u: &[E], seqs: Seqs, y: &mut [E], chunked: bool) {
    let Some(lay) = p.prepare(dims, &[("u", u.len()), ("y", y.len())], seqs) else {
        return;
    };
    let a = mixer::decay_rates(p.a_log);
    let size = (dims, seqs.time, false);
    mixer::forward_seqs(&lay, &blocks(seqs.count()), size, (u, y), (&mut [], 0), |ws, _, out, _| {
        seq::forward(dims, p, &a, ws, out, chunked)
    });
}

/// Forward over all `B * P` sequences of an activation `u` in the model's `(B, T, P, M)`
/// layout: for each `(b, p)` the sequence `u[b, :, p, :]` goes through the mixer and the
/// result is written to `y[b, :, p, :]` (`y` is overwritten). The scan runs in the chunked SSD
/// form with `dims.chunk_size` steps per chunk; parallel over sequences (rayon).
pub fn forward<E: CpuElem, S: AsRef<[E]>>(dims: Mamba2Dims, p: &Mamba2Params<S>, u: &[E], seqs: Seqs, y: &mut [E]) {
    forward_with(dims, &p.view(), u, seqs, y, true);
}

/// The same contract as [`forward`], with the scan evaluated by the sequential recurrence
/// `S_t = exp(dt_t A) S_{t-1} + dt_t x_t B_t^T`: the reference the chunked path is tested
/// against.
pub fn forward_sequential<E: CpuElem, S: AsRef<[E]>>(
    dims: Mamba2Dims,
    p: &Mamba2Params<S>,
    u: &[E],
    seqs: Seqs,
    y: &mut [E],
) {
    forward_with(dims, &p.view(), u, seqs, y, false);
}

/// Backward of [`forward`]: given `io.u` (the same input) and `io.g_y` `(B, T, P, M)`, writes
/// `io.g_u` (`(B, T, P, M)`, overwritten) and ACCUMULATES (`+=`) the parameter gradients into
/// `grads`. The forward is recomputed internally (nothing is cached between the two calls).
///
/// The SSD forward leaves the state at the start of every chunk of Q steps; the backward walks
/// the chunks from the last and recomputes each chunk's states from its checkpoint
/// (BACKWARD.md, "Memory"). Each block of sequences accumulates its own gradient partial in
/// f64; the partials are summed in block order over a split that depends on `B * P` only, so
/// the result is bit-identical from run to run and for any thread count.
pub fn backward<E: CpuElem, S: AsRef<[E]>, G: AsMut<[E]>>(
    dims: Mamba2Dims,
    p: &Mamba2Params<S>,
    seqs: Seqs,
    io: BackwardIo<'_, E>,
    grads: &mut Mamba2Params<G>,
) {
    let (p, grads) = (&p.view(), &mut grads.view_mut());
    grads.check(dims, "gradient");
    let Some(lay) = p.prepare(dims, &io.lens(), seqs) else {
        return;
    };
    let a = mixer::decay_rates(p.a_log);
    // Each block's partial is in f64, so that summing many sequences loses nothing. Its
    // `a_log` holds the gradient with respect to A (not A_log) until the reduction.
    let part = || Mamba2Params::<Vec<f64>>::zeros(dims);
    let size = (dims, seqs.time, true);
    let parts = mixer::backward_seqs(&lay, &blocks(seqs.count()), size, io, part, |ws, _, gu, part| {
        seq::backward(dims, p, &a, ws, gu, part)
    });
    par::reduce_mixer_partials(parts, &a, grads);
}

par::named_tensors!(Mamba2Params);

#[cfg(test)]
mod tests;
