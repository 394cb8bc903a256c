//! bf16 autocast, as `torch.autocast` does it on CUDA: while a [`Precision::Bf16`] scope is
//! active on a thread, every matrix product [`crate::gemm::gemm`] runs takes its two operands
//! rounded to bf16 (round to nearest even, by the kernel of `kernels/autocast.cu`) and
//! accumulates in f32, which is cuBLAS `GemmEx` with `CUDA_R_16BF` inputs and
//! `CUBLAS_COMPUTE_32F`. Everything else stays f32: parameters, gradients, Adam's moments,
//! the scan states, every reduction (LayerNorm, softmax, the loss) and every elementwise op.
//!
//! The mode is **thread-local**, like torch's: the products sit deep inside the layers
//! ([`crate::ops::linear`], the Mamba layers' projections, the spatial mixer), and threading
//! a precision flag through every one of their signatures would change dozens of functions
//! for one bit of state that is constant over a whole forward or backward. A scope is entered
//! with [`scope`] (a guard that restores the previous mode when dropped, so scopes nest) or
//! [`with`] (a closure); [`current`] reads the mode. The guard is neither `Send` nor `Sync`:
//! it restores the mode of the thread that made it. Guards must be dropped in reverse order
//! of creation (as scoped variables are); each restores what it replaced, so dropping an
//! outer guard first and the inner one last leaves the inner guard's predecessor behind.
//!
//! In shim mode a bf16 operand is an f32 buffer holding bf16 values, counted by the pool at
//! the device's 2 bytes: the arithmetic is the device's (bf16 inputs, f32 products and sums).
//! Activations kept for the backward are packed to bf16 bits ([`crate::stored`]) in both modes.

use crate::launch::elementwise;
use crate::pool::{BF16, F32};
use crate::shim::{self, Result};
use core::fmt;
use core::marker::PhantomData;
use core::str::FromStr;
use std::cell::Cell;

/// The precision of activations and matrix-product inputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// Everything f32.
    #[default]
    F32,
    /// Matrix products in bf16 with f32 accumulation (activations 2 bytes on the device);
    /// parameters, moments, states and reductions f32.
    Bf16,
}

impl Precision {
    /// Bytes of one activation.
    pub fn act(self) -> usize {
        match self {
            Precision::F32 => F32,
            Precision::Bf16 => BF16,
        }
    }

    /// The name a command line uses: `f32` or `bf16`.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A precision name that is neither `f32` nor `bf16`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownPrecision(pub String);

impl fmt::Display for UnknownPrecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown precision `{}` (expected f32 or bf16)", self.0)
    }
}

impl std::error::Error for UnknownPrecision {}

/// Parses `f32` or `bf16` (`--precision f32|bf16`).
impl FromStr for Precision {
    type Err = UnknownPrecision;

    fn from_str(s: &str) -> core::result::Result<Self, Self::Err> {
        match s {
            "f32" => Ok(Precision::F32),
            "bf16" => Ok(Precision::Bf16),
            other => Err(UnknownPrecision(other.to_string())),
        }
    }
}

thread_local! {
    static CURRENT: Cell<Precision> = const { Cell::new(Precision::F32) };
}

/// The autocast mode of this thread ([`Precision::F32`] outside any scope).
pub fn current() -> Precision {
    CURRENT.with(Cell::get)
}

/// An active autocast scope: restores the previous mode of its thread when dropped.
#[must_use = "the scope ends when the guard is dropped"]
#[derive(Debug)]
pub struct Scope {
    prev: Precision,
    /// Not `Send`: the guard restores the mode of the thread that created it.
    _thread: PhantomData<*const ()>,
}

impl Drop for Scope {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.prev));
    }
}

/// Enters `precision` on this thread until the returned guard is dropped.
pub fn scope(precision: Precision) -> Scope {
    let prev = CURRENT.with(|c| c.replace(precision));
    Scope { prev, _thread: PhantomData }
}

/// Runs `f` with `precision` as this thread's mode, restoring the previous one after (also
/// when `f` panics).
pub fn with<R>(precision: Precision, f: impl FnOnce() -> R) -> R {
    let _guard = scope(precision);
    f()
}

/// `y = bf16(x)`: each value rounded to the nearest bf16 (ties to even; NaN stays NaN,
/// subnormals are not flushed), held in f32, by the kernel `autocast_round_bf16`. Refuses
/// buffers of different lengths.
pub fn round_bf16(x: &[f32], y: &mut [f32]) -> Result<()> {
    shim::autocast_round_bf16(elementwise(x.len()), x, y)
}

/// `y` = the bf16 bits of `x` (the rounding of [`round_bf16`]), the operand a device's
/// GemmEx reads.
pub fn pack_bf16(x: &[f32], y: &mut [u16]) -> Result<()> {
    shim::autocast_pack_bf16(elementwise(x.len()), x, y)
}

/// `y` = the f32 values of the bf16 bits `x` (exact: the inverse of [`pack_bf16`] on its
/// results).
pub fn unpack_bf16(x: &[u16], y: &mut [f32]) -> Result<()> {
    shim::autocast_unpack_bf16(elementwise(x.len()), x, y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for p in [Precision::F32, Precision::Bf16] {
            assert_eq!(p.name().parse::<Precision>(), Ok(p));
            assert_eq!(p.to_string(), p.name());
        }
        let err = "fp16".parse::<Precision>().unwrap_err();
        assert_eq!(err.to_string(), "unknown precision `fp16` (expected f32 or bf16)");
        assert_eq!(Precision::default(), Precision::F32);
        assert_eq!((Precision::F32.act(), Precision::Bf16.act()), (4, 2));
    }
}
