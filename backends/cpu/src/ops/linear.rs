//! Linear layers over rows: `y = x W^T + b` with PyTorch's `(out, in)` weight layout, and the
//! backward rules `g_W += g_y^T x`, `g_b += sum g_y`, `g_x = g_y W`.

use super::gemm::{gemm, Mat};
use super::CpuElem;

/// A linear layer's weight, `(out, inp)` (PyTorch's layout), with its sizes.
#[derive(Copy, Clone, Debug)]
pub struct Weight<'a, E> {
    /// The weight, row-major `(out, inp)`.
    pub w: &'a [E],
    /// Input width.
    pub inp: usize,
    /// Output width.
    pub out: usize,
}

/// The gradients of a linear layer's weight and bias, accumulated (`+=`).
pub struct WeightGrads<'a, E> {
    /// `g_W`, `(out, inp)`.
    pub w: &'a mut [E],
    /// `g_b`, `(out)`.
    pub b: &'a mut [E],
}

/// `y[rows x out] = x[rows x inp] W^T + b` (bias optional). Overwrites `y`.
pub fn forward<E: CpuElem>(x: &[E], rows: usize, inp: usize, w: &[E], b: Option<&[E]>, out: usize, y: &mut [E]) {
    assert_eq!(w.len(), out * inp, "linear: weight is not {out}x{inp}");
    gemm(E::one(), Mat::rm(x, rows, inp), Mat::rm(w, out, inp).t(), E::zero(), y, out);
    if let Some(b) = b {
        assert_eq!(b.len(), out, "linear: bias is not of length {out}");
        for r in 0..rows {
            for (v, &bb) in y[r * out..(r + 1) * out].iter_mut().zip(b) {
                *v += bb;
            }
        }
    }
}

/// Backward of [`forward`]: accumulates `g_w += g_y^T x` and `g_b += sum_rows g_y`; writes
/// (`accumulate_gx == false`) or adds to (`true`) `g_x = g_y W`.
#[allow(clippy::too_many_arguments)]
pub fn backward<E: CpuElem>(
    x: &[E],
    rows: usize,
    inp: usize,
    w: &[E],
    out: usize,
    g_y: &[E],
    g_w: &mut [E],
    g_b: Option<&mut [E]>,
    g_x: Option<(&mut [E], bool)>,
) {
    gemm(E::one(), Mat::rm(g_y, rows, out).t(), Mat::rm(x, rows, inp), E::one(), g_w, inp);
    if let Some(g_b) = g_b {
        for r in 0..rows {
            for (gb, &g) in g_b.iter_mut().zip(&g_y[r * out..(r + 1) * out]) {
                *gb += g;
            }
        }
    }
    if let Some((g_x, acc)) = g_x {
        let beta = if acc { E::one() } else { E::zero() };
        gemm(E::one(), Mat::rm(g_y, rows, out), Mat::rm(w, out, inp), beta, g_x, inp);
    }
}
