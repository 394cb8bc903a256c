//! The checked launchers of `kernels/autocast.cu`.

use super::{run_linear, Result};
use crate::exec::args;
use crate::launch::Launch;

/// `y = bf16(x)` (round to nearest even, held in f32) through [`crate::exec::launch`].
pub fn autocast_round_bf16(l: Launch, x: &[f32], y: &mut [f32]) -> Result<()> {
    let n = x.len();
    run_linear("autocast_round_bf16", l, &[("y", y.len(), n)], &mut args![x, y, n as i64])
}

/// `y[i]` = the bf16 bits of `x[i]` (round to nearest even, as [`autocast_round_bf16`]).
pub fn autocast_pack_bf16(l: Launch, x: &[f32], y: &mut [u16]) -> Result<()> {
    let n = x.len();
    run_linear("autocast_pack_bf16", l, &[("y", y.len(), n)], &mut args![x, y, n as i64])
}

/// `y[i]` = the f32 value of the bf16 bits `x[i]`.
pub fn autocast_unpack_bf16(l: Launch, x: &[u16], y: &mut [f32]) -> Result<()> {
    let n = x.len();
    run_linear("autocast_unpack_bf16", l, &[("y", y.len(), n)], &mut args![x, y, n as i64])
}
