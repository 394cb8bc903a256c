//! The order of the training windows: which windows global batch `k` holds and which of them
//! each data-parallel rank trains on.
//!
//! - [`epoch_order`]: epoch `e` visits the `n` training windows in a Fisher-Yates order drawn
//!   from `ChaCha8Rng::seed_from_u64(train.seed)` on stream [`ORDER_STREAM_BASE`]` + e`, a pure
//!   function of `(seed, e)`; step `s` is batch `s % bpe` of epoch `s / bpe` with
//!   `bpe = floor(n / batch_size)` (the remainder is left out of that epoch), so a resume
//!   needs only the step.
//! - [`rank_batch`]: global batch `k` of an epoch is `order[k*B .. (k+1)*B]`; rank `r` of
//!   `size` takes its contiguous `B / size` of it
//!   ([`boldcast_core::collective::shard_range`]).
//! - [`val_share`]: the contiguous share of the validation windows a rank evaluates.

use crate::checkpoint::RngState;
use crate::dist::Dist;
use crate::error::TrainError;
use boldcast_core::collective::shard_range;
use boldcast_data::split::shuffle_indices;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The data-order streams start here (stream `ORDER_STREAM_BASE + epoch`), away from stream
/// 0, which model initializations seeded with the same seed may use.
pub const ORDER_STREAM_BASE: u64 = 1 << 32;

/// The order of the `n` training windows in `epoch` (see the module documentation) and the
/// generator's position after drawing it; the identity when `shuffle` is false. It is the
/// global order of the epoch: a data-parallel run shards it.
pub fn epoch_order(n: usize, seed: u64, epoch: u64, shuffle: bool) -> (Vec<usize>, RngState) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(ORDER_STREAM_BASE + epoch);
    let order = if shuffle { shuffle_indices(n, &mut rng) } else { (0..n).collect() };
    let st = RngState {
        algorithm: "ChaCha8Rng".into(),
        seed,
        stream: ORDER_STREAM_BASE + epoch,
        word_pos: rng.get_word_pos().to_string(),
    };
    (order, st)
}

/// The global-order indices that rank `dist.rank()` trains on in global batch `pos` of an
/// epoch whose order is `order`, with global batch size `batch`.
pub fn rank_batch<'a>(order: &'a [usize], pos: usize, batch: usize, dist: &Dist) -> Result<&'a [usize], TrainError> {
    let global = order.get(pos * batch..(pos + 1) * batch).ok_or(TrainError::BatchOutOfEpoch {
        pos,
        batch,
        windows: order.len(),
    })?;
    let r = shard_range(batch, dist.rank(), dist.size())?;
    Ok(&global[r])
}

/// Every training-window index rank `rank` of `size` sees in `epoch`, batch by batch (for
/// checks of the sharding: disjoint across ranks, covering the epoch's full batches).
pub fn epoch_shard(
    n: usize,
    seed: u64,
    epoch: u64,
    shuffle: bool,
    batch: usize,
    rank: usize,
    size: usize,
) -> Result<Vec<usize>, TrainError> {
    let (order, _) = epoch_order(n, seed, epoch, shuffle);
    let r = shard_range(batch, rank, size)?;
    Ok((0..n / batch).flat_map(|k| order[k * batch..(k + 1) * batch][r.clone()].to_vec()).collect())
}

/// The share of `n` validation windows rank `rank` of `size` evaluates: contiguous, sizes
/// differing by at most one.
pub fn val_share(n: usize, rank: usize, size: usize) -> std::ops::Range<usize> {
    (rank * n / size)..((rank + 1) * n / size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn shards_are_disjoint_cover_each_epoch_and_change_with_it() {
        let (n, b, size, seed) = (103, 8, 4, 7);
        let full = (n / b) * b;
        let mut epochs = Vec::new();
        for epoch in 0..3 {
            let shards: Vec<Vec<usize>> =
                (0..size).map(|r| epoch_shard(n, seed, epoch, true, b, r, size).unwrap()).collect();
            let mut all = HashSet::new();
            for s in &shards {
                assert_eq!(s.len(), full / size);
                for &i in s {
                    assert!(all.insert(i), "epoch {epoch}: window {i} on two ranks");
                }
            }
            // Together: exactly the windows of the epoch's full global batches.
            let (order, _) = epoch_order(n, seed, epoch, true);
            assert_eq!(all, order[..full].iter().copied().collect::<HashSet<_>>());
            epochs.push(shards);
        }
        for (r, (e0, (e1, e2))) in epochs[0].iter().zip(epochs[1].iter().zip(&epochs[2])).enumerate() {
            assert_ne!(e0, e1, "rank {r} sees the same windows in epochs 0 and 1");
            assert_ne!(e1, e2, "rank {r} sees the same windows in epochs 1 and 2");
        }
        // The union of the ranks' shards of a global batch is that global batch, in order.
        let (order, _) = epoch_order(n, seed, 1, true);
        let mut joined = Vec::new();
        for r in 0..size {
            joined.extend_from_slice(&epoch_shard(n, seed, 1, true, b, r, size).unwrap()[..b / size]);
        }
        assert_eq!(joined, order[..b]);
    }

    #[test]
    fn an_indivisible_batch_is_refused_by_name() {
        let e = epoch_shard(40, 0, 0, true, 6, 0, 4).unwrap_err().to_string();
        assert!(e.contains("train.batch_size = 6") && e.contains("(4)"), "{e}");
    }

    #[test]
    fn validation_shares_cover_the_windows_once() {
        for n in [0, 1, 5, 16, 17] {
            for size in 1..5 {
                let v: Vec<usize> = (0..size).flat_map(|r| val_share(n, r, size)).collect();
                assert_eq!(v, (0..n).collect::<Vec<_>>(), "n {n} size {size}");
            }
        }
    }

    #[test]
    fn one_rank_takes_the_whole_global_batch() {
        let order: Vec<usize> = (0..20).rev().collect();
        assert_eq!(rank_batch(&order, 1, 8, &Dist::default()).unwrap(), &order[8..16]);
        assert!(rank_batch(&order, 2, 8, &Dist::default()).is_err());
    }
}
