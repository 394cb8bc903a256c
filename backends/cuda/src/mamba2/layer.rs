//! One Mamba-2 layer of the trunk in shim mode, `out = u + Mamba2(LayerNorm(u))` (MODEL.md,
//! "Temporal mixer, Mamba-2", one group), forward and backward, every buffer from a [`Pool`]:
//! the crate's LayerNorm, the Mamba-1 convolution kernels with SiLU over the `Di + 2N`
//! channels of `xBC`, softplus, this module's scan and gated RMSNorm kernels, and [`crate::gemm`]
//! (the shim's cuBLAS) for the projections. It mirrors [`crate::mamba1::layer`].
//!
//! Memory: the forward keeps the chunk-start states of the scan only (the caller keeps the
//! layer input `u`); the backward recomputes the layer's internals from `u`, the scan output
//! included (its forward is rerun, rewriting the same checkpoints bit for bit). Both passes
//! run over groups of [`Layer2Dims::group`] sequences, so the workspace is that of one group;
//! the parameter gradients accumulate group after group.
//!
//! Host work (shim mode only; a device build would fold each into a kernel's loads or
//! stores): `A = -exp(A_log)` (nh values), the split of the convolution output into `x`,
//! `Bc`, `Cc` and the join of their gradients, and the per-head sums into `A_log` and `D`.

use super::norm_launch;
use crate::ops::{act, layernorm, layout, linear};
use crate::pool::{Buf, Pool};
use crate::shim::{self, Cols, ConvDims, GnormBwd, Result, Scan2};
use crate::trunk::{BackwardIn, Groups};

/// The sizes of one layer and how it is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layer2Dims {
    /// `d_model`, M.
    pub m: usize,
    /// The inner width Di (`expand * M`), `nh * pd`.
    pub di: usize,
    /// `d_state`, N.
    pub n: usize,
    /// `d_conv`, K.
    pub k: usize,
    /// Heads, nh.
    pub nh: usize,
    /// Steps per sequence, T.
    pub time: usize,
    /// Steps per scan chunk (between checkpoints).
    pub q: usize,
    /// Sequences per group of the forward and backward.
    pub group: usize,
}

impl Layer2Dims {
    /// How both passes cut the batch: [`Layer2Dims::group`] sequences at a time.
    pub fn groups(&self) -> Groups {
        Groups { group: self.group, tm: self.time * self.m, ck: self.ckpt_len(1) }
    }
    /// Channels of the convolution, `x | Bc | Cc`: `Di + 2 N`.
    pub fn conv_dim(&self) -> usize {
        self.di + 2 * self.n
    }
    /// Rows of `in_proj`, `z | xBC | dtr`: `2 Di + 2 N + nh`.
    pub fn proj_dim(&self) -> usize {
        self.di + self.conv_dim() + self.nh
    }
    /// Channels per head, `Di / nh`.
    pub fn pd(&self) -> usize {
        self.di / self.nh.max(1)
    }
    /// Elements of the scan checkpoints of `seqs` sequences.
    pub fn ckpt_len(&self, seqs: usize) -> usize {
        seqs * self.time.div_ceil(self.q.max(1)) * self.n * self.di
    }
}

/// The layer's parameters (or their gradients), PyTorch layout, row-major (MODEL.md's table).
#[derive(Clone, Debug, PartialEq)]
pub struct Mamba2Params {
    /// `norm.weight` of the layer's LayerNorm (M).
    pub norm_w: Vec<f32>,
    /// `norm.bias` (M).
    pub norm_b: Vec<f32>,
    /// `dt_bias` (nh).
    pub dt_bias: Vec<f32>,
    /// `conv1d.weight` (Di + 2N, K).
    pub conv_w: Vec<f32>,
    /// `conv1d.bias` (Di + 2N).
    pub conv_b: Vec<f32>,
    /// `in_proj.weight` (2 Di + 2N + nh, M): the rows of `z`, `xBC`, `dtr`.
    pub in_proj: Vec<f32>,
    /// `A_log` (nh).
    pub a_log: Vec<f32>,
    /// `D` (nh).
    pub d: Vec<f32>,
    /// `norm.weight` of the gated RMSNorm (Di).
    pub gnorm_w: Vec<f32>,
    /// `out_proj.weight` (M, Di).
    pub out_proj: Vec<f32>,
}

impl Mamba2Params {
    /// All zeros (a gradient to accumulate into).
    pub fn zeros(z: &Layer2Dims) -> Self {
        let v = |n: usize| vec![0.0f32; n];
        let (m, di, cd) = (z.m, z.di, z.conv_dim());
        Self {
            norm_w: v(m),
            norm_b: v(m),
            dt_bias: v(z.nh),
            conv_w: v(cd * z.k),
            conv_b: v(cd),
            in_proj: v(z.proj_dim() * m),
            a_log: v(z.nh),
            d: v(z.nh),
            gnorm_w: v(di),
            out_proj: v(m * di),
        }
    }

    /// Every tensor, in state-dict order.
    pub fn tensors(&self) -> [&Vec<f32>; 10] {
        [
            &self.norm_w,
            &self.norm_b,
            &self.dt_bias,
            &self.conv_w,
            &self.conv_b,
            &self.in_proj,
            &self.a_log,
            &self.d,
            &self.gnorm_w,
            &self.out_proj,
        ]
    }

    /// Every tensor, mutably, in state-dict order.
    pub fn tensors_mut(&mut self) -> [&mut Vec<f32>; 10] {
        [
            &mut self.norm_w,
            &mut self.norm_b,
            &mut self.dt_bias,
            &mut self.conv_w,
            &mut self.conv_b,
            &mut self.in_proj,
            &mut self.a_log,
            &mut self.d,
            &mut self.gnorm_w,
            &mut self.out_proj,
        ]
    }
}

/// What the forward keeps for the backward: the scan's chunk-start states of every sequence.
#[derive(Debug)]
pub struct Saved2 {
    /// `(seqs, ceil(T / q), N, Di)`.
    pub ckpt: Buf,
}

/// The forward's internals of one group, recomputed by the backward.
struct Internals {
    ln: Buf,
    z: Buf,
    xbc: Buf,
    c: Buf,
    x: Buf,
    b: Buf,
    cc: Buf,
    dt_pre: Buf,
    dt: Buf,
    a: Buf,
}

/// Everything from the LayerNorm to the scan's inputs for `u` of one group.
fn internals(p: &Mamba2Params, z: &Layer2Dims, seqs: usize, u: &[f32], pool: &Pool) -> Result<Internals> {
    let (rows, di, n, cd) = (seqs * z.time, z.di, z.n, z.conv_dim());
    let mut ln = pool.zeros(rows * z.m);
    layernorm::forward(u, rows, z.m, &p.norm_w, &p.norm_b, &mut ln)?;
    let (wz, rest) = p.in_proj.split_at(di * z.m);
    let (wxbc, wdt) = rest.split_at(cd * z.m);
    let (mut zg, mut xbc) = (pool.zeros(rows * di), pool.zeros(rows * cd));
    linear::project(&ln, wz, di, 0.0, &mut zg)?;
    linear::project(&ln, wxbc, cd, 0.0, &mut xbc)?;
    // dt_bias enters as cuBLAS's beta = 1 on rows preset to it.
    let mut dt_pre = pool.zeros(rows * z.nh);
    layout::broadcast_rows(&p.dt_bias, &mut dt_pre)?;
    linear::project(&ln, wdt, z.nh, 1.0, &mut dt_pre)?;
    let mut dt = pool.zeros(rows * z.nh);
    act::softplus(&dt_pre, &mut dt)?;
    let (mut c, mut xs) = (pool.zeros(rows * cd), pool.zeros(rows * cd));
    let conv = ConvDims { seqs, time: z.time, di: cd, k: z.k };
    crate::mamba1::conv_forward(conv, &xbc, &p.conv_w, &p.conv_b, &mut c, &mut xs)?;
    let (mut x, mut b, mut cc) = (pool.zeros(rows * di), pool.zeros(rows * n), pool.zeros(rows * n));
    let band = |col: usize| Cols { width: cd, col };
    layout::copy_cols(&xs, band(0), &mut x, Cols { width: di, col: 0 }, di)?;
    layout::copy_cols(&xs, band(di), &mut b, Cols { width: n, col: 0 }, n)?;
    layout::copy_cols(&xs, band(di + n), &mut cc, Cols { width: n, col: 0 }, n)?;
    drop(xs);
    let mut a = pool.zeros(z.nh);
    a.iter_mut().zip(&p.a_log).for_each(|(a, l)| *a = -l.exp());
    Ok(Internals { ln, z: zg, xbc, c, x, b, cc, dt_pre, dt, a })
}

impl Internals {
    fn scan<'a>(&'a self, p: &'a Mamba2Params, z: &Layer2Dims, seqs: usize) -> Scan2<'a> {
        Scan2 {
            seqs,
            time: z.time,
            nh: z.nh,
            pd: z.pd(),
            n: z.n,
            q: z.q,
            x: &self.x,
            dt: &self.dt,
            a: &self.a,
            b: &self.b,
            c: &self.cc,
            d: &p.d,
        }
    }
}

/// The gated RMSNorm of `y` by `z` (rows of Di), its output from the pool.
fn gated_norm(p: &Mamba2Params, rows: usize, di: usize, y: &[f32], z: &[f32], pool: &Pool) -> Result<Buf> {
    let (mut o, mut rinv) = (pool.zeros(rows * di), pool.zeros(rows));
    shim::mamba2_gnorm_fwd(norm_launch("mamba2_gnorm_fwd", rows, di)?, di, y, z, &p.gnorm_w, &mut o, &mut rinv)?;
    Ok(o)
}

/// The layer's forward for `u` `(seqs, T, M)`: the output `u + mixer(LayerNorm(u))` and the
/// scan's checkpoints.
pub fn forward(p: &Mamba2Params, z: &Layer2Dims, seqs: usize, u: &[f32], pool: &Pool) -> Result<(Buf, Saved2)> {
    let mut out = pool.copy_of(u);
    let mut ckpt = pool.zeros(z.ckpt_len(seqs));
    let Groups { tm, ck, .. } = z.groups();
    for (s0, s) in z.groups().of(seqs) {
        let rows = s * z.time;
        let it = internals(p, z, s, &u[s0 * tm..(s0 + s) * tm], pool)?;
        let mut y = pool.zeros(rows * z.di);
        super::scan_forward(&it.scan(p, z, s), &mut y, &mut ckpt[s0 * ck..(s0 + s) * ck])?;
        let o = gated_norm(p, rows, z.di, &y, &it.z, pool)?;
        drop((it, y));
        // The residual: beta = 1 on the copy of u.
        linear::project(&o, &p.out_proj, z.m, 1.0, &mut out[s0 * tm..(s0 + s) * tm])?;
    }
    Ok((out, Saved2 { ckpt }))
}

/// The layer's backward for the output gradient `g_out` `(seqs, T, M)`: returns `g_u`, and
/// adds the parameter gradients to `g`. `saved` must come from [`forward`] of the same `u`
/// and parameters; its checkpoints are rewritten with the same values.
pub fn backward(
    p: &Mamba2Params,
    z: &Layer2Dims,
    b: BackwardIn<'_>,
    saved: &mut Saved2,
    g: &mut Mamba2Params,
    pool: &Pool,
) -> Result<Buf> {
    z.groups().backward(b, &mut saved.ckpt, pool, |b, ckpt, g_u| backward_group(p, z, b, ckpt, g_u, g, pool))
}

/// The gated norm's backward, its outputs and scratch from the pool: returns `g_y`, `g_z`;
/// the norm weight's gradient accumulates in `g`.
fn gated_norm_backward(
    p: &Mamba2Params,
    b: GnormBwd<'_>,
    rows: usize,
    g: &mut Mamba2Params,
    pool: &Pool,
) -> Result<(Buf, Buf)> {
    let (mut g_y, mut g_z) = (pool.zeros(rows * b.m), pool.zeros(rows * b.m));
    super::gated_norm_backward_pooled(b, rows, &p.gnorm_w, (&mut g_y, &mut g_z), &mut g.gnorm_w, pool)?;
    Ok((g_y, g_z))
}

/// The backward of one group: recompute, then walk the layer back from `out_proj`, dropping
/// each buffer once its last use is past.
fn backward_group(
    p: &Mamba2Params,
    z: &Layer2Dims,
    b: BackwardIn<'_>,
    ckpt: &mut [f32],
    g_u: &mut [f32],
    g: &mut Mamba2Params,
    pool: &Pool,
) -> Result<()> {
    let (rows, di, n, nh, cd) = (b.seqs * z.time, z.di, z.n, z.nh, z.conv_dim());
    let it = internals(p, z, b.seqs, b.u, pool)?;
    let mut y = pool.zeros(rows * di);
    super::scan_forward(&it.scan(p, z, b.seqs), &mut y, ckpt)?;
    let o = gated_norm(p, rows, di, &y, &it.z, pool)?;
    linear::weight_grad(rows, b.g_out, &o, &mut g.out_proj)?;
    drop(o);
    let mut g_o = pool.zeros(rows * di);
    linear::backward_input(b.g_out, &p.out_proj, z.m, 0.0, &mut g_o)?;
    let (g_y, g_z) = gated_norm_backward(p, GnormBwd { m: di, y: &y, z: &it.z, g_o: &g_o }, rows, g, pool)?;
    drop((g_o, y));
    let sg = super::scan_backward_pooled(&it.scan(p, z, b.seqs), &g_y, ckpt, pool)?;
    drop(g_y);
    let Internals { ln, z: _, xbc, c, x: _, b: _, cc: _, dt_pre, dt: _, a } = it;
    let super::Scan2Gradients { x: g_x, dt: g_dt, a: g_a, b: g_b, c: g_c, d: g_d } = sg;
    // dA / dA_log = A.
    g.a_log.iter_mut().zip(g_a.iter().zip(a.iter())).for_each(|(g, (ga, a))| *g += ga * a);
    g.d.iter_mut().zip(g_d.iter()).for_each(|(g, v)| *g += v);
    let mut g_pre = pool.zeros(rows * nh);
    act::softplus_backward(&dt_pre, &g_dt, &mut g_pre)?;
    drop((g_dt, dt_pre));
    linear::bias_grad(rows, &g_pre, &mut g.dt_bias, pool)?;
    // The gradient of silu(conv(xBC)), joined from those of x, Bc, Cc.
    let mut g_xs = pool.zeros(rows * cd);
    let band = |col: usize| Cols { width: cd, col };
    layout::copy_cols(&g_x, Cols { width: di, col: 0 }, &mut g_xs, band(0), di)?;
    layout::copy_cols(&g_b, Cols { width: n, col: 0 }, &mut g_xs, band(di), n)?;
    layout::copy_cols(&g_c, Cols { width: n, col: 0 }, &mut g_xs, band(di + n), n)?;
    drop((g_x, g_b, g_c));
    let conv = ConvDims { seqs: b.seqs, time: z.time, di: cd, k: z.k };
    let mut g_xbc = pool.zeros(c.len());
    let cg = crate::mamba1::ConvGrads { x: &mut g_xbc, w: &mut g.conv_w, b: &mut g.conv_b };
    crate::mamba1::conv_backward(conv, (&xbc, &c, &p.conv_w), &g_xs, cg, pool)?;
    drop((g_xs, c, xbc));
    let (gw_z, rest) = g.in_proj.split_at_mut(di * z.m);
    let (gw_xbc, gw_dt) = rest.split_at_mut(cd * z.m);
    let (w_z, rest) = p.in_proj.split_at(di * z.m);
    let (w_xbc, w_dt) = rest.split_at(cd * z.m);
    linear::weight_grad(rows, &g_z, &ln, gw_z)?;
    linear::weight_grad(rows, &g_xbc, &ln, gw_xbc)?;
    linear::weight_grad(rows, &g_pre, &ln, gw_dt)?;
    let mut g_ln = pool.zeros(rows * z.m);
    linear::backward_input(&g_z, w_z, di, 0.0, &mut g_ln)?;
    linear::backward_input(&g_xbc, w_xbc, cd, 1.0, &mut g_ln)?;
    linear::backward_input(&g_pre, w_dt, nh, 1.0, &mut g_ln)?;
    drop((g_z, g_xbc, g_pre, ln));
    let lg = layernorm::Grads { x: g_u, w: &mut g.norm_w, b: &mut g.norm_b };
    layernorm::backward(b.u, rows, z.m, &p.norm_w, &g_ln, lg, pool)
}
