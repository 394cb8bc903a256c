//! What the two temporal mixers ([`crate::mamba1`], [`crate::mamba2`]) share around their
//! scans: the shape of a call, the size checks, where each parcel's sequence lives in the
//! model's `(B, T, P, M)` layout, `A = -exp(A_log)`, and their tensors named by the core.

use crate::ops::CpuElem;
use crate::par;
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
}

/// The constructors and checks every mixer's parameter group has, written once: `zeros`
/// (a gradient accumulator), `cast` (another element type) and `check` (lengths against the
/// sizes, panicking with the tensor's name).
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

    /// Writes the per-block outputs (block `k` holds sequences `blocks[k]`, each `(T, M)`)
    /// back into the `(B, T, P, M)` tensor `dst`. Serial: a copy, cheap next to the mixer.
    pub(crate) fn scatter<E: Copy>(&self, blocks: &[Range<usize>], outs: &[Vec<E>], dst: &mut [E]) {
        let seq_len = self.time * self.m;
        for (r, out) in blocks.iter().zip(outs) {
            for (s, src) in r.clone().zip(out.chunks_exact(seq_len)) {
                for (r, o) in self.offsets(s) {
                    dst[o..o + self.m].copy_from_slice(&src[r..r + self.m]);
                }
            }
        }
    }
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
