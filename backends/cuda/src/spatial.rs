//! The spatial mixer of one layer in shim mode, `out = x + Out(Attend(QKV(LayerNorm(x))))`
//! (MODEL.md, "Spatial mixer"), forward and backward over `groups` `(b, t)` groups of `P`
//! rows `(groups P, M)`: LayerNorm through [`crate::ops::layernorm`], the projections through
//! [`crate::ops::linear`] (q, k and v stacked into one `(3M, M)` product, as the CPU backend
//! does), the attention through [`crate::knn`]. The backward recomputes the group's forward
//! from `x`; every activation comes from the [`Pool`].

use crate::exec;
use crate::knn::{attend, attend_backward, Neighbours};
use crate::ops::{act, layernorm, linear};
use crate::pool::{Buf, Pool};
use crate::shim::Result;

pub use boldcast_core::params::KnnParams;

/// The forward's internals, recomputed by the backward.
struct Internals {
    h: Buf,
    qkv: Buf,
    w: Buf,
    att: Buf,
}

/// The q, k and v projections stacked into one `(3M, M)` weight and `(3M)` bias (as
/// [`KnnParams::stacked`]), copied on the device into buffers of `pool`.
fn stacked(p: &KnnParams<&[f32]>, pool: &Pool) -> (Buf, Buf) {
    let (mm, m) = (p.q_w.len(), p.q_b.len());
    let (mut w3, mut b3) = (pool.zeros(3 * mm), pool.zeros(3 * m));
    for (i, (w, b)) in [(p.q_w, p.q_b), (p.k_w, p.k_b), (p.v_w, p.v_b)].into_iter().enumerate() {
        exec::copy(w, &mut w3[i * mm..(i + 1) * mm]);
        exec::copy(b, &mut b3[i * m..(i + 1) * m]);
    }
    (w3, b3)
}

/// The neighbours as the model holds them, in its pool's buffers.
pub type Nb = Neighbours<Buf<i32>>;

/// Everything up to the attention's output (before the out projection).
fn internals(p: &KnnParams<&[f32]>, nb: &Nb, m: usize, groups: usize, x: &[f32], pool: &Pool) -> Result<Internals> {
    let rows = x.len() / m;
    let mut h = pool.zeros(rows * m);
    layernorm::forward(x, rows, m, p.norm_w, p.norm_b, &mut h)?;
    let (w3, b3) = stacked(p, pool);
    let mut qkv = pool.zeros(rows * 3 * m);
    linear::forward(&h, &w3, Some(&b3), 3 * m, &mut qkv)?;
    let (mut w, mut att) = (pool.zeros(rows * nb.k()), pool.zeros(rows * m));
    attend(nb, m, groups, &qkv, &mut w, &mut att)?;
    Ok(Internals { h, qkv, w, att })
}

/// Where the mixer attends: the neighbours, the width M and the `(b, t)` groups of P rows.
pub type Mixing<'a> = (&'a Nb, usize, usize);

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
    let (w3, _) = stacked(p, pool);
    let (mut gw3, mut gb3) = (pool.zeros(3 * m * m), pool.zeros(3 * m));
    linear::backward_params(rows, &it.h, &g_qkv, &mut gw3, Some(&mut gb3))?;
    for (i, (gw, gb)) in
        [(&mut g.q_w, &mut g.q_b), (&mut g.k_w, &mut g.k_b), (&mut g.v_w, &mut g.v_b)].into_iter().enumerate()
    {
        act::add(&gw3[i * m * m..(i + 1) * m * m], gw)?;
        act::add(&gb3[i * m..(i + 1) * m], gb)?;
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
