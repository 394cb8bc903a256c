//! The safe Rust side of the CPU shim: one function per kernel that checks the launch shape
//! and the buffers' lengths, then calls the kernel's `shim_launch_<kernel>` (compiled by
//! `build.rs` from `shim/*.cpp`). The C++ launcher aborts on a launch CUDA would refuse; the
//! checks here return a [`LaunchError`] first, so safe code never reaches that abort.
//!
//! Launches are serialized inside the shim (the kernels' shared memory is static storage);
//! every function here may be called from any thread.

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

fn check_len(kernel: &'static str, what: &str, len: usize, want: usize) -> Result<()> {
    if len != want {
        return refuse(kernel, format!("{what} has {len} elements, expected {want}"));
    }
    Ok(())
}

mod ffi {
    use crate::launch::Dim3;
    extern "C" {
        pub fn shim_launch_act_softplus_fwd(g: Dim3, b: Dim3, v: *const f32, y: *mut f32, n: i64);
        pub fn shim_launch_act_softplus_bwd(g: Dim3, b: Dim3, v: *const f32, gy: *const f32, gv: *mut f32, n: i64);
        pub fn shim_launch_act_silu_fwd(g: Dim3, b: Dim3, x: *const f32, y: *mut f32, n: i64);
        pub fn shim_launch_act_silu_bwd(g: Dim3, b: Dim3, x: *const f32, gy: *const f32, gx: *mut f32, n: i64);
        pub fn shim_launch_autocast_round_bf16(g: Dim3, b: Dim3, x: *const f32, y: *mut f32, n: i64);
        pub fn shim_launch_act_gate_fwd(g: Dim3, b: Dim3, y: *const f32, z: *const f32, out: *mut f32, n: i64);
        #[allow(clippy::too_many_arguments)]
        pub fn shim_launch_act_gate_bwd(
            g: Dim3,
            b: Dim3,
            y: *const f32,
            z: *const f32,
            gr: *const f32,
            gy: *mut f32,
            gz: *mut f32,
            n: i64,
        );
        pub fn shim_launch_layernorm_fwd(
            g: Dim3,
            b: Dim3,
            x: *const f32,
            w: *const f32,
            bias: *const f32,
            y: *mut f32,
            m: i32,
        );
        #[allow(clippy::too_many_arguments)]
        pub fn shim_launch_layernorm_bwd_x(
            g: Dim3,
            b: Dim3,
            x: *const f32,
            w: *const f32,
            gy: *const f32,
            gx: *mut f32,
            stats: *mut f32,
            m: i32,
        );
        #[allow(clippy::too_many_arguments)]
        pub fn shim_launch_layernorm_bwd_params_partial(
            g: Dim3,
            b: Dim3,
            x: *const f32,
            gy: *const f32,
            stats: *const f32,
            part: *mut f32,
            rows: i64,
            m: i32,
            rows_per_chunk: i32,
        );
        pub fn shim_launch_layernorm_bwd_params_final(
            g: Dim3,
            b: Dim3,
            part: *const f32,
            gw: *mut f32,
            gb: *mut f32,
            chunks: i32,
            m: i32,
        );
        #[allow(clippy::too_many_arguments)]
        pub fn shim_launch_optim_adam_step(
            g: Dim3,
            b: Dim3,
            p: *mut f32,
            gr: *const f32,
            m: *mut f32,
            v: *mut f32,
            n: i64,
            coupled: f32,
            decoupled: f32,
            b1: f32,
            b2: f32,
            ob1: f32,
            ob2: f32,
            step: f32,
            sbc2: f32,
            eps: f32,
        );
        pub fn shim_launch_optim_sumsq_partial(g: Dim3, b: Dim3, gr: *const f32, partial: *mut f64, n: i64, chunk: i64);
        pub fn shim_launch_optim_sumsq_final(g: Dim3, b: Dim3, partial: *const f64, out: *mut f64, parts: i32);
        pub fn shim_launch_optim_clip_factor(g: Dim3, b: Dim3, norm: *const f64, max_norm: f64, factor: *mut f64);
        pub fn shim_launch_optim_scale(g: Dim3, b: Dim3, gr: *mut f32, factor: *const f64, n: i64);
        pub fn shim_launch_selftest_barrier_probe(g: Dim3, b: Dim3, out: *mut f32, slow: u32);
        pub fn shim_launch_selftest_tree_sum(g: Dim3, b: Dim3, x: *const f32, out: *mut f32);
        pub fn shim_launch_selftest_divergent(g: Dim3, b: Dim3, out: *mut f32);
        #[allow(clippy::too_many_arguments)]
        pub fn shim_launch_knn_attend_fwd(
            g: Dim3,
            b: Dim3,
            qkv: *const f32,
            adj: *const i32,
            w: *mut f32,
            att: *mut f32,
            parcels: i32,
            m: i32,
            k: i32,
            sc: f32,
        );
        #[allow(clippy::too_many_arguments)]
        pub fn shim_launch_knn_attend_bwd_q(
            g: Dim3,
            b: Dim3,
            qkv: *const f32,
            adj: *const i32,
            w: *const f32,
            g_att: *const f32,
            gs: *mut f32,
            g_qkv: *mut f32,
            parcels: i32,
            m: i32,
            k: i32,
            sc: f32,
        );
        #[allow(clippy::too_many_arguments)]
        pub fn shim_launch_knn_attend_bwd_kv(
            g: Dim3,
            b: Dim3,
            qkv: *const f32,
            rev_start: *const i32,
            rev: *const i32,
            w: *const f32,
            g_att: *const f32,
            gs: *const f32,
            g_qkv: *mut f32,
            rows: i64,
            parcels: i32,
            m: i32,
            k: i32,
        );
        #[allow(clippy::too_many_arguments)]
        pub fn shim_launch_loss_mse_partial(
            g: Dim3,
            b: Dim3,
            pred: *const f32,
            tokens: *const f32,
            hz: *const i32,
            partial: *mut f64,
            n: i64,
            chunk: i64,
            t: i32,
            tv: i32,
            p: i32,
            nh: i32,
            d: i32,
        );
        pub fn shim_launch_loss_mse_final(g: Dim3, b: Dim3, partial: *const f64, out: *mut f64, parts: i32, n: f64);
        #[allow(clippy::too_many_arguments)]
        pub fn shim_launch_loss_mse_bwd(
            g: Dim3,
            b: Dim3,
            pred: *const f32,
            tokens: *const f32,
            hz: *const i32,
            gr: *mut f32,
            total: i64,
            t: i32,
            tv: i32,
            p: i32,
            nh: i32,
            d: i32,
            scale: f32,
        );
    }
}

/// The raw launchers, for the tests that check the shim's own refusals (which abort the
/// process). Safe code uses the checked functions of this module.
pub mod raw {
    use crate::launch::Dim3;

    /// `act_silu_fwd` unchecked: the shim itself refuses (aborts) a launch CUDA would refuse.
    ///
    /// # Safety
    /// `x` and `y` must hold `n` elements.
    pub unsafe fn act_silu_fwd(grid: Dim3, block: Dim3, x: *const f32, y: *mut f32, n: i64) {
        unsafe { super::ffi::shim_launch_act_silu_fwd(grid, block, x, y, n) }
    }

    /// A kernel whose thread 0 skips the barrier the others wait at: the shim aborts.
    ///
    /// # Safety
    /// `out` must hold the block's thread count of elements.
    pub unsafe fn selftest_divergent(grid: Dim3, block: Dim3, out: *mut f32) {
        unsafe { super::ffi::shim_launch_selftest_divergent(grid, block, out) }
    }
}

mod act;
mod autocast;
mod knn;
mod layernorm;
mod loss;
mod mamba1;
mod mamba2;
mod optim;
mod selftest;

pub use act::*;
pub use autocast::*;
pub use knn::*;
pub use layernorm::*;
pub use loss::*;
pub use mamba1::*;
pub use mamba2::*;
pub use optim::*;
pub use selftest::*;
