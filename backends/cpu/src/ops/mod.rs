//! Building blocks shared by the model's layers: matrix products, linear layers, activations,
//! LayerNorm.

pub mod act;
pub mod gemm;
pub mod layernorm;
pub mod linear;

use boldcast_core::Elem;

/// The element types the CPU backend computes in (`f32`, `f64`): [`Elem`] plus a matrix
/// product.
pub trait CpuElem: Elem {
    /// `C = alpha A B + beta C` for row/column strides as in `matrixmultiply`; see
    /// [`gemm::gemm`] for the safe entry point.
    ///
    /// # Safety
    /// Every index `i * rs + j * cs` reached for the given sizes must lie inside the
    /// corresponding buffer, and `c` must not alias `a` or `b`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm_raw(
        m: usize,
        k: usize,
        n: usize,
        alpha: Self,
        a: *const Self,
        rsa: isize,
        csa: isize,
        b: *const Self,
        rsb: isize,
        csb: isize,
        beta: Self,
        c: *mut Self,
        rsc: isize,
        csc: isize,
    );
}

impl CpuElem for f32 {
    unsafe fn gemm_raw(
        m: usize,
        k: usize,
        n: usize,
        alpha: f32,
        a: *const f32,
        rsa: isize,
        csa: isize,
        b: *const f32,
        rsb: isize,
        csb: isize,
        beta: f32,
        c: *mut f32,
        rsc: isize,
        csc: isize,
    ) {
        matrixmultiply::sgemm(m, k, n, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc)
    }
}

impl CpuElem for f64 {
    unsafe fn gemm_raw(
        m: usize,
        k: usize,
        n: usize,
        alpha: f64,
        a: *const f64,
        rsa: isize,
        csa: isize,
        b: *const f64,
        rsb: isize,
        csb: isize,
        beta: f64,
        c: *mut f64,
        rsc: isize,
        csc: isize,
    ) {
        matrixmultiply::dgemm(m, k, n, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc)
    }
}
