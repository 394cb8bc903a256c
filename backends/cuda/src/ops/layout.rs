//! Layout changes of activation buffers (`kernels/layout.cu`), so that the model moves no
//! activation through host code: [`swap_axes`] between the trunk's per-parcel sequences and
//! the attention's per-time-step groups, [`copy_cols`] for splitting and joining bands of
//! columns, [`broadcast_rows`] for presetting every row to a bias, and [`fill`].

use crate::launch::elementwise;
use crate::shim::{self, Cols, LaunchError, Result};

/// `y[a, j, i, c] = x[a, i, j, c]` for `x` `(a, n1, n2, c)`: between the trunk's per-parcel
/// sequences `(B, P, T, ·)` and the per-time-step groups `(B, T, P, ·)` of the attention, the
/// tokens and the forecasts.
pub fn swap_axes(x: &[f32], a: usize, n1: usize, n2: usize, c: usize, y: &mut [f32]) -> Result<()> {
    shim::layout_swap_axes(elementwise(x.len()), x, a, n1, n2, c, y)
}

/// `y[r, dst.col ..][..band] = x[r, src.col ..][..band]` for every row `r` of `y` (rows of
/// `dst.width` elements).
pub fn copy_cols(x: &[f32], src: Cols, y: &mut [f32], dst: Cols, band: usize) -> Result<()> {
    let rows = y.len().checked_div(dst.width).unwrap_or(0);
    shim::layout_copy_cols(elementwise(rows * band), x, src, y, dst, rows, band)
}

/// Every row of `y` (rows of `row.len()` elements) set to `row`.
pub fn broadcast_rows(row: &[f32], y: &mut [f32]) -> Result<()> {
    if row.is_empty() || !y.len().is_multiple_of(row.len()) {
        let why = format!("{} elements are not rows of {}", y.len(), row.len());
        return Err(LaunchError { kernel: "layout_copy_cols", why });
    }
    let w = row.len();
    copy_cols(row, Cols { width: 0, col: 0 }, y, Cols { width: w, col: 0 }, w)
}

/// Every element of `y` set to `v` (on the device: no host write).
pub fn fill(y: &mut [f32], v: f32) -> Result<()> {
    shim::layout_fill(elementwise(y.len()), y, v)
}
