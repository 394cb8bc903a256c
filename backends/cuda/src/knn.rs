//! The spatial mixer's attention between its projections (`kernels/knn.cu`), the part of the
//! CPU backend's `knn.rs` that is not a matrix product: the gather of each parcel's k
//! neighbours, the scaled scores, the softmax and the weighted sum, and their backward with
//! the scatter of key and value gradients to the neighbours. The projections, LayerNorm and
//! the residual stay with the caller (cuBLAS on a device).
//!
//! The scatter runs without atomics: [`Neighbours`] holds the reverse adjacency, built once
//! on the host, and each thread sums its own incoming contributions in slot order.

use crate::launch::{elementwise, rows as row_launch};
use crate::pool::{Buf, Pool};
use crate::shim::{self, KnnDims, LaunchError, Result};
use boldcast_core::Adjacency;

/// An adjacency as the kernels read it: `adj` `(P, k)` and, for each parcel `a`, the slots
/// `p k + j` with `adj[p, j] = a` in increasing order, `rev[rev_start[a] .. rev_start[a + 1]]`;
/// in host vectors as built, or in a pool's buffers ([`Neighbours::resident`]) as a model
/// keeps them so that no launch stages them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neighbours<S = Vec<i32>> {
    parcels: usize,
    k: usize,
    adj: S,
    rev_start: S,
    rev: S,
}

impl<S: AsRef<[i32]>> Neighbours<S> {
    /// The neighbours per parcel, k.
    pub fn k(&self) -> usize {
        self.k
    }

    /// The parcels, P.
    pub fn parcels(&self) -> usize {
        self.parcels
    }

    /// The sizes of `groups` groups of width `m`.
    fn dims(&self, m: usize, groups: usize) -> KnnDims {
        KnnDims { parcels: self.parcels, k: self.k, m, rows: groups * self.parcels }
    }

    /// A copy in buffers of `pool` (device memory), uploaded once.
    pub fn resident(&self, pool: &Pool) -> Neighbours<Buf<i32>> {
        let up = |v: &S| pool.upload(v.as_ref());
        let (adj, rev_start, rev) = (up(&self.adj), up(&self.rev_start), up(&self.rev));
        Neighbours { parcels: self.parcels, k: self.k, adj, rev_start, rev }
    }
}

impl Neighbours {
    /// The kernels' form of `adj`; `None` when `P k` does not fit an `i32`.
    pub fn new(adj: &Adjacency) -> Option<Self> {
        let (parcels, k) = (adj.parcels(), adj.k());
        i32::try_from(parcels * k).ok()?;
        let idx: Vec<i32> = adj.indices().iter().map(|&a| a as i32).collect();
        // Counting sort of the slots by target parcel: stable, so each list is in slot order,
        // the order in which the CPU backend's loop over (p, j) adds into a neighbour.
        let mut rev_start = vec![0i32; parcels + 1];
        for &a in &idx {
            rev_start[a as usize + 1] += 1;
        }
        for p in 0..parcels {
            rev_start[p + 1] += rev_start[p];
        }
        let mut fill = rev_start.clone();
        let mut rev = vec![0i32; parcels * k];
        for (slot, &a) in idx.iter().enumerate() {
            rev[fill[a as usize] as usize] = slot as i32;
            fill[a as usize] += 1;
        }
        Some(Self { parcels, k, adj: idx, rev_start, rev })
    }
}

/// The score scale `1 / sqrt(M)`, rounded from f64 as the CPU backend's `E::of`.
fn scale(m: usize) -> f32 {
    (1.0 / (m as f64).sqrt()) as f32
}

/// The launch of the row kernels, refusing a row count over the grid's limit.
fn row_shape(kernel: &'static str, d: KnnDims) -> Result<crate::launch::Launch> {
    if d.rows == 0 || d.rows > i32::MAX as usize {
        return Err(LaunchError { kernel, why: format!("{} rows: must be 1 to 2^31 - 1", d.rows) });
    }
    Ok(row_launch(d.rows, d.m))
}

/// The attention of `groups` groups from `qkv` `(groups P, 3M)` rows `[q | kk | v]`: the
/// softmax weights `w` `(groups P, k)` (kept for the backward) and `att` `(groups P, M)`,
/// before the out projection. Overwrites both.
pub fn attend<S: AsRef<[i32]>>(
    nb: &Neighbours<S>,
    m: usize,
    groups: usize,
    qkv: &[f32],
    w: &mut [f32],
    att: &mut [f32],
) -> Result<()> {
    let d = nb.dims(m, groups);
    let l = row_shape("knn_attend_fwd", d)?;
    shim::knn_attend_fwd(l, d, nb.adj.as_ref(), scale(m), qkv, w, att)
}

/// Backward of [`attend`] for `g_att` `(groups P, M)`: overwrites `g_qkv` `(groups P, 3M)`
/// with `[g_q | g_kk | g_v]`, the key and value gradients summed over every parcel that
/// attends to the row.
pub fn attend_backward<S: AsRef<[i32]>>(
    nb: &Neighbours<S>,
    m: usize,
    groups: usize,
    qkv: &[f32],
    w: &[f32],
    g_att: &[f32],
    g_qkv: &mut [f32],
) -> Result<()> {
    let d = nb.dims(m, groups);
    let l = row_shape("knn_attend_bwd_q", d)?;
    let mut gs = crate::exec::scratch().zeros(d.rows * d.k);
    let a = shim::AttendBwd { qkv, w, g_att };
    shim::knn_attend_bwd_q(l, (d, nb.adj.as_ref(), scale(m)), a, &mut gs, g_qkv)?;
    let rev = (nb.rev_start.as_ref(), nb.rev.as_ref());
    shim::knn_attend_bwd_kv(elementwise(d.rows * m), (d, rev.0, rev.1), a, &gs, g_qkv)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reverse lists hold every slot once, under its target, in increasing order.
    #[test]
    fn reverse_adjacency_lists_each_slot_under_its_target() {
        let adj = Adjacency::ring(7, 5).unwrap();
        let nb = Neighbours::new(&adj).unwrap();
        let mut seen = [false; 35];
        for a in 0..7 {
            let list = &nb.rev[nb.rev_start[a] as usize..nb.rev_start[a + 1] as usize];
            assert!(list.windows(2).all(|s| s[0] < s[1]), "{list:?}");
            for &s in list {
                assert_eq!(adj.indices()[s as usize], a);
                seen[s as usize] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
    }
}
