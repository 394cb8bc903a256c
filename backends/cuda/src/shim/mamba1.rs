//! The checked launchers of `kernels/mamba1.cu`: the causal depthwise convolution with SiLU
//! and the checkpointed selective scan, forward and backward (layouts in [`ConvDims`] and
//! [`Scan`]).

use super::scan::{ScanFinal, ScanIn, ScanScratch, SCAN_MAX_N};
use super::{check_launch, check_linear, refuse, run, run_linear, Result};
use crate::exec::{args, Arg};
use crate::launch::{Dim3, Launch};

/// The convolution's sizes: `seqs` sequences of `time` steps of `di` channels (buffers
/// `(seqs, time, di)`), `k` taps (weights `(di, k)`, PyTorch's `(di, 1, k)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvDims {
    /// Sequences.
    pub seqs: usize,
    /// Steps per sequence.
    pub time: usize,
    /// Channels.
    pub di: usize,
    /// Taps.
    pub k: usize,
}

impl ConvDims {
    /// Elements of a `(seqs, time, di)` buffer.
    pub fn len(&self) -> usize {
        self.seqs * self.time * self.di
    }
    /// Whether a buffer is empty (never, for dimensions a launcher accepts).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The rows `seqs time` and the kernels' `int` sizes `time`, `di`, `k`.
    fn ints(&self) -> (i64, [i32; 3]) {
        ((self.seqs * self.time) as i64, [self.time as i32, self.di as i32, self.k as i32])
    }
    fn check(&self, kernel: &'static str) -> Result<()> {
        let ConvDims { seqs, time, di, k } = *self;
        let small = |v: usize| (1..=i32::MAX as usize).contains(&v);
        if !(small(time) && small(di) && small(k) && seqs >= 1) || self.len() > i64::MAX as usize / 2 {
            return refuse(kernel, format!("sizes {self:?}: each must be 1 to 2^31 - 1"));
        }
        Ok(())
    }
}

/// `c = conv(x) + b`, `xs = silu(c)` (causal, depthwise, zero history).
pub fn mamba1_conv_fwd(
    l: Launch,
    dims: ConvDims,
    x: &[f32],
    w: &[f32],
    b: &[f32],
    c: &mut [f32],
    xs: &mut [f32],
) -> Result<()> {
    let kn = "mamba1_conv_fwd";
    check_linear(kn, l)?;
    dims.check(kn)?;
    let (len, dk) = (dims.len(), dims.di * dims.k);
    let lens =
        [("x", x.len(), len), ("w", w.len(), dk), ("b", b.len(), dims.di), ("c", c.len(), len), ("xs", xs.len(), len)];
    let (rows, [time, di, k]) = dims.ints();
    run(kn, l, &lens, &mut args![x, w, b, c, xs, rows, time, di, k])
}

/// `g_c = g_xs silu'(c)`, elementwise.
pub fn mamba1_conv_bwd_gc(l: Launch, c: &[f32], g_xs: &[f32], g_c: &mut [f32]) -> Result<()> {
    let (n, lens) = (c.len(), [("g_xs", g_xs.len(), c.len()), ("g_c", g_c.len(), c.len())]);
    run_linear("mamba1_conv_bwd_gc", l, &lens, &mut args![c, g_xs, g_c, n as i64])
}

/// `g_x = conv^T(g_c)` (the pre-conv input's gradient), overwritten.
pub fn mamba1_conv_bwd_x(l: Launch, dims: ConvDims, g_c: &[f32], w: &[f32], g_x: &mut [f32]) -> Result<()> {
    let kn = "mamba1_conv_bwd_x";
    check_linear(kn, l)?;
    dims.check(kn)?;
    let lens = [("g_c", g_c.len(), dims.len()), ("w", w.len(), dims.di * dims.k), ("g_x", g_x.len(), dims.len())];
    let (rows, [time, di, k]) = dims.ints();
    run(kn, l, &lens, &mut args![g_c, w, g_x, rows, time, di, k])
}

/// Per-chunk sums over rows of the weight and bias gradients into `part`
/// `(chunks, k + 1, di)`; the grid must be `(ceil(di / block), ceil(rows / rows_per_chunk))`.
pub fn mamba1_conv_bwd_params_partial(
    l: Launch,
    dims: ConvDims,
    x: &[f32],
    g_c: &[f32],
    part: &mut [f32],
    rows_per_chunk: usize,
) -> Result<()> {
    let kn = "mamba1_conv_bwd_params_partial";
    check_launch(kn, l)?;
    dims.check(kn)?;
    let rows = dims.seqs * dims.time;
    if rows_per_chunk == 0 || rows_per_chunk > i32::MAX as usize {
        return refuse(kn, format!("rows per chunk {rows_per_chunk} outside 1..2^31"));
    }
    let want = Dim3::xy(dims.di.div_ceil(l.block.x as usize) as u32, rows.div_ceil(rows_per_chunk) as u32);
    if l.grid != want || l.block.y != 1 || l.block.z != 1 {
        return refuse(kn, format!("grid {:?}, block {:?}: expected grid {want:?}, 1-D block", l.grid, l.block));
    }
    let lens = [
        ("x", x.len(), dims.len()),
        ("g_c", g_c.len(), dims.len()),
        ("part", part.len(), want.y as usize * (dims.k + 1) * dims.di),
    ];
    let (rows, [time, di, k]) = dims.ints();
    run(kn, l, &lens, &mut args![x, g_c, part, rows, time, di, k, rows_per_chunk as i32])
}

/// `g_w += `, `g_b += ` the chunks of `part` `(chunks, k + 1, di)` in order.
pub fn mamba1_conv_bwd_params_final(
    l: Launch,
    dims: ConvDims,
    part: &[f32],
    g_w: &mut [f32],
    g_b: &mut [f32],
) -> Result<()> {
    let kn = "mamba1_conv_bwd_params_final";
    check_linear(kn, l)?;
    dims.check(kn)?;
    let per = (dims.k + 1) * dims.di;
    if !part.len().is_multiple_of(per) || part.is_empty() || part.len() / per > i32::MAX as usize {
        return refuse(kn, format!("part of {} elements is not (chunks, {}, {})", part.len(), dims.k + 1, dims.di));
    }
    let lens = [("g_w", g_w.len(), dims.di * dims.k), ("g_b", g_b.len(), dims.di)];
    let (_, [_, di, k]) = dims.ints();
    run(kn, l, &lens, &mut args![part, g_w, g_b, (part.len() / per) as i32, di, k])
}

/// The Mamba-1 scan's inputs: [`ScanIn`] with `dt` `(seqs, time, di)`, `a` `(di, n)` and `d`
/// `(di)`, and the gate's input `z` `(seqs, time, di)`.
#[derive(Clone, Copy, Debug)]
pub struct Scan<'a> {
    /// The inputs both scans have.
    pub base: ScanIn<'a>,
    /// The gate's input.
    pub z: &'a [f32],
}

impl Scan<'_> {
    /// The sizes, every input's length and the launch ([`ScanIn::check`]).
    fn check(&self, kernel: &'static str, l: Launch) -> Result<()> {
        let s = &self.base;
        let own = [
            ("dt", s.dt.len(), s.len()),
            ("z", self.z.len(), s.len()),
            ("a", s.a.len(), s.di * s.n),
            ("d", s.d.len(), s.di),
        ];
        s.check(kernel, l, (&self.sizes(), true), &own)
    }

    fn sizes(&self) -> [usize; 5] {
        let s = &self.base;
        [s.seqs, s.time, s.di, s.n, s.q]
    }

    /// The kernels' trailing sizes.
    fn ints(&self) -> [usize; 4] {
        let s = &self.base;
        [s.time, s.di, s.n, s.q]
    }
}

/// The gated scan `out = (C h + D x) silu(z)` `(seqs, time, di)` and the checkpoints `ckpt`
/// `(seqs, chunks, n, di)`.
pub fn mamba1_scan_fwd(l: Launch, s: &Scan<'_>, out: &mut [f32], ckpt: &mut [f32]) -> Result<()> {
    let (kn, b) = ("mamba1_scan_fwd", &s.base);
    s.check(kn, l)?;
    let lens = [("out", out.len(), b.len()), ("ckpt", ckpt.len(), b.ckpt_len())];
    b.run(kn, l, &lens, args![s.z, out, ckpt], &s.ints())
}

/// The scan backward's outputs, `g_x`, `g_dt`, `g_z` `(seqs, time, di)` (overwritten), and
/// its scratch (`part_a` `(seqs, di, n)`).
#[derive(Debug)]
pub struct ScanGrads<'a> {
    /// Gradient of the scan input `x`.
    pub g_x: &'a mut [f32],
    /// Gradient of `dt`.
    pub g_dt: &'a mut [f32],
    /// Gradient of `z`.
    pub g_z: &'a mut [f32],
    /// The recomputed states and the partials.
    pub scratch: ScanScratch<'a>,
}

/// The scan backward for the gated output's gradient `g_out`, from the forward's `ckpt`
/// (first stage; [`mamba1_scan_bwd_final`] finishes the sums).
pub fn mamba1_scan_bwd(l: Launch, s: &Scan<'_>, g_out: &[f32], ckpt: &[f32], g: &mut ScanGrads<'_>) -> Result<()> {
    let kn = "mamba1_scan_bwd";
    s.check(kn, l)?;
    let ScanGrads { g_x, g_dt, g_z, scratch } = g;
    let own_out = vec![("g_dt", &mut g_dt[..]), ("g_z", &mut g_z[..])];
    s.base.run_bwd((kn, l, &s.ints()), (Some(s.z), g_out, ckpt), (g_x, own_out), scratch, s.base.n)
}

/// The parameter gradients of the scan, shared across channels or sequences: `g_b`, `g_c`
/// `(seqs, time, n)` overwritten from `part_bc` (over `blocks` channel blocks in order);
/// `g_a` `(di, n)` and `g_d` `(di)` accumulate `part_a`, `part_d` over the sequences in order.
pub fn mamba1_scan_bwd_final(l: Launch, s: &Scan<'_>, f: ScanFinal<'_>) -> Result<()> {
    let kn = "mamba1_scan_bwd_final";
    check_linear(kn, l)?;
    let (sizes, b) = (s.sizes(), &s.base);
    if b.seqs > i32::MAX as usize || !(1..=SCAN_MAX_N).contains(&b.n) {
        return refuse(kn, format!("sizes {sizes:?}"));
    }
    let lens = f.lens(kn, b, b.n, (b.di * b.n, b.di))?;
    let ScanFinal { blocks, part_bc, part_a, part_d, g_b, g_c, g_a, g_d } = f;
    let ints = args![b.rows() as i64, blocks as i32, b.seqs as i32, b.di as i32, b.n as i32];
    let mut a: Vec<Arg<'_>> = args![part_bc, part_a, part_d, g_b, g_c, g_a, g_d].into_iter().chain(ints).collect();
    run(kn, l, &lens, &mut a)
}
