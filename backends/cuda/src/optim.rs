//! The optimizer on the device's terms (`kernels/optim.cu`), the core's `optim.rs`: the
//! scalars of one Adam step computed on the host exactly as `Adam::update` computes them,
//! the step itself, the global norm (a two-stage reduction in f64) and the clipping.

use crate::launch::{elementwise, Dim3, Launch, NORM_BLOCK, NORM_CHUNK};
use crate::shim::{self, AdamArgs, Result};
use boldcast_core::optim::{decays, OptimConfig, OptimizerKind};

/// The scalars of one Adam step on one tensor: `core::optim::Adam::update`'s, which computes
/// the bias corrections and `lr / bc1`, `sqrt(bc2)`, `1 - beta` in f64 and rounds each to the
/// element type once; the kernel then does the per-element arithmetic in f32 in its order.
/// For step `t` (the core's count after `begin_step`; 0 counts as 1, as there), learning rate
/// `lr`, and the tensor's name and shape (which decide its weight decay).
pub fn adam_args(cfg: &OptimConfig, t: u64, lr: f64, name: &str, shape: &[usize]) -> AdamArgs {
    let (b1, b2) = cfg.betas;
    let t = t.max(1) as i32;
    let bc1 = 1.0 - b1.powi(t);
    let bc2 = 1.0 - b2.powi(t);
    let wd = if decays(name, shape) { cfg.weight_decay } else { 0.0 };
    let (coupled, decoupled) = match cfg.kind {
        OptimizerKind::AdamW => (0.0, (lr * wd) as f32),
        OptimizerKind::AdamL2 => (wd as f32, 0.0),
    };
    AdamArgs {
        coupled,
        decoupled,
        b1: b1 as f32,
        b2: b2 as f32,
        ob1: (1.0 - b1) as f32,
        ob2: (1.0 - b2) as f32,
        step: (lr / bc1) as f32,
        sbc2: bc2.sqrt() as f32,
        eps: cfg.eps as f32,
    }
}

/// One Adam step on a tensor: `p`, `m`, `v` in place, with the (clipped) gradient `g`.
pub fn adam_step(p: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], args: AdamArgs) -> Result<()> {
    shim::optim_adam_step(elementwise(p.len()), p, g, m, v, args)
}

/// The global L2 norm of a gradient buffer: blocks of [`NORM_CHUNK`] elements summed in f64,
/// then the partials in one block, in buffers of the thread's scratch pool; read back (a
/// synchronization). Returns `(sum of squares, norm)`.
pub fn global_norm(g: &[f32]) -> Result<(f64, f64)> {
    let blocks = g.len().div_ceil(NORM_CHUNK).max(1);
    let pool = crate::exec::scratch();
    let mut partial = pool.zeros_of::<f64>(blocks);
    let stage1 = Launch { grid: Dim3::x(blocks as u32), block: Dim3::x(NORM_BLOCK) };
    shim::optim_sumsq_partial(stage1, g, NORM_CHUNK, &mut partial)?;
    let mut out = pool.zeros_of::<f64>(2);
    shim::optim_sumsq_final(Launch { grid: Dim3::x(1), block: Dim3::x(NORM_BLOCK) }, &partial, &mut out)?;
    let out = crate::exec::download(&out)?;
    Ok((out[0], out[1]))
}

/// Clips a gradient buffer: `g *= clip_factor(norm, max_norm)`; returns the factor.
pub fn clip(g: &mut [f32], norm: f64, max_norm: f64) -> Result<f64> {
    let factor = shim::optim_clip_factor(norm, max_norm)?;
    shim::optim_scale(elementwise(g.len()), g, &[factor])?;
    Ok(factor)
}

/// Scales a gradient buffer: `g *= (f32) factor` (the trainer's clipping by a factor it chose,
/// passed as a launch parameter: nothing to stage).
pub fn scale(g: &mut [f32], factor: f64) -> Result<()> {
    shim::optim_scale_by(elementwise(g.len()), g, factor)
}
