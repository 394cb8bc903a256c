//! One Mamba-2 layer of the trunk in shim mode, `out = u + Mamba2(LayerNorm(u))` (MODEL.md,
//! "Temporal mixer, Mamba-2", one group), forward and backward, every buffer from a [`Pool`]:
//! the layer skeleton of [`crate::trunk`] with this mixer, the Mamba-1 convolution kernels
//! with SiLU over the `Di + 2N` channels of `xBC`, softplus, this module's scan and gated
//! RMSNorm kernels, and [`crate::gemm`] (the shim's cuBLAS) for the projections. Both passes
//! run over groups of [`Layer2Dims::group`] sequences.
//!
//! Host work (shim mode only; a device build would fold each into a kernel's loads or
//! stores): `A = -exp(A_log)` (nh values), the split of the convolution output into `x`,
//! `Bc`, `Cc` and the join of their gradients, and the per-head sums into `A_log` and `D`.

use super::norm_launch;
use crate::ops::layout;
use crate::pool::{Buf, Pool};
use crate::shim::{self, Cols, ConvDims, GnormBwd, Result, Scan2, ScanIn};
use crate::trunk::{self, Frame, Groups, MixPass, Mixer};

pub use crate::trunk::{backward, forward};

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

boldcast_core::param_group! {
    /// The layer's parameters (or their gradients), PyTorch layout, row-major (MODEL.md's
    /// table), in state-dict order. `S` is `Vec<f32>` (owned), `&[f32]` (a view of the model's
    /// store) or `&mut [f32]` (gradients to add to).
    pub struct Mamba2Params {
        /// `norm.weight` of the layer's LayerNorm (M).
        norm_w,
        /// `norm.bias` (M).
        norm_b,
        /// `dt_bias` (nh).
        dt_bias,
        /// `conv1d.weight` (Di + 2N, K).
        conv_w,
        /// `conv1d.bias` (Di + 2N).
        conv_b,
        /// `in_proj.weight` (2 Di + 2N + nh, M): the rows of `z`, `xBC`, `dtr`.
        in_proj,
        /// `A_log` (nh).
        a_log,
        /// `D` (nh).
        d,
        /// `norm.weight` of the gated RMSNorm (Di).
        gnorm_w,
        /// `out_proj.weight` (M, Di).
        out_proj,
    }
}

impl Mamba2Params<Vec<f32>> {
    /// All zeros (a gradient to accumulate into).
    pub fn zeros(z: &Layer2Dims) -> Self {
        let (m, di, cd, nh) = (z.m, z.di, z.conv_dim(), z.nh);
        let lens = [m, m, nh, cd * z.k, cd, z.proj_dim() * m, nh, nh, di, m * di];
        Self::take(&mut lens.into_iter().map(|n| vec![0.0f32; n]))
    }
}

/// The forward's internals of one group, recomputed by the backward.
#[derive(Debug)]
pub struct Internals {
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

impl Internals {
    fn scan<'a>(&'a self, p: &Mamba2Params<&'a [f32]>, z: &Layer2Dims, seqs: usize) -> Scan2<'a> {
        let (time, di, n, q) = (z.time, z.di, z.n, z.q);
        let (x, dt, a, b, c, d) = (&self.x[..], &self.dt[..], &self.a[..], &self.b[..], &self.cc[..], p.d);
        Scan2 { base: ScanIn { seqs, time, di, n, q, x, dt, a, b, c, d }, nh: z.nh }
    }
}

impl Layer2Dims {
    fn conv(&self, seqs: usize) -> ConvDims {
        ConvDims { seqs, time: self.time, di: self.conv_dim(), k: self.k }
    }
    /// The bands of `x | Bc | Cc` in the convolution's rows, as (column, width).
    fn xbc_bands(&self) -> [(usize, usize); 3] {
        [(0, self.di), (self.di, self.n), (self.di + self.n, self.n)]
    }
}

/// The gated RMSNorm of `y` by `z` (rows of Di), its output from the pool.
fn gated_norm(p: &Mamba2Params<&[f32]>, rows: usize, di: usize, y: &[f32], z: &[f32], pool: &Pool) -> Result<Buf> {
    let (mut o, mut rinv) = (pool.zeros(rows * di), pool.zeros(rows));
    shim::mamba2_gnorm_fwd(norm_launch("mamba2_gnorm_fwd", rows, di)?, di, y, z, p.gnorm_w, &mut o, &mut rinv)?;
    Ok(o)
}

/// The one-group SSD scan (as its sequential recurrence) and the gated RMSNorm after it.
impl Mixer for Layer2Dims {
    type Params<S> = Mamba2Params<S>;
    type Internals = Internals;
    /// The scan's output `y`, the gated norm's input.
    type Kept = Buf;

    trunk::frame_fields!();

    fn groups(&self) -> Groups {
        Groups { group: self.group, m: self.m, time: self.time, ck: self.ckpt_len(1) }
    }

    /// `z | xBC | dt` from `in_proj`, the convolution of `xBC` split into `x`, `Bc`, `Cc`.
    fn internals(&self, p: &Mamba2Params<&[f32]>, seqs: usize, ln: &[f32], pool: &Pool) -> Result<Internals> {
        let (di, cd) = (self.di, self.conv_dim());
        let (w_zx, w_dt) = p.in_proj.split_at((di + cd) * self.m);
        let [z, xbc] = trunk::project_bands(ln, w_zx, [di, cd], pool)?;
        let (dt_pre, dt) = trunk::time_steps(ln, w_dt, p.dt_bias, self.nh, pool)?;
        let (c, xs) = trunk::conv_silu(self.conv(seqs), &xbc, p.conv_w, p.conv_b, pool)?;
        let rows = seqs * self.time;
        let [x, b, cc] = self.xbc_bands().map(|(col, width)| {
            let mut band = pool.zeros(rows * width);
            let r = layout::copy_cols(&xs, Cols { width: cd, col }, &mut band, Cols { width, col: 0 }, width);
            r.map(|()| band)
        });
        let (x, b, cc) = (x?, b?, cc?);
        drop(xs);
        let a = trunk::decay(p.a_log, pool)?;
        Ok(Internals { z, xbc, c, x, b, cc, dt_pre, dt, a })
    }

    /// The scan's output `y` (kept) and its gated norm by `z`, `out_proj`'s input.
    fn mix(
        &self,
        p: &Mamba2Params<&[f32]>,
        it: &Internals,
        seqs: usize,
        ckpt: &mut [f32],
        pool: &Pool,
    ) -> Result<(Buf, Buf)> {
        let rows = seqs * self.time;
        let mut y = pool.zeros(rows * self.di);
        super::scan_forward(&it.scan(p, self, seqs), &mut y, ckpt)?;
        let o = gated_norm(p, rows, self.di, &y, &it.z, pool)?;
        Ok((o, y))
    }

    /// Back through the gated norm, the scan, the split and the convolution: the gradients
    /// of `z`, `xBC` and `dt`'s pre-activation, each buffer dropped once its last use is past.
    fn backward(
        &self,
        p: &Mamba2Params<&[f32]>,
        pass: MixPass<'_, Internals, Buf>,
        g: &mut Mamba2Params<&mut [f32]>,
        pool: &Pool,
    ) -> Result<Vec<Buf>> {
        let MixPass { it, kept: y, g_o, ckpt, seqs } = pass;
        let (rows, di, cd) = (seqs * self.time, self.di, self.conv_dim());
        let (mut g_y, mut g_z) = (pool.zeros(rows * di), pool.zeros(rows * di));
        let gb = GnormBwd { m: di, y: &y, z: &it.z, g_o: &g_o };
        super::gated_norm_backward(gb, rows, p.gnorm_w, (&mut g_y, &mut g_z), g.gnorm_w, pool)?;
        drop((g_o, y));
        let sg = super::scan_backward(&it.scan(p, self, seqs), &g_y, ckpt, pool)?;
        drop(g_y);
        let Internals { z: _, xbc, c, x: _, b: _, cc: _, dt_pre, dt: _, a } = it;
        let super::Scan2Gradients { x: g_x, dt: g_dt, a: g_a, b: g_b, c: g_c, d: g_d } = sg;
        trunk::add_decay_grads((&mut g.a_log, &mut g.d), &a, &g_a, &g_d)?;
        let g_pre = trunk::time_steps_backward(dt_pre, g_dt, g.dt_bias, pool)?;
        // The gradient of silu(conv(xBC)), joined from those of x, Bc, Cc.
        let mut g_xs = pool.zeros(rows * cd);
        for ((col, width), gb) in self.xbc_bands().into_iter().zip([&g_x, &g_b, &g_c]) {
            layout::copy_cols(gb, Cols { width, col: 0 }, &mut g_xs, Cols { width: cd, col }, width)?;
        }
        drop((g_x, g_b, g_c));
        let cw = (&mut g.conv_w[..], &mut g.conv_b[..]);
        let g_xbc = trunk::conv_silu_backward(self.conv(seqs), (&xbc, &c, p.conv_w), &g_xs, cw, pool)?;
        drop((g_xs, c, xbc));
        Ok(vec![g_z, g_xbc, g_pre])
    }
}
