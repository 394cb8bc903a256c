//! The Mamba-1 temporal mixer (MODEL.md, "Temporal mixer, `temporal = "mamba"`"): its
//! parameters, the forward over every parcel's sequence of an activation in the model's
//! `(B, T, P, M)` layout, and the hand-written backward of BACKWARD.md ("Mamba-1 selective
//! scan", "Memory").
//!
//! This module owns the mixer only; the LayerNorm in front of it and the residual around it
//! belong to the model assembly. Files, one job each:
//! - `mod.rs` (this file): sizes, parameters, the public entry points, and the parallel split of
//!   the `B * P` sequences into blocks with deterministic reduction of the gradient partials;
//! - `seq.rs`: one sequence through the projections, the convolution and the gate, forward and
//!   backward, in a reusable workspace;
//! - `scan.rs`: the selective scan itself, forward, a pass keeping every Q-th state, and the
//!   chunked backward that recomputes each chunk's states from those checkpoints;
//! - `avx512.rs`: the same scan loops in AVX-512 intrinsics for `f32`, which `scan.rs` calls
//!   when the CPU has them (the same bits as its portable loops).

#[cfg(target_arch = "x86_64")]
mod avx512;
mod scan;
mod seq;

use crate::mixer::{self, BackwardIo, Layout, MixerSizes, Seqs};
use crate::ops::CpuElem;
use crate::par;

/// Sizes of one Mamba-1 mixer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Mamba1Dims {
    /// M: width of the mixer's input and output.
    pub d_model: usize,
    /// Di: inner width (`expand * d_model`).
    pub d_inner: usize,
    /// N: state size per inner channel.
    pub d_state: usize,
    /// R: rank of the time-step projection.
    pub dt_rank: usize,
    /// K: width of the causal depthwise convolution.
    pub d_conv: usize,
}

impl Mamba1Dims {
    /// The sizes a model configuration implies (`Di = expand * d_model`, `R = ceil(M / 16)`).
    pub fn from_config(c: &boldcast_core::ModelConfig) -> Self {
        Self { d_model: c.d_model, d_inner: c.d_inner(), d_state: c.d_state, dt_rank: c.dt_rank(), d_conv: c.d_conv }
    }

    /// Width of the `x_proj` output, `dr | B | C`.
    fn w_dbc(&self) -> usize {
        self.dt_rank + 2 * self.d_state
    }
}

impl MixerSizes for Mamba1Dims {
    const NAME: &'static str = "mamba1";
    fn d_model(&self) -> usize {
        self.d_model
    }
    fn named_sizes(&self) -> Vec<(&'static str, usize)> {
        let Self { d_model, d_inner, d_state, dt_rank, d_conv } = *self;
        vec![("d_model", d_model), ("d_inner", d_inner), ("d_state", d_state), ("dt_rank", dt_rank), ("d_conv", d_conv)]
    }
    fn lens(&self) -> Vec<usize> {
        let Self { d_model: m, d_inner: di, d_state: n, dt_rank: r, d_conv: k } = *self;
        vec![di * k, di, 2 * di * m, (r + 2 * n) * di, di * r, di, di * n, di, m * di]
    }
}

boldcast_core::param_group! {
    /// The parameters (or their gradients) of one mixer, PyTorch layouts, row-major, in
    /// state-dict order ([`boldcast_core::MAMBA1_PARAMS`]). `S` is `Vec<E>` (owned), `&[E]` (a
    /// view of the model's store) or `&mut [E]` (gradients to add to).
    pub struct Mamba1Params names boldcast_core::MAMBA1_PARAMS {
        /// `conv1d.weight`, `(Di, 1, K)`; tap `K - 1` multiplies the current step.
        conv_w,
        /// `conv1d.bias`, `(Di)`.
        conv_b,
        /// `in_proj.weight`, `(2 Di, M)`: rows `0..Di` give `x`, rows `Di..2 Di` give `z`.
        in_proj,
        /// `x_proj.weight`, `(R + 2N, Di)`: output columns `dr | B | C`.
        x_proj,
        /// `dt_proj.weight`, `(Di, R)`.
        dt_proj_w,
        /// `dt_proj.bias`, `(Di)`.
        dt_proj_b,
        /// `A_log`, `(Di, N)`; `A = -exp(A_log)`.
        a_log,
        /// `D`, `(Di)`: the skip connection of the scan.
        d,
        /// `out_proj.weight`, `(M, Di)`.
        out_proj,
    }
}

mixer::mixer_params!(Mamba1Params, Mamba1Dims);

/// At most this many blocks (gradient partials) per call: enough to keep 16 cores busy with
/// a balanced load, few enough that the f64 partials (one parameter copy each) stay small.
const MAX_BLOCKS: usize = 32;

/// Splits `n_seq` sequences into contiguous blocks, one gradient partial each. The split
/// depends only on `n_seq` (not on the thread count, nor on how rayon schedules the work), and
/// the partials are reduced in block order, so the gradients are bit-identical from run to run
/// and for any number of threads.
fn blocks(n_seq: usize) -> Vec<std::ops::Range<usize>> {
    let nb = n_seq.clamp(1, MAX_BLOCKS);
    (0..nb).map(|k| k * n_seq / nb..(k + 1) * n_seq / nb).collect()
}

/// Bytes of one chunk's recomputed states and decays (`2 Q N Di` values). The backward writes
/// them and walks them back at once, so they should stay in the core's L2 cache: a whole
/// sequence recomputed in one piece (8 MiB at `cpu-demo`) does not fit, and its states would
/// go out to L3 and back. Q also sets the memory of the forward's checkpoints, `T / Q` states
/// per sequence, so the bound stays at L2 (Q = 8 at `cpu-demo`) although the channel groups
/// of `scan::GROUP` read a group's quarter of a chunk (32 KiB there) back from L1.
/// BENCHMARKS.md, CPU backend, "Cache-sized chunks and checkpoints left by the forward", has
/// the backward timed for Q = 4 to 256.
const CHUNK_BYTES: usize = 128 << 10;

/// The backward's chunk length Q: the largest power of two up to 32 whose states and decays
/// fit in [`CHUNK_BYTES`] (at least 1, at most `T`). A power of two up to 32 divides the
/// 32-step blocks in which the `A` and `D` gradients are summed (`seq::FLUSH`), so no walk is
/// split twice.
fn scan_chunk(dims: Mamba1Dims, time: usize, elem: usize) -> usize {
    let per_step = (2 * dims.d_inner * dims.d_state * elem).max(1);
    let mut q = 1;
    while q < 32 && 2 * q * per_step <= CHUNK_BYTES {
        q *= 2;
    }
    q.min(time.max(1))
}

/// What a training forward leaves for its backward ([`forward_keeping`], [`backward`]), per
/// sequence: the scan state before every Q-th step, `(ceil(T / Q), N, Di)` with Q the
/// backward's `scan_chunk`, and with [`Keep::projections`] the in_proj and x_proj outputs
/// after them, `(T, 2 Di)` and `(T, R + 2N)`. With the states the backward skips its own pass
/// over them (one exponential per state element); with the projections it skips its two
/// largest recomputed products. They cost [`kept_bytes`], so the model keeps them only while
/// they fit its budgets.
#[derive(Clone, Debug)]
pub struct ScanCheckpoints<E> {
    /// The chunk length Q.
    q: usize,
    /// What they were made for.
    shape: (Mamba1Dims, Seqs),
    /// What they hold besides the states.
    keep: Keep,
    /// Per sequence, the states and then (with `keep.projections`) the projections.
    states: Vec<E>,
}

/// What a training forward keeps besides the scan states ([`forward_keeping`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Keep {
    /// The in_proj and x_proj outputs ([`projection_bytes`]): the backward then recomputes
    /// only the elementwise passes and the small dt_proj product from them.
    pub projections: bool,
}

impl<E> ScanCheckpoints<E> {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.states.len() * std::mem::size_of::<E>()
    }

    /// The buffer, for the next [`forward_keeping`] of the same shape to reuse: a fresh one
    /// of this size (64 MiB per layer at `cpu-demo`) costs a page fault per 4 KiB.
    pub fn into_buffer(self) -> Vec<E> {
        self.states
    }
}

/// Values of scan states one sequence keeps.
fn states_per_seq<E>(dims: Mamba1Dims, time: usize) -> usize {
    let q = scan_chunk(dims, time, std::mem::size_of::<E>());
    time.div_ceil(q) * dims.d_state * dims.d_inner
}

/// Values of projections one sequence keeps, `T (2 Di + R + 2N)`.
fn projections_per_seq(dims: Mamba1Dims, time: usize) -> usize {
    time * (2 * dims.d_inner + dims.w_dbc())
}

/// Bytes of the scan states a forward of this shape leaves.
pub fn checkpoint_bytes<E>(dims: Mamba1Dims, seqs: Seqs) -> usize {
    seqs.count() * states_per_seq::<E>(dims, seqs.time) * std::mem::size_of::<E>()
}

/// Bytes of the projections a forward of this shape leaves with [`Keep::projections`].
pub fn projection_bytes<E>(dims: Mamba1Dims, seqs: Seqs) -> usize {
    seqs.count() * projections_per_seq(dims, seqs.time) * std::mem::size_of::<E>()
}

/// Bytes of everything a forward of this shape leaves with `keep`.
pub fn kept_bytes<E>(dims: Mamba1Dims, seqs: Seqs, keep: Keep) -> usize {
    checkpoint_bytes::<E>(dims, seqs) + if keep.projections { projection_bytes::<E>(dims, seqs) } else { 0 }
}

/// One sequence's share of [`ScanCheckpoints`]: its states (`q` the chunk length) and its
/// projections (empty when not kept).
pub(crate) struct SeqKept<S> {
    q: usize,
    states: S,
    proj: S,
}

/// Per-call values shared by every sequence, in the layouts the kernels want.
pub(crate) struct Prepared<E> {
    /// `A = -exp(A_log)` transposed, `(N, Di)` (the scan's channel-minor layout).
    at: Vec<E>,
    /// `conv1d.weight` transposed, `(K, Di)` (one contiguous row per tap).
    conv_t: Vec<E>,
}

impl<E: CpuElem> Prepared<E> {
    fn new(dims: Mamba1Dims, p: &Mamba1Params<&[E]>, a: &[E]) -> Self {
        let (di, n, k) = (dims.d_inner, dims.d_state, dims.d_conv);
        let mut at = vec![E::zero(); di * n];
        let mut conv_t = vec![E::zero(); di * k];
        for d in 0..di {
            for j in 0..n {
                at[j * di + d] = a[d * n + j];
            }
            for j in 0..k {
                conv_t[j * di + d] = p.conv_w[d * k + j];
            }
        }
        Self { at, conv_t }
    }
}

/// Forward over all B*P sequences of an activation in the model's (B, T, P, M) layout:
/// for each (b, p), the sequence u[b, :, p, :] of length T goes through the mixer and the
/// result is written to y[b, :, p, :]. `y` is overwritten. Parallel over sequences (rayon).
pub fn forward<E: CpuElem, S: AsRef<[E]>>(dims: Mamba1Dims, p: &Mamba1Params<S>, u: &[E], seqs: Seqs, y: &mut [E]) {
    forward_impl(dims, &p.view(), u, seqs, y, None);
}

/// [`forward`], also leaving what the backward needs: the scan's checkpoints and what
/// `keep` asks for ([`kept_bytes`] of them). They are written into `reuse` when it has their
/// size (every value is overwritten; pass [`ScanCheckpoints::into_buffer`] of the last step's,
/// or an empty vector), else into a new buffer.
pub fn forward_keeping<E: CpuElem, S: AsRef<[E]>>(
    dims: Mamba1Dims,
    p: &Mamba1Params<S>,
    (u, y): (&[E], &mut [E]),
    seqs: Seqs,
    keep: Keep,
    reuse: Vec<E>,
) -> ScanCheckpoints<E> {
    let q = scan_chunk(dims, seqs.time, std::mem::size_of::<E>());
    let len = kept_bytes::<E>(dims, seqs, keep) / std::mem::size_of::<E>();
    let states = if reuse.len() == len { reuse } else { par::zeros(len) };
    let mut ck = ScanCheckpoints { q, shape: (dims, seqs), keep, states };
    forward_impl(dims, &p.view(), u, seqs, y, Some((q, keep, &mut ck.states)));
    ck
}

/// The forward, with `kept = (q, what, destination)` for what it leaves.
fn forward_impl<E: CpuElem>(
    dims: Mamba1Dims,
    p: &Mamba1Params<&[E]>,
    u: &[E],
    seqs: Seqs,
    y: &mut [E],
    kept: Option<(usize, Keep, &mut [E])>,
) {
    let Some(lay) = p.prepare(dims, &[("u", u.len()), ("y", y.len())], seqs) else {
        return;
    };
    let a = mixer::decay_rates(p.a_log);
    let pr = Prepared::new(dims, p, &a);
    let (q, keep, dst) = kept.unwrap_or((1, Keep::default(), &mut []));
    let n_states = if dst.is_empty() { 0 } else { states_per_seq::<E>(dims, seqs.time) };
    let n_proj = if keep.projections { projections_per_seq(dims, seqs.time) } else { 0 };
    let size = (dims, seqs.time, None);
    mixer::forward_seqs(&lay, &blocks(seqs.count()), size, (u, y), (dst, n_states + n_proj), |ws, _, out, own| {
        let (states, proj) = own.split_at_mut(n_states);
        seq::forward(dims, p, &pr, ws, out, SeqKept { q, states, proj })
    });
}

/// Backward of `forward`: given `io.u` (the same input) and `io.g_y` (B,T,P,M), writes
/// `io.g_u` (B,T,P,M, overwritten) and ACCUMULATES (+=) parameter gradients into `grads`.
///
/// One sequence at a time per thread: a pass over the scan keeps the state every Q steps, and
/// the backward recomputes each chunk's states from them on the way back, in chunks small
/// enough to stay in cache (`scan_chunk`; BACKWARD.md, "Memory"). With `ck`, the checkpoints
/// [`forward_keeping`] left for the same parameters and input, that pass is
/// skipped (and with its projections, their recomputation): the same results, bit for bit. Without, nothing is cached between forward and
/// backward (the model relies on this to bound memory). Each block of sequences accumulates
/// its own gradient partial in f64; the partials are summed in block order over a split that
/// depends on `B * P` only, so the result is bit-identical from run to run and for any thread
/// count.
///
/// # Panics
/// When `ck` was made for another shape.
pub fn backward<E: CpuElem, S: AsRef<[E]>, G: AsMut<[E]>>(
    dims: Mamba1Dims,
    p: &Mamba1Params<S>,
    seqs: Seqs,
    io: BackwardIo<'_, E>,
    grads: &mut Mamba1Params<G>,
    ck: Option<&ScanCheckpoints<E>>,
) {
    let (p, grads) = (&p.view(), &mut grads.view_mut());
    match ck {
        Some(ck) => {
            assert_eq!(ck.shape, (dims, seqs), "mamba1: checkpoints made for another shape");
            backward_q(dims, p, seqs, io, grads, ck.q, Some((ck.keep, &ck.states)));
        }
        None => {
            let q = scan_chunk(dims, seqs.time, std::mem::size_of::<E>());
            backward_q(dims, p, seqs, io, grads, q, None);
        }
    }
}

/// [`backward`] with an explicit chunk length `q` (the tests compare several), from the
/// checkpoints `given` (and what they hold besides the states) when there are some.
fn backward_q<E: CpuElem>(
    dims: Mamba1Dims,
    p: &Mamba1Params<&[E]>,
    seqs: Seqs,
    io: BackwardIo<'_, E>,
    grads: &mut Mamba1Params<&mut [E]>,
    q: usize,
    given: Option<(Keep, &[E])>,
) {
    grads.check(dims, "gradient");
    let Some(lay) = p.prepare(dims, &io.lens(), seqs) else {
        return;
    };
    assert!(q > 0, "mamba1: the chunk length must be positive");
    let n_states = seqs.time.div_ceil(q) * dims.d_state * dims.d_inner;
    let n_proj = match given {
        Some((keep, _)) if keep.projections => projections_per_seq(dims, seqs.time),
        _ => 0,
    };
    let per_seq = n_states + n_proj;
    if let Some((_, c)) = given {
        assert_eq!(c.len(), seqs.count() * per_seq, "mamba1: checkpoints of another size");
    }
    let a = mixer::decay_rates(p.a_log);
    let pr = Prepared::new(dims, p, &a);
    // Each block's partial is in f64, so that summing many sequences loses nothing. Its
    // `a_log` holds the gradient with respect to A (not A_log) until the final reduction.
    let part = || Mamba1Params::<Vec<f64>>::zeros(dims);
    let size = (dims, seqs.time, Some(q));
    let parts = mixer::backward_seqs(&lay, &blocks(seqs.count()), size, io, part, |ws, s, gu, part| {
        let kept = given.map(|(_, c)| {
            let (states, proj) = c[s * per_seq..][..per_seq].split_at(n_states);
            SeqKept { q, states, proj }
        });
        seq::backward(dims, p, &pr, ws, gu, part, kept)
    });
    par::reduce_mixer_partials(parts, &a, grads);
}

par::named_tensors!(Mamba1Params);

#[cfg(test)]
mod tests;
