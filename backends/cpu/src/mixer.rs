//! What the two temporal mixers ([`crate::mamba1`], [`crate::mamba2`]) share around their
//! scans: the shape of a call, the size checks, where each parcel's sequence lives in the
//! model's `(B, T, P, M)` layout, `A = -exp(A_log)`, the parameter groups' constructors, and
//! the skeleton of a call (`forward_seqs`, `backward_seqs`): the sequences split into
//! blocks run in parallel, each sequence gathered into a thread's cached workspace and its
//! rows written back, the gradient partials returned in block order. What differs between the
//! mixers is the one-sequence function each passes in.

use crate::ops::CpuElem;
use crate::par;
use rayon::prelude::*;
use std::fmt::Debug;
use std::ops::Range;

/// The activation a mixer call runs over: `B * P` sequences of `T` steps, `(B, T, P, M)`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Seqs {
    /// B: batch size.
    pub batch: usize,
    /// T: steps per sequence.
    pub time: usize,
    /// P: parcels (one sequence per parcel and batch entry).
    pub parcels: usize,
}

impl Seqs {
    /// The shape `(batch, time, parcels)`.
    pub fn new(batch: usize, time: usize, parcels: usize) -> Self {
        Self { batch, time, parcels }
    }

    /// Number of sequences, `B * P`.
    pub fn count(&self) -> usize {
        self.batch * self.parcels
    }
}

/// Sizes of one mixer, as the shared checks need them.
pub(crate) trait MixerSizes: Copy + Debug {
    /// The mixer's name in panic messages.
    const NAME: &'static str;
    /// M: width of the mixer's input and output.
    fn d_model(&self) -> usize;
    /// Every size by name; each must be positive.
    fn named_sizes(&self) -> Vec<(&'static str, usize)>;
    /// Lengths of the parameter tensors, state-dict order.
    fn lens(&self) -> Vec<usize>;
    /// Panics, naming the size, when the sizes cannot run: every one positive by default.
    fn check(&self) {
        check_sizes(*self);
    }
}

/// The constructors and checks every mixer's parameter group has, written once: `zeros`
/// (a gradient accumulator), `cast` (another element type), `check` (lengths against the
/// sizes, panicking with the tensor's name) and `prepare` (every check of a call, then its
/// layout).
macro_rules! mixer_params {
    ($group:ident, $dims:ty) => {
        impl<E: CpuElem> $group<Vec<E>> {
            /// All tensors zero (the starting point of a gradient accumulator).
            pub fn zeros(dims: $dims) -> Self {
                Self::take(&mut dims.lens().into_iter().map(|l| vec![E::zero(); l]))
            }

            /// The same parameters in another element type (f64 test parameters in f32, say).
            pub fn cast<F: CpuElem>(&self, dims: $dims) -> $group<Vec<F>> {
                let mut out = $group::zeros(dims);
                $crate::mixer::convert(self.view().named(), out.view_mut().named());
                out
            }
        }

        impl<S> $group<S> {
            /// Panics, naming the tensor, when a length does not match `dims`.
            fn check<E>(&self, dims: $dims, what: &str)
            where
                S: AsRef<[E]>,
            {
                $crate::mixer::check_lens(dims, what, &self.view().named(), &dims.lens());
            }

            /// Checks the sizes, these parameters and the activations `tensors`, and returns
            /// the layout, or `None` when there is nothing to compute.
            fn prepare<E>(&self, dims: $dims, tensors: &[(&str, usize)], seqs: Seqs) -> Option<Layout>
            where
                S: AsRef<[E]>,
            {
                dims.check();
                self.check(dims, "parameter");
                $crate::mixer::layout(dims, tensors, seqs)
            }
        }
    };
}
pub(crate) use mixer_params;

/// Panics with the offending size when one is zero: every loop assumes non-empty rows.
pub(crate) fn check_sizes<D: MixerSizes>(dims: D) {
    for (name, v) in dims.named_sizes() {
        assert!(v > 0, "{}: {name} must be positive (dims {dims:?})", D::NAME);
    }
}

/// Panics, naming the tensor, when a length of `tensors` differs from `lens`.
pub(crate) fn check_lens<D: MixerSizes, E>(dims: D, what: &str, tensors: &[(&str, &[E])], lens: &[usize]) {
    for (&(name, t), &len) in tensors.iter().zip(lens) {
        assert_eq!(t.len(), len, "{}: {what} {name} has {} elements, dims {dims:?} need {len}", D::NAME, t.len());
    }
}

/// Checks that every activation of `tensors` has the `(B, T, P, M)` length and returns the
/// layout, or `None` when there is nothing to compute.
pub(crate) fn layout<D: MixerSizes>(dims: D, tensors: &[(&str, usize)], seqs: Seqs) -> Option<Layout> {
    let Seqs { batch, time, parcels } = seqs;
    let len = batch * time * parcels * dims.d_model();
    for &(name, l) in tensors {
        assert_eq!(
            l,
            len,
            "{}: {name} has {l} elements, (B, T, P, M) = ({batch}, {time}, {parcels}, {}) need {len}",
            D::NAME,
            dims.d_model()
        );
    }
    (len > 0).then_some(Layout { time, parcels, m: dims.d_model() })
}

/// Where each sequence of a `(B, T, P, M)` activation lives: sequence `s = b * P + p` has its
/// step `t` at offset `((b * T + t) * P + p) * M`.
#[derive(Copy, Clone)]
pub(crate) struct Layout {
    time: usize,
    parcels: usize,
    m: usize,
}

impl Layout {
    /// The offsets of sequence `s`'s steps, step by step.
    #[inline]
    fn offsets(&self, s: usize) -> impl Iterator<Item = (usize, usize)> {
        let (b, p) = (s / self.parcels, s % self.parcels);
        let (m, first, stride) = (self.m, (b * self.time * self.parcels + p) * self.m, self.parcels * self.m);
        (0..self.time).map(move |t| (t * m, first + t * stride))
    }

    /// Copies sequence `s` into the contiguous `(T, M)` buffer `dst`, so the projections run as
    /// GEMMs over contiguous rows.
    pub(crate) fn gather<E: Copy>(&self, src: &[E], s: usize, dst: &mut [E]) {
        for (r, o) in self.offsets(s) {
            dst[r..r + self.m].copy_from_slice(&src[o..o + self.m]);
        }
    }

    /// Writes the `(T, M)` rows `src` of sequence `s` to their places in the `(B, T, P, M)`
    /// tensor behind `dst`.
    ///
    /// # Safety
    /// No other thread may write sequence `s`'s rows meanwhile (each sequence belongs to one
    /// block, and each block to one thread).
    pub(crate) unsafe fn scatter_seq<E: Copy>(&self, src: &[E], s: usize, dst: &par::DisjointWriter<'_, E>) {
        for (r, o) in self.offsets(s) {
            // SAFETY: the rows of sequence `s` are written by this call only (caller's promise).
            unsafe { dst.write(o, &src[r..r + self.m]) };
        }
    }
}

/// A mixer's buffers for one sequence, cached per thread ([`par::with_scratch`]) and reused
/// by every sequence of a block and by the next call.
pub(crate) trait SeqWorkspace<E>: 'static {
    /// What a workspace is sized for: a cached one serves when it [`SeqWorkspace::fits`].
    type Size: Copy + Sync;
    /// A workspace of `size`.
    fn new(size: Self::Size) -> Self;
    /// Whether this workspace serves a call of `size`.
    fn fits(&self, size: Self::Size) -> bool;
    /// The sequence's gathered input, `(T, M)`.
    fn input(&mut self) -> &mut [E];
    /// The sequence's gathered output gradient, `(T, M)` (a backward's workspace).
    fn output_grad(&mut self) -> &mut [E];
}

/// Runs `seq(ws, s, out, keep)` for every sequence `s` of `u`, the blocks in parallel, each in
/// a thread's workspace of `size` with the sequence gathered into [`SeqWorkspace::input`];
/// `out` (`(T, M)`) then goes to the sequence's rows of `y`, and `keep` is the sequence's
/// `keep.1` values of `keep.0` (what a forward leaves for its backward; empty for none).
pub(crate) fn forward_seqs<E: CpuElem, W: SeqWorkspace<E>>(
    lay: &Layout,
    blocks: &[Range<usize>],
    size: W::Size,
    (u, y): (&[E], &mut [E]),
    keep: (&mut [E], usize),
    seq: impl Fn(&mut W, usize, &mut [E], &mut [E]) + Sync,
) {
    let (mut rest, per_seq) = keep;
    let mut kept = Vec::with_capacity(blocks.len());
    for r in blocks {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(r.len() * per_seq);
        kept.push(head);
        rest = tail;
    }
    each_seq(lay, blocks, size, y, kept, |ws: &mut W, s, i, out, kept| {
        lay.gather(u, s, ws.input());
        seq(ws, s, out, &mut kept[i * per_seq..][..per_seq]);
    });
}

/// Runs `seq(ws, s, g_u, part)` for every sequence `s`, the blocks in parallel, each in a
/// thread's workspace of `size` with the sequence's `u` and `g_y` gathered into
/// [`SeqWorkspace::input`] and [`SeqWorkspace::output_grad`]; `g_u` (`(T, M)`) then goes to
/// the sequence's rows of `io.g_u`, and each block adds its gradients to its own `part()`.
/// Returns the partials in block order, for a reduction whose bits do not depend on threads.
pub(crate) fn backward_seqs<E: CpuElem, W: SeqWorkspace<E>, P: Send>(
    lay: &Layout,
    blocks: &[Range<usize>],
    size: W::Size,
    io: BackwardIo<'_, E>,
    part: impl Fn() -> P,
    seq: impl Fn(&mut W, usize, &mut [E], &mut P) + Sync,
) -> Vec<P> {
    let BackwardIo { u, g_y, g_u } = io;
    let parts = blocks.iter().map(|_| part()).collect();
    each_seq(lay, blocks, size, g_u, parts, |ws: &mut W, s, _, g_u, part| {
        lay.gather(u, s, ws.input());
        lay.gather(g_y, s, ws.output_grad());
        seq(ws, s, g_u, part);
    })
}

/// Both passes' loop: per block in parallel, with the block's `state`, `seq(ws, s, i, rows,
/// state)` for its `i`-th sequence `s` in a thread's cached workspace, then `rows` (`(T, M)`)
/// written to the sequence's place in `dst`. Returns the states in block order.
fn each_seq<E: CpuElem, W: SeqWorkspace<E>, P: Send>(
    lay: &Layout,
    blocks: &[Range<usize>],
    size: W::Size,
    dst: &mut [E],
    states: Vec<P>,
    seq: impl Fn(&mut W, usize, usize, &mut [E], &mut P) + Sync,
) -> Vec<P> {
    let dst = par::DisjointWriter::new(dst);
    blocks
        .par_iter()
        .zip(states)
        .map(|(r, mut state)| {
            let mut rows = vec![E::zero(); lay.time * lay.m];
            par::with_scratch(
                |w: &W| w.fits(size),
                || W::new(size),
                |ws| {
                    for (i, s) in r.clone().enumerate() {
                        seq(ws, s, i, &mut rows, &mut state);
                        // SAFETY: sequence `s` belongs to this block only.
                        unsafe { lay.scatter_seq(&rows, s, &dst) };
                    }
                },
            );
            state
        })
        .collect()
}

/// `A = -exp(A_log)`, computed once per call rather than per sequence.
pub(crate) fn decay_rates<E: CpuElem>(a_log: &[E]) -> Vec<E> {
    a_log.iter().map(|&v| -v.exp()).collect()
}

/// Copies every tensor of `src` into the same-named one of `dst`, converting each value.
pub(crate) fn convert<E: CpuElem, F: CpuElem, const N: usize>(src: [(&str, &[E]); N], dst: [(&str, &mut [F]); N]) {
    for ((a, s), (b, d)) in src.into_iter().zip(dst) {
        assert_eq!((a, s.len()), (b, d.len()), "convert: the tensors differ");
        d.iter_mut().zip(s).for_each(|(d, s)| *d = F::of(s.f64()));
    }
}

/// The activations of one backward call, all `(B, T, P, M)`: the forward's input again, the
/// gradient of its output, and the gradient of its input (overwritten).
pub struct BackwardIo<'a, E> {
    /// `u`, the forward's input.
    pub u: &'a [E],
    /// `g_y`, the gradient of the forward's output.
    pub g_y: &'a [E],
    /// `g_u`, the gradient of the input, written by the call.
    pub g_u: &'a mut [E],
}

impl<E> BackwardIo<'_, E> {
    /// `(name, length)` of each, for [`layout`].
    pub(crate) fn lens(&self) -> [(&'static str, usize); 3] {
        [("u", self.u.len()), ("g_y", self.g_y.len()), ("g_u", self.g_u.len())]
    }
}
