//! The checked launchers of `kernels/knn.cu`. The kernels index rows by the adjacency and
//! its reverse, so both are checked here entry by entry before a launch.

use super::{check_lens, check_linear, check_tree, refuse, run, Result};
use crate::exec::args;
use crate::launch::Launch;

/// The most neighbours per parcel the kernels take (`KNN_MAX_K` of `kernels/knn.cu`).
pub const KNN_MAX_K: usize = 64;

/// The problem's sizes: `rows = groups parcels` rows of width `m`, `k` neighbours each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnnDims {
    /// Parcels per group, P.
    pub parcels: usize,
    /// Neighbours per parcel, k.
    pub k: usize,
    /// Model width, M.
    pub m: usize,
    /// Rows, `groups P`.
    pub rows: usize,
}

/// The sizes fit the kernels' `int` arithmetic and shared arrays.
fn check_dims(kernel: &'static str, d: KnnDims) -> Result<()> {
    let fits = |v: usize| v >= 1 && v <= i32::MAX as usize;
    if !fits(d.parcels) || !fits(d.m) || !(1..=KNN_MAX_K).contains(&d.k) || !fits(3 * d.m) {
        return refuse(kernel, format!("{d:?}: P, M in 1..2^31, k in 1..={KNN_MAX_K}"));
    }
    if d.rows == 0 || !d.rows.is_multiple_of(d.parcels) || !fits(d.parcels * d.k) {
        return refuse(kernel, format!("{d:?}: rows must be a positive multiple of P"));
    }
    Ok(())
}

/// `adj` `(P, k)` holds parcels below P.
fn check_adj(kernel: &'static str, d: KnnDims, adj: &[i32]) -> Result<()> {
    check_dims(kernel, d)?;
    check_lens(kernel, &[("adj", adj.len(), d.parcels * d.k)])?;
    if let Some(bad) = adj.iter().find(|&&a| a < 0 || a as usize >= d.parcels) {
        return refuse(kernel, format!("adjacency entry {bad} outside 0..{}", d.parcels));
    }
    Ok(())
}

/// The row kernels' shape: one block per row, a power of two.
fn check_row_launch(kernel: &'static str, l: Launch, d: KnnDims) -> Result<()> {
    check_tree(kernel, l)?;
    if l.grid.y != 1 || l.grid.z != 1 || l.grid.x as usize != d.rows {
        return refuse(kernel, format!("grid {:?}: one block per row of {}", l.grid, d.rows));
    }
    Ok(())
}

/// Attention weights `w` `(rows, k)` and `att` `(rows, m)` from `qkv` `(rows, 3m)`.
pub fn knn_attend_fwd(
    l: Launch,
    d: KnnDims,
    adj: &[i32],
    sc: f32,
    qkv: &[f32],
    w: &mut [f32],
    att: &mut [f32],
) -> Result<()> {
    let kn = "knn_attend_fwd";
    check_adj(kn, d, adj)?;
    check_row_launch(kn, l, d)?;
    let lens = [("qkv", qkv.len(), d.rows * 3 * d.m), ("w", w.len(), d.rows * d.k), ("att", att.len(), d.rows * d.m)];
    let (p, m, k) = (d.parcels as i32, d.m as i32, d.k as i32);
    run(kn, l, &lens, &mut args![qkv, adj, w, att, p, m, k, sc])
}

/// What both backward kernels read: the forward's `qkv` `(rows, 3m)` and weights `w`
/// `(rows, k)`, and the gradient `g_att` `(rows, m)`.
#[derive(Clone, Copy, Debug)]
pub struct AttendBwd<'a> {
    /// The stacked projections.
    pub qkv: &'a [f32],
    /// The attention weights.
    pub w: &'a [f32],
    /// The gradient of the attention's output.
    pub g_att: &'a [f32],
}

impl AttendBwd<'_> {
    /// The inputs' and the two outputs' lengths (`gs` `(rows, k)`, `g_qkv` `(rows, 3m)`).
    fn lens(&self, d: KnnDims, gs: usize, g_qkv: usize) -> [(&'static str, usize, usize); 5] {
        let (qkv, w, g_att) = (self.qkv.len(), self.w.len(), self.g_att.len());
        let (r3, rk, rm) = (d.rows * 3 * d.m, d.rows * d.k, d.rows * d.m);
        [("qkv", qkv, r3), ("g_qkv", g_qkv, r3), ("w", w, rk), ("gs", gs, rk), ("g_att", g_att, rm)]
    }
}

/// Score gradients `gs` `(rows, k)` and `g_q` into the q columns of `g_qkv` `(rows, 3m)`.
pub fn knn_attend_bwd_q(
    l: Launch,
    (d, adj, sc): (KnnDims, &[i32], f32),
    a: AttendBwd<'_>,
    gs: &mut [f32],
    g_qkv: &mut [f32],
) -> Result<()> {
    let kn = "knn_attend_bwd_q";
    check_adj(kn, d, adj)?;
    check_row_launch(kn, l, d)?;
    let lens = a.lens(d, gs.len(), g_qkv.len());
    let AttendBwd { qkv, w, g_att } = a;
    let (p, m, k) = (d.parcels as i32, d.m as i32, d.k as i32);
    run(kn, l, &lens, &mut args![qkv, adj, w, g_att, gs, g_qkv, p, m, k, sc])
}

/// The reverse adjacency `(rev_start (P + 1), rev (P k))` is a partition of the slots
/// `0 .. P k`: `rev_start` rises from 0 to `P k` and every slot lies below `P k`.
fn check_reverse(kernel: &'static str, d: KnnDims, rev_start: &[i32], rev: &[i32]) -> Result<()> {
    let slots = d.parcels * d.k;
    check_lens(kernel, &[("rev_start", rev_start.len(), d.parcels + 1), ("rev", rev.len(), slots)])?;
    let rising = rev_start.windows(2).all(|p| p[0] <= p[1]);
    if rev_start[0] != 0 || rev_start[d.parcels] as usize != slots || !rising {
        return refuse(kernel, format!("rev_start is not a rising 0..={slots}"));
    }
    if rev.iter().any(|&s| s < 0 || s as usize >= slots) {
        return refuse(kernel, format!("a reverse slot outside 0..{slots}"));
    }
    Ok(())
}

/// `g_kk` and `g_v` into the kk and v columns of `g_qkv` `(rows, 3m)`, gathered through the
/// reverse adjacency.
pub fn knn_attend_bwd_kv(
    l: Launch,
    (d, rev_start, rev): (KnnDims, &[i32], &[i32]),
    a: AttendBwd<'_>,
    gs: &[f32],
    g_qkv: &mut [f32],
) -> Result<()> {
    let kn = "knn_attend_bwd_kv";
    check_dims(kn, d)?;
    check_reverse(kn, d, rev_start, rev)?;
    check_linear(kn, l)?;
    let lens = a.lens(d, gs.len(), g_qkv.len());
    let AttendBwd { qkv, w, g_att } = a;
    let (p, m, k) = (d.parcels as i32, d.m as i32, d.k as i32);
    run(kn, l, &lens, &mut args![qkv, rev_start, rev, w, g_att, gs, g_qkv, d.rows as i64, p, m, k])
}
