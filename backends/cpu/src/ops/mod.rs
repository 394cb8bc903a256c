//! Building blocks shared by the model's layers: matrix products, linear layers, activations,
//! LayerNorm, the f32 fast transcendental functions, and the run-time vector-width dispatch.

pub mod act;
pub mod fastmath;
pub mod gemm;
pub mod layernorm;
pub mod linear;
pub mod simd;

use boldcast_core::Elem;

/// The element types the CPU backend computes in (`f32`, `f64`): [`Elem`] plus a matrix
/// product and the per-element functions of the hot loops. In `f32` those are the vectorizable
/// versions of [`fastmath`]; in `f64` the library functions of [`act`] (the reference).
pub trait CpuElem: Elem {
    /// `self * b + c` in the hot loops. In `f32` fused, rounded once ([`fastmath::fma`]: the
    /// same bits at every vector level, one instruction where the CPU has FMA); in `f64` (the
    /// reference of the gradient checks) a plain product and sum, as the library formulas.
    fn fma(self, b: Self, c: Self) -> Self;
    /// `exp(x)` for `x <= 0` (the scan's decays).
    fn exp_nonpos(self) -> Self;
    /// The logistic function.
    fn sigmoid(self) -> Self;
    /// Softplus with threshold 20 and its derivative, `(softplus(v), softplus'(v))`.
    fn softplus_and_grad(self) -> (Self, Self);
    /// The fixed tree of [`simd::fold_lanes`] over 16 lane accumulators, plus `tail`.
    fn fold16(acc: &[Self; 16], tail: Self) -> Self;
    /// The slice as `f32` when `Self` is `f32`, else `None`: how a generic kernel hands its
    /// operands to an `f32`-only implementation (the scan's AVX-512 loops) without a cast.
    fn as_f32(s: &[Self]) -> Option<&[f32]>;
    /// [`CpuElem::as_f32`] for a mutable slice.
    fn as_f32_mut(s: &mut [Self]) -> Option<&mut [f32]>;

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
    #[inline(always)]
    fn fma(self, b: Self, c: Self) -> Self {
        fastmath::fma(self, b, c)
    }
    #[inline(always)]
    fn exp_nonpos(self) -> Self {
        fastmath::exp_nonpos(self)
    }
    #[inline(always)]
    fn sigmoid(self) -> Self {
        fastmath::sigmoid(self)
    }
    #[inline(always)]
    fn softplus_and_grad(self) -> (Self, Self) {
        fastmath::softplus_and_grad(self)
    }
    #[inline(always)]
    fn fold16(acc: &[Self; 16], tail: Self) -> Self {
        #[cfg(target_arch = "x86_64")]
        return simd::fold_tree_f32(acc, tail);
        #[cfg(not(target_arch = "x86_64"))]
        return simd::fold_tree(acc, tail);
    }
    #[inline(always)]
    fn as_f32(s: &[Self]) -> Option<&[f32]> {
        Some(s)
    }
    #[inline(always)]
    fn as_f32_mut(s: &mut [Self]) -> Option<&mut [f32]> {
        Some(s)
    }
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
    #[inline(always)]
    fn fma(self, b: Self, c: Self) -> Self {
        self * b + c
    }
    #[inline(always)]
    fn exp_nonpos(self) -> Self {
        self.exp()
    }
    #[inline(always)]
    fn sigmoid(self) -> Self {
        act::sigmoid(self)
    }
    #[inline(always)]
    fn softplus_and_grad(self) -> (Self, Self) {
        (act::softplus(self), act::softplus_grad(self))
    }
    #[inline(always)]
    fn fold16(acc: &[Self; 16], tail: Self) -> Self {
        simd::fold_tree(acc, tail)
    }
    #[inline(always)]
    fn as_f32(_: &[Self]) -> Option<&[f32]> {
        None
    }
    #[inline(always)]
    fn as_f32_mut(_: &mut [Self]) -> Option<&mut [f32]> {
        None
    }
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
