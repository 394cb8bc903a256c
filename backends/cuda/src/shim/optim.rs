//! The checked launchers of `kernels/optim.cu`.

use super::{check_len, check_linear, check_tree, ffi, refuse, Result};
use crate::launch::{Dim3, Launch};

/// The f32 scalars of one Adam step on one tensor, as `core::optim::Adam::update` rounds them
/// (see [`crate::optim::adam_args`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamArgs {
    /// `wd` under coupled L2, else 0.
    pub coupled: f32,
    /// `lr wd` under AdamW, else 0.
    pub decoupled: f32,
    /// `beta1`.
    pub b1: f32,
    /// `beta2`.
    pub b2: f32,
    /// `1 - beta1` (subtracted in f64).
    pub ob1: f32,
    /// `1 - beta2` (subtracted in f64).
    pub ob2: f32,
    /// `lr / (1 - beta1^t)` (in f64).
    pub step: f32,
    /// `sqrt(1 - beta2^t)` (in f64).
    pub sbc2: f32,
    /// `eps`.
    pub eps: f32,
}

/// One Adam step of parameters `p` with gradient `g` and moments `m`, `v`, in place.
pub fn optim_adam_step(l: Launch, p: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], a: AdamArgs) -> Result<()> {
    let k = "optim_adam_step";
    check_linear(k, l)?;
    for (what, len) in [("g", g.len()), ("m", m.len()), ("v", v.len())] {
        check_len(k, what, len, p.len())?;
    }
    let n = p.len() as i64;
    // SAFETY: 1-D launch within CUDA's limits; every thread indexes below n = len.
    unsafe {
        ffi::shim_launch_optim_adam_step(
            l.grid,
            l.block,
            p.as_mut_ptr(),
            g.as_ptr(),
            m.as_mut_ptr(),
            v.as_mut_ptr(),
            n,
            a.coupled,
            a.decoupled,
            a.b1,
            a.b2,
            a.ob1,
            a.ob2,
            a.step,
            a.sbc2,
            a.eps,
        )
    };
    Ok(())
}

/// Per-block sums of squares (f64) of `chunk`-element pieces of `g` into `partial`; the grid
/// must be `ceil(len / chunk)` blocks.
pub fn optim_sumsq_partial(l: Launch, g: &[f32], chunk: usize, partial: &mut [f64]) -> Result<()> {
    let k = "optim_sumsq_partial";
    check_tree(k, l)?;
    let want = Dim3::x(g.len().div_ceil(chunk.max(1)).max(1) as u32);
    if chunk == 0 || l.grid != want {
        return refuse(
            k,
            format!("grid {:?} for {} elements in chunks of {chunk}: expected {want:?}", l.grid, g.len()),
        );
    }
    check_len(k, "partial", partial.len(), want.x as usize)?;
    // SAFETY: block b reads g[b chunk .. min(n, (b + 1) chunk)] and writes partial[b].
    unsafe {
        ffi::shim_launch_optim_sumsq_partial(
            l.grid,
            l.block,
            g.as_ptr(),
            partial.as_mut_ptr(),
            g.len() as i64,
            chunk as i64,
        )
    };
    Ok(())
}

/// `out = [sum of partial, its square root]`, in one block.
pub fn optim_sumsq_final(l: Launch, partial: &[f64], out: &mut [f64; 2]) -> Result<()> {
    let k = "optim_sumsq_final";
    check_tree(k, l)?;
    if l.grid != Dim3::x(1) || partial.len() > i32::MAX as usize {
        return refuse(k, format!("grid {:?} over {} partials: one block, under 2^31", l.grid, partial.len()));
    }
    // SAFETY: one block reads partial[..parts] and thread 0 writes out[0..2].
    unsafe {
        ffi::shim_launch_optim_sumsq_final(l.grid, l.block, partial.as_ptr(), out.as_mut_ptr(), partial.len() as i32)
    };
    Ok(())
}

/// The clipping factor of `norm` for `max_norm`, one thread.
pub fn optim_clip_factor(norm: f64, max_norm: f64) -> f64 {
    let one = Dim3::x(1);
    let mut factor = 0.0f64;
    // SAFETY: a single thread reads one f64 and writes one.
    unsafe { ffi::shim_launch_optim_clip_factor(one, one, &norm, max_norm, &mut factor) };
    factor
}

/// `g *= (f32) factor`.
pub fn optim_scale(l: Launch, g: &mut [f32], factor: f64) -> Result<()> {
    check_linear("optim_scale", l)?;
    // SAFETY: 1-D launch; every thread indexes below n = len and reads the one factor.
    unsafe { ffi::shim_launch_optim_scale(l.grid, l.block, g.as_mut_ptr(), &factor, g.len() as i64) };
    Ok(())
}
