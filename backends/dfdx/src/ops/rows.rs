//! Picking rows and entries with `gather`/`select`, whose backward passes accumulate.
//!
//! (dfdx 0.13's `slice` writes its gradient with `=` on the CPU, so a sliced tensor that is
//! also used elsewhere, or sliced twice with overlap, gets a wrong gradient; this crate
//! does not use `slice` on traced tensors.)

use super::{Mat, Vector};
use dfdx::prelude::*;

/// The index vector `start, start + 1, ..., start + n - 1` on the device.
pub fn arange<E: Dtype, D: Device<E>>(dev: &D, start: usize, n: usize) -> Tensor<(usize,), usize, D> {
    dev.tensor_from_vec((start..start + n).collect(), (n,))
}

/// Rows `start .. start + n` of `x`.
pub fn take_rows<E: Dtype, D: Device<E>, T: Tape<E, D>>(x: Mat<E, D, T>, start: usize, n: usize) -> Mat<E, D, T> {
    let idx = arange::<E, D>(x.device(), start, n);
    x.gather(idx)
}

/// Row `i` of `x` as a vector.
pub fn select_row<E: Dtype, D: Device<E>, T: Tape<E, D>>(x: Mat<E, D, T>, i: usize) -> Vector<E, D, T> {
    let idx: Tensor<(), usize, D> = x.device().tensor_from_vec(vec![i], ());
    x.select(idx)
}

/// Column `j` of `x` as a vector (a strided view, then a row pick).
pub fn select_col<E: Dtype, D: Device<E>, T: Tape<E, D>>(x: Mat<E, D, T>, j: usize) -> Vector<E, D, T> {
    select_row(x.permute::<(usize, usize), Axes2<1, 0>>(), j)
}

/// Columns `start .. start + n` of `x` (rows of the transposed view, transposed back: the
/// result is a strided view).
pub fn take_cols<E: Dtype, D: Device<E>, T: Tape<E, D>>(x: Mat<E, D, T>, start: usize, n: usize) -> Mat<E, D, T> {
    take_rows(x.permute::<(usize, usize), Axes2<1, 0>>(), start, n).permute::<(usize, usize), Axes2<1, 0>>()
}
