//! Activations kept for the backward: in f32, or under bf16 autocast packed to bf16 (2 bytes,
//! as the memory model counts them) and unpacked one group of rows at a time where the
//! backward recomputes from them. The rounding is autocast's (`kernels/autocast.cu`), so a
//! kept activation is what a bf16 matrix product would have read of it.
//!
//! ```
//! use boldcast_cuda::pool::Pool;
//! use boldcast_cuda::stored::Stored;
//! use boldcast_cuda::Precision;
//!
//! let pool = Pool::new();
//! let x = pool.upload(&[1.0f32, 1.0 + 1.0 / 512.0, -3.25]);
//! let kept = Stored::keep(x, Precision::Bf16, &pool).unwrap();
//! assert_eq!(pool.in_use(), 3 * 2);
//! // 1 + 2^-9 is not a bf16: it rounds to 1.
//! assert_eq!(&kept.view().rows(0..3, &pool).unwrap()[..], &[1.0, 1.0, -3.25]);
//! ```

use crate::autocast::{pack_bf16, unpack_bf16, Precision};
use crate::pool::{Buf, Pool, BF16};
use crate::shim::Result;
use std::ops::{Deref, Range};

/// An activation kept for the backward.
#[derive(Debug)]
pub enum Stored {
    /// As computed.
    F32(Buf),
    /// Packed to bf16 bits.
    Bf16(Buf<u16>),
}

impl Stored {
    /// Keeps `x` in `precision`: as it is in f32, else packed into a bf16 buffer of `pool`
    /// (and `x` returned to the pool).
    pub fn keep(x: Buf, precision: Precision, pool: &Pool) -> Result<Self> {
        match precision {
            Precision::F32 => Ok(Self::F32(x)),
            Precision::Bf16 => {
                let mut packed = pool.take_of::<u16>(x.len(), BF16);
                pack_bf16(&x, &mut packed)?;
                Ok(Self::Bf16(packed))
            }
        }
    }

    /// A view to read rows of.
    pub fn view(&self) -> Input<'_> {
        match self {
            Self::F32(b) => Input::F32(b),
            Self::Bf16(b) => Input::Bf16(b),
        }
    }
}

/// A kept activation as the backward reads it: f32 values, or bf16 bits.
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    /// f32 values.
    F32(&'a [f32]),
    /// bf16 bits.
    Bf16(&'a [u16]),
}

impl<'a> From<&'a [f32]> for Input<'a> {
    fn from(x: &'a [f32]) -> Self {
        Self::F32(x)
    }
}

impl<'a> Input<'a> {
    /// Elements.
    pub fn len(&self) -> usize {
        match self {
            Self::F32(x) => x.len(),
            Self::Bf16(x) => x.len(),
        }
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements `r` in f32: borrowed, or unpacked into a buffer of `pool`.
    pub fn rows(&self, r: Range<usize>, pool: &Pool) -> Result<Lent<'a>> {
        match *self {
            Self::F32(x) => Ok(Lent::Borrowed(&x[r])),
            Self::Bf16(x) => {
                let mut y = pool.zeros(r.len());
                unpack_bf16(&x[r], &mut y)?;
                Ok(Lent::Owned(y))
            }
        }
    }
}

/// f32 rows of a kept activation: borrowed from it, or unpacked into a pool buffer.
#[derive(Debug)]
pub enum Lent<'a> {
    /// The kept f32 values themselves.
    Borrowed(&'a [f32]),
    /// An unpacked copy.
    Owned(Buf),
}

impl Deref for Lent<'_> {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        match self {
            Self::Borrowed(x) => x,
            Self::Owned(b) => b,
        }
    }
}
