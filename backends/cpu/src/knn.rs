//! The spatial mixer: single-head attention of each parcel over its k nearest neighbours
//! (MODEL.md, "Spatial mixer"), forward and hand-written backward (BACKWARD.md,
//! "k-nearest-neighbour attention").
//!
//! Everything in the block (its LayerNorm, the q/k/v/out projections, the attention) acts on
//! one `(b, t)` slice of `P` rows at a time, so both directions run per `(b, t)` group: the
//! groups are split into the fixed blocks of [`crate::par`], each block keeps `O(P M)`
//! scratch and its own partial weight gradients, and the partials are reduced in block order.
//! The scatter-adds of the backward (`g_v[a(p, j)] += ...`, `g_kk[a(p, j)] += ...`) stay inside
//! one `(b, t)` group, which a single thread owns: no races, and no activations of the whole
//! batch are kept (the backward recomputes the group's forward).

use crate::ops::{layernorm, linear, CpuElem};
use crate::par;
use boldcast_core::Adjacency;

/// The block's parameters, PyTorch layouts: `Linear` weights `(out, in) = (M, M)`.
#[derive(Clone, Debug, PartialEq)]
pub struct KnnParams<E> {
    /// `knn.norm.weight` (M).
    pub norm_w: Vec<E>,
    /// `knn.norm.bias` (M).
    pub norm_b: Vec<E>,
    /// `knn.q.weight` (M, M).
    pub q_w: Vec<E>,
    /// `knn.q.bias` (M).
    pub q_b: Vec<E>,
    /// `knn.kproj.weight` (M, M).
    pub k_w: Vec<E>,
    /// `knn.kproj.bias` (M).
    pub k_b: Vec<E>,
    /// `knn.v.weight` (M, M).
    pub v_w: Vec<E>,
    /// `knn.v.bias` (M).
    pub v_b: Vec<E>,
    /// `knn.out.weight` (M, M).
    pub out_w: Vec<E>,
    /// `knn.out.bias` (M).
    pub out_b: Vec<E>,
}

impl<E: CpuElem> KnnParams<E> {
    /// All zeros for width `m` (gradient buffers; the model initializes parameters itself).
    pub fn zeros(m: usize) -> Self {
        let v = || vec![E::zero(); m];
        let w = || vec![E::zero(); m * m];
        Self {
            norm_w: v(),
            norm_b: v(),
            q_w: w(),
            q_b: v(),
            k_w: w(),
            k_b: v(),
            v_w: w(),
            v_b: v(),
            out_w: w(),
            out_b: v(),
        }
    }

    /// `(suffix after "layers.{i}.knn.", slice)` in [`boldcast_core::ModelConfig::param_specs`]
    /// order.
    pub fn tensors(&self) -> [(&'static str, &[E]); 10] {
        [
            ("norm.weight", &self.norm_w),
            ("norm.bias", &self.norm_b),
            ("q.weight", &self.q_w),
            ("q.bias", &self.q_b),
            ("kproj.weight", &self.k_w),
            ("kproj.bias", &self.k_b),
            ("v.weight", &self.v_w),
            ("v.bias", &self.v_b),
            ("out.weight", &self.out_w),
            ("out.bias", &self.out_b),
        ]
    }

    /// Mutable [`KnnParams::tensors`], same order.
    pub fn tensors_mut(&mut self) -> [(&'static str, &mut [E]); 10] {
        [
            ("norm.weight", &mut self.norm_w),
            ("norm.bias", &mut self.norm_b),
            ("q.weight", &mut self.q_w),
            ("q.bias", &mut self.q_b),
            ("kproj.weight", &mut self.k_w),
            ("kproj.bias", &mut self.k_b),
            ("v.weight", &mut self.v_w),
            ("v.bias", &mut self.v_b),
            ("out.weight", &mut self.out_w),
            ("out.bias", &mut self.out_b),
        ]
    }

    /// Adds `other` entry by entry (reducing per-block partial gradients).
    fn add(&mut self, other: &Self) {
        for ((_, a), (_, b)) in self.tensors_mut().into_iter().zip(other.tensors()) {
            for (x, &y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
    }
}

/// `(b, t)` groups per parallel block at least (a group is already `P x M` of work).
const MIN_GROUPS: usize = 4;

/// Per-group scratch: the recomputed activations (`P x M`, `w` is `P x k`).
struct Scratch<E> {
    h: Vec<E>,
    q: Vec<E>,
    kk: Vec<E>,
    v: Vec<E>,
    w: Vec<E>,
    att: Vec<E>,
}

impl<E: CpuElem> Scratch<E> {
    fn new(p: usize, m: usize, k: usize) -> Self {
        let z = || vec![E::zero(); p * m];
        Self { h: z(), q: z(), kk: z(), v: z(), w: vec![E::zero(); p * k], att: z() }
    }

    /// The forward of one `(b, t)` group `x` (`P x M`) up to `att` (before the out projection).
    fn forward(&mut self, adj: &Adjacency, prm: &KnnParams<E>, x: &[E], m: usize) {
        let (np, k) = (adj.parcels(), adj.k());
        layernorm::forward_rows(x, np, m, &prm.norm_w, &prm.norm_b, &mut self.h);
        linear::forward(&self.h, np, m, &prm.q_w, Some(&prm.q_b), m, &mut self.q);
        linear::forward(&self.h, np, m, &prm.k_w, Some(&prm.k_b), m, &mut self.kk);
        linear::forward(&self.h, np, m, &prm.v_w, Some(&prm.v_b), m, &mut self.v);
        let sc = E::of(1.0 / (m as f64).sqrt());
        for p in 0..np {
            let row = adj.row(p);
            let qp = &self.q[p * m..(p + 1) * m];
            let w = &mut self.w[p * k..(p + 1) * k];
            for (j, &a) in row.iter().enumerate() {
                w[j] = dot(qp, &self.kk[a * m..(a + 1) * m]) * sc;
            }
            // Softmax with the row maximum subtracted, so exp never overflows.
            let mx = w.iter().copied().fold(E::neg_infinity(), E::max);
            let mut s = E::zero();
            for v in w.iter_mut() {
                *v = (*v - mx).exp();
                s += *v;
            }
            let att = &mut self.att[p * m..(p + 1) * m];
            att.fill(E::zero());
            for (j, &a) in row.iter().enumerate() {
                w[j] /= s;
                let va = &self.v[a * m..(a + 1) * m];
                for (o, &vv) in att.iter_mut().zip(va) {
                    *o += w[j] * vv;
                }
            }
        }
    }
}

#[inline]
fn dot<E: CpuElem>(a: &[E], b: &[E]) -> E {
    a.iter().zip(b).fold(E::zero(), |s, (&x, &y)| s + x * y)
}

fn check(adj: &Adjacency, m: usize, n: usize, groups: usize, what: &str) {
    assert_eq!(n, groups * adj.parcels() * m, "knn {what}: {n} values, not (B*T={groups}, P={}, M={m})", adj.parcels());
}

/// The attention output `out = KnnAttention(x)` (without the residual) for `x` in the
/// model's `(B, T, P, M)` layout, `groups = B * T`. Overwrites `out`.
pub fn forward<E: CpuElem>(m: usize, adj: &Adjacency, prm: &KnnParams<E>, x: &[E], groups: usize, out: &mut [E]) {
    check(adj, m, x.len(), groups, "x");
    check(adj, m, out.len(), groups, "out");
    let g = adj.parcels() * m;
    par::map_blocks(groups, MIN_GROUPS, out, g, |r, ob| {
        let mut s = Scratch::new(adj.parcels(), m, adj.k());
        for (gi, o) in r.zip(ob.chunks_exact_mut(g)) {
            s.forward(adj, prm, &x[gi * g..(gi + 1) * g], m);
            linear::forward(&s.att, adj.parcels(), m, &prm.out_w, Some(&prm.out_b), m, o);
        }
    });
}

/// Backward of [`forward`]: recomputes each group's forward, then `g_x += d loss / d x`
/// through the attention only (the caller adds the residual's identity) and
/// **accumulates** (`+=`) the parameter gradients into `grads`.
#[allow(clippy::too_many_arguments)]
pub fn backward<E: CpuElem>(
    m: usize,
    adj: &Adjacency,
    prm: &KnnParams<E>,
    x: &[E],
    groups: usize,
    g_out: &[E],
    g_x: &mut [E],
    grads: &mut KnnParams<E>,
) {
    check(adj, m, x.len(), groups, "x");
    check(adj, m, g_out.len(), groups, "g_out");
    check(adj, m, g_x.len(), groups, "g_x");
    let (np, k) = (adj.parcels(), adj.k());
    let g = np * m;
    let sc = E::of(1.0 / (m as f64).sqrt());
    let parts = par::map_blocks(groups, MIN_GROUPS, g_x, g, |r, gxb| {
        let mut s = Scratch::new(np, m, k);
        let mut pg = KnnParams::zeros(m);
        let z = || vec![E::zero(); g];
        let (mut g_att, mut g_q, mut g_k, mut g_v, mut g_h) = (z(), z(), z(), z(), z());
        let mut g_w = vec![E::zero(); k];
        for (gi, gx) in r.zip(gxb.chunks_exact_mut(g)) {
            let xs = &x[gi * g..(gi + 1) * g];
            let go = &g_out[gi * g..(gi + 1) * g];
            s.forward(adj, prm, xs, m);
            // out = att Wo^T + bo.
            linear::backward(
                &s.att,
                np,
                m,
                &prm.out_w,
                m,
                go,
                &mut pg.out_w,
                Some(&mut pg.out_b),
                Some((&mut g_att, false)),
            );
            g_q.fill(E::zero());
            g_k.fill(E::zero());
            g_v.fill(E::zero());
            for p in 0..np {
                let row = adj.row(p);
                let w = &s.w[p * k..(p + 1) * k];
                let ga = &g_att[p * m..(p + 1) * m];
                // g_w[p, j] = <g_att[p], v[a(p, j)]>;  g_v[a(p, j)] += w[p, j] g_att[p].
                for (j, &a) in row.iter().enumerate() {
                    g_w[j] = dot(ga, &s.v[a * m..(a + 1) * m]);
                    for (o, &gg) in g_v[a * m..(a + 1) * m].iter_mut().zip(ga) {
                        *o += w[j] * gg;
                    }
                }
                // Softmax backward, then the scaled dot products.
                let wg = dot(w, &g_w);
                let qp = &s.q[p * m..(p + 1) * m];
                for (j, &a) in row.iter().enumerate() {
                    let gs = w[j] * (g_w[j] - wg) * sc;
                    let ka = &s.kk[a * m..(a + 1) * m];
                    for (o, &kv) in g_q[p * m..(p + 1) * m].iter_mut().zip(ka) {
                        *o += gs * kv;
                    }
                    for (o, &qv) in g_k[a * m..(a + 1) * m].iter_mut().zip(qp) {
                        *o += gs * qv;
                    }
                }
            }
            // g_h = g_q Wq + g_kk Wk + g_v Wv (and the projections' weight gradients).
            linear::backward(&s.h, np, m, &prm.q_w, m, &g_q, &mut pg.q_w, Some(&mut pg.q_b), Some((&mut g_h, false)));
            linear::backward(&s.h, np, m, &prm.k_w, m, &g_k, &mut pg.k_w, Some(&mut pg.k_b), Some((&mut g_h, true)));
            linear::backward(&s.h, np, m, &prm.v_w, m, &g_v, &mut pg.v_w, Some(&mut pg.v_b), Some((&mut g_h, true)));
            layernorm::backward_rows(xs, np, m, &prm.norm_w, &g_h, gx, &mut pg.norm_w, &mut pg.norm_b);
        }
        pg
    });
    for p in &parts {
        grads.add(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn rand_vec(rng: &mut rand_chacha::ChaCha8Rng, n: usize, scale: f64) -> Vec<f64> {
        (0..n).map(|_| (rng.random::<f64>() * 2.0 - 1.0) * scale).collect()
    }

    fn params(rng: &mut rand_chacha::ChaCha8Rng, m: usize) -> KnnParams<f64> {
        let mut p = KnnParams::zeros(m);
        for (name, t) in p.tensors_mut() {
            let v = rand_vec(rng, t.len(), 0.7);
            for (o, x) in t.iter_mut().zip(v) {
                *o = if name == "norm.weight" { 1.0 + 0.3 * x } else { x };
            }
        }
        p
    }

    fn loss(m: usize, adj: &Adjacency, p: &KnnParams<f64>, x: &[f64], groups: usize, c: &[f64]) -> f64 {
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
        let mut cmp = |a: f64, plus: f64, minus: f64, what: &str| {
            let num = (plus - minus) / (2.0 * h);
            // Relative error with an absolute floor: entries near zero are judged absolutely.
            let err = (a - num).abs() / num.abs().max(1e-2);
            worst = worst.max(err);
            assert!((a - num).abs() <= 1e-7 + 1e-5 * num.abs(), "{what}: {a} vs {num}");
        };
        for i in (0..x.len()).step_by(7) {
            let (mut xp, mut xm) = (x.clone(), x.clone());
            xp[i] += h;
            xm[i] -= h;
            cmp(g_x[i], loss(m, &adj, &prm, &xp, groups, &c), loss(m, &adj, &prm, &xm, groups, &c), "g_x");
        }
        for ti in 0..10 {
            let n = prm.tensors()[ti].1.len();
            for i in (0..n).step_by(3) {
                let (mut pp, mut pm) = (prm.clone(), prm.clone());
                pp.tensors_mut()[ti].1[i] += h;
                pm.tensors_mut()[ti].1[i] -= h;
                let a = grads.tensors()[ti].1[i];
                cmp(a, loss(m, &adj, &pp, &x, groups, &c), loss(m, &adj, &pm, &x, groups, &c), prm.tensors()[ti].0);
            }
        }
        assert!(worst < 1e-5, "worst relative error {worst}");
    }

    #[test]
    fn softmax_rows_sum_to_one_and_k1_is_self_value() {
        // With k = 1 each parcel attends to itself only: att = v.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let (m, np) = (4, 3);
        let adj = Adjacency::ring(np, 1).unwrap();
        let prm = params(&mut rng, m);
        let x = rand_vec(&mut rng, np * m, 1.0);
        let mut s = Scratch::new(np, m, 1);
        s.forward(&adj, &prm, &x, m);
        assert_eq!(s.att, s.v);
        let adj = Adjacency::ring(np, 3).unwrap();
        let mut s = Scratch::new(np, m, 3);
        s.forward(&adj, &prm, &x, m);
        for r in s.w.chunks(3) {
            assert!((r.iter().sum::<f64>() - 1.0).abs() < 1e-14);
        }
    }
}
