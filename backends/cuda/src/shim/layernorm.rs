//! The checked launchers of `kernels/layernorm.cu`.

use super::{check_launch, check_lens, check_tree, refuse, run, Result};
use crate::exec::args;
use crate::launch::Launch;

/// The row kernels' shape: one block per row, so the grid is `rows`; `x` is `(rows, m)`.
fn check_rows(kernel: &'static str, l: Launch, x: usize, m: usize) -> Result<usize> {
    check_tree(kernel, l)?;
    if m == 0 || m > i32::MAX as usize {
        return refuse(kernel, format!("row width {m} outside 1..2^31"));
    }
    if l.grid.y != 1 || l.grid.z != 1 {
        return refuse(kernel, format!("grid {:?}: one block per row, 1-D", l.grid));
    }
    let rows = l.grid.x as usize;
    check_lens(kernel, &[("x", x, rows * m)])?;
    Ok(rows)
}

/// `y = LayerNorm(x) w + b` for `x` of `(grid.x, m)` rows.
pub fn layernorm_fwd(l: Launch, x: &[f32], m: usize, w: &[f32], b: &[f32], y: &mut [f32]) -> Result<()> {
    let k = "layernorm_fwd";
    check_rows(k, l, x.len(), m)?;
    run(k, l, &[("w", w.len(), m), ("b", b.len(), m), ("y", y.len(), x.len())], &mut args![x, w, b, y, m as i32])
}

/// `g_x += ` LayerNorm's input gradient; each row's `(mean, r)` into `stats` `(rows, 2)`.
pub fn layernorm_bwd_x(
    l: Launch,
    x: &[f32],
    m: usize,
    w: &[f32],
    g_y: &[f32],
    g_x: &mut [f32],
    stats: &mut [f32],
) -> Result<()> {
    let k = "layernorm_bwd_x";
    let rows = check_rows(k, l, x.len(), m)?;
    let lens =
        [("w", w.len(), m), ("g_y", g_y.len(), x.len()), ("g_x", g_x.len(), x.len()), ("stats", stats.len(), 2 * rows)];
    run(k, l, &lens, &mut args![x, w, g_y, g_x, stats, m as i32])
}

/// Per-chunk sums over rows of `g_y xh` and `g_y` into `part` `(grid.y, 2, m)`: chunk c is
/// rows `c rows_per_chunk ..`; the grid must be `(ceil(m / block), ceil(rows / rows_per_chunk))`.
pub fn layernorm_bwd_params_partial(
    l: Launch,
    x: &[f32],
    g_y: &[f32],
    stats: &[f32],
    part: &mut [f32],
    m: usize,
    rows_per_chunk: usize,
) -> Result<()> {
    let k = "layernorm_bwd_params_partial";
    check_launch(k, l)?;
    if m == 0 || m > i32::MAX as usize || rows_per_chunk == 0 || rows_per_chunk > i32::MAX as usize {
        return refuse(k, format!("width {m} or rows per chunk {rows_per_chunk} outside 1..2^31"));
    }
    let rows = x.len() / m;
    let want = crate::launch::Dim3::xy(m.div_ceil(l.block.x as usize) as u32, rows.div_ceil(rows_per_chunk) as u32);
    if l.grid != want || l.block.y != 1 || l.block.z != 1 || rows == 0 {
        return refuse(k, format!("grid {:?}: expected {want:?} for {rows} rows of {m}", l.grid));
    }
    let lens = [
        ("x", x.len(), rows * m),
        ("g_y", g_y.len(), x.len()),
        ("stats", stats.len(), 2 * rows),
        ("part", part.len(), 2 * m * want.y as usize),
    ];
    run(k, l, &lens, &mut args![x, g_y, stats, part, rows as i64, m as i32, rows_per_chunk as i32])
}

/// `g_w += sum_c part[c, 0]`, `g_b += sum_c part[c, 1]`, chunks in order.
pub fn layernorm_bwd_params_final(l: Launch, part: &[f32], g_w: &mut [f32], g_b: &mut [f32]) -> Result<()> {
    let k = "layernorm_bwd_params_final";
    check_launch(k, l)?;
    let m = g_w.len();
    check_lens(k, &[("g_b", g_b.len(), m)])?;
    if m == 0 || m > i32::MAX as usize || !part.len().is_multiple_of(2 * m) || part.len() / (2 * m) > i32::MAX as usize
    {
        return refuse(k, format!("part of {} elements is not (chunks, 2, {m})", part.len()));
    }
    let chunks = (part.len() / (2 * m)) as i32;
    run(k, l, &[], &mut args![part, g_w, g_b, chunks, m as i32])
}
