//! The checked launcher of `kernels/autocast.cu`.

use super::{check_len, check_linear, ffi, Result};
use crate::launch::Launch;

/// `y = bf16(x)` (round to nearest even, held in f32) through the shim.
pub fn autocast_round_bf16(l: Launch, x: &[f32], y: &mut [f32]) -> Result<()> {
    let k = "autocast_round_bf16";
    check_linear(k, l)?;
    check_len(k, "y", y.len(), x.len())?;
    // SAFETY: the launch is within CUDA's limits and every thread indexes below n = len.
    unsafe { ffi::shim_launch_autocast_round_bf16(l.grid, l.block, x.as_ptr(), y.as_mut_ptr(), x.len() as i64) };
    Ok(())
}
