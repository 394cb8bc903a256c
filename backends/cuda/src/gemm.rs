//! The matrix product of the crate: a row-major `f32` product `C = op(A) op(B) + beta C`, on a
//! thread that has entered a device (feature `cuda`) through `cublasSgemm` (with the operands
//! swapped for cuBLAS's column-major view), else on host slices through `matrixmultiply::sgemm`,
//! the shim's stand-in for cuBLAS. It is not the
//! device's arithmetic (cuBLAS picks its own blocking and summation order), so what the tests
//! compare against a product's result is held to a rounding bound, never to bits.

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

/// `C = op(A) op(B) + beta C`, all row-major; `A` is stored `(m, k)` (or `(k, m)` under
/// [`Op::T`]), `B` `(k, n)` (or `(n, k)`). `beta = 0` overwrites `C` (its old values unread,
/// as cuBLAS). Refuses buffers of the wrong length.
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
    #[cfg(feature = "cuda")]
    if let Some(gpu) = crate::device::current() {
        return gpu.gemm(s, a, ta, b, tb, beta, c);
    }
    if beta == 0.0 {
        // matrixmultiply reads C when beta is not 0 only, but NaN in stale memory must not leak.
        c.fill(0.0);
    }
    // (row stride, column stride) of op(X) in X's storage.
    let (rsa, csa) = if ta == Op::N { (k, 1) } else { (1, m) };
    let (rsb, csb) = if tb == Op::N { (n, 1) } else { (1, k) };
    let st = |v: usize| v as isize;
    // SAFETY: the lengths were checked; with these strides every index stays in bounds.
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
    Ok(())
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
