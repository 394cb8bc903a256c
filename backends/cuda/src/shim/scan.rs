//! What the two scans' launchers share (`kernels/common.cuh`'s scan helpers): their common
//! inputs and sizes ([`ScanIn`]), the size and launch checks, the first stage's outputs that
//! both backwards have, and the argument order of every scan kernel.

use super::{check_launch, check_lens, refuse, run, Result};
use crate::exec::{args, Arg};
use crate::launch::{Dim3, Launch};

/// The most state indices a scan thread holds (`SCAN_MAX_N` of `kernels/common.cuh`).
pub const SCAN_MAX_N: usize = 64;
/// Floats of the scan backward's shared array (`SCAN_SHARED`): a block of `B` threads needs
/// `2 N B` of them.
pub const SCAN_SHARED: usize = 8192;

/// Both scans' inputs: `seqs` sequences of `time` steps, `di` channels, `n` states, chunks of
/// `q` steps. `x` is `(seqs, time, di)`; `b`, `c` (`Bc`, `Cc`) `(seqs, time, n)`; `dt`, `a`
/// (`A = -exp(A_log)`) and `d` (the skip weights) as each scan lays them out.
#[derive(Clone, Copy, Debug)]
pub struct ScanIn<'a> {
    /// Sequences.
    pub seqs: usize,
    /// Steps per sequence.
    pub time: usize,
    /// Channels.
    pub di: usize,
    /// State indices.
    pub n: usize,
    /// Steps per chunk (between checkpoints).
    pub q: usize,
    /// The scan's input (post-conv, post-SiLU).
    pub x: &'a [f32],
    /// Time steps.
    pub dt: &'a [f32],
    /// `A`.
    pub a: &'a [f32],
    /// `Bc`.
    pub b: &'a [f32],
    /// `Cc`.
    pub c: &'a [f32],
    /// `D`.
    pub d: &'a [f32],
}

/// The scratch of a scan backward's first stage, the same for both scans: the recomputed
/// states `hs` `(seqs, q, n, di)` and the partials of the second stage, written.
#[derive(Debug)]
pub struct ScanScratch<'a> {
    /// The chunk's recomputed states.
    pub hs: &'a mut [f32],
    /// Per channel block and step, the block's sums of the `Cc` then `Bc` gradient terms,
    /// `(seqs, time, grid.x, 2 n)`.
    pub part_bc: &'a mut [f32],
    /// Per sequence and channel, the `A` gradient's terms summed over time, `(seqs, di, w)`
    /// (`w` values of `A` per channel: N for Mamba-1, 1 for Mamba-2's lanes).
    pub part_a: &'a mut [f32],
    /// Per sequence and channel, the `D` gradient's terms summed over time, `(seqs, di)`.
    pub part_d: &'a mut [f32],
}

/// The second stage's inputs both scans have (the first stage's partials over `blocks`
/// channel blocks) and outputs: `g_b`, `g_c` `(seqs, time, n)` overwritten; `g_a` and `g_d`
/// accumulate (`(di, n)` and `(di)` for Mamba-1, `(nh)` each for Mamba-2).
#[derive(Debug)]
pub struct ScanFinal<'a> {
    /// Channel blocks of the first stage's launch.
    pub blocks: usize,
    /// As [`ScanScratch::part_bc`].
    pub part_bc: &'a [f32],
    /// As [`ScanScratch::part_a`].
    pub part_a: &'a [f32],
    /// As [`ScanScratch::part_d`].
    pub part_d: &'a [f32],
    /// Gradient of `Bc`.
    pub g_b: &'a mut [f32],
    /// Gradient of `Cc`.
    pub g_c: &'a mut [f32],
    /// Gradient of `A` (not `A_log`).
    pub g_a: &'a mut [f32],
    /// Gradient of `D`.
    pub g_d: &'a mut [f32],
}

impl ScanFinal<'_> {
    /// The blocks within `int`, then every buffer's length for the scan `s`: `a_width` values
    /// of `A` per channel in `part_a`, and `g_a`, `g_d` of `ad` values.
    pub(super) fn lens(
        &self,
        kernel: &'static str,
        s: &ScanIn<'_>,
        a_width: usize,
        ad: (usize, usize),
    ) -> Result<[(&'static str, usize, usize); 7]> {
        if self.blocks == 0 || self.blocks > i32::MAX as usize {
            return refuse(kernel, format!("{} blocks", self.blocks));
        }
        let (rows, per_seq) = (s.rows(), s.seqs * s.di);
        Ok([
            ("part_bc", self.part_bc.len(), rows * self.blocks * 2 * s.n),
            ("part_a", self.part_a.len(), per_seq * a_width),
            ("part_d", self.part_d.len(), per_seq),
            ("g_b", self.g_b.len(), rows * s.n),
            ("g_c", self.g_c.len(), rows * s.n),
            ("g_a", self.g_a.len(), ad.0),
            ("g_d", self.g_d.len(), ad.1),
        ])
    }
}

/// The lengths a launcher checks: `(name, length, wanted)`.
type Lens<'n> = [(&'n str, usize, usize)];

impl<'a> ScanIn<'a> {
    /// Elements of a `(seqs, time, di)` buffer.
    pub fn len(&self) -> usize {
        self.rows() * self.di
    }
    /// Whether a `(seqs, time, di)` buffer is empty (never, for inputs a launcher accepts).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Rows of the steps, `seqs time`.
    pub fn rows(&self) -> usize {
        self.seqs * self.time
    }
    /// Chunks of `q` steps: `ceil(time / q)`.
    pub fn chunks(&self) -> usize {
        self.time.div_ceil(self.q.max(1))
    }
    /// Elements of the checkpoints `(seqs, chunks, n, di)`.
    pub fn ckpt_len(&self) -> usize {
        self.seqs * self.chunks() * self.n * self.di
    }

    /// The sizes (`sizes`, the scan's list of them, within `int`; N within a thread's arrays;
    /// `ok`, whatever else the scan needs), the launch (grid `(ceil(di / B), seqs)`, a 1-D
    /// block whose `2 N B` floats fit the shared array), and the lengths of `x`, `Bc`, `Cc`
    /// then of the scan's own inputs `own`.
    pub(super) fn check(
        &self,
        kernel: &'static str,
        l: Launch,
        (sizes, ok): (&[usize], bool),
        own: &Lens,
    ) -> Result<()> {
        check_launch(kernel, l)?;
        let small = |v: &usize| (1..=i32::MAX as usize).contains(v);
        if !(ok && sizes.iter().all(small) && (1..=SCAN_MAX_N).contains(&self.n)) {
            return refuse(kernel, format!("sizes {sizes:?}: N must be 1 to {SCAN_MAX_N}, the rest 1 to 2^31 - 1"));
        }
        let (g, b) = (l.grid, l.block);
        let want = Dim3::xy(self.di.div_ceil(b.x as usize) as u32, self.seqs as u32);
        if g != want || b.y != 1 || b.z != 1 || 2 * self.n * b.x as usize > SCAN_SHARED {
            let why = format!("grid {g:?}, block {b:?}: expected grid {want:?}, 1-D block of 2 N B <= {SCAN_SHARED}");
            return refuse(kernel, why);
        }
        let bc = self.rows() * self.n;
        check_lens(kernel, &[("x", self.x.len(), self.len()), ("b", self.b.len(), bc), ("c", self.c.len(), bc)])?;
        check_lens(kernel, own)
    }

    /// Runs the first stage of a scan backward (grid `(blocks, seqs)`) after its buffers'
    /// lengths, in the parameter order of both scans: the common inputs, the scan's own input
    /// `own_in`, the output gradient `g_out` and the checkpoints, `hs`, the input gradient
    /// `g_x`, the scan's own `(seqs, time, di)` outputs `own_out`, the partials (`part_a` of
    /// `a_width` per channel), then `ints`.
    pub(super) fn run_bwd<'b>(
        &'b self,
        (kernel, l, ints): (&'static str, Launch, &[usize]),
        (own_in, g_out, ckpt): (Option<&'b [f32]>, &'b [f32], &'b [f32]),
        (g_x, own_out): (&'b mut [f32], Vec<(&'static str, &'b mut [f32])>),
        sc: &'b mut ScanScratch<'_>,
        a_width: usize,
    ) -> Result<()> {
        let ScanScratch { hs, part_bc, part_a, part_d } = sc;
        let (len, per_seq) = (self.len(), self.seqs * self.di);
        let mut lens = vec![
            ("g_out", g_out.len(), len),
            ("ckpt", ckpt.len(), self.ckpt_len()),
            ("hs", hs.len(), self.seqs * self.q * self.n * self.di),
            ("g_x", g_x.len(), len),
        ];
        lens.extend(own_out.iter().map(|(name, v)| (*name, v.len(), len)));
        lens.extend([
            ("part_bc", part_bc.len(), self.rows() * l.grid.x as usize * 2 * self.n),
            ("part_a", part_a.len(), per_seq * a_width),
            ("part_d", part_d.len(), per_seq),
        ]);
        let mut bufs: Vec<Arg<'b>> = own_in.into_iter().map(Arg::from).collect();
        bufs.extend(args![g_out, ckpt, &mut hs[..], g_x]);
        bufs.extend(own_out.into_iter().map(|(_, v)| Arg::from(v)));
        bufs.extend(args![&mut part_bc[..], &mut part_a[..], &mut part_d[..]]);
        self.run(kernel, l, &lens, bufs, ints)
    }

    /// Runs a scan kernel after the lengths `lens` of its other buffers, in the parameter
    /// order of every scan kernel: the common inputs, then `bufs` (the scan's own inputs and
    /// the kernel's buffers), then `ints` (its sizes).
    pub(super) fn run<'b>(
        &'b self,
        kernel: &'static str,
        l: Launch,
        lens: &Lens,
        bufs: impl IntoIterator<Item = Arg<'b>>,
        ints: &[usize],
    ) -> Result<()> {
        let mut a: Vec<Arg<'b>> = args![self.x, self.dt, self.a, self.b, self.c, self.d].into();
        a.extend(bufs);
        a.extend(ints.iter().map(|&v| Arg::I32(v as i32)));
        run(kernel, l, lens, &mut a)
    }
}
