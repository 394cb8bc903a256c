//! One Mamba-1 layer of the trunk in shim mode, `out = u + Mamba1(LayerNorm(u))` (MODEL.md,
//! "Temporal mixer, Mamba-1"), forward and backward, every buffer from a [`Pool`]: the
//! layer skeleton of [`crate::trunk`] with this mixer, the kernels of this crate for the
//! convolution with SiLU, softplus and the gated scan, and [`crate::gemm`] (the shim's
//! cuBLAS) for the projections. Both passes run over groups of [`LayerDims::group`]
//! sequences; the parameter gradients accumulate group after group.

use crate::pool::{Buf, Pool};
use crate::shim::{ConvDims, Result, Scan, ScanIn};
use crate::trunk::{self, Frame, Groups, MixPass, Mixer};

pub use crate::trunk::{backward, forward};

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

boldcast_core::param_group! {
    /// The layer's parameters (or their gradients), PyTorch layout, row-major (MODEL.md's
    /// table), in state-dict order. `S` is `Vec<f32>` (owned), `&[f32]` (a view of the model's
    /// store) or `&mut [f32]` (gradients to add to).
    pub struct Mamba1Params {
        /// `norm.weight` (M).
        norm_w,
        /// `norm.bias` (M).
        norm_b,
        /// `conv1d.weight` (Di, K).
        conv_w,
        /// `conv1d.bias` (Di).
        conv_b,
        /// `in_proj.weight` (2 Di, M): the rows of `x`, then those of `z`.
        in_proj,
        /// `x_proj.weight` (R + 2 N, Di): the rows of `dr`, `Bc`, `Cc`.
        x_proj,
        /// `dt_proj.weight` (Di, R).
        dt_w,
        /// `dt_proj.bias` (Di).
        dt_b,
        /// `A_log` (Di, N).
        a_log,
        /// `D` (Di).
        d,
        /// `out_proj.weight` (M, Di).
        out_proj,
    }
}

impl Mamba1Params<Vec<f32>> {
    /// All zeros (a gradient to accumulate into).
    pub fn zeros(z: &LayerDims) -> Self {
        let (m, di) = (z.m, z.di);
        let lens = [m, m, di * z.k, di, 2 * di * m, z.w() * di, di * z.r, di, di * z.n, di, m * di];
        Self::take(&mut lens.into_iter().map(|n| vec![0.0f32; n]))
    }
}

/// The forward's internals of one group, recomputed by the backward.
#[derive(Debug)]
pub struct Internals {
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

impl Internals {
    fn scan<'a>(&'a self, p: &Mamba1Params<&'a [f32]>, z: &LayerDims, seqs: usize) -> Scan<'a> {
        let (time, di, n, q) = (z.time, z.di, z.n, z.q);
        let (x, dt, a, b, c, d) = (&self.xs[..], &self.dt[..], &self.a[..], &self.bc[..], &self.cc[..], p.d);
        Scan { base: ScanIn { seqs, time, di, n, q, x, dt, a, b, c, d }, z: &self.z }
    }
}

impl LayerDims {
    fn conv(&self, seqs: usize) -> ConvDims {
        ConvDims { seqs, time: self.time, di: self.di, k: self.k }
    }
}

/// The gated selective scan, with `dt_proj` and `x_proj` feeding it.
impl Mixer for LayerDims {
    type Params<S> = Mamba1Params<S>;
    type Internals = Internals;
    type Kept = ();

    trunk::frame_fields!();

    fn groups(&self) -> Groups {
        Groups { group: self.group, m: self.m, time: self.time, ck: self.ckpt_len(1) }
    }

    /// `x | z` from `in_proj`, the convolution, `dr | Bc | Cc` from `x_proj`, and `dt`.
    fn internals(&self, p: &Mamba1Params<&[f32]>, seqs: usize, ln: &[f32], pool: &Pool) -> Result<Internals> {
        let [x, z] = trunk::project_bands(ln, p.in_proj, [self.di; 2], pool)?;
        let (c, xs) = trunk::conv_silu(self.conv(seqs), &x, p.conv_w, p.conv_b, pool)?;
        let [dr, bc, cc] = trunk::project_bands(&xs, p.x_proj, [self.r, self.n, self.n], pool)?;
        let (dt_pre, dt) = trunk::time_steps(&dr, p.dt_w, p.dt_b, self.di, pool)?;
        let a = trunk::decay(p.a_log, pool)?;
        Ok(Internals { x, z, c, xs, dr, bc, cc, dt_pre, dt, a })
    }

    /// The scan's gated output, `out_proj`'s input.
    fn mix(
        &self,
        p: &Mamba1Params<&[f32]>,
        it: &Internals,
        seqs: usize,
        ckpt: &mut [f32],
        pool: &Pool,
    ) -> Result<(Buf, ())> {
        let mut y = pool.zeros(seqs * self.time * self.di);
        super::scan_forward(&it.scan(p, self, seqs), &mut y, ckpt)?;
        Ok((y, ()))
    }

    /// Back through the scan, `dt_proj`, `x_proj` and the convolution: the gradients of `x`
    /// and `z`. Each buffer is dropped once its last use is past (what keeps the group's
    /// peak at the scan backward).
    fn backward(
        &self,
        p: &Mamba1Params<&[f32]>,
        pass: MixPass<'_, Internals, ()>,
        g: &mut Mamba1Params<&mut [f32]>,
        pool: &Pool,
    ) -> Result<Vec<Buf>> {
        let MixPass { it, g_o: g_y, ckpt, seqs, .. } = pass;
        let rows = seqs * self.time;
        let sg = super::scan_backward(&it.scan(p, self, seqs), &g_y, ckpt, pool)?;
        drop(g_y);
        let Internals { x, z: _, c, xs, dr, bc: _, cc: _, dt_pre, dt: _, a } = it;
        let super::ScanGradients { x: mut g_xs, dt: g_dt, z: g_z, b: g_b, c: g_c, a: g_a, d: g_d } = sg;
        trunk::add_decay_grads((&mut g.a_log, &mut g.d), &a, &g_a, &g_d)?;
        let g_pre = trunk::time_steps_backward(dt_pre, g_dt, g.dt_b, pool)?;
        let mut g_dr = pool.zeros(rows * self.r);
        trunk::bands_backward(rows, &dr, (p.dt_w, &mut g.dt_w), &[&g_pre], (&mut g_dr, 0.0))?;
        drop((g_pre, dr));
        trunk::bands_backward(rows, &xs, (p.x_proj, &mut g.x_proj), &[&g_dr, &g_b, &g_c], (&mut g_xs, 1.0))?;
        drop((g_dr, g_b, g_c, xs));
        let cw = (&mut g.conv_w[..], &mut g.conv_b[..]);
        let g_x = trunk::conv_silu_backward(self.conv(seqs), (&x, &c, p.conv_w), &g_xs, cw, pool)?;
        drop((g_xs, c, x));
        Ok(vec![g_x, g_z])
    }
}
