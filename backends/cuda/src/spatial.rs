//! The spatial mixer of one layer in shim mode, `out = x + Out(Attend(QKV(LayerNorm(x))))`
//! (MODEL.md, "Spatial mixer"), forward and backward over `groups` `(b, t)` groups of `P`
//! rows `(groups P, M)`: LayerNorm through [`crate::ops::layernorm`], the projections through
//! [`crate::ops::linear`] (q, k and v stacked into one `(3M, M)` product, as the CPU backend
//! does), the attention through [`crate::knn`]. Both passes walk the groups a chunk at a time
//! (their workspace is one chunk's), and the backward recomputes a chunk's forward from `x`;
//! every activation comes from the [`Pool`].

use crate::exec;
use crate::knn::{attend, attend_backward, Neighbours};
use crate::ops::{act, layernorm, linear};
use crate::pool::{Buf, Pool};
use crate::shim::Result;
use crate::stored::Input;

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

/// Everything up to the attention's output (before the out projection), for `groups`
/// groups of `x`.
fn internals(p: &KnnParams<&[f32]>, mx: &Mixing<'_>, groups: usize, x: &[f32], pool: &Pool) -> Result<Internals> {
    let (nb, m) = (mx.nb, mx.m);
    let rows = x.len() / m;
    let mut h = pool.zeros(rows * m);
    layernorm::forward(x, rows, m, p.norm_w, p.norm_b, &mut h)?;
    let mut qkv = pool.zeros(rows * 3 * m);
    linear::forward(&h, mx.w3, Some(mx.b3), 3 * m, &mut qkv)?;
    let (mut w, mut att) = (pool.zeros(rows * nb.k()), pool.zeros(rows * m));
    attend(nb, m, groups, &qkv, &mut w, &mut att)?;
    Ok(Internals { h, qkv, w, att })
}

/// Where the mixer attends: the neighbours, the width M, the `(b, t)` groups of P rows and
/// how many groups one pass recomputes at a time (which bounds its workspace; the groups are
/// independent).
#[derive(Clone, Copy, Debug)]
pub struct Groups<'a> {
    /// The neighbours.
    pub nb: &'a Nb,
    /// The width M.
    pub m: usize,
    /// Groups of P rows.
    pub groups: usize,
    /// Groups per pass (0 counts as 1).
    pub chunk: usize,
}

/// [`Groups`] with the stacked projection, made once per call.
struct Mixing<'a> {
    nb: &'a Nb,
    m: usize,
    w3: &'a [f32],
    b3: &'a [f32],
}

impl Groups<'_> {
    /// The passes: (first element, elements, groups), in order.
    fn passes(&self) -> impl Iterator<Item = (usize, usize, usize)> {
        let (c, per) = (self.chunk.max(1), self.nb.parcels() * self.m);
        let n = self.groups;
        (0..n).step_by(c).map(move |g0| (g0 * per, c.min(n - g0) * per, c.min(n - g0)))
    }
}

/// `x + attention(x)` for `x` `(groups P, M)`, a pass of `gs.chunk` groups at a time.
pub fn forward(p: &KnnParams<&[f32]>, gs: Groups<'_>, x: &[f32], pool: &Pool) -> Result<Buf> {
    let (w3, b3) = stacked(p, pool);
    let mx = Mixing { nb: gs.nb, m: gs.m, w3: &w3, b3: &b3 };
    // The residual: the out projection adds onto a copy of x.
    let mut out = pool.copy_of(x);
    for (at, len, groups) in gs.passes() {
        let it = internals(p, &mx, groups, &x[at..at + len], pool)?;
        linear::forward_add(&it.att, p.out_w, p.out_b, gs.m, &mut out[at..at + len])?;
    }
    Ok(out)
}

/// The backward of [`forward`] for the output gradient `g_out`, recomputing from `x` (as
/// kept: f32 or bf16) a pass at a time: returns `g_x`, and adds the parameter gradients to
/// `g`.
pub fn backward(
    p: &KnnParams<&[f32]>,
    gs: Groups<'_>,
    (x, g_out): (Input<'_>, &[f32]),
    g: &mut KnnParams<&mut [f32]>,
    pool: &Pool,
) -> Result<Buf> {
    let (w3, b3) = stacked(p, pool);
    let mx = Mixing { nb: gs.nb, m: gs.m, w3: &w3, b3: &b3 };
    // The residual's gradient; each pass's LayerNorm backward adds to its rows.
    let mut g_x = pool.copy_of(g_out);
    for (at, len, groups) in gs.passes() {
        let xs = x.rows(at..at + len, pool)?;
        let pass = Pass { groups, x: &xs, g_out: &g_out[at..at + len] };
        pass_backward(p, &mx, pass, g, &mut g_x[at..at + len], pool)?;
    }
    Ok(g_x)
}

/// One pass of the backward: its groups, its rows of the input and of the output gradient.
struct Pass<'a> {
    groups: usize,
    x: &'a [f32],
    g_out: &'a [f32],
}

/// The backward of one pass: the parameter gradients added to `g`, the input's added to `g_x`.
fn pass_backward(
    p: &KnnParams<&[f32]>,
    mx: &Mixing<'_>,
    b: Pass<'_>,
    g: &mut KnnParams<&mut [f32]>,
    g_x: &mut [f32],
    pool: &Pool,
) -> Result<()> {
    let m = mx.m;
    let rows = b.x.len() / m;
    let it = internals(p, mx, b.groups, b.x, pool)?;
    linear::backward_params(rows, &it.att, b.g_out, g.out_w, Some(&mut g.out_b))?;
    let mut g_att = pool.zeros(rows * m);
    linear::backward_input(b.g_out, p.out_w, m, 0.0, &mut g_att)?;
    let mut g_qkv = pool.zeros(rows * 3 * m);
    attend_backward(mx.nb, m, b.groups, &it.qkv, &it.w, &g_att, &mut g_qkv)?;
    drop(g_att);
    // The stacked gradient, split back into q, k and v afterwards.
    let (mut gw3, mut gb3) = (pool.zeros(3 * m * m), pool.zeros(3 * m));
    linear::backward_params(rows, &it.h, &g_qkv, &mut gw3, Some(&mut gb3))?;
    for (i, (gw, gb)) in
        [(&mut g.q_w, &mut g.q_b), (&mut g.k_w, &mut g.k_b), (&mut g.v_w, &mut g.v_b)].into_iter().enumerate()
    {
        act::add(&gw3[i * m * m..(i + 1) * m * m], gw)?;
        act::add(&gb3[i * m..(i + 1) * m], gb)?;
    }
    let mut g_h = pool.zeros(rows * m);
    linear::backward_input(&g_qkv, mx.w3, 3 * m, 0.0, &mut g_h)?;
    drop((g_qkv, it, gw3, gb3));
    let lg = layernorm::Grads { x: g_x, w: g.norm_w, b: g.norm_b };
    layernorm::backward(b.x, rows, m, p.norm_w, &g_h, lg, pool)
}
