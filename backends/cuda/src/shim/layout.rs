//! The checked launchers of `kernels/layout.cu`.

use super::{check_linear, refuse, run, Result};
use crate::exec::args;
use crate::launch::Launch;

/// `y[a, j, i, e] = x[a, i, j, e]` for `x` `(na, n1, n2, c)`.
pub fn layout_swap_axes(l: Launch, x: &[f32], na: usize, n1: usize, n2: usize, c: usize, y: &mut [f32]) -> Result<()> {
    let k = "layout_swap_axes";
    check_linear(k, l)?;
    let n = na.checked_mul(n1).and_then(|v| v.checked_mul(n2)).and_then(|v| v.checked_mul(c));
    if n != Some(x.len()) || [n1, n2, c].iter().any(|&d| d > i32::MAX as usize) {
        return refuse(k, format!("x has {} elements, not ({na}, {n1}, {n2}, {c}) within 2^31 per axis", x.len()));
    }
    run(k, l, &[("y", y.len(), x.len())], &mut args![x, y, na as i64, n1 as i32, n2 as i32, c as i32])
}

/// Where a band of columns is read and written: rows of `width` elements, from column `col`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cols {
    /// Elements per row of the matrix (0 for the source of a broadcast: one row for all).
    pub width: usize,
    /// The band's first column.
    pub col: usize,
}

/// `y[r, dst.col + e] = x[r, src.col + e]` for `r < rows`, `e < band` (`src.width = 0`: the
/// one row `x[src.col ..]` into every row).
pub fn layout_copy_cols(
    l: Launch,
    x: &[f32],
    src: Cols,
    y: &mut [f32],
    dst: Cols,
    rows: usize,
    band: usize,
) -> Result<()> {
    let k = "layout_copy_cols";
    check_linear(k, l)?;
    let need = |c: Cols| if c.width == 0 { c.col + band } else { rows * c.width };
    let fits = |c: Cols| c.width == 0 || c.col + band <= c.width;
    if !fits(src)
        || !fits(dst)
        || dst.width == 0
        || [src.width, src.col, dst.width, dst.col, band].iter().any(|&v| v > i32::MAX as usize)
    {
        return refuse(k, format!("band of {band} from {src:?} to {dst:?}: outside the rows or over 2^31"));
    }
    let lens = [("x", x.len(), need(src)), ("y", y.len(), need(dst))];
    let i = |v: usize| v as i32;
    run(k, l, &lens, &mut args![x, y, rows as i64, i(src.width), i(src.col), i(dst.width), i(dst.col), i(band)])
}

/// `y = v` everywhere through the shim.
pub fn layout_fill(l: Launch, y: &mut [f32], v: f32) -> Result<()> {
    check_linear("layout_fill", l)?;
    let n = y.len();
    run("layout_fill", l, &[], &mut args![y, v, n as i64])
}
