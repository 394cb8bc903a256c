//! The matrix product of the crate: a row-major `f32` product `C = op(A) op(B) + beta C`, on a
//! thread that has entered a device (feature `cuda`) through `cublasSgemm` (with the operands
//! swapped for cuBLAS's column-major view), else on host slices through `matrixmultiply::sgemm`,
//! the shim's stand-in for cuBLAS. It is not the
//! device's arithmetic (cuBLAS picks its own blocking and summation order), so what the tests
//! compare against a product's result is held to a rounding bound, never to bits.
//!
//! Under a bf16 autocast scope ([`crate::autocast`]) the product is `gemm_bf16_shim`'s:
//! both operands rounded to bf16 by the rounding kernel, then the same f32-accumulating
//! product, which is what `cublasGemmEx` with `CUDA_R_16BF` inputs and `CUBLAS_COMPUTE_32F`
//! multiplies (`C`, `beta` and the accumulation stay f32).

use crate::autocast::{self, Precision};
use crate::exec::Arg;
use crate::pool::BF16;
use crate::shim::{LaunchError, Result};

/// Whether an operand is used as stored or transposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// As stored.
    N,
    /// Transposed.
    T,
}

/// The shape of a product: `op(A)` is `(m, k)`, `op(B)` is `(k, n)`, `C` is `(m, n)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Rows of `C`.
    pub m: usize,
    /// Columns of `C`.
    pub n: usize,
    /// The summed dimension.
    pub k: usize,
}

/// The operands of a product `C = op(A) op(B) + beta C` beside `C`: the shape, `A` and `B`
/// with their ops, and `beta`.
#[cfg(feature = "cuda")]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Operands<'a> {
    /// The shape.
    pub s: Shape,
    /// `A` and whether it is transposed.
    pub a: (&'a [f32], Op),
    /// `B` and whether it is transposed.
    pub b: (&'a [f32], Op),
    /// The factor of `C`'s old values.
    pub beta: f32,
}

/// `C = op(A) op(B) + beta C`, all row-major; `A` is stored `(m, k)` (or `(k, m)` under
/// [`Op::T`]), `B` `(k, n)` (or `(n, k)`). `beta = 0` overwrites `C` (its old values unread,
/// as cuBLAS). Refuses buffers of the wrong length. Under a bf16 autocast scope the operands
/// are rounded to bf16 first (`gemm_bf16_shim`).
pub fn gemm(s: Shape, a: &[f32], ta: Op, b: &[f32], tb: Op, beta: f32, c: &mut [f32]) -> Result<()> {
    let Shape { m, n, k } = s;
    for (what, len, want) in [("A", a.len(), m * k), ("B", b.len(), k * n), ("C", c.len(), m * n)] {
        if len != want {
            return Err(LaunchError { kernel: "gemm", why: format!("{what} has {len} elements, expected {want}") });
        }
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    crate::exec::note_buffers(&[Arg::F32s(a), Arg::F32s(b), Arg::F32s(c)]);
    crate::exec::count(|t| t.products += 1);
    match autocast::current() {
        Precision::F32 => product(s, a, ta, b, tb, beta, c),
        Precision::Bf16 => gemm_bf16(s, a, ta, b, tb, beta, c),
    }
}

/// The bf16 autocast product: `A` and `B` rounded to bf16 (round to nearest even,
/// `kernels/autocast.cu`), then [`product`] on the rounded copies, so the products and sums
/// are f32 as in `cublasGemmEx(CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F)` (up
/// to the summation order, as for the f32 product). On a device the operands are packed to
/// bf16 by the same rounding (`kernels/autocast.cu`) and the product is that GemmEx.
///
/// The rounded copies are temporaries of the thread's scratch pool ([`crate::exec::scratch`],
/// the model's while it runs). The lengths have been checked by [`gemm`].
fn gemm_bf16(s: Shape, a: &[f32], ta: Op, b: &[f32], tb: Op, beta: f32, c: &mut [f32]) -> Result<()> {
    #[cfg(feature = "cuda")]
    if let Some(gpu) = crate::device::current() {
        return gpu.gemm_bf16(Operands { s, a: (a, ta), b: (b, tb), beta }, c);
    }
    // Counted at 2 bytes, as the device holds them (`u16`), though the shim keeps f32.
    let pool = crate::exec::scratch();
    let (mut a16, mut b16) = (pool.take(a.len(), BF16), pool.take(b.len(), BF16));
    autocast::round_bf16(a, &mut a16)?;
    autocast::round_bf16(b, &mut b16)?;
    product(s, &a16, ta, &b16, tb, beta, c)
}

/// The f32 product on the thread's device (cuBLAS) when it has entered one, else
/// [`sgemm_shim`]; lengths checked by [`gemm`], `m` and `n` not zero.
fn product(s: Shape, a: &[f32], ta: Op, b: &[f32], tb: Op, beta: f32, c: &mut [f32]) -> Result<()> {
    #[cfg(feature = "cuda")]
    if let Some(gpu) = crate::device::current() {
        return gpu.gemm(Operands { s, a: (a, ta), b: (b, tb), beta }, c);
    }
    sgemm_shim(s, a, ta, b, tb, beta, c);
    Ok(())
}

/// The f32 product through `matrixmultiply::sgemm`, on buffers whose lengths [`gemm`] has
/// checked (`m` and `n` not zero).
fn sgemm_shim(s: Shape, a: &[f32], ta: Op, b: &[f32], tb: Op, beta: f32, c: &mut [f32]) {
    let Shape { m, n, k } = s;
    debug_assert!(a.len() == m * k && b.len() == k * n && c.len() == m * n);
    if beta == 0.0 {
        // matrixmultiply reads C when beta is not 0 only, but NaN in stale memory must not leak.
        c.fill(0.0);
    }
    // (row stride, column stride) of op(X) in X's storage.
    let (rsa, csa) = if ta == Op::N { (k, 1) } else { (1, m) };
    let (rsb, csb) = if tb == Op::N { (n, 1) } else { (1, k) };
    let st = |v: usize| v as isize;
    // SAFETY: the lengths were checked by `gemm`; with these strides every index stays in bounds.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            st(rsa),
            st(csa),
            b.as_ptr(),
            st(rsb),
            st(csb),
            beta,
            c.as_mut_ptr(),
            st(n),
            1,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_transpose_matches_the_plain_product() {
        let (m, n, k) = (3, 4, 5);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.91).cos()).collect();
        let at: Vec<f32> = (0..m * k).map(|i| a[(i % m) * k + i / m]).collect();
        let bt: Vec<f32> = (0..k * n).map(|i| b[(i % k) * n + i / k]).collect();
        let want: Vec<f64> = (0..m * n)
            .map(|ij| (0..k).map(|p| f64::from(a[ij / n * k + p]) * f64::from(b[p * n + ij % n])).sum::<f64>() + 1.0)
            .collect();
        for (aa, ta, bb, tb) in
            [(&a, Op::N, &b, Op::N), (&at, Op::T, &b, Op::N), (&a, Op::N, &bt, Op::T), (&at, Op::T, &bt, Op::T)]
        {
            let mut c = vec![1.0f32; m * n];
            gemm(Shape { m, n, k }, aa, ta, bb, tb, 1.0, &mut c).unwrap();
            for (g, w) in c.iter().zip(&want) {
                assert!((f64::from(*g) - w).abs() <= 1e-5 * (1.0 + w.abs()), "{ta:?} {tb:?}: {g} vs {w}");
            }
        }
        let mut c = vec![f32::NAN; m * n];
        gemm(Shape { m, n, k }, &a, Op::N, &b, Op::N, 0.0, &mut c).unwrap();
        assert!(c.iter().all(|v| v.is_finite()));
        assert!(gemm(Shape { m, n, k }, &a, Op::N, &b, Op::N, 0.0, &mut c[1..]).is_err());
    }
}
