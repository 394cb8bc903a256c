//! The checked launchers: one function per kernel that checks the launch shape and the
//! buffers' lengths, then runs the kernel through [`crate::exec::launch`], on the CPU shim
//! (`shim/*.cpp`, compiled by `build.rs`) or on the thread's device. The shim's C++ launcher
//! aborts on a launch CUDA would refuse; the checks here return a [`LaunchError`] first, so
//! safe code never reaches that abort (nor a device's launch failure for the same reason).
//!
//! Shim launches are serialized inside the shim (the kernels' shared memory is static
//! storage); every function here may be called from any thread.

use crate::exec::{self, Arg};
use crate::launch::{Launch, MAX_BLOCK};
use core::fmt;

/// A launch refused before it ran: the kernel and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchError {
    /// The kernel's name.
    pub kernel: &'static str,
    /// What is wrong with the launch or its buffers.
    pub why: String,
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kernel {}: {}", self.kernel, self.why)
    }
}

impl std::error::Error for LaunchError {}

/// A launch's result.
pub type Result<T> = core::result::Result<T, LaunchError>;

fn refuse<T>(kernel: &'static str, why: String) -> Result<T> {
    Err(LaunchError { kernel, why })
}

/// CUDA's limits on a launch: a block of 1 to 1024 threads (z at most 64), a grid of at least
/// one block within 2^31 - 1 by 65535 by 65535.
pub fn check_launch(kernel: &'static str, l: Launch) -> Result<()> {
    let (g, b) = (l.grid, l.block);
    if b.count() == 0 || b.count() > u64::from(MAX_BLOCK) || b.z > 64 {
        return refuse(kernel, format!("block {b:?}: must have 1 to {MAX_BLOCK} threads, z at most 64"));
    }
    if g.count() == 0 || g.x > i32::MAX as u32 || g.y > 65535 || g.z > 65535 {
        return refuse(kernel, format!("grid {g:?}: outside 1..2^31 x 65535 x 65535"));
    }
    Ok(())
}

/// A launch for a kernel indexed by `blockIdx.x` and `threadIdx.x` only: 1-D grid and block
/// (any other dimension would run each element more than once).
fn check_linear(kernel: &'static str, l: Launch) -> Result<()> {
    check_launch(kernel, l)?;
    if l.grid.y != 1 || l.grid.z != 1 || l.block.y != 1 || l.block.z != 1 {
        return refuse(kernel, format!("grid {:?}, block {:?}: must be 1-D", l.grid, l.block));
    }
    Ok(())
}

/// A launch for a kernel with a block-wide tree reduction: 1-D, a power of two.
fn check_tree(kernel: &'static str, l: Launch) -> Result<()> {
    check_launch(kernel, l)?;
    if !l.block.x.is_power_of_two() || l.block.y != 1 || l.block.z != 1 {
        return refuse(kernel, format!("block {:?}: the tree reduction needs a 1-D power of two", l.block));
    }
    Ok(())
}

/// Each buffer's length against what the kernel indexes: rows of `(name, length, wanted)`,
/// checked in order, the first mismatch refused. The one length check of every launcher.
fn check_lens(kernel: &'static str, rows: &[(&str, usize, usize)]) -> Result<()> {
    match rows.iter().find(|&&(_, len, want)| len != want) {
        Some(&(what, len, want)) => refuse(kernel, format!("{what} has {len} elements, expected {want}")),
        None => Ok(()),
    }
}

/// How every launcher ends, once it has checked the launch's shape and the sizes: the
/// buffers' lengths ([`check_lens`]), then the kernel with `args` through [`exec::launch`].
fn run(kernel: &'static str, l: Launch, lens: &[(&str, usize, usize)], args: &mut [Arg<'_>]) -> Result<()> {
    check_lens(kernel, lens)?;
    exec::launch(kernel, l, args)
}

/// [`run`] for a kernel of a 1-D grid-stride launch ([`check_linear`]).
fn run_linear(kernel: &'static str, l: Launch, lens: &[(&str, usize, usize)], args: &mut [Arg<'_>]) -> Result<()> {
    check_linear(kernel, l)?;
    run(kernel, l, lens, args)
}

/// The raw launchers, for the tests that check the shim's own refusals (which abort the
/// process). Safe code uses the checked functions of this module.
pub mod raw {
    use crate::exec::{args, launch_shim_unchecked};
    use crate::launch::Dim3;

    /// `act_silu_fwd` unchecked: the shim itself refuses (aborts) a launch CUDA would refuse.
    ///
    /// # Safety
    /// `x` and `y` must hold `n` elements (the launch shape is the caller's to get wrong).
    pub unsafe fn act_silu_fwd(grid: Dim3, block: Dim3, x: &[f32], y: &mut [f32], n: i64) {
        // SAFETY: by the caller's contract.
        unsafe { launch_shim_unchecked("act_silu_fwd", grid, block, &mut args![x, y, n]) }
            .expect("the signature matches");
    }

    /// A kernel whose thread 0 skips the barrier the others wait at: the shim aborts.
    ///
    /// # Safety
    /// `out` must hold the block's thread count of elements.
    pub unsafe fn selftest_divergent(grid: Dim3, block: Dim3, out: &mut [f32]) {
        // SAFETY: by the caller's contract.
        unsafe { launch_shim_unchecked("selftest_divergent", grid, block, &mut args![out]) }
            .expect("the signature matches");
    }
}

mod act;
mod autocast;
mod knn;
mod layernorm;
mod layout;
mod loss;
mod mamba1;
mod mamba2;
mod optim;
mod scan;
mod selftest;

pub use act::*;
pub use autocast::*;
pub use knn::*;
pub use layernorm::*;
pub use layout::*;
pub use loss::*;
pub use mamba1::*;
pub use mamba2::*;
pub use optim::*;
pub use scan::{ScanFinal, ScanIn, ScanScratch, SCAN_MAX_N, SCAN_SHARED};
pub use selftest::*;
