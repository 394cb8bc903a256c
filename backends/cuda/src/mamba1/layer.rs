//! One Mamba-1 layer of the trunk in shim mode, `out = u + Mamba1(LayerNorm(u))` (MODEL.md,
//! "Temporal mixer, Mamba-1"), forward and backward, every buffer from a [`Pool`]: the
//! kernels of this crate for LayerNorm, the convolution with SiLU, softplus and the gated
//! scan, and [`gemm`] (the shim's cuBLAS) for the projections.
//!
//! Memory: the forward keeps the chunk-start states of the scan only (the caller keeps the
//! layer input `u`); the backward recomputes the layer's internals from `u`, the scan's
//! output included (its forward is rerun, rewriting the same checkpoints bit for bit, since
//! `out_proj`'s weight gradient needs it). Sequences are independent, so both passes run over
//! groups of [`LayerDims::group`] sequences: the workspace is that of one group, whatever the
//! batch, and the parameter gradients accumulate group after group. `crate::memory` counts
//! what this module takes from the pool.

use super::scan_launch;
use crate::gemm::{gemm, Op, Shape};
use crate::launch::elementwise;
use crate::ops::{act, layernorm, layout};
use crate::pool::{Buf, Pool};
use crate::shim::{self, ConvDims, Result, Scan, ScanGrads};

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

/// `y (rows, out) = x (rows, in) W^T + beta y`, `W` `(out, in)`: a `Linear` without bias.
fn linear(x: &[f32], w: &[f32], out: usize, beta: f32, y: &mut [f32]) -> Result<()> {
    let inn = w.len() / out;
    gemm(Shape { m: x.len() / inn, n: out, k: inn }, x, Op::N, w, Op::T, beta, y)
}

/// `g_w (out, in) += g_y^T x` over `rows` rows: a `Linear`'s weight gradient.
fn linear_gw(rows: usize, g_y: &[f32], x: &[f32], g_w: &mut [f32]) -> Result<()> {
    gemm(Shape { m: g_y.len() / rows, n: x.len() / rows, k: rows }, g_y, Op::T, x, Op::N, 1.0, g_w)
}

/// `g_x (rows, in) = g_y (rows, out) W + beta g_x`: a `Linear`'s input gradient.
fn linear_gx(g_y: &[f32], w: &[f32], out: usize, beta: f32, g_x: &mut [f32]) -> Result<()> {
    let inn = w.len() / out;
    gemm(Shape { m: g_y.len() / out, n: inn, k: out }, g_y, Op::N, w, Op::N, beta, g_x)
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
    linear(&ln, wx, di, 0.0, &mut x)?;
    linear(&ln, wz, di, 0.0, &mut zg)?;
    let (mut c, mut xs) = (pool.zeros(rows * di), pool.zeros(rows * di));
    let conv = ConvDims { seqs, time: z.time, di, k: z.k };
    super::conv_forward(conv, &x, &p.conv_w, &p.conv_b, &mut c, &mut xs)?;
    let (wdr, wbc) = p.x_proj.split_at(z.r * di);
    let (wb, wc) = wbc.split_at(z.n * di);
    let (mut dr, mut bc, mut cc) = (pool.zeros(rows * z.r), pool.zeros(rows * z.n), pool.zeros(rows * z.n));
    linear(&xs, wdr, z.r, 0.0, &mut dr)?;
    linear(&xs, wb, z.n, 0.0, &mut bc)?;
    linear(&xs, wc, z.n, 0.0, &mut cc)?;
    // The bias enters as cuBLAS's beta = 1 on rows preset to it.
    let mut dt_pre = pool.zeros(rows * di);
    layout::broadcast_rows(&p.dt_b, &mut dt_pre)?;
    linear(&dr, &p.dt_w, di, 1.0, &mut dt_pre)?;
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
    let (tm, g) = (z.time * z.m, z.group.max(1));
    let ck = z.ckpt_len(1);
    for s0 in (0..seqs).step_by(g) {
        let s = g.min(seqs - s0);
        let it = internals(p, z, s, &u[s0 * tm..(s0 + s) * tm], pool)?;
        let mut y = pool.zeros(s * z.time * z.di);
        super::scan_forward(&it.scan(p, z, s), &mut y, &mut ckpt[s0 * ck..(s0 + s) * ck])?;
        drop(it);
        // The residual: beta = 1 on the copy of u.
        linear(&y, &p.out_proj, z.m, 1.0, &mut out[s0 * tm..(s0 + s) * tm])?;
    }
    Ok((out, Saved { ckpt }))
}

/// The layer's backward for the output gradient `g_out` `(seqs, T, M)`: returns `g_u`, and
/// adds the parameter gradients to `g`. `saved` must come from [`forward`] of the same `u`
/// and parameters; its checkpoints are rewritten with the same values.
#[allow(clippy::too_many_arguments)]
pub fn backward(
    p: &Mamba1Params,
    z: &LayerDims,
    seqs: usize,
    u: &[f32],
    g_out: &[f32],
    saved: &mut Saved,
    g: &mut Mamba1Params,
    pool: &Pool,
) -> Result<Buf> {
    // The residual's gradient; the LayerNorm's backward adds to it.
    let mut g_u = pool.copy_of(g_out);
    let (tm, gs) = (z.time * z.m, z.group.max(1));
    let ck = z.ckpt_len(1);
    for s0 in (0..seqs).step_by(gs) {
        let s = gs.min(seqs - s0);
        let (a, b) = (s0 * tm, (s0 + s) * tm);
        let ckpt = &mut saved.ckpt[s0 * ck..(s0 + s) * ck];
        backward_group(p, z, s, &u[a..b], &g_out[a..b], ckpt, &mut g_u[a..b], g, pool)?;
    }
    Ok(g_u)
}

/// The scan's gradients of one group, in pool buffers.
struct ScanG {
    x: Buf,
    dt: Buf,
    z: Buf,
    b: Buf,
    c: Buf,
    a: Buf,
    d: Buf,
}

/// [`super::scan_backward`] with its outputs and scratch from the pool (the scratch returned
/// to it before this returns).
fn scan_backward(s: &Scan<'_>, g_y: &[f32], ckpt: &[f32], pool: &Pool) -> Result<ScanG> {
    let l = scan_launch(s.di, s.seqs);
    let blocks = l.grid.x as usize;
    let (len, rows) = (s.len(), s.seqs * s.time);
    let mut g = ScanG {
        x: pool.zeros(len),
        dt: pool.zeros(len),
        z: pool.zeros(len),
        b: pool.zeros(rows * s.n),
        c: pool.zeros(rows * s.n),
        a: pool.zeros(s.di * s.n),
        d: pool.zeros(s.di),
    };
    let (mut hs, mut part_bc) = (pool.zeros(s.seqs * s.q * s.n * s.di), pool.zeros(rows * blocks * 2 * s.n));
    let (mut part_a, mut part_d) = (pool.zeros(s.seqs * s.di * s.n), pool.zeros(s.seqs * s.di));
    let mut scratch = ScanGrads {
        g_x: &mut g.x,
        g_dt: &mut g.dt,
        g_z: &mut g.z,
        hs: &mut hs,
        part_bc: &mut part_bc,
        part_a: &mut part_a,
        part_d: &mut part_d,
    };
    shim::mamba1_scan_bwd(l, s, g_y, ckpt, &mut scratch)?;
    let fin = elementwise((rows * 2 * s.n).max(s.di * s.n + s.di));
    shim::mamba1_scan_bwd_final(fin, s, blocks, &part_bc, &part_a, &part_d, &mut g.b, &mut g.c, &mut g.a, &mut g.d)?;
    Ok(g)
}

/// The backward of one group: recompute, then walk the layer back from `out_proj`, dropping
/// each buffer once its last use is past (what keeps the group's peak at the scan backward).
#[allow(clippy::too_many_arguments)]
fn backward_group(
    p: &Mamba1Params,
    z: &LayerDims,
    seqs: usize,
    u: &[f32],
    g_out: &[f32],
    ckpt: &mut [f32],
    g_u: &mut [f32],
    g: &mut Mamba1Params,
    pool: &Pool,
) -> Result<()> {
    let (rows, di) = (seqs * z.time, z.di);
    let it = internals(p, z, seqs, u, pool)?;
    let mut y = pool.zeros(rows * di);
    super::scan_forward(&it.scan(p, z, seqs), &mut y, ckpt)?;
    linear_gw(rows, g_out, &y, &mut g.out_proj)?;
    drop(y);
    let mut g_y = pool.zeros(rows * di);
    linear_gx(g_out, &p.out_proj, z.m, 0.0, &mut g_y)?;
    let sg = scan_backward(&it.scan(p, z, seqs), &g_y, ckpt, pool)?;
    drop(g_y);
    let Internals { ln, x, z: _, c, xs, dr, bc: _, cc: _, dt_pre, dt: _, a } = it;
    let ScanG { x: mut g_xs, dt: g_dt, z: g_z, b: g_b, c: g_c, a: g_a, d: g_d } = sg;
    // dA / dA_log = A.
    g.a_log.iter_mut().zip(g_a.iter().zip(a.iter())).for_each(|(g, (ga, a))| *g += ga * a);
    g.d.iter_mut().zip(g_d.iter()).for_each(|(g, v)| *g += v);
    let mut g_pre = pool.zeros(rows * di);
    act::softplus_backward(&dt_pre, &g_dt, &mut g_pre)?;
    drop((g_dt, dt_pre));
    linear_gw(rows, &g_pre, &dr, &mut g.dt_w)?;
    // The bias gradient as cuBLAS would take it: a product with a row of ones.
    let mut ones = pool.zeros(rows);
    layout::broadcast_rows(&[1.0], &mut ones)?;
    linear_gw(rows, &g_pre, &ones, &mut g.dt_b)?;
    drop(ones);
    let mut g_dr = pool.zeros(rows * z.r);
    linear_gx(&g_pre, &p.dt_w, di, 0.0, &mut g_dr)?;
    drop((g_pre, dr));
    let (gw_dr, gw_bc) = g.x_proj.split_at_mut(z.r * di);
    let (gw_b, gw_c) = gw_bc.split_at_mut(z.n * di);
    let (w_dr, w_bc) = p.x_proj.split_at(z.r * di);
    let (w_b, w_c) = w_bc.split_at(z.n * di);
    for (gy, gw, w, out) in [(&g_dr, gw_dr, w_dr, z.r), (&g_b, gw_b, w_b, z.n), (&g_c, gw_c, w_c, z.n)] {
        linear_gw(rows, gy, &xs, gw)?;
        linear_gx(gy, w, out, 1.0, &mut g_xs)?;
    }
    drop((g_dr, g_b, g_c, xs));
    let conv = ConvDims { seqs, time: z.time, di, k: z.k };
    let mut g_x = pool.zeros(c.len());
    super::conv_backward(conv, &x, &c, &p.conv_w, &g_xs, &mut g_x, &mut g.conv_w, &mut g.conv_b, pool)?;
    drop((g_xs, c, x));
    let (gw_x, gw_z) = g.in_proj.split_at_mut(di * z.m);
    let (w_x, w_z) = p.in_proj.split_at(di * z.m);
    linear_gw(rows, &g_x, &ln, gw_x)?;
    linear_gw(rows, &g_z, &ln, gw_z)?;
    let mut g_ln = pool.zeros(rows * z.m);
    linear_gx(&g_x, w_x, di, 0.0, &mut g_ln)?;
    linear_gx(&g_z, w_z, di, 1.0, &mut g_ln)?;
    drop((g_x, g_z, ln));
    layernorm::backward(u, rows, z.m, &p.norm_w, &g_ln, g_u, &mut g.norm_w, &mut g.norm_b, pool)
}
