//! The checked launchers of the shim's own test kernels (`shim/selftest.cu`), which check
//! that its barrier and shared memory behave as a GPU's.

use super::{check_len, check_lens, check_linear, check_tree, refuse, Result};
use crate::exec::{self, args};
use crate::launch::Launch;

/// Runs the barrier probe: `out[b B + t]` is what thread t of block b read from its
/// neighbour's shared slot after the barrier, `10000 b + (t + 1) mod B` when the barrier
/// held; thread `slow` sleeps before writing its slot.
pub fn selftest_barrier_probe(l: Launch, slow: u32, out: &mut [f32]) -> Result<()> {
    let k = "selftest_barrier_probe";
    check_linear(k, l)?;
    check_len(k, "out", out.len(), (l.grid.count() * l.block.count()) as usize)?;
    exec::launch("selftest_barrier_probe", l, &mut args![out, slow])?;
    Ok(())
}

/// Runs the race probe: `out[b B + t]` is what thread t of block b read from its neighbour's
/// shared slot with no barrier after the writes (`10000 b + t + 1` is thread t's own write).
pub fn selftest_race(l: Launch, out: &mut [f32]) -> Result<()> {
    let k = "selftest_race";
    check_linear(k, l)?;
    check_len(k, "out", out.len(), (l.grid.count() * l.block.count()) as usize)?;
    exec::launch("selftest_race", l, &mut args![out])?;
    Ok(())
}

/// Runs the tree sum: `out[b]` is the shared-memory tree sum of `x[b B .. (b + 1) B]`.
pub fn selftest_tree_sum(l: Launch, x: &[f32], out: &mut [f32]) -> Result<()> {
    let k = "selftest_tree_sum";
    check_tree(k, l)?;
    check_lens(
        k,
        &[("x", x.len(), (l.grid.count() * l.block.count()) as usize), ("out", out.len(), l.grid.count() as usize)],
    )?;
    if l.grid.y != 1 || l.grid.z != 1 {
        return refuse(k, "the grid must be 1-D".into());
    }
    exec::launch("selftest_tree_sum", l, &mut args![x, out])?;
    Ok(())
}
