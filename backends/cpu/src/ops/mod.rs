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
    unsafe fn gemm_raw(g: RawGemm<Self>);
}

/// The operands of one `matrixmultiply` call, `C = alpha A B + beta C` with `A` `(m, k)`, `B`
/// `(k, n)` and `C` `(m, n)`, each matrix a pointer with its row and column strides.
#[derive(Copy, Clone, Debug)]
pub struct RawGemm<E> {
    /// Rows of `A` and `C`.
    pub m: usize,
    /// Columns of `A`, rows of `B`.
    pub k: usize,
    /// Columns of `B` and `C`.
    pub n: usize,
    /// The product's factor.
    pub alpha: E,
    /// `A`: pointer, row stride, column stride.
    pub a: (*const E, isize, isize),
    /// `B`: pointer, row stride, column stride.
    pub b: (*const E, isize, isize),
    /// The factor of `C`'s old values.
    pub beta: E,
    /// `C`: pointer, row stride, column stride.
    pub c: (*mut E, isize, isize),
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
    unsafe fn gemm_raw(g: RawGemm<Self>) {
        let RawGemm { m, k, n, alpha, a: (a, rsa, csa), b: (b, rsb, csb), beta, c: (c, rsc, csc) } = g;
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
    unsafe fn gemm_raw(g: RawGemm<Self>) {
        let RawGemm { m, k, n, alpha, a: (a, rsa, csa), b: (b, rsb, csb), beta, c: (c, rsc, csc) } = g;
        matrixmultiply::dgemm(m, k, n, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc)
    }
}
