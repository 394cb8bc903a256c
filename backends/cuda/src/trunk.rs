//! The layer skeleton both temporal mixers share, `out = u + out_proj(mix(LayerNorm(u)))`:
//! the pre-norm, `in_proj`'s backward, `out_proj` with the residual, the walk over groups of
//! sequences (sequences are independent, so a group's workspace bounds the memory whatever
//! the batch) and the backward's recomputation, forward and backward. What differs between
//! Mamba-1 and Mamba-2 (the scan, what feeds it and what gates it) is a [`Mixer`]; the pieces
//! both mixers build it from (the projections in bands of rows, the convolution with SiLU,
//! the time steps through softplus, the decays) are the functions below.
//!
//! Memory: the forward keeps nothing (the caller keeps the layer input `u`): its scan writes
//! its chunk-start states into one group's scratch. The backward recomputes the group's
//! internals from `u`, the scan's output included (its forward is rerun, writing the same
//! checkpoints bit for bit into the group's own buffer, since `out_proj`'s weight gradient
//! needs the output and the scan's backward the states), and each buffer is dropped once its
//! last use is past. `crate::memory` counts what the layers take from the pool.

use crate::mamba1::{conv_backward, conv_forward, ConvGrads};
use crate::ops::{act, layernorm, layout, linear};
use crate::pool::{Buf, Pool};
use crate::shim::{ConvDims, Result};
use crate::stored::Input;

/// A layer backward's inputs: `seqs` sequences of the layer input `u` (as kept: f32 or bf16,
/// [`crate::stored`]) and of the output gradient `g_out`, both `(seqs, T, M)`.
#[derive(Clone, Copy, Debug)]
pub struct BackwardIn<'a> {
    /// Sequences.
    pub seqs: usize,
    /// The layer's input.
    pub u: Input<'a>,
    /// The gradient of the layer's output.
    pub g_out: &'a [f32],
}

/// One group's part of a [`BackwardIn`], its input in f32.
#[derive(Clone, Copy, Debug)]
struct Group<'a> {
    seqs: usize,
    u: &'a [f32],
    g_out: &'a [f32],
}

/// How a layer cuts its sequences into groups: `group` sequences at a time, each of `time`
/// steps of width `m` (`d_model`) and `ck` values of the scan checkpoints.
#[derive(Clone, Copy, Debug)]
pub struct Groups {
    /// Sequences per group (0 counts as 1).
    pub group: usize,
    /// `d_model`, M.
    pub m: usize,
    /// Steps per sequence, T.
    pub time: usize,
    /// Values of one sequence's checkpoints.
    pub ck: usize,
}

impl Groups {
    /// Values of one sequence of the layer input, T M.
    pub fn tm(self) -> usize {
        self.time * self.m
    }

    /// The groups of `seqs` sequences: (first sequence, count), in order.
    pub fn of(self, seqs: usize) -> impl Iterator<Item = (usize, usize)> {
        let g = self.group.max(1);
        (0..seqs).step_by(g).map(move |s0| (s0, g.min(seqs - s0)))
    }
}

/// The tensors of a layer around its mixer (or their gradients): the pre-norm's weight and
/// bias, `in_proj` and `out_proj`.
#[derive(Debug)]
pub struct Frame<T> {
    /// `norm.weight` (M).
    pub norm_w: T,
    /// `norm.bias` (M).
    pub norm_b: T,
    /// `in_proj.weight`, its bands of rows in the order of [`Mixer::backward`]'s gradients.
    pub in_proj: T,
    /// `out_proj.weight` (M, Di).
    pub out_proj: T,
}

/// The part of a layer that differs between the mixers: from the pre-norm's output `ln` to
/// the input of `out_proj`, and back. Implemented by each layer's sizes.
pub trait Mixer {
    /// The layer's parameters (or their gradients), with storage `S` (a `param_group!`).
    type Params<S>;
    /// The forward's internals of one group, recomputed by the backward.
    type Internals;
    /// What the backward keeps of the output stage besides the internals.
    type Kept;

    /// How both passes cut the batch, and the layer's width.
    fn groups(&self) -> Groups;
    /// The tensors around the mixer.
    fn frame<'a>(p: &Self::Params<&'a [f32]>) -> Frame<&'a [f32]>;
    /// The gradients of the tensors around the mixer.
    fn frame_mut<'a>(g: &'a mut Self::Params<&mut [f32]>) -> Frame<&'a mut [f32]>;
    /// Everything from `ln` (`(seqs, T, M)`) to the scan's inputs.
    fn internals(&self, p: &Self::Params<&[f32]>, seqs: usize, ln: &[f32], pool: &Pool) -> Result<Self::Internals>;
    /// The scan (its checkpoints into `ckpt`) and what gates it: the input of `out_proj`,
    /// and what the backward keeps.
    fn mix(
        &self,
        p: &Self::Params<&[f32]>,
        it: &Self::Internals,
        seqs: usize,
        ckpt: &mut [f32],
        pool: &Pool,
    ) -> Result<(Buf, Self::Kept)>;
    /// The backward from `g_o`, the gradient of `out_proj`'s input, to the gradients of
    /// `in_proj`'s bands of rows, in row order; the mixer's parameter gradients add to `g`.
    fn backward(
        &self,
        p: &Self::Params<&[f32]>,
        pass: MixPass<'_, Self::Internals, Self::Kept>,
        g: &mut Self::Params<&mut [f32]>,
        pool: &Pool,
    ) -> Result<Vec<Buf>>;
}

/// One group's pass through a mixer's backward: its internals, what the output stage kept,
/// the gradient `g_o` of `out_proj`'s input, the group's checkpoints and its sequences.
#[derive(Debug)]
pub struct MixPass<'a, I, K> {
    /// The recomputed internals.
    pub it: I,
    /// What [`Mixer::mix`] kept.
    pub kept: K,
    /// The gradient of `out_proj`'s input.
    pub g_o: Buf,
    /// The group's checkpoints.
    pub ckpt: &'a [f32],
    /// Sequences of the group.
    pub seqs: usize,
}

/// The pre-norm of `rows` rows of `u`, its output from the pool.
fn pre_norm<L: Mixer>(z: &L, p: &L::Params<&[f32]>, u: &[f32], pool: &Pool) -> Result<Buf> {
    let (f, m) = (L::frame(p), z.groups().m);
    let rows = u.len() / m;
    let mut ln = pool.zeros(rows * m);
    layernorm::forward(u, rows, m, f.norm_w, f.norm_b, &mut ln)?;
    Ok(ln)
}

/// The layer's forward for `u` `(seqs, T, M)`: the output `u + mixer(LayerNorm(u))`.
pub fn forward<L: Mixer>(p: &L::Params<&[f32]>, z: &L, seqs: usize, u: &[f32], pool: &Pool) -> Result<Buf> {
    let groups = z.groups();
    let (tm, ck) = (groups.tm(), groups.ck);
    let mut out = pool.copy_of(u);
    for (s0, s) in groups.of(seqs) {
        let ln = pre_norm(z, p, &u[s0 * tm..(s0 + s) * tm], pool)?;
        let it = z.internals(p, s, &ln, pool)?;
        let mut ckpt = pool.zeros(s * ck);
        let (o, kept) = z.mix(p, &it, s, &mut ckpt, pool)?;
        drop((ln, it, kept, ckpt));
        // The residual: beta = 1 on the copy of u.
        linear::project(&o, L::frame(p).out_proj, groups.m, 1.0, &mut out[s0 * tm..(s0 + s) * tm])?;
    }
    Ok(out)
}

/// The layer's backward for the output gradient `g_out` `(seqs, T, M)`: returns `g_u`, and
/// adds the parameter gradients to `g`. `g_u` starts as `g_out` (the residual's gradient) and
/// each group adds the rest of its own.
pub fn backward<L: Mixer>(
    p: &L::Params<&[f32]>,
    z: &L,
    b: BackwardIn<'_>,
    g: &mut L::Params<&mut [f32]>,
    pool: &Pool,
) -> Result<Buf> {
    let groups = z.groups();
    let tm = groups.tm();
    let mut g_u = pool.copy_of(b.g_out);
    for (s0, s) in groups.of(b.seqs) {
        let (a, e) = (s0 * tm, (s0 + s) * tm);
        let u = b.u.rows(a..e, pool)?;
        backward_group(p, z, Group { seqs: s, u: &u, g_out: &b.g_out[a..e] }, &mut g_u[a..e], g, pool)?;
    }
    Ok(g_u)
}

/// The backward of one group: recompute (the scan's checkpoints into the group's buffer),
/// then walk the layer back from `out_proj`.
fn backward_group<L: Mixer>(
    p: &L::Params<&[f32]>,
    z: &L,
    b: Group<'_>,
    g_u: &mut [f32],
    g: &mut L::Params<&mut [f32]>,
    pool: &Pool,
) -> Result<()> {
    let (f, m) = (L::frame(p), z.groups().m);
    let rows = b.u.len() / m;
    let ln = pre_norm(z, p, b.u, pool)?;
    let it = z.internals(p, b.seqs, &ln, pool)?;
    let mut ckpt = pool.zeros(b.seqs * z.groups().ck);
    let (o, kept) = z.mix(p, &it, b.seqs, &mut ckpt, pool)?;
    linear::weight_grad(rows, b.g_out, &o, L::frame_mut(g).out_proj)?;
    let o_len = o.len();
    drop(o);
    let mut g_o = pool.zeros(o_len);
    linear::backward_input(b.g_out, f.out_proj, m, 0.0, &mut g_o)?;
    let g_in = z.backward(p, MixPass { it, kept, g_o, ckpt: &ckpt, seqs: b.seqs }, g, pool)?;
    drop(ckpt);
    let mut g_ln = pool.zeros(rows * m);
    let bands: Vec<&[f32]> = g_in.iter().map(|b| &b[..]).collect();
    bands_backward(rows, &ln, (f.in_proj, L::frame_mut(g).in_proj), &bands, (&mut g_ln, 0.0))?;
    drop((g_in, ln));
    let gf = L::frame_mut(g);
    let lg = layernorm::Grads { x: g_u, w: gf.norm_w, b: gf.norm_b };
    layernorm::backward(b.u, rows, m, f.norm_w, &g_ln, lg, pool)
}

/// [`Mixer::frame`] and [`Mixer::frame_mut`] of a parameter struct whose tensors around the
/// mixer are its fields `norm_w`, `norm_b`, `in_proj` and `out_proj`.
macro_rules! frame_fields {
    () => {
        fn frame<'a>(p: &Self::Params<&'a [f32]>) -> Frame<&'a [f32]> {
            Frame { norm_w: p.norm_w, norm_b: p.norm_b, in_proj: p.in_proj, out_proj: p.out_proj }
        }
        fn frame_mut<'a>(g: &'a mut Self::Params<&mut [f32]>) -> Frame<&'a mut [f32]> {
            Frame {
                norm_w: &mut *g.norm_w,
                norm_b: &mut *g.norm_b,
                in_proj: &mut *g.in_proj,
                out_proj: &mut *g.out_proj,
            }
        }
    };
}
pub(crate) use frame_fields;

/// `x` times each band of rows of `w` (`widths` rows each, in order) into a buffer of its
/// own from the pool: a projection whose output is used in parts.
pub fn project_bands<const K: usize>(x: &[f32], w: &[f32], widths: [usize; K], pool: &Pool) -> Result<[Buf; K]> {
    let inn = w.len() / widths.iter().sum::<usize>().max(1);
    let rows = x.len() / inn.max(1);
    let mut rest = w;
    let mut out = Vec::with_capacity(K);
    for width in widths {
        let (wb, tail) = rest.split_at(width * inn);
        let mut y = pool.zeros(rows * width);
        linear::project(x, wb, width, 0.0, &mut y)?;
        out.push(y);
        rest = tail;
    }
    Ok(out.try_into().unwrap_or_else(|_| unreachable!("one buffer per band")))
}

/// Backward of [`project_bands`] for the bands' gradients `g_bands`: each band's weight
/// gradient adds to its rows of `g_w`, and the input gradient `g_x` is `beta g_x` plus every
/// band's, in order.
pub fn bands_backward(
    rows: usize,
    x: &[f32],
    (w, g_w): (&[f32], &mut [f32]),
    g_bands: &[&[f32]],
    (g_x, beta): (&mut [f32], f32),
) -> Result<()> {
    let inn = x.len() / rows.max(1);
    let (mut w, mut g_w, mut beta) = (w, g_w, beta);
    for gy in g_bands {
        let width = gy.len() / rows.max(1);
        let (wb, w_rest) = w.split_at(width * inn);
        let (gwb, gw_rest) = g_w.split_at_mut(width * inn);
        linear::weight_grad(rows, gy, x, gwb)?;
        linear::backward_input(gy, wb, width, beta, g_x)?;
        (w, g_w, beta) = (w_rest, gw_rest, 1.0);
    }
    Ok(())
}

/// The time steps `dt = softplus(x W^T + bias)` (`width` per row) and their pre-activation,
/// both from the pool.
pub fn time_steps(x: &[f32], w: &[f32], bias: &[f32], width: usize, pool: &Pool) -> Result<(Buf, Buf)> {
    let rows = x.len() / (w.len() / width.max(1)).max(1);
    // The bias enters as cuBLAS's beta = 1 on rows preset to it.
    let mut dt_pre = pool.zeros(rows * width);
    layout::broadcast_rows(bias, &mut dt_pre)?;
    linear::project(x, w, width, 1.0, &mut dt_pre)?;
    let mut dt = pool.zeros(rows * width);
    act::softplus(&dt_pre, &mut dt)?;
    Ok((dt_pre, dt))
}

/// Backward of [`time_steps`]' softplus and bias for the gradient `g_dt`: the
/// pre-activation's gradient (the bias gradient added to `g_bias`); both inputs are dropped.
pub fn time_steps_backward(dt_pre: Buf, g_dt: Buf, g_bias: &mut [f32], pool: &Pool) -> Result<Buf> {
    let rows = dt_pre.len() / g_bias.len().max(1);
    let mut g_pre = pool.zeros(dt_pre.len());
    act::softplus_backward(&dt_pre, &g_dt, &mut g_pre)?;
    drop((g_dt, dt_pre));
    linear::bias_grad(rows, &g_pre, g_bias, pool)?;
    Ok(g_pre)
}

/// The causal depthwise convolution with SiLU of `x` (`dims`): its pre-activation and its
/// output, from the pool.
pub fn conv_silu(dims: ConvDims, x: &[f32], w: &[f32], b: &[f32], pool: &Pool) -> Result<(Buf, Buf)> {
    let (mut c, mut xs) = (pool.zeros(dims.len()), pool.zeros(dims.len()));
    conv_forward(dims, x, w, b, &mut c, &mut xs)?;
    Ok((c, xs))
}

/// Backward of [`conv_silu`] for its output's gradient `g_xs`: the input's gradient, from
/// the pool; the weight and bias gradients add to `g_wb`.
pub fn conv_silu_backward(
    dims: ConvDims,
    xcw: (&[f32], &[f32], &[f32]),
    g_xs: &[f32],
    (g_w, g_b): (&mut [f32], &mut [f32]),
    pool: &Pool,
) -> Result<Buf> {
    let mut g_x = pool.zeros(dims.len());
    conv_backward(dims, xcw, g_xs, ConvGrads { x: &mut g_x, w: g_w, b: g_b }, pool)?;
    Ok(g_x)
}

/// `A = -exp(A_log)`, from the pool.
pub fn decay(a_log: &[f32], pool: &Pool) -> Result<Buf> {
    let mut a = pool.zeros(a_log.len());
    act::decay(a_log, &mut a)?;
    Ok(a)
}

/// The scan's gradients of `A` and `D` into those of `A_log` (`dA / dA_log = A`) and `D`.
pub fn add_decay_grads((g_a_log, g_d): (&mut [f32], &mut [f32]), a: &[f32], g_a: &[f32], g_dd: &[f32]) -> Result<()> {
    act::decay_backward(a, g_a, g_a_log)?;
    act::add(g_dd, g_d)
}
