//! The checked launchers of `kernels/act.cu`.

use super::{run_linear, Result};
use crate::exec::args;
use crate::launch::Launch;

/// `y = softplus(v)` through the shim.
pub fn act_softplus_fwd(l: Launch, v: &[f32], y: &mut [f32]) -> Result<()> {
    let n = v.len();
    run_linear("act_softplus_fwd", l, &[("y", y.len(), n)], &mut args![v, y, n as i64])
}

/// `g_v = g_y softplus'(v)` through the shim.
pub fn act_softplus_bwd(l: Launch, v: &[f32], g_y: &[f32], g_v: &mut [f32]) -> Result<()> {
    let (n, lens) = (v.len(), [("g_y", g_y.len(), v.len()), ("g_v", g_v.len(), v.len())]);
    run_linear("act_softplus_bwd", l, &lens, &mut args![v, g_y, g_v, n as i64])
}

/// `y = silu(x)` through the shim.
pub fn act_silu_fwd(l: Launch, x: &[f32], y: &mut [f32]) -> Result<()> {
    let n = x.len();
    run_linear("act_silu_fwd", l, &[("y", y.len(), n)], &mut args![x, y, n as i64])
}

/// `g_x = g_y silu'(x)` through the shim.
pub fn act_silu_bwd(l: Launch, x: &[f32], g_y: &[f32], g_x: &mut [f32]) -> Result<()> {
    let (n, lens) = (x.len(), [("g_y", g_y.len(), x.len()), ("g_x", g_x.len(), x.len())]);
    run_linear("act_silu_bwd", l, &lens, &mut args![x, g_y, g_x, n as i64])
}

/// `out = y silu(z)` through the shim.
pub fn act_gate_fwd(l: Launch, y: &[f32], z: &[f32], out: &mut [f32]) -> Result<()> {
    let (n, lens) = (y.len(), [("z", z.len(), y.len()), ("out", out.len(), y.len())]);
    run_linear("act_gate_fwd", l, &lens, &mut args![y, z, out, n as i64])
}

/// The gate's backward for the output gradient `g`: `g_y = g silu(z)`, `g_z = g y silu'(z)`.
pub fn act_gate_bwd(l: Launch, y: &[f32], z: &[f32], g: &[f32], g_y: &mut [f32], g_z: &mut [f32]) -> Result<()> {
    let n = y.len();
    let lens = [("z", z.len(), n), ("g", g.len(), n), ("g_y", g_y.len(), n), ("g_z", g_z.len(), n)];
    run_linear("act_gate_bwd", l, &lens, &mut args![y, z, g, g_y, g_z, n as i64])
}

/// `y += x` through the shim.
pub fn act_add(l: Launch, x: &[f32], y: &mut [f32]) -> Result<()> {
    let n = x.len();
    run_linear("act_add", l, &[("y", y.len(), n)], &mut args![x, y, n as i64])
}

/// `a = -exp(a_log)` through the shim.
pub fn act_decay_fwd(l: Launch, a_log: &[f32], a: &mut [f32]) -> Result<()> {
    let n = a_log.len();
    run_linear("act_decay_fwd", l, &[("a", a.len(), n)], &mut args![a_log, a, n as i64])
}

/// `g_a_log += g_a a` through the shim.
pub fn act_decay_bwd(l: Launch, a: &[f32], g_a: &[f32], g_a_log: &mut [f32]) -> Result<()> {
    let (n, lens) = (a.len(), [("g_a", g_a.len(), a.len()), ("g_a_log", g_a_log.len(), a.len())]);
    run_linear("act_decay_bwd", l, &lens, &mut args![a, g_a, g_a_log, n as i64])
}
