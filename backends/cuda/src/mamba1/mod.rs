//! The Mamba-1 mixer's sequence operations (`kernels/mamba1.cu`), named after the CPU
//! backend's `mamba1` module: the causal depthwise convolution with SiLU and the checkpointed
//! selective scan, forward and backward, over a batch of sequences on host slices through the
//! shim. Every sum over channels, time or sequences has a fixed order (per-block partials,
//! then the blocks in order; no atomics), so results are bitwise reproducible, and the
//! backward's recomputation from checkpoints gives the forward's states exactly, so its
//! result does not depend on the chunk length.

pub mod layer;

use crate::launch::{elementwise, Dim3, Launch, ROWS_PER_CHUNK};
use crate::pool::{Buf, Pool};
use crate::shim::{self, ConvDims, Result, Scan, ScanFinal, ScanGrads, ScanIn, ScanScratch};

/// Threads per block of the scan kernels (one thread per channel of one sequence): two warps,
/// so that a `d_inner` of a few hundred still spreads over several blocks, and `2 N` floats
/// per thread fit the shared array for every N up to [`shim::SCAN_MAX_N`].
pub const SCAN_BLOCK: u32 = 64;
const _: () = assert!(2 * shim::SCAN_MAX_N * SCAN_BLOCK as usize <= shim::SCAN_SHARED);

/// The scan kernels' launch: grid `(ceil(di / 64), seqs)`, blocks of [`SCAN_BLOCK`].
pub fn scan_launch(di: usize, seqs: usize) -> Launch {
    Launch { grid: Dim3::xy(di.div_ceil(SCAN_BLOCK as usize) as u32, seqs as u32), block: Dim3::x(SCAN_BLOCK) }
}

/// The convolution and its SiLU: `c = b + conv(x)` (pre-activation, kept for the backward)
/// and `xs = silu(c)`, all `(seqs, time, di)`; `w` `(di, k)`.
pub fn conv_forward(dims: ConvDims, x: &[f32], w: &[f32], b: &[f32], c: &mut [f32], xs: &mut [f32]) -> Result<()> {
    shim::mamba1_conv_fwd(elementwise(dims.len()), dims, x, w, b, c, xs)
}

/// The gradients of the convolution's backward: `x` (of the conv input, `(seqs, time, di)`)
/// is overwritten; `w` `(di, k)` and `b` `(di)` accumulate.
#[derive(Debug)]
pub struct ConvGrads<'a> {
    /// Of the conv input.
    pub x: &'a mut [f32],
    /// Of the weights.
    pub w: &'a mut [f32],
    /// Of the bias.
    pub b: &'a mut [f32],
}

/// Backward of [`conv_forward`] for the gradient `g_xs` of its SiLU output, into `g`; the
/// weight and bias gradients summed over the rows in chunks of [`ROWS_PER_CHUNK`] rows then
/// the chunks in order. Its scratch comes from `pool`. Mamba-2 convolves its `Di + 2N`
/// channels with it too.
pub fn conv_backward(
    dims: ConvDims,
    (x, c, w): (&[f32], &[f32], &[f32]),
    g_xs: &[f32],
    g: ConvGrads<'_>,
    pool: &Pool,
) -> Result<()> {
    let ConvGrads { x: g_x, w: g_w, b: g_b } = g;
    let mut g_c = pool.zeros(c.len());
    shim::mamba1_conv_bwd_gc(elementwise(c.len()), c, g_xs, &mut g_c)?;
    shim::mamba1_conv_bwd_x(elementwise(dims.len()), dims, &g_c, w, g_x)?;
    let chunks = (dims.seqs * dims.time).div_ceil(ROWS_PER_CHUNK);
    let block = 128u32;
    let partial =
        Launch { grid: Dim3::xy(dims.di.div_ceil(block as usize) as u32, chunks as u32), block: Dim3::x(block) };
    let mut part = pool.zeros(chunks * (dims.k + 1) * dims.di);
    shim::mamba1_conv_bwd_params_partial(partial, dims, x, &g_c, &mut part, ROWS_PER_CHUNK)?;
    shim::mamba1_conv_bwd_params_final(elementwise((dims.k + 1) * dims.di), dims, &part, g_w, g_b)
}

/// The gated scan: `out` `(seqs, time, di)` and the chunk-start states `ckpt`
/// (`(seqs, ceil(time / q), n, di)`, [`crate::shim::ScanIn::ckpt_len`]), both overwritten.
pub fn scan_forward(s: &Scan<'_>, out: &mut [f32], ckpt: &mut [f32]) -> Result<()> {
    shim::mamba1_scan_fwd(scan_launch(s.base.di, s.base.seqs), s, out, ckpt)
}

/// A scan backward's scratch from the pool ([`ScanScratch`]): the recomputed states, the
/// partials over `blocks` channel blocks, and `a_width` values of `A` per channel.
#[derive(Debug)]
pub(crate) struct Scratch {
    pub hs: Buf,
    pub part_bc: Buf,
    pub part_a: Buf,
    pub part_d: Buf,
}

impl Scratch {
    pub fn new(s: &ScanIn<'_>, blocks: usize, a_width: usize, pool: &Pool) -> Self {
        let (hs, part_bc) = (pool.zeros(s.seqs * s.q * s.n * s.di), pool.zeros(s.rows() * blocks * 2 * s.n));
        let per_seq = s.seqs * s.di;
        Self { hs, part_bc, part_a: pool.zeros(per_seq * a_width), part_d: pool.zeros(per_seq) }
    }

    /// The second stage's view of the partials over `blocks` channel blocks, writing the
    /// gradients `[g_b, g_c, g_a, g_d]`.
    pub fn second_stage<'a>(&'a self, blocks: usize, [g_b, g_c, g_a, g_d]: [&'a mut [f32]; 4]) -> ScanFinal<'a> {
        ScanFinal { blocks, part_bc: &self.part_bc, part_a: &self.part_a, part_d: &self.part_d, g_b, g_c, g_a, g_d }
    }

    /// The buffers as the first stage's launcher takes them.
    pub fn lend(&mut self) -> ScanScratch<'_> {
        ScanScratch { hs: &mut self.hs, part_bc: &mut self.part_bc, part_a: &mut self.part_a, part_d: &mut self.part_d }
    }
}

/// The scan's gradients (BACKWARD.md, "Mamba-1") for the gated output's gradient, from the
/// pool.
#[derive(Debug)]
pub struct ScanGradients {
    /// Of the scan input `x`, `(seqs, time, di)`.
    pub x: Buf,
    /// Of `dt`, `(seqs, time, di)`.
    pub dt: Buf,
    /// Of the gate input `z`, `(seqs, time, di)`.
    pub z: Buf,
    /// Of `A` (not `A_log`), `(di, n)`, summed over the sequences.
    pub a: Buf,
    /// Of `Bc`, `(seqs, time, n)`.
    pub b: Buf,
    /// Of `Cc`, `(seqs, time, n)`.
    pub c: Buf,
    /// Of `D`, `(di)`, summed over the sequences.
    pub d: Buf,
}

/// The scan backward from the forward's checkpoints `ckpt` (made with the same `q`) for the
/// gradient `g_out` of its gated output: chunks from the last, each recomputed from its
/// checkpoint, then walked back; the shared gradients' partials summed in a second kernel.
/// Its outputs and scratch come from `pool` (the scratch goes back on return).
pub fn scan_backward(s: &Scan<'_>, g_out: &[f32], ckpt: &[f32], pool: &Pool) -> Result<ScanGradients> {
    let l = scan_launch(s.base.di, s.base.seqs);
    let blocks = l.grid.x as usize;
    let (len, rows) = (s.base.len(), s.base.seqs * s.base.time);
    let mut g = ScanGradients {
        x: pool.zeros(len),
        dt: pool.zeros(len),
        z: pool.zeros(len),
        a: pool.zeros(s.base.di * s.base.n),
        b: pool.zeros(rows * s.base.n),
        c: pool.zeros(rows * s.base.n),
        d: pool.zeros(s.base.di),
    };
    let mut sc = Scratch::new(&s.base, blocks, s.base.n, pool);
    let mut grads = ScanGrads { g_x: &mut g.x, g_dt: &mut g.dt, g_z: &mut g.z, scratch: sc.lend() };
    shim::mamba1_scan_bwd(l, s, g_out, ckpt, &mut grads)?;
    let fin = elementwise((rows * 2 * s.base.n).max(s.base.di * s.base.n + s.base.di));
    let f = sc.second_stage(blocks, [&mut g.b, &mut g.c, &mut g.a, &mut g.d]);
    shim::mamba1_scan_bwd_final(fin, s, f)?;
    Ok(g)
}
