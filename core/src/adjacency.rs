//! The spatial neighbourhood `adjacency[P, k]`: for each parcel, the indices of its k
//! neighbours with itself first (MODEL.md, "Spatial mixer").

use crate::error::{Error, Result};
use alloc::vec::Vec;

/// A validated `(P, k)` neighbour table, row-major.
///
/// Invariants (checked by [`Adjacency::new`]): `idx.len() == parcels * k`, every index is
/// `< parcels`, and row `p` starts with `p`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Adjacency {
    parcels: usize,
    k: usize,
    idx: Vec<usize>,
}

impl Adjacency {
    /// A table from row-major indices; the error names the offending row and value.
    pub fn new(parcels: usize, k: usize, idx: Vec<usize>) -> Result<Self> {
        if k == 0 {
            return Err(Error::config("adjacency.k", k, "must be at least 1 (use no adjacency for k = 0)"));
        }
        if k > parcels {
            return Err(Error::config("k_neighbors", k, alloc::format!("exceeds the {parcels} parcels")));
        }
        // A table read from a file may claim any sizes: their product is checked, not wrapped.
        match parcels.checked_mul(k) {
            Some(n) if n == idx.len() => {}
            Some(n) => return Err(Error::shape("adjacency", n, idx.len())),
            None => {
                return Err(Error::config(
                    "adjacency.parcels",
                    parcels,
                    alloc::format!("{parcels} parcels x k = {k} overflows: not a table"),
                ))
            }
        }
        for p in 0..parcels {
            let row = &idx[p * k..(p + 1) * k];
            if row[0] != p {
                return Err(Error::config(
                    alloc::format!("adjacency[{p}][0]"),
                    row[0],
                    alloc::format!("the first neighbour of parcel {p} must be the parcel itself"),
                ));
            }
            if let Some(&q) = row.iter().find(|&&q| q >= parcels) {
                return Err(Error::config(
                    alloc::format!("adjacency[{p}]"),
                    q,
                    alloc::format!("index out of range for {parcels} parcels"),
                ));
            }
        }
        Ok(Self { parcels, k, idx })
    }

    /// Parcels on a ring, as the golden generator's `ring_adjacency`: self first, then the
    /// nearest neighbours alternating right and left.
    pub fn ring(parcels: usize, k: usize) -> Result<Self> {
        let mut idx = Vec::with_capacity(parcels * k);
        for i in 0..parcels {
            let mut row = alloc::vec![i];
            let mut step = 1;
            while row.len() < k && step <= parcels {
                for j in [i + step, i + parcels * step - step] {
                    if row.len() < k {
                        row.push(j % parcels);
                    }
                }
                step += 1;
            }
            idx.extend_from_slice(&row);
        }
        Self::new(parcels, k, idx)
    }

    /// P.
    pub fn parcels(&self) -> usize {
        self.parcels
    }
    /// k.
    pub fn k(&self) -> usize {
        self.k
    }
    /// Row-major `(P, k)` indices.
    pub fn indices(&self) -> &[usize] {
        &self.idx
    }
    /// The neighbours of parcel `p`, itself first.
    pub fn row(&self, p: usize) -> &[usize] {
        &self.idx[p * self.k..(p + 1) * self.k]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_matches_the_generator() {
        // generate.py's ring_adjacency(5, 3): [[0,1,4],[1,2,0],[2,3,1],[3,4,2],[4,0,3]].
        let a = Adjacency::ring(5, 3).unwrap();
        assert_eq!(a.indices(), &[0, 1, 4, 1, 2, 0, 2, 3, 1, 3, 4, 2, 4, 0, 3]);
    }

    #[test]
    fn bad_tables_name_the_row() {
        let e = Adjacency::new(2, 2, alloc::vec![0, 1, 0, 1]).unwrap_err();
        assert!(alloc::format!("{e}").contains("adjacency[1][0]"), "{e}");
        assert!(Adjacency::new(2, 3, alloc::vec![0; 6]).is_err());
        assert!(Adjacency::new(2, 1, alloc::vec![0, 5]).is_err());
    }

    #[test]
    fn sizes_whose_product_overflows_are_an_error_not_a_panic() {
        // Found by the checkpoint_model fuzz target: a metadata `parcels` of u64::MAX.
        let e = Adjacency::new(usize::MAX, 3, alloc::vec![0, 1, 2]).unwrap_err();
        assert!(alloc::format!("{e}").contains("overflows"), "{e}");
    }
}
