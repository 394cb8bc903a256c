//! Data-parallel training: the [`Collective`] that ties the processes ("ranks") of one run
//! together, its single-process implementation [`SingleProcess`], and the pure rules of
//! data-parallel training that every implementation shares.
//!
//! # The rules (every rank keeps them, so the ranks never drift apart)
//!
//! - Every rank builds the same model from the same seed.
//! - The global batch is `train.batch_size` windows; the global batch `k` of an epoch is the
//!   `k`-th run of `batch_size` windows of the epoch's global order. Rank `r` of `size` takes
//!   the contiguous slice [`shard_range`]`(batch_size, r, size)` of it, so the shards of one
//!   global batch are disjoint and cover it, and they change with the epoch's order.
//!   `batch_size` must be divisible by `size` (a [`Error::Config`] otherwise).
//! - After the backward, the loss and the gradients are averaged over the ranks
//!   ([`Collective::all_reduce_sum_f64`], [`all_reduce_grads`]); clipping then uses the norm
//!   of the averaged gradient and every rank applies the identical optimizer step.
//!
//! A backend takes part by implementing [`DataParallel`] (its gradients as one flat host
//! buffer); the element types a collective can sum are those of [`Reduce`] (`f32`, `f64`).
//!
//! The loss of MODEL.md is a mean over the `B * T_valid * P * H * D` elements of the batch,
//! and every rank's shard has the same `B / size` windows, so the mean over ranks of the
//! shards' losses is the global batch's loss, and likewise for the gradients (the gradient
//! of a mean is the mean of the gradients); only the order of the floating-point additions
//! differs from one process.
//!
//! # Implementing a collective
//!
//! A [`Collective`] works on host buffers: [`Collective::all_reduce_sum_f32`] and
//! [`Collective::all_reduce_sum_f64`] replace the buffer of every rank with the element-wise
//! sum over ranks, **identical on every rank** (an implementation whose reduction could round
//! differently on different ranks must reduce to one rank and broadcast). A failure of a peer
//! is an [`Error::Backend`] naming the operation, never a silent wrong value.

use crate::elem::Elem;
use crate::error::{Error, Result};
use crate::model::Model;
use alloc::format;
use alloc::vec::Vec;
use core::ops::Range;

/// The processes of one data-parallel run: rank, size, and the two collective operations
/// training needs (all-reduce of a buffer, broadcast from one rank).
pub trait Collective {
    /// What carries the messages: `"single"`, `"mpi"`, `"nccl"`.
    fn name(&self) -> &'static str;

    /// This process's rank, `0..size`. Rank 0 is the one that prints and writes files.
    fn rank(&self) -> usize;

    /// The number of processes.
    fn size(&self) -> usize;

    /// Replaces `buf` on every rank with the element-wise sum over the ranks' `buf`s (of equal
    /// length), identical on every rank.
    fn all_reduce_sum_f32(&self, buf: &mut [f32]) -> Result<()>;

    /// As [`Collective::all_reduce_sum_f32`], in `f64`.
    fn all_reduce_sum_f64(&self, buf: &mut [f64]) -> Result<()>;

    /// Copies rank `root`'s `buf` into every other rank's `buf` (of equal length).
    fn broadcast(&self, buf: &mut [u8], root: usize) -> Result<()>;

    /// Returns once every rank has called it.
    fn barrier(&self) -> Result<()>;

    /// Ends every rank of the run with exit status `code` (after this rank printed its error),
    /// so that no peer waits forever in a collective this rank will never join. The default,
    /// for a single process, does nothing and lets the caller exit.
    fn abort(&self, code: i32) {
        let _ = code;
    }

    /// True on rank 0.
    fn is_root(&self) -> bool {
        self.rank() == 0
    }
}

/// The collective of a run of one process: rank 0 of 1, every operation a no-op.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SingleProcess;

impl Collective for SingleProcess {
    fn name(&self) -> &'static str {
        "single"
    }
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn all_reduce_sum_f32(&self, _: &mut [f32]) -> Result<()> {
        Ok(())
    }
    fn all_reduce_sum_f64(&self, _: &mut [f64]) -> Result<()> {
        Ok(())
    }
    fn broadcast(&self, _: &mut [u8], root: usize) -> Result<()> {
        if root != 0 {
            return Err(Error::Backend(format!("broadcast from rank {root} in a run of one process")));
        }
        Ok(())
    }
    fn barrier(&self) -> Result<()> {
        Ok(())
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// An element type a [`Collective`] can sum: `f32` and `f64`, the two it has operations for
/// (sealed). The type dispatch of data-parallel training lives here, on the collective's
/// side; [`Elem`] knows nothing of collectives.
pub trait Reduce: Elem + sealed::Sealed {
    /// Sums `buf` element-wise over the ranks of `c` in place
    /// ([`Collective::all_reduce_sum_f32`] or [`Collective::all_reduce_sum_f64`]), identical
    /// on every rank.
    fn all_reduce_sum(c: &dyn Collective, buf: &mut [Self]) -> Result<()>;
}

impl Reduce for f32 {
    fn all_reduce_sum(c: &dyn Collective, buf: &mut [f32]) -> Result<()> {
        c.all_reduce_sum_f32(buf)
    }
}

impl Reduce for f64 {
    fn all_reduce_sum(c: &dyn Collective, buf: &mut [f64]) -> Result<()> {
        c.all_reduce_sum_f64(buf)
    }
}

/// A [`Model`] that can train data-parallel: its gradients as one flat host buffer, which
/// [`all_reduce_grads`] averages over the ranks between [`Model::loss_and_grads`] and
/// [`Model::grad_sq_norm`]. [`crate::Trainer::with_collective`] requires it.
///
/// The layout is every gradient entry in state-dict order: the tensors of [`Model::grads`],
/// each row-major, one after the other.
pub trait DataParallel<E: Elem>: Model<E> {
    /// Every gradient entry in state-dict order into `flat`, which is cleared first. The
    /// default goes through [`Model::grads`]; a backend may override it to skip that copy.
    fn grads_to_flat(&self, flat: &mut Vec<E>) {
        flat.clear();
        for t in self.grads() {
            flat.extend_from_slice(&t.data);
        }
    }

    /// Overwrites every gradient entry from `flat`, laid out as
    /// [`DataParallel::grads_to_flat`] lays it out (a wrong length is an [`Error::Shape`]
    /// naming the gradients and changes nothing).
    fn grads_from_flat(&mut self, flat: &[E]) -> Result<()>;

    /// Averages the gradients over the ranks of `c` in place (a no-op for one process). The
    /// default is [`all_reduce_grads_on_host`], through `scratch`; a backend whose gradients
    /// live on a device overrides it to hand the collective a device buffer (NCCL then sums it
    /// where it is).
    fn all_reduce_grads(&mut self, c: &dyn Collective, scratch: &mut Vec<E>) -> Result<()>
    where
        E: Reduce,
    {
        all_reduce_grads_on_host(self, c, scratch)
    }
}

/// Every method forwarded to `M` (as [`Model`] is for `&mut M`).
impl<E: Elem, M: DataParallel<E> + ?Sized> DataParallel<E> for &mut M {
    fn grads_to_flat(&self, flat: &mut Vec<E>) {
        (**self).grads_to_flat(flat)
    }
    fn grads_from_flat(&mut self, flat: &[E]) -> Result<()> {
        (**self).grads_from_flat(flat)
    }
    fn all_reduce_grads(&mut self, c: &dyn Collective, scratch: &mut Vec<E>) -> Result<()>
    where
        E: Reduce,
    {
        (**self).all_reduce_grads(c, scratch)
    }
}

/// The slice of a global batch of `batch` windows that rank `rank` of `size` trains on: the
/// contiguous `rank * batch / size .. (rank + 1) * batch / size`. The error names
/// `train.batch_size` when `batch` is not a positive multiple of `size`.
pub fn shard_range(batch: usize, rank: usize, size: usize) -> Result<Range<usize>> {
    if size == 0 || rank >= size {
        return Err(Error::config(
            "rank",
            format!("{rank} of {size}"),
            "the rank must be below the number of processes",
        ));
    }
    if batch == 0 || !batch.is_multiple_of(size) {
        return Err(Error::config(
            "train.batch_size",
            batch,
            format!(
                "the global batch must be a positive multiple of the number of processes ({size}): each rank trains on \
                 batch_size / {size} windows of it"
            ),
        ));
    }
    let per = batch / size;
    Ok(rank * per..(rank + 1) * per)
}

/// Averages `buf` over the ranks in place: sum ([`Reduce::all_reduce_sum`]), then divide by
/// the number of ranks. A no-op for one process.
pub fn all_reduce_mean<E: Reduce>(c: &dyn Collective, buf: &mut [E]) -> Result<()> {
    if c.size() <= 1 {
        return Ok(());
    }
    E::all_reduce_sum(c, buf)?;
    let inv = E::of(1.0 / c.size() as f64);
    for v in buf.iter_mut() {
        *v *= inv;
    }
    Ok(())
}

/// Averages the model's gradients over the ranks in place: [`DataParallel::all_reduce_grads`]
/// (by default [`all_reduce_grads_on_host`]). A no-op for one process.
pub fn all_reduce_grads<E: Reduce, M: DataParallel<E> + ?Sized>(
    model: &mut M,
    c: &dyn Collective,
    scratch: &mut Vec<E>,
) -> Result<()> {
    model.all_reduce_grads(c, scratch)
}

/// Averages the model's gradients over the ranks in place through one flat host buffer
/// (`scratch`, reused between calls): [`DataParallel::grads_to_flat`], [`all_reduce_mean`],
/// [`DataParallel::grads_from_flat`]. A no-op for one process.
pub fn all_reduce_grads_on_host<E: Reduce, M: DataParallel<E> + ?Sized>(
    model: &mut M,
    c: &dyn Collective,
    scratch: &mut Vec<E>,
) -> Result<()> {
    if c.size() <= 1 {
        return Ok(());
    }
    model.grads_to_flat(scratch);
    all_reduce_mean(c, scratch)?;
    model.grads_from_flat(scratch)
}

/// Broadcasts a byte string of any length from `root` (its length first, then its bytes);
/// the other ranks' `buf` is replaced.
pub fn broadcast_bytes(c: &dyn Collective, buf: &mut Vec<u8>, root: usize) -> Result<()> {
    if c.size() <= 1 {
        return Ok(());
    }
    let mut len = (buf.len() as u64).to_le_bytes();
    c.broadcast(&mut len, root)?;
    let n = u64::from_le_bytes(len) as usize;
    buf.resize(n, 0);
    c.broadcast(buf, root)
}

/// Checks that every rank holds the same `fingerprint` of `what` (parameters, a checkpoint):
/// rank 0's is broadcast and each rank compares its own. The error, on the ranks that differ,
/// names `what`, the rank and both values.
pub fn check_agreement(c: &dyn Collective, what: &str, fingerprint: u64) -> Result<()> {
    if c.size() <= 1 {
        return Ok(());
    }
    let mut root = fingerprint.to_le_bytes();
    c.broadcast(&mut root, 0)?;
    let root = u64::from_le_bytes(root);
    if root != fingerprint {
        return Err(Error::Backend(format!(
            "rank {} of {}: {what} differs from rank 0's (fingerprint {fingerprint:016x}, rank 0 {root:016x})",
            c.rank(),
            c.size()
        )));
    }
    Ok(())
}

/// FNV-1a 64 over the bit patterns of `values` (in order): the fingerprint of a model state
/// for [`check_agreement`].
pub fn fingerprint<E: Elem>(values: impl IntoIterator<Item = E>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in values {
        for b in v.f64().to_bits().to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn shards_are_disjoint_contiguous_and_cover_the_batch() {
        for size in 1..=8 {
            let batch = 3 * size;
            let mut seen = vec![0usize; batch];
            for r in 0..size {
                let s = shard_range(batch, r, size).unwrap();
                assert_eq!(s.len(), 3);
                assert_eq!(s.start, 3 * r);
                for i in s {
                    seen[i] += 1;
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "size {size}: {seen:?}");
        }
    }

    #[test]
    fn indivisible_batch_is_a_config_error_naming_it() {
        let e = shard_range(6, 0, 4).unwrap_err();
        let text = alloc::string::ToString::to_string(&e);
        assert!(text.contains("train.batch_size = 6"), "{text}");
        assert!(text.contains("(4)"), "{text}");
        assert!(shard_range(0, 0, 1).is_err());
        assert!(shard_range(4, 2, 2).is_err());
    }

    #[test]
    fn single_process_is_a_no_op() {
        let c = SingleProcess;
        let mut v = vec![1.5f32, -2.0];
        all_reduce_mean(&c, &mut v).unwrap();
        assert_eq!(v, [1.5, -2.0]);
        assert!(c.is_root());
        assert!(c.broadcast(&mut [0u8], 1).is_err());
        check_agreement(&c, "x", 7).unwrap();
    }

    #[test]
    fn fingerprint_sees_one_bit() {
        let a = fingerprint([1.0f32, 2.0, 3.0]);
        assert_eq!(a, fingerprint([1.0f32, 2.0, 3.0]));
        assert_ne!(a, fingerprint([1.0f32, 2.0, f32::from_bits(3.0f32.to_bits() + 1)]));
        assert_ne!(a, fingerprint([2.0f32, 1.0, 3.0]));
    }
}
