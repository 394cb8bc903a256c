//! The checked launchers of `kernels/mamba2.cu`: the Mamba-2 scan (one group) with chunk-start
//! checkpoints and its recomputing backward (layouts in [`Scan2`]), and the gated RMSNorm,
//! forward and backward.

use super::scan::{ScanFinal, ScanIn, ScanScratch};
use super::{check_launch, check_lens, check_linear, check_tree, refuse, run, Result};
use crate::exec::{args, Arg};
use crate::launch::{Dim3, Launch};
/// The most threads of a gated-norm block (`M2_NORM_MAX_BLOCK`).
pub const GNORM_MAX_BLOCK: u32 = 256;

/// The Mamba-2 scan's inputs: [`ScanIn`] with `dt` `(seqs, time, nh)`, `a` and `d` `(nh)`,
/// over `nh` heads of `di / nh` channels (`Bc`, `Cc` shared by the heads).
#[derive(Clone, Copy, Debug)]
pub struct Scan2<'a> {
    /// The inputs both scans have.
    pub base: ScanIn<'a>,
    /// Heads.
    pub nh: usize,
}

impl Scan2<'_> {
    /// Channels per head (`headdim`), `di / nh`.
    pub fn pd(&self) -> usize {
        self.base.di.checked_div(self.nh).unwrap_or(0)
    }

    /// The sizes (`di` a multiple of `nh`), every input's length and the launch
    /// ([`ScanIn::check`]).
    fn check(&self, kernel: &'static str, l: Launch) -> Result<()> {
        let s = &self.base;
        let ok = self.pd() * self.nh == s.di && s.len() <= i64::MAX as usize / 2;
        let own = [("dt", s.dt.len(), s.rows() * self.nh), ("a", s.a.len(), self.nh), ("d", s.d.len(), self.nh)];
        s.check(kernel, l, (&[s.seqs, s.time, self.nh, self.pd(), s.n, s.q], ok), &own)
    }

    /// The kernels' trailing sizes.
    fn ints(&self) -> [usize; 6] {
        let s = &self.base;
        [s.time, s.di, s.n, self.nh, self.pd(), s.q]
    }
}

/// The scan `y = S C + D x` `(seqs, time, di)` and the checkpoints `ckpt`
/// `(seqs, chunks, n, di)`, both overwritten.
pub fn mamba2_scan_fwd(l: Launch, s: &Scan2<'_>, y: &mut [f32], ckpt: &mut [f32]) -> Result<()> {
    let (kn, b) = ("mamba2_scan_fwd", &s.base);
    s.check(kn, l)?;
    b.run(kn, l, &[("y", y.len(), b.len()), ("ckpt", ckpt.len(), b.ckpt_len())], args![y, ckpt], &s.ints())
}

/// The scan backward's outputs, `g_x` and the per-lane `g_dt` terms `gdt_term`
/// `(seqs, time, di)` (overwritten), and its scratch (`part_a` `(seqs, di)`).
#[derive(Debug)]
pub struct Scan2Grads<'a> {
    /// Gradient of the scan input `x`.
    pub g_x: &'a mut [f32],
    /// Each lane's part of the gradient of its head's `dt`.
    pub gdt_term: &'a mut [f32],
    /// The recomputed states and the partials.
    pub scratch: ScanScratch<'a>,
}

/// The scan backward for the output gradient `g_y`, from the forward's `ckpt` (first stage;
/// [`mamba2_scan_bwd_final`] finishes the sums).
pub fn mamba2_scan_bwd(l: Launch, s: &Scan2<'_>, g_y: &[f32], ckpt: &[f32], g: &mut Scan2Grads<'_>) -> Result<()> {
    let kn = "mamba2_scan_bwd";
    s.check(kn, l)?;
    let Scan2Grads { g_x, gdt_term, scratch } = g;
    let own_out = vec![("gdt_term", &mut gdt_term[..])];
    s.base.run_bwd((kn, l, &s.ints()), (None, g_y, ckpt), (g_x, own_out), scratch, 1)
}

/// The second stage's inputs and outputs: the common ones (`g_a`, `g_d` `(nh)`), and the
/// per-lane `g_dt` terms summed into `g_dt` `(seqs, time, nh)`, overwritten.
#[derive(Debug)]
pub struct Scan2Final<'a> {
    /// The partials and gradients both scans have.
    pub base: ScanFinal<'a>,
    /// As [`Scan2Grads::gdt_term`].
    pub gdt_term: &'a [f32],
    /// Gradient of `dt`.
    pub g_dt: &'a mut [f32],
}

/// The scan's shared gradients, each summed in a fixed order (see the kernel).
pub fn mamba2_scan_bwd_final(l: Launch, s: &Scan2<'_>, f: Scan2Final<'_>) -> Result<()> {
    let kn = "mamba2_scan_bwd_final";
    check_linear(kn, l)?;
    let (b, nh) = (&s.base, s.nh);
    // The sizes and inputs as the first stage checks them, under its launch shape.
    s.check(kn, Launch { grid: Dim3::xy(b.di.div_ceil(64) as u32, b.seqs as u32), block: Dim3::x(64) })?;
    let mut lens = f.base.lens(kn, b, 1, (nh, nh))?.to_vec();
    let Scan2Final { base: ScanFinal { blocks, part_bc, part_a, part_d, g_b, g_c, g_a, g_d }, gdt_term, g_dt } = f;
    lens.extend([("gdt_term", gdt_term.len(), b.len()), ("g_dt", g_dt.len(), b.rows() * nh)]);
    let ints = args![b.rows() as i64, blocks as i32, b.seqs as i32, b.n as i32, nh as i32, s.pd() as i32];
    let bufs = args![part_bc, gdt_term, part_a, part_d, g_b, g_c, g_dt, g_a, g_d];
    let mut a: Vec<Arg<'_>> = bufs.into_iter().chain(ints).collect();
    run(kn, l, &lens, &mut a)
}

/// The gated norm's row kernels: a power-of-two block of at most [`GNORM_MAX_BLOCK`], one
/// block per row of width `m`, `y` and `z` of `(grid.x, m)`.
fn check_norm_rows(kernel: &'static str, l: Launch, y: usize, z: usize, m: usize) -> Result<usize> {
    check_tree(kernel, l)?;
    if l.block.x > GNORM_MAX_BLOCK || l.grid.y != 1 || l.grid.z != 1 || m == 0 || m > i32::MAX as usize {
        let why =
            format!("grid {:?}, block {:?}, width {m}: one 1-D block of <= {GNORM_MAX_BLOCK} per row", l.grid, l.block);
        return refuse(kernel, why);
    }
    let rows = l.grid.x as usize;
    check_lens(kernel, &[("y", y, rows * m), ("z", z, rows * m)])?;
    Ok(rows)
}

/// `o = v r w`, `v = y silu(z)`, `r = 1 / sqrt(mean(v^2) + eps)` into `rinv` `(rows)`.
pub fn mamba2_gnorm_fwd(
    l: Launch,
    m: usize,
    y: &[f32],
    z: &[f32],
    w: &[f32],
    o: &mut [f32],
    rinv: &mut [f32],
) -> Result<()> {
    let kn = "mamba2_gnorm_fwd";
    let rows = check_norm_rows(kn, l, y.len(), z.len(), m)?;
    let lens = [("w", w.len(), m), ("o", o.len(), rows * m), ("rinv", rinv.len(), rows)];
    run(kn, l, &lens, &mut args![y, z, w, o, rinv, m as i32])
}

/// What the gated norm's backward kernels read: rows of width `m` of the norm's inputs `y`,
/// `z` and of its output's gradient `g_o`.
#[derive(Clone, Copy, Debug)]
pub struct GnormBwd<'a> {
    /// The row width.
    pub m: usize,
    /// The normalized input.
    pub y: &'a [f32],
    /// The gate's input.
    pub z: &'a [f32],
    /// The gradient of the output.
    pub g_o: &'a [f32],
}

/// The gated norm's input gradients `g_y`, `g_z` for `g_o` (overwritten) and `r` into `rinv`.
pub fn mamba2_gnorm_bwd_x(
    l: Launch,
    b: GnormBwd<'_>,
    w: &[f32],
    (g_y, g_z): (&mut [f32], &mut [f32]),
    rinv: &mut [f32],
) -> Result<()> {
    let kn = "mamba2_gnorm_bwd_x";
    let GnormBwd { m, y, z, g_o } = b;
    let rows = check_norm_rows(kn, l, y.len(), z.len(), m)?;
    let rm = rows * m;
    let lens = [
        ("w", w.len(), m),
        ("g_o", g_o.len(), rm),
        ("g_y", g_y.len(), rm),
        ("g_z", g_z.len(), rm),
        ("rinv", rinv.len(), rows),
    ];
    run(kn, l, &lens, &mut args![y, z, w, g_o, g_y, g_z, rinv, m as i32])
}

/// Per-chunk sums over rows of `g_o v r` into `part` `(grid.y, m)`; the grid must be
/// `(ceil(m / block), ceil(rows / rows_per_chunk))`.
pub fn mamba2_gnorm_bwd_w_partial(
    l: Launch,
    b: GnormBwd<'_>,
    rinv: &[f32],
    part: &mut [f32],
    rows_per_chunk: usize,
) -> Result<()> {
    let kn = "mamba2_gnorm_bwd_w_partial";
    let GnormBwd { m, y, z, g_o } = b;
    check_launch(kn, l)?;
    let rows = rinv.len();
    if m == 0 || m > i32::MAX as usize || rows == 0 || rows_per_chunk == 0 || rows_per_chunk > i32::MAX as usize {
        return refuse(kn, format!("{rows} rows of width {m}, {rows_per_chunk} rows per chunk"));
    }
    let want = Dim3::xy(m.div_ceil(l.block.x as usize) as u32, rows.div_ceil(rows_per_chunk) as u32);
    if l.grid != want || l.block.y != 1 || l.block.z != 1 || l.block.x > GNORM_MAX_BLOCK {
        return refuse(kn, format!("grid {:?}, block {:?}: expected grid {want:?}, 1-D block", l.grid, l.block));
    }
    let rm = rows * m;
    let lens =
        [("y", y.len(), rm), ("z", z.len(), rm), ("g_o", g_o.len(), rm), ("part", part.len(), want.y as usize * m)];
    run(kn, l, &lens, &mut args![y, z, g_o, rinv, part, rows as i64, m as i32, rows_per_chunk as i32])
}

/// `g_w += sum_c part[c]`, chunks in order.
pub fn mamba2_gnorm_bwd_w_final(l: Launch, part: &[f32], g_w: &mut [f32]) -> Result<()> {
    let kn = "mamba2_gnorm_bwd_w_final";
    check_linear(kn, l)?;
    let m = g_w.len();
    if m == 0 || m > i32::MAX as usize || !part.len().is_multiple_of(m) || part.len() / m > i32::MAX as usize {
        return refuse(kn, format!("part of {} elements is not (chunks, {m})", part.len()));
    }
    run(kn, l, &[], &mut args![part, g_w, (part.len() / m) as i32, m as i32])
}
