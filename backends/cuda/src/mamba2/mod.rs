//! The Mamba-2 mixer's sequence operations (`kernels/mamba2.cu`), named after the CPU
//! backend's `mamba2` module: the one-group scan (MODEL.md step 4) with chunk-start
//! checkpoints and its backward recomputing each chunk from them, and the gated RMSNorm
//! (step 5), forward and backward, over a batch of sequences on host slices through the shim.
//!
//! The scan is the sequential recurrence, one thread per (sequence, channel), not the chunked
//! SSD matrix form: MODEL.md defines the sequential result (the SSD form must reproduce it up
//! to rounding), the recurrence costs O(T N) per channel with no intra-chunk O(Q^2) work, and
//! it reuses the Mamba-1 kernels' checkpoint scheme, under which the backward's recomputed
//! states are the forward's bit for bit, so the backward does not depend on Q. Every sum has a
//! fixed order (per-block partials, then the blocks in order; no atomics), so results are
//! bitwise reproducible.

pub mod layer;

use crate::launch::{elementwise, Dim3, Launch, ROWS_PER_CHUNK};
use crate::pool::{Buf, Pool};
use crate::shim::{self, GnormBwd, LaunchError, Result, Scan2, Scan2Final, Scan2Grads, GNORM_MAX_BLOCK};

// Both scans launch alike: one thread per (sequence, channel), blocks of two warps.
use crate::mamba1::Scratch;
pub use crate::mamba1::{scan_launch, SCAN_BLOCK};

/// The scan: `y` `(seqs, time, di)` (ungated) and the chunk-start states `ckpt`
/// (`(seqs, ceil(time / q), n, di)`, [`crate::shim::ScanIn::ckpt_len`]), both overwritten.
pub fn scan_forward(s: &Scan2<'_>, y: &mut [f32], ckpt: &mut [f32]) -> Result<()> {
    shim::mamba2_scan_fwd(scan_launch(s.base.di, s.base.seqs), s, y, ckpt)
}

/// The scan's gradients (BACKWARD.md, "Mamba-2") for the gradient of its output `y`, from
/// the pool.
#[derive(Debug)]
pub struct Scan2Gradients {
    /// Of the scan input `x`, `(seqs, time, di)`.
    pub x: Buf,
    /// Of `dt`, `(seqs, time, nh)`.
    pub dt: Buf,
    /// Of `A` (not `A_log`), `(nh)`, summed over the sequences.
    pub a: Buf,
    /// Of `Bc`, `(seqs, time, n)`, summed over the heads.
    pub b: Buf,
    /// Of `Cc`, `(seqs, time, n)`, summed over the heads.
    pub c: Buf,
    /// Of `D`, `(nh)`, summed over the sequences.
    pub d: Buf,
}

/// The scan backward from the forward's checkpoints `ckpt` (made with the same `q`) for the
/// gradient `g_y` of its output: chunks from the last, each recomputed from its checkpoint,
/// then walked back; the shared gradients summed in a second kernel. Its outputs and scratch
/// come from `pool` (the scratch goes back on return).
pub fn scan_backward(s: &Scan2<'_>, g_y: &[f32], ckpt: &[f32], pool: &Pool) -> Result<Scan2Gradients> {
    let l = scan_launch(s.base.di, s.base.seqs);
    let blocks = l.grid.x as usize;
    let (len, rows) = (s.base.len(), s.base.seqs * s.base.time);
    let mut g = Scan2Gradients {
        x: pool.zeros(len),
        dt: pool.zeros(rows * s.nh),
        a: pool.zeros(s.nh),
        b: pool.zeros(rows * s.base.n),
        c: pool.zeros(rows * s.base.n),
        d: pool.zeros(s.nh),
    };
    let mut gdt_term = pool.zeros(len);
    let mut sc = Scratch::new(&s.base, blocks, 1, pool);
    let mut grads = Scan2Grads { g_x: &mut g.x, gdt_term: &mut gdt_term, scratch: sc.lend() };
    shim::mamba2_scan_bwd(l, s, g_y, ckpt, &mut grads)?;
    let base = sc.second_stage(blocks, [&mut g.b, &mut g.c, &mut g.a, &mut g.d]);
    let fin = Scan2Final { base, gdt_term: &gdt_term, g_dt: &mut g.dt };
    shim::mamba2_scan_bwd_final(elementwise((rows * 2 * s.base.n).max(rows * s.nh)), s, fin)?;
    Ok(g)
}

/// The gated norm's launch: one block per row, the power of two at or above `m / 4` (about
/// four columns a thread), at least a warp, at most [`GNORM_MAX_BLOCK`].
pub fn norm_launch(kernel: &'static str, rows: usize, m: usize) -> Result<Launch> {
    if rows == 0 || rows > i32::MAX as usize {
        return Err(LaunchError { kernel, why: format!("{rows} rows: must be 1 to 2^31 - 1") });
    }
    let block = m.div_ceil(4).next_power_of_two().clamp(32, GNORM_MAX_BLOCK as usize);
    Ok(Launch { grid: Dim3::x(rows as u32), block: Dim3::x(block as u32) })
}

/// The gated RMSNorm `o = v r w`, `v = y silu(z)`, `r = 1 / sqrt(mean(v^2) + 1e-5)` over the
/// rows of `(rows, m)` (MODEL.md step 5); `o` is overwritten.
pub fn gated_norm_forward(y: &[f32], z: &[f32], rows: usize, m: usize, w: &[f32], o: &mut [f32]) -> Result<()> {
    let mut rinv = crate::exec::scratch().zeros(rows);
    shim::mamba2_gnorm_fwd(norm_launch("mamba2_gnorm_fwd", rows, m)?, m, y, z, w, o, &mut rinv)
}

/// Backward of [`gated_norm_forward`] for `g_o` (BACKWARD.md's gated RMSNorm): `g_y` and `g_z`
/// are overwritten; `g_w` accumulates, summed over the rows in chunks of [`ROWS_PER_CHUNK`]
/// rows then the chunks in order. Its scratch comes from `pool`.
pub fn gated_norm_backward(
    b: GnormBwd<'_>,
    rows: usize,
    w: &[f32],
    g_yz: (&mut [f32], &mut [f32]),
    g_w: &mut [f32],
    pool: &Pool,
) -> Result<()> {
    let m = b.m;
    let mut rinv = pool.zeros(rows);
    shim::mamba2_gnorm_bwd_x(norm_launch("mamba2_gnorm_bwd_x", rows, m)?, b, w, g_yz, &mut rinv)?;
    let (chunks, block) = (rows.div_ceil(ROWS_PER_CHUNK), 128u32);
    let partial = Launch { grid: Dim3::xy(m.div_ceil(block as usize) as u32, chunks as u32), block: Dim3::x(block) };
    let mut part = pool.zeros(chunks * m);
    shim::mamba2_gnorm_bwd_w_partial(partial, b, &rinv, &mut part, ROWS_PER_CHUNK)?;
    shim::mamba2_gnorm_bwd_w_final(elementwise(m), &part, g_w)
}
