//! `boldcast-comm`: the [`Collective`]s of boldcast's data-parallel training (the trait and
//! its rules are in [`boldcast_core::collective`]).
//!
//! - [`launch`]: which launcher started this process and how many ranks it started
//!   (`mpirun`/`mpiexec` of Open MPI, MPICH's and Intel MPI's PMI, Slurm's `srun`);
//! - [`init`]: the collective a process should use: [`SingleProcess`] when it was started
//!   alone, MPI (feature `mpi`) when a launcher started several ranks, and a clear error
//!   naming the launcher's variable when it was but this build has no `mpi` feature;
//! - [`threads`]: ranks as threads of one process ([`threads::ThreadGroup`]), for tests and
//!   for checking the data-parallel arithmetic without MPI;
//! - `mpi` (feature `mpi`): `mpi::MpiCollective`, over rsmpi and the system's MPI;
//! - `nccl` (feature `nccl`): `nccl::NcclCollective`, all-reduce on the GPU with NCCL
//!   (cudarc's `nccl` module), MPI carrying the ranks and NCCL's unique id.
#![deny(missing_docs)]

pub mod launch;
#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(feature = "nccl")]
pub mod nccl;
pub mod threads;

pub use boldcast_core::collective::{Collective, SingleProcess};
use boldcast_core::Error;
pub use launch::{detect_launch, Launch};
use std::sync::Arc;

/// Which collective [`init`] should build for a run of several ranks.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    /// MPI on host buffers (CPU backends).
    Mpi,
    /// NCCL on the GPU of each rank (the CUDA backend), MPI for the rest.
    Nccl,
}

/// True when this build can train across processes (the `mpi` feature).
pub const HAS_MPI: bool = cfg!(feature = "mpi");

/// True when this build has the NCCL path (the `nccl` feature).
pub const HAS_NCCL: bool = cfg!(feature = "nccl");

/// The collective of this process: [`SingleProcess`] unless a launcher started more than one
/// rank ([`detect_launch`]); then MPI (or NCCL with [`Transport::Nccl`]). A multi-rank launch
/// with a build that lacks the feature is an error naming the launcher's variable and the
/// feature to build with, never a silent single-process run per rank.
pub fn init(transport: Transport) -> Result<Arc<dyn Collective>, Error> {
    let launch = detect_launch();
    match launch {
        Some(l) if l.size > 1 => multi(l, transport),
        _ => Ok(Arc::new(SingleProcess)),
    }
}

// The collectives are shared (trainer, validation, writers) on the one thread that initialized
// MPI: `Arc` for the `Arc<dyn Collective>` of the API, never sent to another thread.
#[cfg(feature = "mpi")]
#[allow(clippy::arc_with_non_send_sync)]
fn multi(l: Launch, transport: Transport) -> Result<Arc<dyn Collective>, Error> {
    let mpi = mpi::MpiCollective::init()?;
    if mpi.size() != l.size {
        return Err(Error::Backend(format!(
            "{}={} but MPI started {} ranks: this binary's MPI is not the launcher's",
            l.var,
            l.size,
            mpi.size()
        )));
    }
    match transport {
        Transport::Mpi => Ok(Arc::new(mpi)),
        Transport::Nccl => nccl_of(mpi, &l),
    }
}

/// NCCL on CUDA device 0 of each rank, the device the dfdx backend uses: each rank must see
/// its own GPU as device 0 (`srun --gpus-per-task=1`, or `CUDA_VISIBLE_DEVICES` set from the
/// node-local rank under `mpirun`; NCCL refuses two ranks on one GPU).
#[cfg(feature = "nccl")]
#[allow(clippy::arc_with_non_send_sync)]
fn nccl_of(mpi: mpi::MpiCollective, _: &Launch) -> Result<Arc<dyn Collective>, Error> {
    Ok(Arc::new(nccl::NcclCollective::init(mpi, 0)?))
}

#[cfg(all(feature = "mpi", not(feature = "nccl")))]
fn nccl_of(_: mpi::MpiCollective, l: &Launch) -> Result<Arc<dyn Collective>, Error> {
    Err(Error::Backend(format!(
        "started as {} ranks ({}={}) on the CUDA backend, but this build has no `nccl` feature: rebuild with \
         `--features nccl` (needs the CUDA toolkit and NCCL)",
        l.size, l.var, l.size
    )))
}

#[cfg(not(feature = "mpi"))]
fn multi(l: Launch, transport: Transport) -> Result<Arc<dyn Collective>, Error> {
    let feature = if transport == Transport::Nccl { "nccl" } else { "mpi" };
    Err(Error::Backend(format!(
        "started as one of {} ranks ({}={}), but this bc-cli was built without the `{feature}` feature, so the \
         ranks cannot talk to each other: rebuild with `cargo build --release -p bc-cli --features {feature}` \
         (needs libopenmpi-dev and libclang-dev), or run one process without the launcher",
        l.size, l.var, l.size
    )))
}
