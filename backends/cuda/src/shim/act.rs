//! The checked launchers of `kernels/act.cu`.

use super::{check_len, check_lens, check_linear, Result};
use crate::exec::{self, args};
use crate::launch::Launch;

/// `y = softplus(v)` through the shim.
pub fn act_softplus_fwd(l: Launch, v: &[f32], y: &mut [f32]) -> Result<()> {
    let k = "act_softplus_fwd";
    check_linear(k, l)?;
    check_len(k, "y", y.len(), v.len())?;
    exec::launch("act_softplus_fwd", l, &mut args![v, &mut y[..], v.len() as i64])?;
    Ok(())
}

/// `g_v = g_y softplus'(v)` through the shim.
pub fn act_softplus_bwd(l: Launch, v: &[f32], g_y: &[f32], g_v: &mut [f32]) -> Result<()> {
    let k = "act_softplus_bwd";
    check_linear(k, l)?;
    check_lens(k, &[("g_y", g_y.len(), v.len()), ("g_v", g_v.len(), v.len())])?;
    exec::launch("act_softplus_bwd", l, &mut args![v, g_y, &mut g_v[..], v.len() as i64])?;
    Ok(())
}

/// `y = silu(x)` through the shim.
pub fn act_silu_fwd(l: Launch, x: &[f32], y: &mut [f32]) -> Result<()> {
    let k = "act_silu_fwd";
    check_linear(k, l)?;
    check_len(k, "y", y.len(), x.len())?;
    exec::launch("act_silu_fwd", l, &mut args![x, &mut y[..], x.len() as i64])?;
    Ok(())
}

/// `g_x = g_y silu'(x)` through the shim.
pub fn act_silu_bwd(l: Launch, x: &[f32], g_y: &[f32], g_x: &mut [f32]) -> Result<()> {
    let k = "act_silu_bwd";
    check_linear(k, l)?;
    check_lens(k, &[("g_y", g_y.len(), x.len()), ("g_x", g_x.len(), x.len())])?;
    exec::launch("act_silu_bwd", l, &mut args![x, g_y, &mut g_x[..], x.len() as i64])?;
    Ok(())
}

/// `out = y silu(z)` through the shim.
pub fn act_gate_fwd(l: Launch, y: &[f32], z: &[f32], out: &mut [f32]) -> Result<()> {
    let k = "act_gate_fwd";
    check_linear(k, l)?;
    check_lens(k, &[("z", z.len(), y.len()), ("out", out.len(), y.len())])?;
    exec::launch("act_gate_fwd", l, &mut args![y, z, &mut out[..], y.len() as i64])?;
    Ok(())
}

/// The gate's backward for the output gradient `g`: `g_y = g silu(z)`, `g_z = g y silu'(z)`.
pub fn act_gate_bwd(l: Launch, y: &[f32], z: &[f32], g: &[f32], g_y: &mut [f32], g_z: &mut [f32]) -> Result<()> {
    let k = "act_gate_bwd";
    check_linear(k, l)?;
    check_lens(
        k,
        &[("z", z.len(), y.len()), ("g", g.len(), y.len()), ("g_y", g_y.len(), y.len()), ("g_z", g_z.len(), y.len())],
    )?;
    exec::launch("act_gate_bwd", l, &mut args![y, z, g, &mut g_y[..], &mut g_z[..], y.len() as i64])?;
    Ok(())
}
