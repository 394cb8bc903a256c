//! [`MpiCollective`]: the ranks of `mpirun`/`srun` over MPI (rsmpi, the system's MPI).
//!
//! All-reduce is `MPI_Allreduce` with `MPI_SUM` (every rank gets the same bits: Open MPI's
//! algorithms combine each pair of values once and copy the result); broadcast is
//! `MPI_Bcast`. MPI's default error handler ends the job on a communication failure, and
//! Open MPI's `mpirun` ends every rank when one dies, naming it. [`Collective::abort`] is
//! `MPI_Abort`, which an erroring rank calls so that its peers do not wait for it forever.

use boldcast_core::{Collective, Error};
use mpi::collective::SystemOperation;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Equivalence, Root};
use std::cell::RefCell;

/// This process's rank of the MPI world. Holds MPI initialized; dropping it finalizes MPI.
pub struct MpiCollective {
    world: SimpleCommunicator,
    rank: usize,
    size: usize,
    scratch32: RefCell<Vec<f32>>,
    scratch64: RefCell<Vec<f64>>,
    // Dropped last: finalizes MPI.
    _universe: Universe,
}

impl MpiCollective {
    /// Initializes MPI (once per process) and joins its world.
    pub fn init() -> Result<Self, Error> {
        let universe =
            mpi::initialize().ok_or_else(|| Error::Backend("MPI was already initialized in this process".into()))?;
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        Ok(Self {
            world,
            rank,
            size,
            scratch32: RefCell::new(Vec::new()),
            scratch64: RefCell::new(Vec::new()),
            _universe: universe,
        })
    }

    /// The MPI world (for callers that need more than the [`Collective`] operations).
    pub fn world(&self) -> &SimpleCommunicator {
        &self.world
    }

    /// Sums `buf` over the ranks in place; `send` is the scratch copy MPI reads from (a send
    /// buffer may not alias the receive buffer).
    fn sum_into<T: Equivalence + Copy>(&self, send: &mut Vec<T>, buf: &mut [T]) {
        send.clear();
        send.extend_from_slice(buf);
        self.world.all_reduce_into(&send[..], buf, SystemOperation::sum());
    }
}

impl Collective for MpiCollective {
    fn name(&self) -> &'static str {
        "mpi"
    }
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn all_reduce_sum_f32(&self, buf: &mut [f32]) -> Result<(), Error> {
        self.sum_into(&mut self.scratch32.borrow_mut(), buf);
        Ok(())
    }
    fn all_reduce_sum_f64(&self, buf: &mut [f64]) -> Result<(), Error> {
        self.sum_into(&mut self.scratch64.borrow_mut(), buf);
        Ok(())
    }
    fn broadcast(&self, buf: &mut [u8], root: usize) -> Result<(), Error> {
        if root >= self.size {
            return Err(Error::Backend(format!("broadcast from rank {root} of {}", self.size)));
        }
        self.world.process_at_rank(root as i32).broadcast_into(buf);
        Ok(())
    }
    fn barrier(&self) -> Result<(), Error> {
        self.world.barrier();
        Ok(())
    }
    fn abort(&self, code: i32) {
        self.world.abort(code)
    }
}
