//! Deterministic data parallelism: work is split into a fixed partition of contiguous blocks
//! that depends only on the problem size (never on the thread count or on rayon's work
//! stealing), each block returns its partial sums, and the caller reduces them in block order.
//! So a reduction (a weight gradient summed over rows) gives bit-identical results for any
//! number of threads, and a run is repeatable.

use crate::ops::linear::{self, Weight, WeightGrads};
use crate::ops::CpuElem;
use rayon::prelude::*;
use std::any::Any;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::ops::Range;

/// At most this many blocks per call: enough to keep 16 cores busy, few enough that the
/// partial sums (one weight-gradient copy per block) stay small.
pub const MAX_BLOCKS: usize = 32;

/// The fixed partition of `items` into at most [`MAX_BLOCKS`] contiguous ranges of at least
/// `min_items` items each (one range, possibly empty, when `items < 2 * min_items`).
pub fn blocks(items: usize, min_items: usize) -> Vec<Range<usize>> {
    let n = (items / min_items.max(1)).clamp(1, MAX_BLOCKS);
    let (base, rem) = (items / n, items % n);
    let mut out = Vec::with_capacity(n);
    let mut start = 0;
    for i in 0..n {
        let len = base + usize::from(i < rem);
        out.push(start..start + len);
        start += len;
    }
    out
}

/// Runs `f(range, out_rows)` for every block of [`blocks`]`(items, min_items)` in parallel,
/// where `out_rows` is the part of `out` that belongs to the block (`out_per_item` elements per
/// item; `out` may be empty with `out_per_item == 0`), and returns the blocks' results in block
/// order, for the caller to reduce sequentially.
pub fn map_blocks<E, T, F>(items: usize, min_items: usize, out: &mut [E], out_per_item: usize, f: F) -> Vec<T>
where
    E: Send,
    T: Send,
    F: Fn(Range<usize>, &mut [E]) -> T + Sync,
{
    map_blocks2(items, min_items, (out, out_per_item), (&mut [], 0), |r, o, _| f(r, o))
}

/// [`map_blocks`] with two outputs: `f(range, a_rows, b_rows)`, each the block's part of its
/// output (`per_a` and `per_b` elements per item).
pub fn map_blocks2<E, T, F>(
    items: usize,
    min_items: usize,
    (a, per_a): (&mut [E], usize),
    (b, per_b): (&mut [E], usize),
    f: F,
) -> Vec<T>
where
    E: Send,
    T: Send,
    F: Fn(Range<usize>, &mut [E], &mut [E]) -> T + Sync,
{
    assert_eq!(a.len(), items * per_a, "map_blocks2: first output of {} for {items} x {per_a}", a.len());
    assert_eq!(b.len(), items * per_b, "map_blocks2: second output of {} for {items} x {per_b}", b.len());
    let ranges = blocks(items, min_items);
    let mut parts = Vec::with_capacity(ranges.len());
    let (mut rest_a, mut rest_b) = (a, b);
    for r in &ranges {
        let (ha, ta) = rest_a.split_at_mut(r.len() * per_a);
        let (hb, tb) = rest_b.split_at_mut(r.len() * per_b);
        parts.push((r.clone(), ha, hb));
        (rest_a, rest_b) = (ta, tb);
    }
    // An indexed parallel iterator collects in input order, whatever thread ran each block.
    parts.into_par_iter().map(|(r, oa, ob)| f(r, oa, ob)).collect()
}

/// Elements per task of the elementwise helpers below ([`zeros`], [`copy_into`], [`add`], ...):
/// 256 KiB of f32, large enough that a task's overhead is negligible. Below two of these the
/// work stays on the calling thread.
const ELEMWISE_CHUNK: usize = 1 << 16;

/// `vec![0; n]`, written by all threads for a large `n`: for memory the allocator reuses
/// (see `crate::alloc`), `vec!` zeroes on the calling thread alone, one 16 MiB pass per
/// `cpu-demo` activation while the other cores wait.
pub fn zeros<E: CpuElem>(n: usize) -> Vec<E> {
    if n < 2 * ELEMWISE_CHUNK {
        return vec![E::zero(); n];
    }
    let mut v = Vec::with_capacity(n);
    v.par_extend(rayon::iter::repeat_n(E::zero(), n));
    v
}

/// `y = x` (equal lengths), by all threads for a large `x`.
pub fn copy_into<E: CpuElem>(x: &[E], y: &mut [E]) {
    assert_eq!(x.len(), y.len(), "copy_into: {} values into {}", x.len(), y.len());
    if x.len() < 2 * ELEMWISE_CHUNK {
        y.copy_from_slice(x);
    } else {
        y.par_chunks_mut(ELEMWISE_CHUNK).zip(x.par_chunks(ELEMWISE_CHUNK)).for_each(|(yc, xc)| yc.copy_from_slice(xc));
    }
}

/// `z = x + y` elementwise (equal lengths), by all threads for a large `x`: the same additions
/// as [`add_into`], into a third buffer.
pub fn add<E: CpuElem>(x: &[E], y: &[E], z: &mut [E]) {
    assert!(x.len() == y.len() && y.len() == z.len(), "add: lengths {}, {}, {}", x.len(), y.len(), z.len());
    let sum = |((zc, xc), yc): ((&mut [E], &[E]), &[E])| {
        for ((c, &a), &b) in zc.iter_mut().zip(xc).zip(yc) {
            *c = a + b;
        }
    };
    if x.len() < 2 * ELEMWISE_CHUNK {
        sum(((z, x), y));
    } else {
        z.par_chunks_mut(ELEMWISE_CHUNK)
            .zip(x.par_chunks(ELEMWISE_CHUNK))
            .zip(y.par_chunks(ELEMWISE_CHUNK))
            .for_each(sum);
    }
}

/// Every value of `y` set to `v`, by all threads for a large `y`.
pub fn fill<E: CpuElem>(y: &mut [E], v: E) {
    if y.len() < 2 * ELEMWISE_CHUNK {
        y.fill(v);
    } else {
        y.par_chunks_mut(ELEMWISE_CHUNK).for_each(|yc| yc.fill(v));
    }
}

/// `x += y` elementwise (over the shorter length), by all threads for a large `x`. Each element
/// is one addition, so the result does not depend on the split.
pub fn add_into<E: CpuElem>(x: &mut [E], y: &[E]) {
    let n = x.len().min(y.len());
    let (x, y) = (&mut x[..n], &y[..n]);
    let add = |(xc, yc): (&mut [E], &[E])| {
        for (a, &b) in xc.iter_mut().zip(yc) {
            *a += b;
        }
    };
    if n < 2 * ELEMWISE_CHUNK {
        add((x, y));
    } else {
        x.par_chunks_mut(ELEMWISE_CHUNK).zip(y.par_chunks(ELEMWISE_CHUNK)).for_each(add);
    }
}

/// Worker threads of the pool the parallel code runs on (rayon's global pool:
/// `RAYON_NUM_THREADS`, or the number of CPUs).
pub fn threads() -> usize {
    rayon::current_num_threads()
}

/// Adds `parts` into `acc` one after the other, in order (the deterministic reduction).
pub fn add_in_order<E: boldcast_core::Elem>(acc: &mut [E], parts: &[Vec<E>]) {
    for p in parts {
        assert_eq!(p.len(), acc.len(), "add_in_order: partial of {} for {}", p.len(), acc.len());
        for (a, &x) in acc.iter_mut().zip(p) {
            *a += x;
        }
    }
}

/// Write access to one slice shared by parallel blocks that each write their own, disjoint set
/// of positions (each mixer sequence owns the `(b, p)` rows of a `(B, T, P, M)` tensor, which
/// are interleaved with the other sequences' rows, so the slice cannot be split into
/// contiguous parts). Bounds are checked; disjointness is the caller's promise.
pub struct DisjointWriter<'a, E> {
    ptr: *mut E,
    len: usize,
    _borrow: PhantomData<&'a mut [E]>,
}

// SAFETY: the writer only hands out writes of `E: Send` values; callers promise (see `write`)
// that concurrent writes never overlap, so sharing it between threads is a set of disjoint
// `&mut` accesses.
unsafe impl<E: Send> Sync for DisjointWriter<'_, E> {}
// SAFETY: as above.
unsafe impl<E: Send> Send for DisjointWriter<'_, E> {}

impl<'a, E: Copy> DisjointWriter<'a, E> {
    /// Takes the slice for the writer's lifetime.
    pub fn new(s: &'a mut [E]) -> Self {
        Self { ptr: s.as_mut_ptr(), len: s.len(), _borrow: PhantomData }
    }

    /// Copies `src` to `offset..offset + src.len()`; panics when that is out of bounds.
    ///
    /// # Safety
    /// No other thread may write any position of that range while the writer lives.
    pub unsafe fn write(&self, offset: usize, src: &[E]) {
        assert!(offset <= self.len && src.len() <= self.len - offset, "DisjointWriter: write out of bounds");
        // SAFETY: in bounds (checked above), `src` cannot alias the exclusively borrowed
        // destination, and the caller promises no concurrent write to this range.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(offset), src.len()) }
    }
}

thread_local! {
    /// One cached scratch object per thread ([`with_scratch`]).
    static SCRATCH: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's cached scratch of type `W` when there is one for which
/// `fits` holds, else with `make()`; the scratch is kept for the thread's next call. Blocks run
/// on rayon's long-lived threads, so the buffers of a training step's many calls (every layer,
/// every step) are allocated once per thread instead of once per block and call.
pub fn with_scratch<W: Any, R>(fits: impl Fn(&W) -> bool, make: impl FnOnce() -> W, f: impl FnOnce(&mut W) -> R) -> R {
    let cached = SCRATCH.with(|c| {
        let mut c = c.borrow_mut();
        let i = c.iter().position(|b| b.downcast_ref::<W>().is_some_and(&fits))?;
        Some(c.swap_remove(i))
    });
    let mut w = match cached {
        Some(b) => *b.downcast::<W>().expect("found by type"),
        None => make(),
    };
    let r = f(&mut w);
    SCRATCH.with(|c| {
        let mut c = c.borrow_mut();
        // Keep one object per type: the newest replaces an older, differently sized one.
        c.retain(|b| !b.is::<W>());
        c.push(Box::new(w));
    });
    r
}

/// Rows per block of a parallel linear layer at least.
const MIN_LINEAR_ROWS: usize = 256;

/// `y = x W^T + b` ([`crate::ops::linear::forward`]) with the rows split into parallel blocks.
/// Overwrites `y`.
pub fn linear_forward<E: CpuElem>(x: &[E], rows: usize, inp: usize, w: &[E], b: Option<&[E]>, out: usize, y: &mut [E]) {
    assert_eq!(x.len(), rows * inp, "linear: input is not {rows}x{inp}");
    map_blocks(rows, MIN_LINEAR_ROWS, y, out, |r, yb| {
        linear::forward(&x[r.start * inp..r.end * inp], r.len(), inp, w, b, out, yb)
    });
}

/// Backward of [`linear_forward`]: accumulates `g.w += g_y^T x`, `g.b += sum g_y` from
/// per-block partials reduced in block order, and overwrites `g_x = g_y W` when given.
pub fn linear_backward<E: CpuElem>(
    x: &[E],
    rows: usize,
    lin: Weight<'_, E>,
    g_y: &[E],
    g: WeightGrads<'_, E>,
    g_x: Option<&mut [E]>,
) {
    let Weight { w, inp, out } = lin;
    let WeightGrads { w: g_w, b: g_b } = g;
    assert!(x.len() == rows * inp && g_y.len() == rows * out, "linear backward: not {rows} rows");
    assert!(g_w.len() == out * inp && g_b.len() == out, "linear backward: gradients are not {out}x{inp}");
    let mut none: [E; 0] = [];
    let (gx, per) = match g_x {
        Some(g) => (g, inp),
        None => (&mut none[..], 0),
    };
    let parts = map_blocks(rows, MIN_LINEAR_ROWS, gx, per, |r, gxb| {
        let mut part = vec![E::zero(); out * inp + out];
        let (pw, pb) = part.split_at_mut(out * inp);
        let gx = (per > 0).then_some((gxb, false));
        let (xs, gs) = (&x[r.start * inp..r.end * inp], &g_y[r.start * out..r.end * out]);
        linear::backward(xs, r.len(), inp, w, out, gs, pw, Some(pb), gx);
        part
    });
    let mut acc = vec![E::zero(); out * inp + out];
    add_in_order(&mut acc, &parts);
    for (a, &v) in g_w.iter_mut().chain(g_b.iter_mut()).zip(&acc) {
        *a += v;
    }
}

/// A set of named tensors (a mixer's parameters or gradients), in state-dict order.
pub trait NamedTensors<T> {
    /// `(name, values)` per tensor.
    fn named(&self) -> Vec<(&'static str, &[T])>;
    /// `(name, values)` per tensor, mutable.
    fn named_mut(&mut self) -> Vec<(&'static str, &mut [T])>;
}

/// [`NamedTensors`] for named parameter groups (`boldcast_core::param_group!` with `names`),
/// owned (`Vec<T>`) or borrowed mutably (`&mut [T]`).
macro_rules! named_tensors {
    ($group:ident) => {
        impl<T, S: AsRef<[T]> + AsMut<[T]>> $crate::par::NamedTensors<T> for $group<S> {
            fn named(&self) -> Vec<(&'static str, &[T])> {
                self.view().named().into()
            }
            fn named_mut(&mut self) -> Vec<(&'static str, &mut [T])> {
                self.view_mut().named().into()
            }
        }
    };
}
pub(crate) use named_tensors;

/// Sums per-block gradient partials (f64) in block order and adds the total to `grads`,
/// rounding once to `E`. The mixers accumulate the gradient with respect to `A = -exp(A_log)`
/// in the `A_log` slot; it becomes the gradient with respect to `A_log` here
/// (`g_A_log = g_A * A`), after the sum, so the rounding happens once.
pub fn reduce_mixer_partials<E: CpuElem, P: NamedTensors<f64>, G: NamedTensors<E>>(
    parts: Vec<P>,
    a: &[E],
    grads: &mut G,
) {
    let mut parts = parts.into_iter();
    let Some(mut total) = parts.next() else { return };
    for part in parts {
        for ((_, acc), (_, v)) in total.named_mut().into_iter().zip(part.named()) {
            for (x, &y) in acc.iter_mut().zip(v) {
                *x += y;
            }
        }
    }
    for (name, g) in total.named_mut() {
        if name == "A_log" {
            for (ga, &av) in g.iter_mut().zip(a) {
                *ga *= av.f64();
            }
        }
    }
    for ((_, g), (_, t)) in grads.named_mut().into_iter().zip(total.named()) {
        for (x, &y) in g.iter_mut().zip(t) {
            *x += E::of(y);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elementwise_helpers_match_the_serial_loops_on_both_sides_of_the_threshold() {
        for n in [0, 5, 2 * ELEMWISE_CHUNK - 1, 2 * ELEMWISE_CHUNK, 5 * ELEMWISE_CHUNK + 17] {
            let x: Vec<f32> = (0..n).map(|i| (i % 1013) as f32 * 0.37 - 11.0).collect();
            let y: Vec<f32> = (0..n).map(|i| (i % 977) as f32 * -0.21 + 3.0).collect();
            let z = zeros::<f32>(n);
            assert_eq!(z.len(), n);
            assert!(z.iter().all(|&v| v == 0.0));
            let mut into = vec![f32::NAN; n];
            copy_into(&x, &mut into);
            assert_eq!(into, x);
            fill(&mut into, 2.5);
            assert!(into.iter().all(|&v| v == 2.5));
            let mut sum = x.clone();
            add_into(&mut sum, &y);
            let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
            assert_eq!(sum, want, "n = {n}");
            let mut third = vec![f32::NAN; n];
            add(&x, &y, &mut third);
            assert_eq!(third, want, "n = {n}");
            // A shorter `y` adds over its length only.
            let mut part = x.clone();
            add_into(&mut part, &y[..n / 2]);
            assert_eq!(part[..n / 2], want[..n / 2]);
            assert_eq!(part[n / 2..], x[n / 2..]);
        }
    }

    #[test]
    fn partition_covers_every_item_once() {
        for items in [0, 1, 5, 63, 64, 200, 10_000] {
            for min in [1, 7, 64] {
                let b = blocks(items, min);
                assert!(!b.is_empty() && b.len() <= MAX_BLOCKS);
                assert_eq!(b[0].start, 0);
                assert_eq!(b.last().unwrap().end, items);
                for w in b.windows(2) {
                    assert_eq!(w[0].end, w[1].start);
                }
            }
        }
    }

    #[test]
    fn results_come_back_in_block_order() {
        let mut out = vec![0usize; 100];
        let got = map_blocks(100, 3, &mut out, 1, |r, o| {
            for (i, x) in r.clone().zip(o.iter_mut()) {
                *x = i;
            }
            r.start
        });
        assert!(got.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(out, (0..100).collect::<Vec<_>>());
    }
}
