//! Data-parallel `train` and `bench`: the ranks a launcher started (`mpirun`, `srun`), which
//! windows each one trains on, and validation shared between them. The rules are those of
//! [`boldcast::core::collective`]; the transports are in `boldcast-comm`.
//!
//! - [`Dist::from_env`]: one rank when no launcher started this process; MPI ranks with the
//!   `mpi` feature; a clear error under a launcher of several ranks without it.
//! - [`rank_batch`]: global batch `k` of an epoch is `order[k*B .. (k+1)*B]` of the epoch's
//!   global order ([`crate::train::epoch_order`]); rank `r` of `size` takes its contiguous
//!   `B / size` of it. The order is a pure function of `(seed, epoch)` and the shard a pure
//!   function of `(order, k, r, size)`, so every rank's data changes with the epoch without any
//!   per-epoch call to forget.
//! - [`validate`]: each rank evaluates a contiguous share of the validation windows; the
//!   per-horizon sums and the count are summed over the ranks, so every rank gets the same
//!   validation loss (and takes the same early-stopping decision).
//! - Only rank 0 prints, writes the log, `best.safetensors`, checkpoints, figures and the
//!   summary ([`Dist::is_root`]).

use crate::error::CliError;
use crate::train::TrainData;
use boldcast::core::collective::{check_agreement, fingerprint, shard_range};
use boldcast::core::forecast::{build_forecast_targets, per_horizon_losses};
use boldcast::core::{Collective, Model, SingleProcess};
use boldcast::data::WindowRef;
use std::sync::Arc;

pub use boldcast_comm::Transport;

/// The ranks of this run, shared by the trainer, validation and the writers.
#[derive(Clone)]
pub struct Dist(pub Arc<dyn Collective>);

impl Default for Dist {
    fn default() -> Self {
        Dist(Arc::new(SingleProcess))
    }
}

impl std::fmt::Debug for Dist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Dist({}, rank {} of {})", self.0.name(), self.rank(), self.size())
    }
}

impl Dist {
    /// The ranks of this process's launch ([`boldcast_comm::init`]).
    pub fn from_env(transport: Transport) -> Result<Dist, CliError> {
        Ok(Dist(boldcast_comm::init(transport)?))
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.0.rank()
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.0.size()
    }

    /// Rank 0: the one that prints and writes.
    pub fn is_root(&self) -> bool {
        self.0.rank() == 0
    }

    /// The collective.
    pub fn collective(&self) -> &dyn Collective {
        &*self.0
    }

    /// Checks that every rank holds the same parameters (`what` names the moment, e.g. "the
    /// initial parameters"): a different build, seed or checkpoint on one rank is an error
    /// here rather than a silently diverging run.
    pub fn check_same_params<M: Model<f32>>(&self, model: &M, what: &str) -> Result<(), CliError> {
        if self.size() <= 1 {
            return Ok(());
        }
        let fp = fingerprint(model.state().into_iter().flat_map(|t| t.data));
        Ok(check_agreement(self.collective(), what, fp)?)
    }
}

/// Passes `r` through; but an error of a run of several ranks is printed here, naming this
/// rank, and ends every rank ([`Collective::abort`], exit status 2), so that no peer waits
/// forever in a collective this rank will never join.
pub fn abort_on_error<T>(dist: &Dist, r: Result<T, CliError>) -> Result<T, CliError> {
    match r {
        Err(e) if dist.size() > 1 => {
            eprintln!("error: rank {} of {}: {e}", dist.rank(), dist.size());
            dist.0.abort(2);
            // A collective that cannot abort the others (none of the real ones): exit alone.
            std::process::exit(2)
        }
        r => r,
    }
}

/// The global-order indices that rank `dist.rank()` trains on in global batch `pos` of an
/// epoch whose order is `order`, with global batch size `batch`.
pub fn rank_batch<'a>(order: &'a [usize], pos: usize, batch: usize, dist: &Dist) -> Result<&'a [usize], CliError> {
    let global = order.get(pos * batch..(pos + 1) * batch).ok_or_else(|| {
        CliError::Msg(format!("global batch {pos} of {batch} windows is past the {} windows of the epoch", order.len()))
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
) -> Result<Vec<usize>, CliError> {
    let (order, _) = crate::train::epoch_order(n, seed, epoch, shuffle);
    let r = shard_range(batch, rank, size)?;
    Ok((0..n / batch).flat_map(|k| order[k * batch..(k + 1) * batch][r.clone()].to_vec()).collect())
}

/// The share of `n` validation windows rank `rank` of `size` evaluates: contiguous, sizes
/// differing by at most one.
pub fn val_share(n: usize, rank: usize, size: usize) -> std::ops::Range<usize> {
    (rank * n / size)..((rank + 1) * n / size)
}

/// Mean loss and per-horizon loss of `model` over `windows`, in batches of `batch`, shared
/// over the ranks: each evaluates [`val_share`] of the windows, and the sums are reduced. With
/// one rank it is [`crate::train::validate`] exactly.
pub fn validate<M: Model<f32>>(
    model: &M,
    data: &TrainData,
    windows: &[WindowRef],
    batch: usize,
    dist: &Dist,
) -> Result<(f64, Vec<f64>), CliError> {
    if dist.size() <= 1 {
        return crate::train::validate(model, data, windows, batch);
    }
    let horizons = model.config().horizons.clone();
    let mine = &windows[val_share(windows.len(), dist.rank(), dist.size())];
    // Per-horizon sums, then the window count, reduced together.
    let mut sums = vec![0.0f64; horizons.len() + 1];
    for chunk in mine.chunks(batch.max(1)) {
        let tokens = data.ds.tokens::<f32>(chunk, &data.spec)?;
        let pred = model.forward(&tokens)?;
        let target = build_forecast_targets(&tokens, &horizons)?;
        let per = per_horizon_losses(&pred, &target)?;
        for (s, p) in sums.iter_mut().zip(per) {
            *s += p * chunk.len() as f64;
        }
    }
    sums[horizons.len()] = mine.len() as f64;
    dist.collective().all_reduce_sum_f64(&mut sums)?;
    let n = sums.pop().expect("count").max(1.0);
    let per: Vec<f64> = sums.into_iter().map(|s| s / n).collect();
    let mean = per.iter().sum::<f64>() / per.len() as f64;
    Ok((mean, per))
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
            let (order, _) = crate::train::epoch_order(n, seed, epoch, true);
            assert_eq!(all, order[..full].iter().copied().collect::<HashSet<_>>());
            epochs.push(shards);
        }
        for (r, (e0, (e1, e2))) in epochs[0].iter().zip(epochs[1].iter().zip(&epochs[2])).enumerate() {
            assert_ne!(e0, e1, "rank {r} sees the same windows in epochs 0 and 1");
            assert_ne!(e1, e2, "rank {r} sees the same windows in epochs 1 and 2");
        }
        // The union of the ranks' shards of a global batch is that global batch, in order.
        let (order, _) = crate::train::epoch_order(n, seed, 1, true);
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
