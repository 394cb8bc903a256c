//! One Mamba-1 layer of the trunk in shim mode, `out = u + Mamba1(LayerNorm(u))` (MODEL.md,
//! "Temporal mixer, Mamba-1"), forward and backward, every buffer from a [`Pool`]: the
//! kernels of this crate for LayerNorm, the convolution with SiLU, softplus and the gated
//! scan, and [`crate::gemm`] (the shim's cuBLAS) for the projections.
//!
//! Memory: the forward keeps the chunk-start states of the scan only (the caller keeps the
//! layer input `u`); the backward recomputes the layer's internals from `u`, the scan's
//! output included (its forward is rerun, rewriting the same checkpoints bit for bit, since
//! `out_proj`'s weight gradient needs it). Sequences are independent, so both passes run over
//! groups of [`LayerDims::group`] sequences: the workspace is that of one group, whatever the
//! batch, and the parameter gradients accumulate group after group. `crate::memory` counts
//! what this module takes from the pool.

use crate::ops::{act, layernorm, layout, linear};
use crate::pool::{Buf, Pool};
use crate::shim::{ConvDims, Result, Scan};
use crate::trunk::{BackwardIn, Groups};

/// The sizes of one layer and how it is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerDims {
    /// `d_model`, M.
    pub m: usize,
    /// The inner width Di (`expand * M`).
    pub di: usize,
    /// `d_state`, N.
    pub n: usize,
    /// `d_conv`, K.
    pub k: usize,
    /// `dt_rank`, R.
    pub r: usize,
    /// Steps per sequence, T.
    pub time: usize,
    /// Steps per scan chunk (between checkpoints).
    pub q: usize,
    /// Sequences per group of the forward and backward.
    pub group: usize,
}

impl LayerDims {
    /// How both passes cut the batch: [`LayerDims::group`] sequences at a time.
    pub fn groups(&self) -> Groups {
        Groups { group: self.group, tm: self.time * self.m, ck: self.ckpt_len(1) }
    }
    /// Values of `x_proj`'s output per step: `R + 2 N`.
    pub fn w(&self) -> usize {
        self.r + 2 * self.n
    }
    /// Elements of the scan checkpoints of `seqs` sequences.
    pub fn ckpt_len(&self, seqs: usize) -> usize {
        seqs * self.time.div_ceil(self.q) * self.n * self.di
    }
}

/// The layer's parameters (or their gradients), PyTorch layout, row-major (MODEL.md's table).
#[derive(Clone, Debug, PartialEq)]
pub struct Mamba1Params {
    /// `norm.weight` (M).
    pub norm_w: Vec<f32>,
    /// `norm.bias` (M).
    pub norm_b: Vec<f32>,
    /// `conv1d.weight` (Di, K).
    pub conv_w: Vec<f32>,
    /// `conv1d.bias` (Di).
    pub conv_b: Vec<f32>,
    /// `in_proj.weight` (2 Di, M): the rows of `x`, then those of `z`.
    pub in_proj: Vec<f32>,
    /// `x_proj.weight` (R + 2 N, Di): the rows of `dr`, `Bc`, `Cc`.
    pub x_proj: Vec<f32>,
    /// `dt_proj.weight` (Di, R).
    pub dt_w: Vec<f32>,
    /// `dt_proj.bias` (Di).
    pub dt_b: Vec<f32>,
    /// `A_log` (Di, N).
    pub a_log: Vec<f32>,
    /// `D` (Di).
    pub d: Vec<f32>,
    /// `out_proj.weight` (M, Di).
    pub out_proj: Vec<f32>,
}

impl Mamba1Params {
    /// All zeros (a gradient to accumulate into).
    pub fn zeros(z: &LayerDims) -> Self {
        let v = |n: usize| vec![0.0f32; n];
        let (m, di) = (z.m, z.di);
        Self {
            norm_w: v(m),
            norm_b: v(m),
            conv_w: v(di * z.k),
            conv_b: v(di),
            in_proj: v(2 * di * m),
            x_proj: v(z.w() * di),
            dt_w: v(di * z.r),
            dt_b: v(di),
            a_log: v(di * z.n),
            d: v(di),
            out_proj: v(m * di),
        }
    }

    /// Every tensor, in state-dict order.
    pub fn tensors(&self) -> [&Vec<f32>; 11] {
        [
            &self.norm_w,
            &self.norm_b,
            &self.conv_w,
            &self.conv_b,
            &self.in_proj,
            &self.x_proj,
            &self.dt_w,
            &self.dt_b,
            &self.a_log,
            &self.d,
            &self.out_proj,
        ]
    }

    /// Every tensor, mutably, in state-dict order.
    pub fn tensors_mut(&mut self) -> [&mut Vec<f32>; 11] {
        [
            &mut self.norm_w,
            &mut self.norm_b,
            &mut self.conv_w,
            &mut self.conv_b,
            &mut self.in_proj,
            &mut self.x_proj,
            &mut self.dt_w,
            &mut self.dt_b,
            &mut self.a_log,
            &mut self.d,
            &mut self.out_proj,
        ]
    }
}

/// What the forward keeps for the backward: the scan's chunk-start states of every sequence.
#[derive(Debug)]
pub struct Saved {
    /// `(seqs, ceil(T / q), N, Di)`.
    pub ckpt: Buf,
}

/// The forward's internals of one group, recomputed by the backward.
struct Internals {
    ln: Buf,
    x: Buf,
    z: Buf,
    c: Buf,
    xs: Buf,
    dr: Buf,
    bc: Buf,
    cc: Buf,
    dt_pre: Buf,
    dt: Buf,
    a: Buf,
}

/// `A = -exp(A_log)`: `Di N` values, computed on the host (a device build would fold it into
/// the scan's load of `A`).
fn decay(p: &Mamba1Params, pool: &Pool) -> Buf {
    let mut a = pool.zeros(p.a_log.len());
    a.iter_mut().zip(&p.a_log).for_each(|(a, l)| *a = -l.exp());
    a
}

/// Everything from the LayerNorm to the scan's inputs for `u` of one group.
fn internals(p: &Mamba1Params, z: &LayerDims, seqs: usize, u: &[f32], pool: &Pool) -> Result<Internals> {
    let (rows, di) = (seqs * z.time, z.di);
    let mut ln = pool.zeros(rows * z.m);
    layernorm::forward(u, rows, z.m, &p.norm_w, &p.norm_b, &mut ln)?;
    let (mut x, mut zg) = (pool.zeros(rows * di), pool.zeros(rows * di));
    let (wx, wz) = p.in_proj.split_at(di * z.m);
    linear::project(&ln, wx, di, 0.0, &mut x)?;
    linear::project(&ln, wz, di, 0.0, &mut zg)?;
    let (mut c, mut xs) = (pool.zeros(rows * di), pool.zeros(rows * di));
    let conv = ConvDims { seqs, time: z.time, di, k: z.k };
    super::conv_forward(conv, &x, &p.conv_w, &p.conv_b, &mut c, &mut xs)?;
    let (wdr, wbc) = p.x_proj.split_at(z.r * di);
    let (wb, wc) = wbc.split_at(z.n * di);
    let (mut dr, mut bc, mut cc) = (pool.zeros(rows * z.r), pool.zeros(rows * z.n), pool.zeros(rows * z.n));
    linear::project(&xs, wdr, z.r, 0.0, &mut dr)?;
    linear::project(&xs, wb, z.n, 0.0, &mut bc)?;
    linear::project(&xs, wc, z.n, 0.0, &mut cc)?;
    // The bias enters as cuBLAS's beta = 1 on rows preset to it.
    let mut dt_pre = pool.zeros(rows * di);
    layout::broadcast_rows(&p.dt_b, &mut dt_pre)?;
    linear::project(&dr, &p.dt_w, di, 1.0, &mut dt_pre)?;
    let mut dt = pool.zeros(rows * di);
    act::softplus(&dt_pre, &mut dt)?;
    let a = decay(p, pool);
    Ok(Internals { ln, x, z: zg, c, xs, dr, bc, cc, dt_pre, dt, a })
}

impl Internals {
    fn scan<'a>(&'a self, p: &'a Mamba1Params, z: &LayerDims, seqs: usize) -> Scan<'a> {
        let (time, di, n, q) = (z.time, z.di, z.n, z.q);
        Scan {
            seqs,
            time,
            di,
            n,
            q,
            x: &self.xs,
            dt: &self.dt,
            a: &self.a,
            b: &self.bc,
            c: &self.cc,
            d: &p.d,
            z: &self.z,
        }
    }
}

/// The layer's forward for `u` `(seqs, T, M)`: the output `u + mixer(LayerNorm(u))` and the
/// scan's checkpoints.
pub fn forward(p: &Mamba1Params, z: &LayerDims, seqs: usize, u: &[f32], pool: &Pool) -> Result<(Buf, Saved)> {
    let mut out = pool.copy_of(u);
    let mut ckpt = pool.zeros(z.ckpt_len(seqs));
    let Groups { tm, ck, .. } = z.groups();
    for (s0, s) in z.groups().of(seqs) {
        let it = internals(p, z, s, &u[s0 * tm..(s0 + s) * tm], pool)?;
        let mut y = pool.zeros(s * z.time * z.di);
        super::scan_forward(&it.scan(p, z, s), &mut y, &mut ckpt[s0 * ck..(s0 + s) * ck])?;
        drop(it);
        // The residual: beta = 1 on the copy of u.
        linear::project(&y, &p.out_proj, z.m, 1.0, &mut out[s0 * tm..(s0 + s) * tm])?;
    }
    Ok((out, Saved { ckpt }))
}

/// The layer's backward for the output gradient `g_out` `(seqs, T, M)`: returns `g_u`, and
/// adds the parameter gradients to `g`. `saved` must come from [`forward`] of the same `u`
/// and parameters; its checkpoints are rewritten with the same values.
pub fn backward(
    p: &Mamba1Params,
    z: &LayerDims,
    b: BackwardIn<'_>,
    saved: &mut Saved,
    g: &mut Mamba1Params,
    pool: &Pool,
) -> Result<Buf> {
    z.groups().backward(b, &mut saved.ckpt, pool, |b, ckpt, g_u| backward_group(p, z, b, ckpt, g_u, g, pool))
}

/// The backward of one group: recompute, then walk the layer back from `out_proj`, dropping
/// each buffer once its last use is past (what keeps the group's peak at the scan backward).
fn backward_group(
    p: &Mamba1Params,
    z: &LayerDims,
    b: BackwardIn<'_>,
    ckpt: &mut [f32],
    g_u: &mut [f32],
    g: &mut Mamba1Params,
    pool: &Pool,
) -> Result<()> {
    let (rows, di) = (b.seqs * z.time, z.di);
    let it = internals(p, z, b.seqs, b.u, pool)?;
    let mut y = pool.zeros(rows * di);
    super::scan_forward(&it.scan(p, z, b.seqs), &mut y, ckpt)?;
    linear::weight_grad(rows, b.g_out, &y, &mut g.out_proj)?;
    drop(y);
    let mut g_y = pool.zeros(rows * di);
    linear::backward_input(b.g_out, &p.out_proj, z.m, 0.0, &mut g_y)?;
    let sg = super::scan_backward_pooled(&it.scan(p, z, b.seqs), &g_y, ckpt, pool)?;
    drop(g_y);
    let Internals { ln, x, z: _, c, xs, dr, bc: _, cc: _, dt_pre, dt: _, a } = it;
    let super::ScanGradients { x: mut g_xs, dt: g_dt, z: g_z, b: g_b, c: g_c, a: g_a, d: g_d } = sg;
    // dA / dA_log = A.
    g.a_log.iter_mut().zip(g_a.iter().zip(a.iter())).for_each(|(g, (ga, a))| *g += ga * a);
    g.d.iter_mut().zip(g_d.iter()).for_each(|(g, v)| *g += v);
    let mut g_pre = pool.zeros(rows * di);
    act::softplus_backward(&dt_pre, &g_dt, &mut g_pre)?;
    drop((g_dt, dt_pre));
    linear::weight_grad(rows, &g_pre, &dr, &mut g.dt_w)?;
    linear::bias_grad(rows, &g_pre, &mut g.dt_b, pool)?;
    let mut g_dr = pool.zeros(rows * z.r);
    linear::backward_input(&g_pre, &p.dt_w, di, 0.0, &mut g_dr)?;
    drop((g_pre, dr));
    let (gw_dr, gw_bc) = g.x_proj.split_at_mut(z.r * di);
    let (gw_b, gw_c) = gw_bc.split_at_mut(z.n * di);
    let (w_dr, w_bc) = p.x_proj.split_at(z.r * di);
    let (w_b, w_c) = w_bc.split_at(z.n * di);
    for (gy, gw, w, out) in [(&g_dr, gw_dr, w_dr, z.r), (&g_b, gw_b, w_b, z.n), (&g_c, gw_c, w_c, z.n)] {
        linear::weight_grad(rows, gy, &xs, gw)?;
        linear::backward_input(gy, w, out, 1.0, &mut g_xs)?;
    }
    drop((g_dr, g_b, g_c, xs));
    let conv = ConvDims { seqs: b.seqs, time: z.time, di, k: z.k };
    let mut g_x = pool.zeros(c.len());
    let cg = super::ConvGrads { x: &mut g_x, w: &mut g.conv_w, b: &mut g.conv_b };
    super::conv_backward(conv, (&x, &c, &p.conv_w), &g_xs, cg, pool)?;
    drop((g_xs, c, x));
    let (gw_x, gw_z) = g.in_proj.split_at_mut(di * z.m);
    let (w_x, w_z) = p.in_proj.split_at(di * z.m);
    linear::weight_grad(rows, &g_x, &ln, gw_x)?;
    linear::weight_grad(rows, &g_z, &ln, gw_z)?;
    let mut g_ln = pool.zeros(rows * z.m);
    linear::backward_input(&g_x, w_x, di, 0.0, &mut g_ln)?;
    linear::backward_input(&g_z, w_z, di, 1.0, &mut g_ln)?;
    drop((g_x, g_z, ln));
    let lg = layernorm::Grads { x: g_u, w: &mut g.norm_w, b: &mut g.norm_b };
    layernorm::backward(b.u, rows, z.m, &p.norm_w, &g_ln, lg, pool)
}
