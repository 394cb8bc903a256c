//! The forecasting loss (`kernels/loss.cu`), the CPU backend's `loss_of` in `model.rs`:
//! the MSE over `pred[:, :T_valid]` against the horizon-shifted tokens, summed in f64 in a
//! fixed two-stage order, and its gradient `2 (pred - target) / n`.

use crate::launch::{elementwise, Dim3, Launch, NORM_BLOCK, NORM_CHUNK};
use crate::pool::Pool;
use crate::shim::{self, LaunchError, LossShape, Result};

/// The loss of `pred` `(B, T, P, H, D)` against `tokens` `(B, T, P, D)`, read back (a
/// synchronization).
pub fn mse(s: LossShape, pred: &[f32], tokens: &[f32]) -> Result<f64> {
    let pool = crate::exec::scratch();
    let mut out = pool.zeros_of::<f64>(1);
    mse_into(s, pred, tokens, &mut out, &pool)?;
    Ok(crate::exec::download(&out)?[0])
}

/// [`mse`] left on the device in `out` (one value); the partial sums come from `pool`.
pub fn mse_into(s: LossShape, pred: &[f32], tokens: &[f32], out: &mut [f64], pool: &Pool) -> Result<()> {
    let n = s.valid();
    if n == 0 || n.div_ceil(NORM_CHUNK) > i32::MAX as usize {
        return Err(LaunchError { kernel: "loss_mse_partial", why: format!("{n} valid elements") });
    }
    let parts = n.div_ceil(NORM_CHUNK);
    let block = Dim3::x(NORM_BLOCK);
    let mut partial = pool.zeros_of::<f64>(parts);
    shim::loss_mse_partial(Launch { grid: Dim3::x(parts as u32), block }, s, pred, tokens, NORM_CHUNK, &mut partial)?;
    shim::loss_mse_final(Launch { grid: Dim3::x(1), block }, &partial, n as f64, out)
}

/// The gradient of [`mse`] with respect to `pred`, overwriting `g` (0 for `t >= T_valid`).
pub fn mse_backward(s: LossShape, pred: &[f32], tokens: &[f32], g: &mut [f32]) -> Result<()> {
    // The CPU backend's `E::of(2.0 / count)`: the scale rounded once from f64.
    let scale = (2.0 / s.valid() as f64) as f32;
    shim::loss_mse_bwd(elementwise(pred.len()), s, pred, tokens, scale, g)
}
