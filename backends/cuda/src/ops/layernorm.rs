//! LayerNorm over rows (`kernels/layernorm.cu`), the CPU backend's `ops/layernorm.rs`: the
//! same per-element arithmetic, sums in the kernels' fixed orders (one block per row, a
//! shared-memory tree; over rows, chunks of [`ROWS_PER_CHUNK`] rows then the chunks in order).

use crate::launch::{elementwise, rows as row_launch, Dim3, Launch, ROWS_PER_CHUNK};
use crate::pool::Pool;
use crate::shim::{self, LaunchError, Result};

/// `y = LayerNorm(x) w + b` for `x` of `(rows, m)`. Overwrites `y`.
pub fn forward(x: &[f32], rows: usize, m: usize, w: &[f32], b: &[f32], y: &mut [f32]) -> Result<()> {
    shim::layernorm_fwd(rows_checked("layernorm_fwd", rows, m)?, x, m, w, b, y)
}

/// The gradients a LayerNorm's backward accumulates into.
#[derive(Debug)]
pub struct Grads<'a> {
    /// Of the input `(rows, m)`.
    pub x: &'a mut [f32],
    /// Of the weight `(m)`.
    pub w: &'a mut [f32],
    /// Of the bias `(m)`.
    pub b: &'a mut [f32],
}

/// Backward of [`forward`]: the gradients `g` accumulate, as the CPU backend's; the row
/// statistics and the weight partials come from `pool` (so its peak counts them).
pub fn backward(x: &[f32], rows: usize, m: usize, w: &[f32], g_y: &[f32], g: Grads<'_>, pool: &Pool) -> Result<()> {
    let Grads { x: g_x, w: g_w, b: g_b } = g;
    let mut stats = pool.zeros(2 * rows);
    shim::layernorm_bwd_x(rows_checked("layernorm_bwd_x", rows, m)?, x, m, w, g_y, g_x, &mut stats)?;
    let chunks = rows.div_ceil(ROWS_PER_CHUNK);
    let block = 128u32;
    let partial = Launch { grid: Dim3::xy(m.div_ceil(block as usize) as u32, chunks as u32), block: Dim3::x(block) };
    let mut part = pool.zeros(chunks * 2 * m);
    shim::layernorm_bwd_params_partial(partial, x, g_y, &stats, &mut part, m, ROWS_PER_CHUNK)?;
    shim::layernorm_bwd_params_final(elementwise(m), &part, g_w, g_b)
}

/// The row launch, refusing a row count over the grid's limit instead of truncating it.
fn rows_checked(kernel: &'static str, rows: usize, m: usize) -> Result<Launch> {
    if rows == 0 || rows > i32::MAX as usize {
        return Err(LaunchError { kernel, why: format!("{rows} rows: must be 1 to 2^31 - 1") });
    }
    Ok(row_launch(rows, m))
}
