//! The spatial mixer of one layer in shim mode, `out = x + Out(Attend(QKV(LayerNorm(x))))`
//! (MODEL.md, "Spatial mixer"), forward and backward over `groups` `(b, t)` groups of `P`
//! rows `(groups P, M)`: LayerNorm through [`crate::ops::layernorm`], the projections through
//! [`crate::ops::linear`] (q, k and v stacked into one `(3M, M)` product, as the CPU backend
//! does), the attention through [`crate::knn`]. The backward recomputes the group's forward
//! from `x`; every activation comes from the [`Pool`].

use crate::knn::{attend, attend_backward, Neighbours};
use crate::ops::{layernorm, linear};
use crate::pool::{Buf, Pool};
use crate::shim::Result;

boldcast_core::param_group! {
    /// The block's parameters (or gradients), PyTorch layouts: `Linear` weights `(M, M)`, in
    /// state-dict order. `S` is `Vec<f32>` (owned), `&[f32]` (a view of the model's store) or
    /// `&mut [f32]` (gradients to add to).
    pub struct KnnParams {
        /// `knn.norm.weight` (M).
        norm_w,
        /// `knn.norm.bias` (M).
        norm_b,
        /// `knn.q.weight` (M, M).
        q_w,
        /// `knn.q.bias` (M).
        q_b,
        /// `knn.kproj.weight` (M, M).
        k_w,
        /// `knn.kproj.bias` (M).
        k_b,
        /// `knn.v.weight` (M, M).
        v_w,
        /// `knn.v.bias` (M).
        v_b,
        /// `knn.out.weight` (M, M).
        out_w,
        /// `knn.out.bias` (M).
        out_b,
    }
}

impl KnnParams<Vec<f32>> {
    /// All zeros for width `m`.
    pub fn zeros(m: usize) -> Self {
        let (v, w) = (|| vec![0.0f32; m], || vec![0.0f32; m * m]);
        let (norm_w, norm_b) = (v(), v());
        Self { norm_w, norm_b, q_w: w(), q_b: v(), k_w: w(), k_b: v(), v_w: w(), v_b: v(), out_w: w(), out_b: v() }
    }
}

impl KnnParams<&[f32]> {
    /// The stacked `(3M, M)` weight and `(3M)` bias of q, k and v (a device build keeps them
    /// stacked in its parameter buffer instead of copying them per call).
    fn stacked(&self) -> (Vec<f32>, Vec<f32>) {
        ([self.q_w, self.k_w, self.v_w].concat(), [self.q_b, self.k_b, self.v_b].concat())
    }
}

/// The forward's internals, recomputed by the backward.
struct Internals {
    h: Buf,
    qkv: Buf,
    w: Buf,
    att: Buf,
}

/// Everything up to the attention's output (before the out projection).
fn internals(
    p: &KnnParams<&[f32]>,
    nb: &Neighbours,
    m: usize,
    groups: usize,
    x: &[f32],
    pool: &Pool,
) -> Result<Internals> {
    let rows = x.len() / m;
    let mut h = pool.zeros(rows * m);
    layernorm::forward(x, rows, m, p.norm_w, p.norm_b, &mut h)?;
    let (w3, b3) = p.stacked();
    let mut qkv = pool.zeros(rows * 3 * m);
    linear::forward(&h, &w3, Some(&b3), 3 * m, &mut qkv)?;
    let (mut w, mut att) = (pool.zeros(rows * nb.k()), pool.zeros(rows * m));
    attend(nb, m, groups, &qkv, &mut w, &mut att)?;
    Ok(Internals { h, qkv, w, att })
}

/// Where the mixer attends: the neighbours, the width M and the `(b, t)` groups of P rows.
pub type Mixing<'a> = (&'a Neighbours, usize, usize);

/// `x + attention(x)` for `x` `(groups P, M)`.
pub fn forward(p: &KnnParams<&[f32]>, (nb, m, groups): Mixing<'_>, x: &[f32], pool: &Pool) -> Result<Buf> {
    let it = internals(p, nb, m, groups, x, pool)?;
    // The residual: the out projection adds onto a copy of x.
    let mut out = pool.copy_of(x);
    linear::forward_add(&it.att, p.out_w, p.out_b, m, &mut out)?;
    Ok(out)
}

/// The backward of [`forward`] for the output gradient `g_out`: returns `g_x`, and adds the
/// parameter gradients to `g`.
pub fn backward(
    p: &KnnParams<&[f32]>,
    (nb, m, groups): Mixing<'_>,
    (x, g_out): (&[f32], &[f32]),
    g: &mut KnnParams<&mut [f32]>,
    pool: &Pool,
) -> Result<Buf> {
    let rows = x.len() / m;
    let it = internals(p, nb, m, groups, x, pool)?;
    linear::backward_params(rows, &it.att, g_out, g.out_w, Some(&mut g.out_b))?;
    let mut g_att = pool.zeros(rows * m);
    linear::backward_input(g_out, p.out_w, m, 0.0, &mut g_att)?;
    let mut g_qkv = pool.zeros(rows * 3 * m);
    attend_backward(nb, m, groups, &it.qkv, &it.w, &g_att, &mut g_qkv)?;
    drop(g_att);
    // The stacked gradient, split back into q, k and v afterwards.
    let (w3, _) = p.stacked();
    let (mut gw3, mut gb3) = (vec![0.0f32; 3 * m * m], vec![0.0f32; 3 * m]);
    linear::backward_params(rows, &it.h, &g_qkv, &mut gw3, Some(&mut gb3))?;
    for (i, (gw, gb)) in
        [(&mut g.q_w, &mut g.q_b), (&mut g.k_w, &mut g.k_b), (&mut g.v_w, &mut g.v_b)].into_iter().enumerate()
    {
        gw.iter_mut().zip(&gw3[i * m * m..(i + 1) * m * m]).for_each(|(a, b)| *a += b);
        gb.iter_mut().zip(&gb3[i * m..(i + 1) * m]).for_each(|(a, b)| *a += b);
    }
    let mut g_h = pool.zeros(rows * m);
    linear::backward_input(&g_qkv, &w3, 3 * m, 0.0, &mut g_h)?;
    drop((g_qkv, it));
    // The residual's gradient; the LayerNorm's backward adds to it.
    let mut g_x = pool.copy_of(g_out);
    let lg = layernorm::Grads { x: &mut g_x, w: g.norm_w, b: g.norm_b };
    layernorm::backward(x, rows, m, p.norm_w, &g_h, lg, pool)?;
    Ok(g_x)
}
