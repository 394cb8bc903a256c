//! The checked launchers of `kernels/optim.cu`.

use super::{check_tree, refuse, run, run_linear, Result};
use crate::exec::{self, args};
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
    let n = p.len();
    let lens = [("g", g.len(), n), ("m", m.len(), n), ("v", v.len(), n)];
    let mut all = args![p, g, m, v, n as i64, a.coupled, a.decoupled, a.b1, a.b2, a.ob1, a.ob2, a.step, a.sbc2, a.eps];
    run_linear("optim_adam_step", l, &lens, &mut all)
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
    let lens = [("partial", partial.len(), want.x as usize)];
    run(k, l, &lens, &mut args![g, partial, g.len() as i64, chunk as i64])
}

/// `out = [sum of partial, its square root]`, in one block.
pub fn optim_sumsq_final(l: Launch, partial: &[f64], out: &mut [f64]) -> Result<()> {
    let k = "optim_sumsq_final";
    check_tree(k, l)?;
    if l.grid != Dim3::x(1) || partial.len() > i32::MAX as usize {
        return refuse(k, format!("grid {:?} over {} partials: one block, under 2^31", l.grid, partial.len()));
    }
    run(k, l, &[("out", out.len(), 2)], &mut args![partial, out, partial.len() as i32])
}

/// The clipping factor of `norm` for `max_norm`, one thread.
pub fn optim_clip_factor(norm: f64, max_norm: f64) -> Result<f64> {
    let one = Launch { grid: Dim3::x(1), block: Dim3::x(1) };
    let mut factor = [0.0f64];
    exec::launch("optim_clip_factor", one, &mut args![&[norm][..], max_norm, &mut factor[..]])?;
    Ok(factor[0])
}

/// `g *= (f32) factor[0]`, the factor where [`optim_clip_factor`] would leave it on a device.
pub fn optim_scale(l: Launch, g: &mut [f32], factor: &[f64]) -> Result<()> {
    let n = g.len() as i64;
    run_linear("optim_scale", l, &[("factor", factor.len(), 1)], &mut args![g, factor, n])
}

/// `g *= (f32) factor`, the factor a launch parameter.
pub fn optim_scale_by(l: Launch, g: &mut [f32], factor: f64) -> Result<()> {
    let n = g.len() as i64;
    run_linear("optim_scale_by", l, &[], &mut args![g, factor, n])
}
