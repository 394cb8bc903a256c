//! Elementwise activations and the gate (`kernels/act.cu`), the CPU backend's `ops/act.rs`
//! and the gate of its mixers, over whole buffers.

use crate::launch::elementwise;
use crate::shim::{self, Result};

/// `y = softplus(v)`, elementwise.
pub fn softplus(v: &[f32], y: &mut [f32]) -> Result<()> {
    shim::act_softplus_fwd(elementwise(v.len()), v, y)
}

/// `g_v = g_y softplus'(v)`.
pub fn softplus_backward(v: &[f32], g_y: &[f32], g_v: &mut [f32]) -> Result<()> {
    shim::act_softplus_bwd(elementwise(v.len()), v, g_y, g_v)
}

/// `y = silu(x)`, elementwise.
pub fn silu(x: &[f32], y: &mut [f32]) -> Result<()> {
    shim::act_silu_fwd(elementwise(x.len()), x, y)
}

/// `g_x = g_y silu'(x)`.
pub fn silu_backward(x: &[f32], g_y: &[f32], g_x: &mut [f32]) -> Result<()> {
    shim::act_silu_bwd(elementwise(x.len()), x, g_y, g_x)
}

/// The gate `out = y silu(z)`, elementwise.
pub fn gate(y: &[f32], z: &[f32], out: &mut [f32]) -> Result<()> {
    shim::act_gate_fwd(elementwise(y.len()), y, z, out)
}

/// The gate's backward for the output gradient `g`: `g_y = g silu(z)`, `g_z = g y silu'(z)`.
pub fn gate_backward(y: &[f32], z: &[f32], g: &[f32], g_y: &mut [f32], g_z: &mut [f32]) -> Result<()> {
    shim::act_gate_bwd(elementwise(y.len()), y, z, g, g_y, g_z)
}

/// `y += x`, elementwise: a sum the host would otherwise make over device buffers.
pub fn add(x: &[f32], y: &mut [f32]) -> Result<()> {
    shim::act_add(elementwise(x.len()), x, y)
}

/// The scans' decays `a = -exp(a_log)`.
pub fn decay(a_log: &[f32], a: &mut [f32]) -> Result<()> {
    shim::act_decay_fwd(elementwise(a_log.len()), a_log, a)
}

/// Backward of [`decay`]: `g_a_log += g_a a`.
pub fn decay_backward(a: &[f32], g_a: &[f32], g_a_log: &mut [f32]) -> Result<()> {
    shim::act_decay_bwd(elementwise(a.len()), a, g_a, g_a_log)
}
