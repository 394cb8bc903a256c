//! The checked launcher of `kernels/autocast.cu`.

use super::{check_len, check_linear, Result};
use crate::exec::{self, args};
use crate::launch::Launch;

/// `y = bf16(x)` (round to nearest even, held in f32) through [`exec::launch`].
pub fn autocast_round_bf16(l: Launch, x: &[f32], y: &mut [f32]) -> Result<()> {
    let k = "autocast_round_bf16";
    check_linear(k, l)?;
    check_len(k, "y", y.len(), x.len())?;
    let n = x.len() as i64;
    exec::launch(k, l, &mut args![x, y, n])
}

/// `y[i]` = the bf16 bits of `x[i]` (round to nearest even, as [`autocast_round_bf16`]).
pub fn autocast_pack_bf16(l: Launch, x: &[f32], y: &mut [u16]) -> Result<()> {
    let k = "autocast_pack_bf16";
    check_linear(k, l)?;
    check_len(k, "y", y.len(), x.len())?;
    let n = x.len() as i64;
    exec::launch(k, l, &mut args![x, y, n])
}
