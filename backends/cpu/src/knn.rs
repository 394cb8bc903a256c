//! The spatial mixer: single-head attention of each parcel over its k nearest neighbours
//! (MODEL.md, "Spatial mixer"), forward and hand-written backward (BACKWARD.md,
//! "k-nearest-neighbour attention").
//!
//! The attention acts on one `(b, t)` slice of `P` rows at a time (the LayerNorm and the
//! projections act on rows): the groups are split into the fixed blocks of [`crate::par`],
//! each block walks its groups in sub-batches of up to `SUB_ROWS` contiguous rows (the
//! LayerNorm, the stacked q/k/v product and the out product run once per sub-batch as matrix
//! products, the attention per group), keeps cached per-thread scratch and its own partial
//! weight gradients, and the partials are reduced in block order.
//! The scatter-adds of the backward (`g_v[a(p, j)] += ...`, `g_kk[a(p, j)] += ...`) stay inside
//! one `(b, t)` group, which a single thread owns: no races. The backward reads the group's
//! forward activations from what a training forward kept ([`forward_keeping`], when the model's
//! budget allows) or recomputes them ([`backward`]); the same bits either way.

use crate::multiversion;
use crate::ops::{layernorm, linear, simd, CpuElem};
use crate::par;
use boldcast_core::Adjacency;

pub use boldcast_core::params::KnnParams;

/// Adds `other` to `acc` entry by entry (reducing per-block partial gradients).
fn add<E: CpuElem>(acc: &mut KnnParams<&mut [E]>, other: &KnnParams<Vec<E>>) {
    for (a, b) in acc.view_mut().into_tensors().into_iter().zip(other.view().into_tensors()) {
        for (x, &y) in a.iter_mut().zip(b) {
            *x += y;
        }
    }
}

/// `(b, t)` groups per parallel block at least (a group is already `P x M` of work).
const MIN_GROUPS: usize = 4;

/// Rows (`groups x P`) of one sub-batch at most: the projections of a sub-batch run as one
/// matrix product each, over contiguous rows, instead of one small product per group.
const SUB_ROWS: usize = 1024;

/// The q, k and v projections stacked into one `(3M, M)` weight and `(3M)` bias, so that one
/// product gives every row's `[q | k | v]`.
struct Stacked<E> {
    w: Vec<E>,
    b: Vec<E>,
}

impl<E: CpuElem> Stacked<E> {
    fn new(prm: &KnnParams<&[E]>) -> Self {
        let (w, b) = prm.stacked();
        Self { w, b }
    }
}

/// A sub-batch's scratch: the recomputed activations and, for the backward, their gradients.
/// Cached per thread ([`par::with_scratch`]) and sized for [`SUB_ROWS`] rows (or one group).
struct Scratch<E> {
    /// `(P, M, k)` it was sized for, and its row capacity.
    sized: (usize, usize, usize, usize),
    /// `LayerNorm(x)`, `(rows, M)`.
    h: Vec<E>,
    /// `[q | k | v]`, `(rows, 3M)`.
    qkv: Vec<E>,
    /// Attention weights, `(rows, k)`.
    w: Vec<E>,
    /// The weighted values before the out projection, `(rows, M)`.
    att: Vec<E>,
    /// Gradient of `att`, `(rows, M)`.
    g_att: Vec<E>,
    /// Gradient of `[q | k | v]`, `(rows, 3M)`.
    g_qkv: Vec<E>,
    /// Gradient of `h`, `(rows, M)`.
    g_h: Vec<E>,
    /// One row's `g_w`, `(k)`.
    g_w: Vec<E>,
    /// One row's `g_q`, `(M)`.
    g_q: Vec<E>,
}

impl<E: CpuElem> Scratch<E> {
    fn new(p: usize, m: usize, k: usize, rows: usize) -> Self {
        let z = |n: usize| vec![E::zero(); n];
        Self {
            sized: (p, m, k, rows),
            h: z(rows * m),
            qkv: z(rows * 3 * m),
            w: z(rows * k),
            att: z(rows * m),
            g_att: z(rows * m),
            g_qkv: z(rows * 3 * m),
            g_h: z(rows * m),
            g_w: z(k),
            g_q: z(m),
        }
    }

    /// Groups per sub-batch for `P` parcels.
    fn groups_per_sub(p: usize) -> usize {
        (SUB_ROWS / p.max(1)).max(1)
    }

    /// Runs `f` with this thread's cached scratch for `(P, M, k)`.
    fn with<R>(p: usize, m: usize, k: usize, f: impl FnOnce(&mut Self) -> R) -> R {
        let rows = Self::groups_per_sub(p) * p;
        par::with_scratch(|s: &Self| s.sized == (p, m, k, rows), || Self::new(p, m, k, rows), f)
    }

    /// The forward of `ng` consecutive `(b, t)` groups `x` (`ng P x M`) up to `att` (before
    /// the out projection), into this scratch.
    fn forward(&mut self, adj: &Adjacency, prm: &KnnParams<&[E]>, st: &Stacked<E>, x: &[E], ng: usize, m: usize) {
        let rows = ng * adj.parcels();
        let k = adj.k();
        let acts = Acts {
            h: &mut self.h[..rows * m],
            qkv: &mut self.qkv[..rows * 3 * m],
            w: &mut self.w[..rows * k],
            att: &mut self.att[..rows * m],
        };
        forward_acts(adj, prm, st, x, (ng, m), acts);
    }
}

/// The activations of some `(b, t)` groups that the backward needs, `rows = groups x P`:
/// `LayerNorm(x)` `(rows, M)`, `[q | k | v]` `(rows, 3M)`, the attention weights
/// `(rows, k)` and the weighted values before the out projection `(rows, M)`. Views of a
/// thread's [`Scratch`] or of the buffer a training forward keeps ([`KnnKept`]).
struct Acts<S> {
    h: S,
    qkv: S,
    w: S,
    att: S,
}

/// Values of [`Acts`] per row: `5M + k`.
fn acts_per_row(m: usize, k: usize) -> usize {
    5 * m + k
}

/// Splits `buf` (`rows` rows of [`Acts`], region after region) into its four views.
fn split_acts<E>(buf: &mut [E], rows: usize, m: usize, k: usize) -> Acts<&mut [E]> {
    let (h, rest) = buf.split_at_mut(rows * m);
    let (qkv, rest) = rest.split_at_mut(rows * 3 * m);
    let (w, att) = rest.split_at_mut(rows * k);
    Acts { h, qkv, w, att }
}

/// Rows `r` of the [`Acts`] of a block of `rows` rows (see [`split_acts`]).
fn acts_rows<E>(buf: &[E], rows: usize, m: usize, k: usize, r: std::ops::Range<usize>) -> Acts<&[E]> {
    let (h, rest) = buf.split_at(rows * m);
    let (qkv, rest) = rest.split_at(rows * 3 * m);
    let (w, att) = rest.split_at(rows * k);
    let n = r.len();
    Acts {
        h: &h[r.start * m..][..n * m],
        qkv: &qkv[r.start * 3 * m..][..n * 3 * m],
        w: &w[r.start * k..][..n * k],
        att: &att[r.start * m..][..n * m],
    }
}

/// The forward of `ng` consecutive `(b, t)` groups `x` (`ng P x M`) up to `att` (before the
/// out projection), into `acts` (each view exactly `ng P` rows).
fn forward_acts<E: CpuElem>(
    adj: &Adjacency,
    prm: &KnnParams<&[E]>,
    st: &Stacked<E>,
    x: &[E],
    (ng, m): (usize, usize),
    acts: Acts<&mut [E]>,
) {
    let (np, k) = (adj.parcels(), adj.k());
    let rows = ng * np;
    layernorm::forward_rows(x, rows, m, prm.norm_w, prm.norm_b, acts.h);
    linear::forward(acts.h, rows, m, &st.w, Some(&st.b), 3 * m, acts.qkv);
    let hd = Heads::new(adj, m);
    for g in 0..ng {
        let base = g * np;
        let (w, att) = (&mut acts.w[base * k..][..np * k], &mut acts.att[base * m..][..np * m]);
        attend(&hd, &acts.qkv[base * 3 * m..][..np * 3 * m], w, att);
    }
}

/// The attention's backward for each of the `ng` groups of `qkv` and `w` (from their
/// forward): from `g_att` into `g_qkv`, with `g_w` and `g_q` one row's scratch.
fn attention_backward<E: CpuElem>(
    hd: &Heads<'_, E>,
    ng: usize,
    (qkv, w, g_att): (&[E], &[E], &[E]),
    (g_w, g_q): (&mut [E], &mut [E]),
    g_qkv: &mut [E],
) {
    let (np, m, k) = (hd.adj.parcels(), hd.m, hd.k);
    for gi in 0..ng {
        let b = gi * np;
        attend_backward(
            hd,
            &qkv[b * 3 * m..][..np * 3 * m],
            &w[b * k..][..np * k],
            &g_att[b * m..][..np * m],
            g_w,
            g_q,
            &mut g_qkv[b * 3 * m..][..np * 3 * m],
        );
    }
}

/// What every group's attention shares: the neighbours, the width `M`, `k` and the score
/// scale `1 / sqrt(M)`.
#[derive(Copy, Clone)]
struct Heads<'a, E> {
    adj: &'a Adjacency,
    m: usize,
    k: usize,
    sc: E,
}

impl<'a, E: CpuElem> Heads<'a, E> {
    fn new(adj: &'a Adjacency, m: usize) -> Self {
        Self { adj, m, k: adj.k(), sc: E::of(1.0 / (m as f64).sqrt()) }
    }
}

multiversion! {
    /// The attention of one group: `qkv` `(P, 3M)` rows `[q | k | v]`; writes the softmax
    /// weights `w` `(P, k)` and `att[p] = sum_j w[p, j] v[a(p, j)]` `(P, M)`.
    fn attend<E: CpuElem>(hd: &Heads<'_, E>, qkv: &[E], w: &mut [E], att: &mut [E]) {
        let Heads { adj, m, k, sc } = *hd;
        for p in 0..adj.parcels() {
            let row = adj.row(p);
            let qp = &qkv[p * 3 * m..][..m];
            let wp = &mut w[p * k..][..k];
            for (j, &a) in row.iter().enumerate() {
                wp[j] = simd::dot(qp, &qkv[a * 3 * m + m..][..m]) * sc;
            }
            // Softmax with the row maximum subtracted, so every exponent is non-positive. The
            // exponentials in a loop of their own (it vectorizes: k of them at once) and then
            // the sum, in the same order as one loop would add them.
            let mx = wp.iter().copied().fold(E::neg_infinity(), E::max);
            for v in wp.iter_mut() {
                *v = (*v - mx).exp_nonpos();
            }
            let mut s = E::zero();
            for &v in wp.iter() {
                s += v;
            }
            let ap = &mut att[p * m..][..m];
            ap.fill(E::zero());
            for (j, &a) in row.iter().enumerate() {
                wp[j] /= s;
                let (wj, va) = (wp[j], &qkv[a * 3 * m + 2 * m..][..m]);
                for i in 0..m {
                    ap[i] += wj * va[i];
                }
            }
        }
    }
}

multiversion! {
    /// The attention's backward for one group (BACKWARD.md): from `g_att` `(P, M)`, the
    /// stored weights `w` and `[q | k | v]`, overwrites `g_qkv` `(P, 3M)` with
    /// `[g_q | g_k | g_v]`; the scatter-adds to neighbours stay inside the group.
    fn attend_backward<E: CpuElem>(
        hd: &Heads<'_, E>,
        qkv: &[E],
        w: &[E],
        g_att: &[E],
        g_w: &mut [E],
        g_q: &mut [E],
        g_qkv: &mut [E],
    ) {
        let Heads { adj, m, k, sc } = *hd;
        g_qkv.fill(E::zero());
        for p in 0..adj.parcels() {
            let row = adj.row(p);
            let wp = &w[p * k..][..k];
            let ga = &g_att[p * m..][..m];
            // g_w[p, j] = <g_att[p], v[a(p, j)]>;  g_v[a(p, j)] += w[p, j] g_att[p].
            for (j, &a) in row.iter().enumerate() {
                g_w[j] = simd::dot(ga, &qkv[a * 3 * m + 2 * m..][..m]);
                let gv = &mut g_qkv[a * 3 * m + 2 * m..][..m];
                for i in 0..m {
                    gv[i] += wp[j] * ga[i];
                }
            }
            // Softmax backward, then the scaled dot products: g_q[p] is summed in a row of its
            // own (so the loops read and write disjoint slices and vectorize).
            let wg = simd::dot(wp, &g_w[..k]);
            let (gq, qp) = (&mut g_q[..m], &qkv[p * 3 * m..][..m]);
            gq.fill(E::zero());
            for (j, &a) in row.iter().enumerate() {
                let gs = wp[j] * (g_w[j] - wg) * sc;
                let ka = &qkv[a * 3 * m + m..][..m];
                for i in 0..m {
                    gq[i] += gs * ka[i];
                }
                let gk = &mut g_qkv[a * 3 * m + m..][..m];
                for i in 0..m {
                    gk[i] += gs * qp[i];
                }
            }
            let gqp = &mut g_qkv[p * 3 * m..][..m];
            for i in 0..m {
                gqp[i] += gq[i];
            }
        }
    }
}

/// Runs `f(first group, groups)` over the groups `r` in sub-batches of
/// [`Scratch::groups_per_sub`], in order.
fn each_sub<E: CpuElem>(np: usize, r: std::ops::Range<usize>, mut f: impl FnMut(usize, usize)) {
    let sub = Scratch::<E>::groups_per_sub(np);
    let mut g0 = r.start;
    while g0 < r.end {
        let ng = sub.min(r.end - g0);
        f(g0, ng);
        g0 += ng;
    }
}

fn check(adj: &Adjacency, m: usize, n: usize, groups: usize, what: &str) {
    assert_eq!(n, groups * adj.parcels() * m, "knn {what}: {n} values, not (B*T={groups}, P={}, M={m})", adj.parcels());
}

/// What a training forward keeps for the backward ([`forward_keeping`], [`backward`]): every
/// row's activations (LayerNorm output, q/k/v, weights, weighted values), so the backward does
/// not recompute the LayerNorm, the q/k/v product and the attention. Laid out block by block
/// of the parallel blocks of the groups, each block's rows region after region.
#[derive(Clone, Debug)]
pub struct KnnKept<E> {
    /// `(M, P, k, groups)` they were made for.
    shape: (usize, usize, usize, usize),
    buf: Vec<E>,
}

impl<E> KnnKept<E> {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.buf.len() * std::mem::size_of::<E>()
    }

    /// The buffer, for the next [`forward_keeping`] of the same shape to reuse.
    pub fn into_buffer(self) -> Vec<E> {
        self.buf
    }
}

/// Bytes of the [`KnnKept`] a forward over `groups` groups leaves.
pub fn kept_bytes<E>(m: usize, adj: &Adjacency, groups: usize) -> usize {
    groups * adj.parcels() * acts_per_row(m, adj.k()) * std::mem::size_of::<E>()
}

/// The attention output `out = KnnAttention(x)` (without the residual) for `x` in the
/// model's `(B, T, P, M)` layout, `groups = B * T`. Overwrites `out`.
pub fn forward<E: CpuElem, S: AsRef<[E]>>(
    m: usize,
    adj: &Adjacency,
    prm: &KnnParams<S>,
    x: &[E],
    groups: usize,
    out: &mut [E],
) {
    forward_impl(m, adj, &prm.view(), (x, groups), out, &mut []);
}

/// [`forward`], also leaving what [`backward`] needs ([`kept_bytes`] of it), written into
/// `reuse` when it has that size (every value is overwritten), else into a new buffer.
pub fn forward_keeping<E: CpuElem, S: AsRef<[E]>>(
    m: usize,
    adj: &Adjacency,
    prm: &KnnParams<S>,
    (x, groups): (&[E], usize),
    out: &mut [E],
    reuse: Vec<E>,
) -> KnnKept<E> {
    let len = kept_bytes::<E>(m, adj, groups) / std::mem::size_of::<E>();
    let buf = if reuse.len() == len { reuse } else { par::zeros(len) };
    let mut kept = KnnKept { shape: (m, adj.parcels(), adj.k(), groups), buf };
    forward_impl(m, adj, &prm.view(), (x, groups), out, &mut kept.buf);
    kept
}

/// The forward, with its activations left in `kept` unless it is empty.
fn forward_impl<E: CpuElem>(
    m: usize,
    adj: &Adjacency,
    prm: &KnnParams<&[E]>,
    (x, groups): (&[E], usize),
    out: &mut [E],
    kept: &mut [E],
) {
    check(adj, m, x.len(), groups, "x");
    check(adj, m, out.len(), groups, "out");
    let (np, k) = (adj.parcels(), adj.k());
    let g = np * m;
    let per_group = if kept.is_empty() { 0 } else { np * acts_per_row(m, k) };
    let st = Stacked::new(prm);
    par::map_blocks2(groups, MIN_GROUPS, (out, g), (kept, per_group), |r, ob, kb| {
        let block_rows = r.len() * np;
        let mut kb = (!kb.is_empty()).then(|| split_acts(kb, block_rows, m, k));
        Scratch::with(np, m, k, |s| {
            each_sub::<E>(np, r.clone(), |g0, ng| {
                let (rows, xs) = (ng * np, &x[g0 * g..][..ng * g]);
                let att = match kb.as_mut() {
                    Some(kb) => {
                        let r0 = (g0 - r.start) * np;
                        let acts = Acts {
                            h: &mut kb.h[r0 * m..][..rows * m],
                            qkv: &mut kb.qkv[r0 * 3 * m..][..rows * 3 * m],
                            w: &mut kb.w[r0 * k..][..rows * k],
                            att: &mut kb.att[r0 * m..][..rows * m],
                        };
                        forward_acts(adj, prm, &st, xs, (ng, m), acts);
                        &kb.att[r0 * m..][..rows * m]
                    }
                    None => {
                        s.forward(adj, prm, &st, xs, ng, m);
                        &s.att[..rows * m]
                    }
                };
                let o = &mut ob[(g0 - r.start) * g..][..ng * g];
                linear::forward(att, rows, m, prm.out_w, Some(prm.out_b), m, o);
            })
        })
    });
}

/// The gradient arguments of [`backward`]: `g_out`, the gradient of the attention output;
/// `g_x`, the input gradient to add to; `grads`, the parameter gradients to add to.
pub struct KnnGrads<'a, E, G> {
    /// Gradient of the attention output, `(B, T, P, M)`.
    pub g_out: &'a [E],
    /// Gradient of the input, added to, `(B, T, P, M)`.
    pub g_x: &'a mut [E],
    /// Parameter gradients, added to.
    pub grads: &'a mut KnnParams<G>,
}

/// Backward of [`forward`]: recomputes each group's forward, then `g_x += d loss / d x`
/// through the attention only (the caller adds the residual's identity) and **accumulates**
/// (`+=`) the parameter gradients into `grads`.
#[allow(clippy::too_many_arguments)]
pub fn backward<E: CpuElem, S: AsRef<[E]>, G: AsMut<[E]>>(
    m: usize,
    adj: &Adjacency,
    prm: &KnnParams<S>,
    x: &[E],
    groups: usize,
    g_out: &[E],
    g_x: &mut [E],
    grads: &mut KnnParams<G>,
) {
    backward_kept(m, adj, prm, (x, groups), KnnGrads { g_out, g_x, grads }, None);
}

/// [`backward`] from the activations `kept` that [`forward_keeping`] left for the same
/// parameters and input (without, it recomputes them): the same bits either way.
///
/// # Panics
/// When `kept` was made for another shape.
pub fn backward_kept<E: CpuElem, S: AsRef<[E]>, G: AsMut<[E]>>(
    m: usize,
    adj: &Adjacency,
    prm: &KnnParams<S>,
    (x, groups): (&[E], usize),
    io: KnnGrads<'_, E, G>,
    kept: Option<&KnnKept<E>>,
) {
    let prm = &prm.view();
    let KnnGrads { g_out, g_x, grads } = io;
    check(adj, m, x.len(), groups, "x");
    check(adj, m, g_out.len(), groups, "g_out");
    check(adj, m, g_x.len(), groups, "g_x");
    let (np, k) = (adj.parcels(), adj.k());
    if let Some(kp) = kept {
        assert_eq!(kp.shape, (m, np, k, groups), "knn: kept activations made for another shape");
    }
    let g = np * m;
    let hd = Heads::new(adj, m);
    let st = Stacked::new(prm);
    let per_group = np * acts_per_row(m, k);
    let parts = par::map_blocks(groups, MIN_GROUPS, g_x, g, |r, gxb| {
        let mut pg = KnnParams::<Vec<E>>::zeros(m);
        // The stacked projections' gradients, split into q, k, v at the end of the block.
        let (mut g_wqkv, mut g_bqkv) = (vec![E::zero(); 3 * m * m], vec![E::zero(); 3 * m]);
        let kb = kept.map(|kp| &kp.buf[r.start * per_group..r.end * per_group]);
        Scratch::with(np, m, k, |s| {
            each_sub::<E>(np, r.clone(), |g0, ng| {
                let rows = ng * np;
                let xs = &x[g0 * g..][..ng * g];
                let go = &g_out[g0 * g..][..ng * g];
                if kb.is_none() {
                    s.forward(adj, prm, &st, xs, ng, m);
                }
                let Scratch { h, qkv, w, att, g_att, g_qkv, g_h, g_w, g_q, .. } = s;
                let acts = match kb {
                    Some(kb) => {
                        let r0 = (g0 - r.start) * np;
                        acts_rows(kb, r.len() * np, m, k, r0..r0 + rows)
                    }
                    None => {
                        Acts { h: &h[..rows * m], qkv: &qkv[..rows * 3 * m], w: &w[..rows * k], att: &att[..rows * m] }
                    }
                };
                // out = att Wo^T + bo.
                linear::backward(
                    acts.att,
                    rows,
                    m,
                    prm.out_w,
                    m,
                    go,
                    &mut pg.out_w,
                    Some(&mut pg.out_b),
                    Some((&mut g_att[..rows * m], false)),
                );
                attention_backward(&hd, ng, (acts.qkv, acts.w, &g_att[..rows * m]), (g_w, g_q), g_qkv);
                // [q | k | v] = h W^T + b: g_h = g_qkv W, and the stacked weight gradients.
                linear::backward(
                    acts.h,
                    rows,
                    m,
                    &st.w,
                    3 * m,
                    &g_qkv[..rows * 3 * m],
                    &mut g_wqkv,
                    Some(&mut g_bqkv),
                    Some((&mut g_h[..rows * m], false)),
                );
                let gx = &mut gxb[(g0 - r.start) * g..][..ng * g];
                let lg = layernorm::Grads { x: gx, w: &mut pg.norm_w, b: &mut pg.norm_b };
                layernorm::backward_rows(xs, rows, m, prm.norm_w, &g_h[..rows * m], lg);
            })
        });
        for (dst, src) in [&mut pg.q_w, &mut pg.k_w, &mut pg.v_w].into_iter().zip(g_wqkv.chunks_exact(m * m)) {
            dst.copy_from_slice(src);
        }
        for (dst, src) in [&mut pg.q_b, &mut pg.k_b, &mut pg.v_b].into_iter().zip(g_bqkv.chunks_exact(m)) {
            dst.copy_from_slice(src);
        }
        pg
    });
    let mut grads = grads.view_mut();
    for p in &parts {
        add(&mut grads, p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boldcast_testkit::fd::{central, central_at};
    use rand::{Rng, SeedableRng};

    fn rand_vec(rng: &mut rand_chacha::ChaCha8Rng, n: usize, scale: f64) -> Vec<f64> {
        (0..n).map(|_| (rng.random::<f64>() * 2.0 - 1.0) * scale).collect()
    }

    fn params(rng: &mut rand_chacha::ChaCha8Rng, m: usize) -> KnnParams<Vec<f64>> {
        let mut p = KnnParams::zeros(m);
        for t in p.view_mut().into_tensors() {
            t.copy_from_slice(&rand_vec(rng, t.len(), 0.7));
        }
        p.norm_w.iter_mut().for_each(|w| *w = 1.0 + 0.3 * *w);
        p
    }

    fn loss(m: usize, adj: &Adjacency, p: &KnnParams<Vec<f64>>, x: &[f64], groups: usize, c: &[f64]) -> f64 {
        let mut out = vec![0.0; x.len()];
        forward(m, adj, p, x, groups, &mut out);
        out.iter().zip(c).map(|(a, b)| a * b).sum()
    }

    #[test]
    fn backward_matches_finite_differences() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        // 12 groups: several parallel blocks; k = 4 of P = 6 so neighbours are shared.
        let (m, np, k, groups) = (5, 6, 4, 12);
        let adj = Adjacency::ring(np, k).unwrap();
        let prm = params(&mut rng, m);
        let x = rand_vec(&mut rng, groups * np * m, 1.5);
        let c = rand_vec(&mut rng, x.len(), 1.0);
        let mut g_x = vec![0.0; x.len()];
        let mut grads = KnnParams::zeros(m);
        backward(m, &adj, &prm, &x, groups, &c, &mut g_x, &mut grads);
        let h = 1e-6;
        let mut worst = 0.0f64;
        let mut cmp = |a: f64, num: f64, what: &str| {
            // Relative error with an absolute floor: entries near zero are judged absolutely.
            let err = (a - num).abs() / num.abs().max(1e-2);
            worst = worst.max(err);
            assert!((a - num).abs() <= 1e-7 + 1e-5 * num.abs(), "{what}: {a} vs {num}");
        };
        for i in (0..x.len()).step_by(7) {
            cmp(g_x[i], central_at(&x, i, h, |x| loss(m, &adj, &prm, x, groups, &c)), "g_x");
        }
        for ti in 0..10 {
            let n = prm.view().into_tensors()[ti].len();
            for i in (0..n).step_by(3) {
                let bump = |q: &mut KnnParams<Vec<f64>>, d| q.view_mut().into_tensors()[ti][i] += d;
                let num = central(&prm, h, bump, |q| loss(m, &adj, q, &x, groups, &c));
                cmp(grads.view().into_tensors()[ti][i], num, &format!("tensor {ti}"));
            }
        }
        assert!(worst < 1e-5, "worst relative error {worst}");
    }

    /// The activations a training forward keeps are what the backward recomputes, so the
    /// backward from them gives the same bits, and keeping them leaves the forward's output
    /// as it is. f32; 960 groups of 40 parcels: 32 blocks of 30 groups, each two sub-batches
    /// (25 and 5 groups), so the kept buffer's block and sub-batch offsets are all exercised.
    #[test]
    fn backward_from_the_kept_activations_is_the_plain_backward() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(19);
        let (m, np, k, groups) = (5, 40, 4, 960);
        assert_eq!(Scratch::<f32>::groups_per_sub(np), 25);
        let adj = Adjacency::ring(np, k).unwrap();
        let to32 = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect::<Vec<f32>>();
        let p64 = params(&mut rng, m);
        let mut prm = KnnParams::<Vec<f32>>::zeros(m);
        for (d, s) in prm.view_mut().into_tensors().into_iter().zip(p64.view().into_tensors()) {
            d.copy_from_slice(&to32(s.to_vec()));
        }
        let x = to32(rand_vec(&mut rng, groups * np * m, 1.5));
        let g_out = to32(rand_vec(&mut rng, x.len(), 1.0));
        let (mut y, mut y_kept) = (vec![0.0f32; x.len()], vec![0.0f32; x.len()]);
        forward(m, &adj, &prm, &x, groups, &mut y);
        let stale = vec![f32::NAN; kept_bytes::<f32>(m, &adj, groups) / 4];
        let kept = forward_keeping(m, &adj, &prm, (&x, groups), &mut y_kept, stale);
        assert!(y == y_kept, "keeping the activations changed the forward");
        assert!(kept.buf.iter().all(|v| v.is_finite()), "a stale value was left");
        assert_eq!(kept.bytes(), groups * np * (5 * m + k) * 4);
        let run = |kept: Option<&KnnKept<f32>>| {
            let (mut g_x, mut grads) = (vec![0.5f32; x.len()], KnnParams::<Vec<f32>>::zeros(m));
            let io = KnnGrads { g_out: &g_out, g_x: &mut g_x, grads: &mut grads };
            backward_kept(m, &adj, &prm, (&x, groups), io, kept);
            (g_x, grads.view().into_tensors().into_iter().map(|t| t.to_vec()).collect::<Vec<_>>())
        };
        let plain = run(None);
        assert!(plain.0.iter().any(|&v| v != 0.5));
        assert!(run(Some(&kept)) == plain, "the backward from the kept activations differs");
        let mut bad = kept.clone();
        bad.buf.iter_mut().for_each(|v| *v += 0.25);
        assert!(run(Some(&bad)) != plain, "the kept activations are not used");
    }

    #[test]
    fn softmax_rows_sum_to_one_and_k1_is_self_value() {
        // With k = 1 each parcel attends to itself only: att = v.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let (m, np) = (4, 3);
        let adj = Adjacency::ring(np, 1).unwrap();
        let prm = params(&mut rng, m);
        let x = rand_vec(&mut rng, np * m, 1.0);
        let st = Stacked::new(&prm.view());
        let mut s = Scratch::new(np, m, 1, np);
        s.forward(&adj, &prm.view(), &st, &x, 1, m);
        for p in 0..np {
            assert_eq!(&s.att[p * m..(p + 1) * m], &s.qkv[p * 3 * m + 2 * m..][..m]);
        }
        let adj = Adjacency::ring(np, 3).unwrap();
        let mut s = Scratch::new(np, m, 3, np);
        s.forward(&adj, &prm.view(), &st, &x, 1, m);
        for r in s.w.chunks(3) {
            assert!((r.iter().sum::<f64>() - 1.0).abs() < 1e-14);
        }
    }
}
