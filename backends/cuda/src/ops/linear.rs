//! `Linear` layers over rows through [`crate::gemm`] (cuBLAS on a device).
//!
//! A bias enters the product as cuBLAS's `beta = 1` on rows preset to it, and a bias gradient
//! is the product of the output gradient with a row of ones, as a device build would take it.

use super::layout;
use crate::gemm::{gemm, Op, Shape};
use crate::pool::Pool;
use crate::shim::Result;

/// `y (rows, out) = x (rows, in) W^T + b`, `W` `(out, in)`; without a bias `y` is overwritten.
pub fn forward(x: &[f32], w: &[f32], b: Option<&[f32]>, out: usize, y: &mut [f32]) -> Result<()> {
    let beta = match b {
        Some(b) => {
            layout::broadcast_rows(b, y)?;
            1.0
        }
        None => 0.0,
    };
    project(x, w, out, beta, y)
}

/// `y (rows, out) = x (rows, in) W^T + beta y`: a `Linear` without bias, onto `y` when `beta`
/// is 1 (a residual, or a bias preset in `y`).
pub fn project(x: &[f32], w: &[f32], out: usize, beta: f32, y: &mut [f32]) -> Result<()> {
    let inn = w.len() / out.max(1);
    let rows = x.len() / inn.max(1);
    gemm(Shape { m: rows, n: out, k: inn }, x, Op::N, w, Op::T, beta, y)
}

/// `y (rows, out) += x (rows, in) W^T + b`: a `Linear` added onto `y` (a residual), the
/// bias as a rank-one product of a column of ones with it, so both terms are GEMMs.
pub fn forward_add(x: &[f32], w: &[f32], b: &[f32], out: usize, y: &mut [f32]) -> Result<()> {
    let inn = w.len() / out.max(1);
    let rows = x.len() / inn.max(1);
    gemm(Shape { m: rows, n: out, k: inn }, x, Op::N, w, Op::T, 1.0, y)?;
    let mut ones = crate::exec::scratch().zeros(rows);
    layout::fill(&mut ones, 1.0)?;
    gemm(Shape { m: rows, n: out, k: 1 }, &ones, Op::N, b, Op::N, 1.0, y)
}

/// The weight gradient `g_w (out, in) += g_y^T x` over `rows` rows and, with `g_b`, the bias
/// gradient `g_b += 1^T g_y`.
pub fn backward_params(rows: usize, x: &[f32], g_y: &[f32], g_w: &mut [f32], g_b: Option<&mut [f32]>) -> Result<()> {
    weight_grad(rows, g_y, x, g_w)?;
    if let Some(g_b) = g_b {
        let out = g_y.len() / rows.max(1);
        let mut ones = crate::exec::scratch().zeros(rows);
        layout::fill(&mut ones, 1.0)?;
        gemm(Shape { m: out, n: 1, k: rows }, g_y, Op::T, &ones, Op::N, 1.0, g_b)?;
    }
    Ok(())
}

/// The weight gradient `g_w (out, in) += g_y^T x` over `rows` rows.
pub fn weight_grad(rows: usize, g_y: &[f32], x: &[f32], g_w: &mut [f32]) -> Result<()> {
    let (out, inn) = (g_y.len() / rows.max(1), x.len() / rows.max(1));
    gemm(Shape { m: out, n: inn, k: rows }, g_y, Op::T, x, Op::N, 1.0, g_w)
}

/// The bias gradient `g_b += 1^T g_y` as cuBLAS would take it, a product with a row of ones
/// (from `pool`, so that the memory model counts it).
pub fn bias_grad(rows: usize, g_y: &[f32], g_b: &mut [f32], pool: &Pool) -> Result<()> {
    let mut ones = pool.zeros(rows);
    layout::fill(&mut ones, 1.0)?;
    weight_grad(rows, g_y, &ones, g_b)
}

/// The input gradient `g_x (rows, in) = g_y (rows, out) W + beta g_x`.
pub fn backward_input(g_y: &[f32], w: &[f32], out: usize, beta: f32, g_x: &mut [f32]) -> Result<()> {
    let inn = w.len() / out.max(1);
    gemm(Shape { m: g_y.len() / out.max(1), n: inn, k: out }, g_y, Op::N, w, Op::N, beta, g_x)
}
