//! The element types a backend computes in: `f32` for training, `f64` for gradient checks.

use core::fmt::{Debug, Display};
use core::iter::Sum;
use core::ops::{AddAssign, DivAssign, MulAssign, SubAssign};

/// A floating-point element type. Implemented for `f32` and `f64` only: the golden files and
/// the tolerances of MODEL.md are stated for these two.
pub trait Elem:
    num_traits::Float
    + num_traits::FloatConst
    + Debug
    + Display
    + Default
    + Send
    + Sync
    + Sum
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + 'static
{
    /// `"f32"` or `"f64"`, as in safetensors' dtype names (lower case).
    const NAME: &'static str;
    /// Converts from `f64`, rounding to nearest.
    fn of(x: f64) -> Self;
    /// Widens (or keeps) to `f64`.
    fn f64(self) -> f64;
}

impl Elem for f32 {
    const NAME: &'static str = "f32";
    #[inline]
    fn of(x: f64) -> Self {
        x as f32
    }
    #[inline]
    fn f64(self) -> f64 {
        self as f64
    }
}

impl Elem for f64 {
    const NAME: &'static str = "f64";
    #[inline]
    fn of(x: f64) -> Self {
        x
    }
    #[inline]
    fn f64(self) -> f64 {
        self
    }
}
