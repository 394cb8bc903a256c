//! Axis sizes known at compile time or at run time, and the shapes built from them.
//!
//! A [`Dim`] is either [`Const<N>`] (the size is part of the type) or `usize` (the size comes
//! from data). Shapes are structs of named axes, so passing a forecast whose horizon or token
//! width is a different constant is a type error, while a mismatch of runtime sizes is an
//! [`Error::Shape`] naming the axis:
//!
//! ```compile_fail
//! use boldcast_core::{Const, ForecastShape, HostTensor};
//! use boldcast_core::forecast::forecasting_loss;
//! // pred has 2 horizons, target 3: the loss refuses to compile.
//! let pred = HostTensor::<_, f32>::zeros(ForecastShape::new(1usize, 4usize, 2usize, Const::<2>, Const::<1>));
//! let target = HostTensor::<_, f32>::zeros(ForecastShape::new(1usize, 3usize, 2usize, Const::<3>, Const::<1>));
//! let _ = forecasting_loss(&pred, &target);
//! ```
//!
//! ```compile_fail
//! use boldcast_core::{Const, ForecastShape, HostTensor};
//! use boldcast_core::forecast::forecasting_loss;
//! // pred has tokens of 1 TR, target of 2 TRs: the loss refuses to compile.
//! let pred = HostTensor::<_, f32>::zeros(ForecastShape::new(1usize, 4usize, 2usize, Const::<2>, Const::<1>));
//! let target = HostTensor::<_, f32>::zeros(ForecastShape::new(1usize, 3usize, 2usize, Const::<2>, Const::<2>));
//! let _ = forecasting_loss(&pred, &target);
//! ```
//!
//! The same call with matching constants compiles and runs:
//!
//! ```
//! use boldcast_core::{Const, ForecastShape, HostTensor};
//! use boldcast_core::forecast::forecasting_loss;
//! let pred = HostTensor::<_, f32>::zeros(ForecastShape::new(1usize, 4usize, 2usize, Const::<2>, Const::<1>));
//! let target = HostTensor::<_, f32>::zeros(ForecastShape::new(1usize, 3usize, 2usize, Const::<2>, Const::<1>));
//! assert_eq!(forecasting_loss(&pred, &target).unwrap(), 0.0);
//! ```

use crate::error::{Error, Result};
use core::fmt::Debug;

/// The size of one axis: a compile-time constant or a runtime `usize`.
pub trait Dim: Copy + Debug + PartialEq + Send + Sync + 'static {
    /// The size.
    fn size(&self) -> usize;
    /// The dim of size `n`, or `None` when this type cannot hold `n` (a different constant).
    fn try_from_size(n: usize) -> Option<Self>;
    /// The size fixed by the type, `None` for runtime dims.
    const FIXED: Option<usize>;
}

/// An axis whose size `N` is part of the type.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Const<const N: usize>;

impl<const N: usize> Dim for Const<N> {
    const FIXED: Option<usize> = Some(N);
    #[inline]
    fn size(&self) -> usize {
        N
    }
    #[inline]
    fn try_from_size(n: usize) -> Option<Self> {
        (n == N).then_some(Const)
    }
}

impl Dim for usize {
    const FIXED: Option<usize> = None;
    #[inline]
    fn size(&self) -> usize {
        *self
    }
    #[inline]
    fn try_from_size(n: usize) -> Option<Self> {
        Some(n)
    }
}

/// Converts one axis to another dim type, naming the axis on failure.
pub fn convert_dim<A: Dim, B: Dim>(what: &str, a: A) -> Result<B> {
    let n = a.size();
    B::try_from_size(n).ok_or_else(|| Error::shape(what, B::FIXED.unwrap_or(n), n))
}

/// A tensor shape: a fixed number of named axes.
pub trait Shape: Copy + Debug + PartialEq + Send + Sync + 'static {
    /// Number of axes.
    const RANK: usize;
    /// The axis names, outermost first, for error messages.
    const AXES: &'static [&'static str];
    /// The sizes, outermost first (row-major layout).
    fn dims(&self) -> alloc::vec::Vec<usize>;
    /// Number of elements.
    fn numel(&self) -> usize {
        self.dims().iter().product()
    }
}

pub use self::defs::*;

mod defs {
    use super::*;

    /// Tokens `(B, T, P, D)`: windows, tokens per window, parcels, TRs per token.
    #[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
    pub struct TokenShape<B: Dim = usize, T: Dim = usize, P: Dim = usize, D: Dim = usize> {
        /// Windows in the batch (B).
        pub batch: B,
        /// Tokens per window (T).
        pub time: T,
        /// Parcels (P).
        pub parcels: P,
        /// TRs per token (D, `d_in`).
        pub d_in: D,
    }

    /// Forecasts and targets `(B, T, P, H, D)`; the H axis is always present.
    #[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
    pub struct ForecastShape<B: Dim = usize, T: Dim = usize, P: Dim = usize, H: Dim = usize, D: Dim = usize> {
        /// Windows in the batch (B).
        pub batch: B,
        /// Time steps (T for predictions, `T_valid` for targets).
        pub time: T,
        /// Parcels (P).
        pub parcels: P,
        /// Forecast horizons (H).
        pub horizons: H,
        /// TRs per token (D).
        pub d_in: D,
    }

    /// Embeddings `(B, T, P, M)` with M = `d_model`.
    #[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
    pub struct EmbedShape<B: Dim = usize, T: Dim = usize, P: Dim = usize, M: Dim = usize> {
        /// Windows in the batch (B).
        pub batch: B,
        /// Tokens per window (T).
        pub time: T,
        /// Parcels (P).
        pub parcels: P,
        /// Model width (M, `d_model`).
        pub d_model: M,
    }

    impl<B: Dim, T: Dim, P: Dim, D: Dim> TokenShape<B, T, P, D> {
        /// A shape from its axes.
        pub fn new(batch: B, time: T, parcels: P, d_in: D) -> Self {
            Self { batch, time, parcels, d_in }
        }
        /// The same sizes, all runtime.
        pub fn to_runtime(&self) -> TokenShape {
            TokenShape::new(self.batch.size(), self.time.size(), self.parcels.size(), self.d_in.size())
        }
        /// The same sizes as other dim types, or an error naming the axis that does not fit.
        pub fn convert<B2: Dim, T2: Dim, P2: Dim, D2: Dim>(&self) -> Result<TokenShape<B2, T2, P2, D2>> {
            Ok(TokenShape {
                batch: convert_dim("tokens.batch", self.batch)?,
                time: convert_dim("tokens.time", self.time)?,
                parcels: convert_dim("tokens.parcels", self.parcels)?,
                d_in: convert_dim("tokens.d_in", self.d_in)?,
            })
        }
    }

    impl<B: Dim, T: Dim, P: Dim, H: Dim, D: Dim> ForecastShape<B, T, P, H, D> {
        /// A shape from its axes.
        pub fn new(batch: B, time: T, parcels: P, horizons: H, d_in: D) -> Self {
            Self { batch, time, parcels, horizons, d_in }
        }
        /// The same sizes, all runtime.
        pub fn to_runtime(&self) -> ForecastShape {
            ForecastShape::new(
                self.batch.size(),
                self.time.size(),
                self.parcels.size(),
                self.horizons.size(),
                self.d_in.size(),
            )
        }
        /// The same sizes as other dim types, or an error naming the axis that does not fit.
        pub fn convert<B2: Dim, T2: Dim, P2: Dim, H2: Dim, D2: Dim>(
            &self,
        ) -> Result<ForecastShape<B2, T2, P2, H2, D2>> {
            Ok(ForecastShape {
                batch: convert_dim("forecast.batch", self.batch)?,
                time: convert_dim("forecast.time", self.time)?,
                parcels: convert_dim("forecast.parcels", self.parcels)?,
                horizons: convert_dim("forecast.horizons", self.horizons)?,
                d_in: convert_dim("forecast.d_in", self.d_in)?,
            })
        }
    }

    impl<B: Dim, T: Dim, P: Dim, M: Dim> EmbedShape<B, T, P, M> {
        /// A shape from its axes.
        pub fn new(batch: B, time: T, parcels: P, d_model: M) -> Self {
            Self { batch, time, parcels, d_model }
        }
        /// The same sizes, all runtime.
        pub fn to_runtime(&self) -> EmbedShape {
            EmbedShape::new(self.batch.size(), self.time.size(), self.parcels.size(), self.d_model.size())
        }
    }

    impl<B: Dim, T: Dim, P: Dim, D: Dim> Shape for TokenShape<B, T, P, D> {
        const RANK: usize = 4;
        const AXES: &'static [&'static str] = &["batch", "time", "parcels", "d_in"];
        fn dims(&self) -> alloc::vec::Vec<usize> {
            alloc::vec![self.batch.size(), self.time.size(), self.parcels.size(), self.d_in.size()]
        }
    }

    impl<B: Dim, T: Dim, P: Dim, H: Dim, D: Dim> Shape for ForecastShape<B, T, P, H, D> {
        const RANK: usize = 5;
        const AXES: &'static [&'static str] = &["batch", "time", "parcels", "horizons", "d_in"];
        fn dims(&self) -> alloc::vec::Vec<usize> {
            alloc::vec![
                self.batch.size(),
                self.time.size(),
                self.parcels.size(),
                self.horizons.size(),
                self.d_in.size()
            ]
        }
    }

    impl<B: Dim, T: Dim, P: Dim, M: Dim> Shape for EmbedShape<B, T, P, M> {
        const RANK: usize = 4;
        const AXES: &'static [&'static str] = &["batch", "time", "parcels", "d_model"];
        fn dims(&self) -> alloc::vec::Vec<usize> {
            alloc::vec![self.batch.size(), self.time.size(), self.parcels.size(), self.d_model.size()]
        }
    }
}
