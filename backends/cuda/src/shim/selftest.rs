//! The checked launchers of the shim's own test kernels (`shim/selftest.cu`), which check
//! that its barrier and shared memory behave as a GPU's.

use super::{check_tree, refuse, run, run_linear, Result};
use crate::exec::args;
use crate::launch::Launch;

/// Runs the barrier probe: `out[b B + t]` is what thread t of block b read from its
/// neighbour's shared slot after the barrier, `10000 b + (t + 1) mod B` when the barrier
/// held; thread `slow` sleeps before writing its slot.
pub fn selftest_barrier_probe(l: Launch, slow: u32, out: &mut [f32]) -> Result<()> {
    let threads = (l.grid.count() * l.block.count()) as usize;
    run_linear("selftest_barrier_probe", l, &[("out", out.len(), threads)], &mut args![out, slow])
}

/// Runs the race probe: `out[b B + t]` is what thread t of block b read from its neighbour's
/// shared slot with no barrier after the writes (`10000 b + t + 1` is thread t's own write).
pub fn selftest_race(l: Launch, out: &mut [f32]) -> Result<()> {
    let threads = (l.grid.count() * l.block.count()) as usize;
    run_linear("selftest_race", l, &[("out", out.len(), threads)], &mut args![out])
}

/// Runs the tree sum: `out[b]` is the shared-memory tree sum of `x[b B .. (b + 1) B]`.
pub fn selftest_tree_sum(l: Launch, x: &[f32], out: &mut [f32]) -> Result<()> {
    let k = "selftest_tree_sum";
    check_tree(k, l)?;
    let lens =
        [("x", x.len(), (l.grid.count() * l.block.count()) as usize), ("out", out.len(), l.grid.count() as usize)];
    if l.grid.y != 1 || l.grid.z != 1 {
        return refuse(k, "the grid must be 1-D".into());
    }
    run(k, l, &lens, &mut args![x, out])
}
