//! Host tensors: a row-major `Vec` with a typed shape, the form in which tokens, forecasts and
//! embeddings cross the [`crate::Model`] boundary (a backend copies them to and from its
//! device itself).

use crate::error::{Error, Result};
use crate::shape::{Dim, EmbedShape, ForecastShape, Shape, TokenShape};
use alloc::vec;
use alloc::vec::Vec;

/// A row-major tensor in host memory whose shape is a typed [`Shape`].
///
/// Invariant: `data.len() == shape.numel()`; every constructor checks it.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor<S: Shape, E> {
    shape: S,
    data: Vec<E>,
}

/// Tokens `(B, T, P, D)` in host memory.
pub type Tokens<E, B = usize, T = usize, P = usize, D = usize> = HostTensor<TokenShape<B, T, P, D>, E>;
/// Forecasts or targets `(B, T, P, H, D)` in host memory.
pub type Forecasts<E, B = usize, T = usize, P = usize, H = usize, D = usize> =
    HostTensor<ForecastShape<B, T, P, H, D>, E>;
/// Embeddings `(B, T, P, M)` in host memory.
pub type Embeddings<E, B = usize, T = usize, P = usize, M = usize> = HostTensor<EmbedShape<B, T, P, M>, E>;

impl<S: Shape, E: Copy> HostTensor<S, E> {
    /// A tensor from its shape and row-major data; a length that does not match the shape is an
    /// [`Error::Shape`].
    pub fn new(shape: S, data: Vec<E>) -> Result<Self> {
        if data.len() != shape.numel() {
            return Err(Error::shape("tensor data length", shape.numel(), data.len()));
        }
        Ok(Self { shape, data })
    }

    /// A tensor of zeros.
    pub fn zeros(shape: S) -> Self
    where
        E: Default,
    {
        Self { shape, data: vec![E::default(); shape.numel()] }
    }

    /// The shape.
    pub fn shape(&self) -> S {
        self.shape
    }

    /// The row-major data.
    pub fn data(&self) -> &[E] {
        &self.data
    }

    /// The row-major data, mutable (the shape cannot change).
    pub fn data_mut(&mut self) -> &mut [E] {
        &mut self.data
    }

    /// The data, consuming the tensor.
    pub fn into_data(self) -> Vec<E> {
        self.data
    }

    /// The same data under another shape type with the same sizes (e.g. runtime dims to
    /// constants); any axis that differs is an [`Error::Shape`] naming it.
    pub fn with_shape<S2: Shape>(self, shape: S2) -> Result<HostTensor<S2, E>> {
        let (a, b) = (self.shape.dims(), shape.dims());
        for (i, (x, y)) in a.iter().zip(b.iter()).enumerate() {
            if x != y {
                return Err(Error::shape(S2::AXES.get(i).copied().unwrap_or("axis"), *y, *x));
            }
        }
        if a.len() != b.len() {
            return Err(Error::shape("rank", b.len(), a.len()));
        }
        Ok(HostTensor { shape, data: self.data })
    }
}

impl<E: Copy, B: Dim, T: Dim, P: Dim, D: Dim> Tokens<E, B, T, P, D> {
    /// Flat index of `[b, t, p, j]`.
    #[inline]
    pub fn index(&self, b: usize, t: usize, p: usize, j: usize) -> usize {
        let s = self.shape;
        ((b * s.time.size() + t) * s.parcels.size() + p) * s.d_in.size() + j
    }
    /// The element `[b, t, p, j]`.
    #[inline]
    pub fn at(&self, b: usize, t: usize, p: usize, j: usize) -> E {
        self.data[self.index(b, t, p, j)]
    }
    /// The same tokens with every axis a runtime `usize`.
    pub fn to_runtime(self) -> Tokens<E> {
        let s = self.shape.to_runtime();
        HostTensor { shape: s, data: self.data }
    }
    /// The same tokens with other dim types, or an error naming the axis that does not fit.
    pub fn convert<B2: Dim, T2: Dim, P2: Dim, D2: Dim>(self) -> Result<Tokens<E, B2, T2, P2, D2>> {
        let s = self.shape.convert()?;
        Ok(HostTensor { shape: s, data: self.data })
    }
}

impl<E: Copy, B: Dim, T: Dim, P: Dim, H: Dim, D: Dim> Forecasts<E, B, T, P, H, D> {
    /// Flat index of `[b, t, p, h, j]`.
    #[inline]
    pub fn index(&self, b: usize, t: usize, p: usize, h: usize, j: usize) -> usize {
        let s = self.shape;
        (((b * s.time.size() + t) * s.parcels.size() + p) * s.horizons.size() + h) * s.d_in.size() + j
    }
    /// The element `[b, t, p, h, j]`.
    #[inline]
    pub fn at(&self, b: usize, t: usize, p: usize, h: usize, j: usize) -> E {
        self.data[self.index(b, t, p, h, j)]
    }
    /// The same forecasts with every axis a runtime `usize`.
    pub fn to_runtime(self) -> Forecasts<E> {
        let s = self.shape.to_runtime();
        HostTensor { shape: s, data: self.data }
    }
    /// The same forecasts with other dim types, or an error naming the axis that does not fit.
    pub fn convert<B2: Dim, T2: Dim, P2: Dim, H2: Dim, D2: Dim>(self) -> Result<Forecasts<E, B2, T2, P2, H2, D2>> {
        let s = self.shape.convert()?;
        Ok(HostTensor { shape: s, data: self.data })
    }
}
