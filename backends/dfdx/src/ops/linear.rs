//! `y = x W^T + b` with weights stored `(out, in)` as in PyTorch.

use super::{Mat, Vector};
use dfdx::prelude::*;

/// `x W^T` for `x (rows, in)` and `w (out, in)`.
pub fn matmul_t<E: Dtype, D: Device<E>, T: Tape<E, D>>(x: Mat<E, D, T>, w: Mat<E, D, T>) -> Mat<E, D, T> {
    x.matmul(w.permute::<(usize, usize), Axes2<1, 0>>())
}

/// `v` repeated over `rows` rows: `(n,)` to `(rows, n)`.
pub fn rows_of<E: Dtype, D: Device<E>, T: Tape<E, D>>(v: Vector<E, D, T>, rows: usize) -> Mat<E, D, T> {
    let n = v.shape().0;
    v.broadcast_like::<(usize, usize), Axis<0>>(&(rows, n))
}

/// `x W^T + b`.
pub fn linear<E: Dtype, D: Device<E>, T: Tape<E, D>>(
    x: Mat<E, D, T>,
    w: Mat<E, D, T>,
    b: Vector<E, D, T>,
) -> Mat<E, D, T> {
    let rows = x.shape().0;
    matmul_t(x, w) + rows_of(b, rows)
}
