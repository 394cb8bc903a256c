//! Data-parallel `train` and `bench`: the ranks a launcher started (`mpirun`, `srun`). The
//! rules (which windows each rank trains on, shared validation, rank 0 writes) are the train
//! library's ([`boldcast_train::order`], [`boldcast_train::validate`], [`Dist`]); the
//! transports are in `boldcast-comm`. This module turns the launch into a [`Dist`] and ends
//! every rank on an error.

use crate::error::CliError;
pub use boldcast_comm::Transport;
pub use boldcast_train::Dist;

/// The ranks of this process's launch ([`boldcast_comm::init`]): one rank when no launcher
/// started this process; MPI ranks with the `mpi` feature; a clear error under a launcher of
/// several ranks without it.
pub fn from_env(transport: Transport) -> Result<Dist, CliError> {
    Ok(Dist(boldcast_comm::init(transport)?))
}

/// Passes `r` through; but an error of a run of several ranks is printed here, naming this
/// rank, and ends every rank ([`boldcast::core::Collective::abort`], exit status 2), so that no peer waits
/// forever in a collective this rank will never join.
pub fn abort_on_error<T>(dist: &Dist, r: Result<T, CliError>) -> Result<T, CliError> {
    match r {
        Err(e) if dist.size() > 1 => {
            crate::errln!("error: rank {} of {}: {e}", dist.rank(), dist.size());
            dist.0.abort(2);
            // A collective that cannot abort the others (none of the real ones): exit alone.
            std::process::exit(2)
        }
        r => r,
    }
}
