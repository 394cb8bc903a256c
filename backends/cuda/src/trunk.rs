//! What the Mamba-1 and Mamba-2 layers share around their mixers: the inputs of a layer's
//! backward, and the walk over groups of sequences that both passes of either layer make
//! (sequences are independent, so a group's workspace bounds the memory whatever the batch).

use crate::pool::{Buf, Pool};
use crate::shim::Result;

/// A layer backward's inputs: `seqs` sequences of the layer input `u` and of the output
/// gradient `g_out`, both `(seqs, T, M)`.
#[derive(Clone, Copy, Debug)]
pub struct BackwardIn<'a> {
    /// Sequences.
    pub seqs: usize,
    /// The layer's input.
    pub u: &'a [f32],
    /// The gradient of the layer's output.
    pub g_out: &'a [f32],
}

/// How a layer cuts its sequences into groups: `group` sequences at a time, each with `tm`
/// (T M) values of the input and `ck` values of the scan checkpoints.
#[derive(Clone, Copy, Debug)]
pub struct Groups {
    /// Sequences per group (0 counts as 1).
    pub group: usize,
    /// Values of one sequence of the layer input.
    pub tm: usize,
    /// Values of one sequence's checkpoints.
    pub ck: usize,
}

impl Groups {
    /// The groups of `seqs` sequences: (first sequence, count), in order.
    pub fn of(self, seqs: usize) -> impl Iterator<Item = (usize, usize)> {
        let g = self.group.max(1);
        (0..seqs).step_by(g).map(move |s0| (s0, g.min(seqs - s0)))
    }

    /// A layer's backward, group after group: `g_u` starts as `g_out` (the residual's
    /// gradient) and `group` adds the rest of each group's, given the group's inputs, its
    /// checkpoints and its rows of `g_u`.
    pub fn backward(
        self,
        b: BackwardIn<'_>,
        ckpt: &mut [f32],
        pool: &Pool,
        mut group: impl FnMut(BackwardIn<'_>, &mut [f32], &mut [f32]) -> Result<()>,
    ) -> Result<Buf> {
        let mut g_u = pool.copy_of(b.g_out);
        for (s0, s) in self.of(b.seqs) {
            let (a, e) = (s0 * self.tm, (s0 + s) * self.tm);
            let part = BackwardIn { seqs: s, u: &b.u[a..e], g_out: &b.g_out[a..e] };
            group(part, &mut ckpt[s0 * self.ck..(s0 + s) * self.ck], &mut g_u[a..e])?;
        }
        Ok(g_u)
    }
}
