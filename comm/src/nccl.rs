//! [`NcclCollective`]: the gradient all-reduce of the CUDA backend on the GPUs, with NCCL
//! (cudarc's `nccl` module, the cudarc 0.9 that dfdx 0.13 builds on).
//!
//! MPI starts the ranks (one per GPU, `mpirun -np <GPUs>` or `srun --gpus-per-task=1`); rank
//! 0 creates NCCL's unique id and MPI broadcasts it; each rank then joins the NCCL
//! communicator on the GPU of its node-local rank. Sums run on the device (`ncclAllReduce`,
//! identical on every rank); broadcast, barrier and abort stay with MPI. A buffer the
//! [`Collective`] interface is given in CUDA managed memory (boldcast-cuda's flat gradient
//! buffer on a device) is summed where it is, in place; any other (host) buffer is copied to
//! the GPU and back. A backend holding cudarc buffers can call
//! [`NcclCollective::all_reduce_device`] on them directly.

use crate::mpi::MpiCollective;
use boldcast_core::{Collective, Error};
use cudarc::driver::{CudaDevice, CudaSlice};
use cudarc::nccl::safe::{Comm, Id, NcclType, ReduceOp};
use std::sync::Arc;

/// One GPU rank of an NCCL communicator, with the MPI rank that started it.
pub struct NcclCollective {
    comm: Comm,
    dev: Arc<CudaDevice>,
    mpi: MpiCollective,
}

fn cuda_err(what: &str) -> impl FnOnce(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Error::Backend(format!("CUDA, {what}: {e:?}"))
}

fn nccl_err(what: &str) -> impl FnOnce(cudarc::nccl::result::NcclError) -> Error + '_ {
    move |e| Error::Backend(format!("NCCL, {what}: {e:?}"))
}

impl NcclCollective {
    /// Joins the NCCL communicator of the MPI world on GPU `ordinal` (the node-local rank).
    pub fn init(mpi: MpiCollective, ordinal: usize) -> Result<Self, Error> {
        let dev = CudaDevice::new(ordinal).map_err(cuda_err("opening the GPU of this rank"))?;
        let mut bytes = [0u8; 128];
        if mpi.rank() == 0 {
            let id = Id::new().map_err(nccl_err("creating the unique id"))?;
            for (b, c) in bytes.iter_mut().zip(id.internal()) {
                *b = *c as u8;
            }
        }
        mpi.broadcast(&mut bytes, 0)?;
        let id = Id::uninit(bytes.map(|b| b as core::ffi::c_char));
        let comm =
            Comm::from_rank(dev.clone(), mpi.rank(), mpi.size(), id).map_err(nccl_err("joining the communicator"))?;
        Ok(Self { comm, dev, mpi })
    }

    /// The GPU of this rank.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.dev
    }

    /// Sums `buf` over the ranks in place on the device.
    pub fn all_reduce_device<T: NcclType + cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
        &self,
        buf: &mut CudaSlice<T>,
    ) -> Result<(), Error> {
        let send = buf.clone();
        self.comm.all_reduce(&send, buf, &ReduceOp::Sum).map_err(nccl_err("all-reduce"))?;
        Ok(())
    }

    /// Sums `buf` over the ranks in place: on the device where it is when it is CUDA managed
    /// memory, else through a device copy.
    fn sum<T: NcclType + cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits + Unpin>(
        &self,
        buf: &mut [T],
    ) -> Result<(), Error> {
        if buf.is_empty() || !is_managed(buf.as_ptr() as u64) {
            return self.host_sum(buf);
        }
        // SAFETY: `buf` is managed memory of `buf.len()` elements, alive and exclusively
        // borrowed for the call; the view is leaked below, so it never frees that memory.
        let mut view = unsafe { self.dev.upgrade_device_ptr::<T>(buf.as_ptr() as u64, buf.len()) };
        let r = self.all_reduce_device(&mut view);
        view.leak();
        r?;
        // The host reads `buf` next: wait for the sum.
        self.dev.synchronize().map_err(cuda_err("waiting for the all-reduce"))
    }

    fn host_sum<T: NcclType + cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits + Unpin>(
        &self,
        buf: &mut [T],
    ) -> Result<(), Error> {
        let send = self.dev.htod_sync_copy(buf).map_err(cuda_err("copying to the GPU"))?;
        let mut recv = self.dev.alloc_zeros::<T>(buf.len()).map_err(cuda_err("allocating"))?;
        self.comm.all_reduce(&send, &mut recv, &ReduceOp::Sum).map_err(nccl_err("all-reduce"))?;
        self.dev.dtoh_sync_copy_into(&recv, buf).map_err(cuda_err("copying from the GPU"))
    }
}

/// Whether `addr` is in CUDA managed memory (a host pointer the driver does not know is not).
fn is_managed(addr: u64) -> bool {
    use cudarc::driver::sys;
    let mut v: u32 = 0;
    // SAFETY: the driver writes one unsigned int for this attribute; an address it does not
    // know is an error, not a fault.
    let r = unsafe {
        sys::cuPointerGetAttribute(
            &mut v as *mut u32 as *mut core::ffi::c_void,
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
            addr,
        )
    };
    r == sys::CUresult::CUDA_SUCCESS && v != 0
}

impl Collective for NcclCollective {
    fn name(&self) -> &'static str {
        "nccl"
    }
    fn rank(&self) -> usize {
        self.mpi.rank()
    }
    fn size(&self) -> usize {
        self.mpi.size()
    }
    fn all_reduce_sum_f32(&self, buf: &mut [f32]) -> Result<(), Error> {
        self.sum(buf)
    }
    fn all_reduce_sum_f64(&self, buf: &mut [f64]) -> Result<(), Error> {
        self.sum(buf)
    }
    fn broadcast(&self, buf: &mut [u8], root: usize) -> Result<(), Error> {
        self.mpi.broadcast(buf, root)
    }
    fn barrier(&self) -> Result<(), Error> {
        self.mpi.barrier()
    }
    fn abort(&self, code: i32) {
        self.mpi.abort(code)
    }
}
