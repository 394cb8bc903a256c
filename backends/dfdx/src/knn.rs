//! The spatial mixer: single-head attention of each parcel over its k neighbours
//! (MODEL.md, "Spatial mixer"), for every `(t, b)` at once.
//!
//! In the row layout the `P` parcels of one `(t, b)` are contiguous, so `(T * B * P, M)` is
//! viewed as `(G, P, M)` with `G = T * B`, then transposed (a strided view) to `(P, G, M)`
//! so that one `gather` along axis 0 with the flat `(P * k,)` adjacency picks every
//! neighbour of every parcel for all `G` groups.

use crate::ops::layernorm::layer_norm;
use crate::ops::linear::linear;
use crate::ops::tape::dup;
use crate::ops::{Index, Mat, Vector};
use boldcast_core::Elem;
use dfdx::prelude::*;

/// One layer's attention parameters with tape `T`.
pub struct KnnParams<E: Dtype, D: Device<E>, T> {
    /// `knn.norm.weight`, `knn.norm.bias`.
    pub norm: (Vector<E, D, T>, Vector<E, D, T>),
    /// `knn.q` weight and bias.
    pub q: (Mat<E, D, T>, Vector<E, D, T>),
    /// `knn.kproj` weight and bias.
    pub k: (Mat<E, D, T>, Vector<E, D, T>),
    /// `knn.v` weight and bias.
    pub v: (Mat<E, D, T>, Vector<E, D, T>),
    /// `knn.out` weight and bias.
    pub out: (Mat<E, D, T>, Vector<E, D, T>),
}

/// The attention output (before the residual) for `x (G * P, M)`; `adjacency` is the flat
/// `(P * k,)` neighbour table, self first in each row.
pub fn knn_attention<E: Dtype + Elem, D: Device<E>, T: Tape<E, D>>(
    x: Mat<E, D, T>,
    p: KnnParams<E, D, T>,
    parcels: usize,
    adjacency: &Index<D>,
) -> Mat<E, D, T> {
    let (rows, m) = *x.shape();
    let kn = adjacency.shape().0 / parcels;
    let g = rows / parcels;
    let h = layer_norm(x, p.norm.0, p.norm.1);
    let (h, h1) = dup(h);
    let (h, h2) = dup(h);
    // (G * P, M) -> (G, P, M) -> view (P, G, M).
    let by_parcel =
        |t: Mat<E, D, T>| t.reshape_like(&(g, parcels, m)).permute::<(usize, usize, usize), Axes3<1, 0, 2>>();
    let q = by_parcel(linear(h, p.q.0, p.q.1));
    let kk = by_parcel(linear(h1, p.k.0, p.k.1));
    let v = by_parcel(linear(h2, p.v.0, p.v.1));
    let sh4 = (parcels, kn, g, m);
    let neighbours = |t: Tensor<(usize, usize, usize), E, D, T>| {
        let picked: Tensor<(usize, usize, usize), E, D, T> = t.gather(adjacency.clone());
        picked.reshape_like(&sh4)
    };
    let kg = neighbours(kk);
    let vg = neighbours(v);
    let q4 = q.broadcast_like::<(usize, usize, usize, usize), Axis<1>>(&sh4);
    let scale = E::of(1.0 / (m as f64).sqrt());
    let scores = (q4 * kg).sum::<(usize, usize, usize), Axis<3>>() * scale; // (P, k, G)
    let w = scores.softmax::<Axis<1>>();
    let att =
        (w.broadcast_like::<(usize, usize, usize, usize), Axis<3>>(&sh4) * vg).sum::<(usize, usize, usize), Axis<1>>(); // (P, G, M)
    let att = att.permute::<(usize, usize, usize), Axes3<1, 0, 2>>().reshape_like(&(rows, m));
    linear(att, p.out.0, p.out.1)
}
