//! The elementwise kernels of `kernels/act.cu` through the shim against the CPU backend's
//! `ops::act` functions, **bit for bit**: the kernels do the same f32 operations in the same
//! order, and the shim maps `expf` / `log1pf` to the C library functions Rust's `f32::exp` /
//! `ln_1p` call, with contraction into fused multiply-adds off (build.rs), so any difference
//! is a bug, not rounding.

use crate::common;

use boldcast_cpu::ops::act as cpu;
use boldcast_cuda::launch::{elementwise, Dim3, Launch};
use boldcast_cuda::{ops::act, shim};
use common::uniform;

/// Awkward lengths (not multiples of the block of 256), and inputs over the interesting range
/// plus the special points: the softplus threshold 20 and its neighbours, signed zeros, the
/// ends where `exp` overflows or underflows.
fn inputs(seed: u64, n: usize) -> Vec<f32> {
    let mut x = uniform(seed, n, -30.0, 30.0);
    let special = [20.0, 20.000002, 19.999998, 0.0, -0.0, 88.8, -88.8, -104.0, 1e-30, -1e-30];
    for (xi, s) in x.iter_mut().zip(special) {
        *xi = s;
    }
    x
}

fn assert_bits(what: &str, got: &[f32], want: impl Fn(usize) -> f32) {
    for (i, g) in got.iter().enumerate() {
        let w = want(i);
        assert_eq!(g.to_bits(), w.to_bits(), "{what}[{i}]: shim {g:e}, cpu {w:e}");
    }
}

const LENGTHS: [usize; 5] = [1, 10, 255, 257, 10_007];

#[test]
fn softplus_and_silu_match_the_cpu_backend_bitwise() {
    for (k, &n) in LENGTHS.iter().enumerate() {
        let x = inputs(k as u64, n.max(10));
        let gy = uniform(100 + k as u64, x.len(), -2.0, 2.0);
        let mut out = vec![f32::NAN; x.len()];
        act::softplus(&x, &mut out).unwrap();
        assert_bits("softplus", &out, |i| cpu::softplus(x[i]));
        act::softplus_backward(&x, &gy, &mut out).unwrap();
        assert_bits("softplus'", &out, |i| gy[i] * cpu::softplus_grad(x[i]));
        act::silu(&x, &mut out).unwrap();
        assert_bits("silu", &out, |i| cpu::silu(x[i]));
        act::silu_backward(&x, &gy, &mut out).unwrap();
        assert_bits("silu'", &out, |i| gy[i] * cpu::silu_grad(x[i]));
    }
}

#[test]
fn the_gate_matches_the_cpu_backend_bitwise() {
    for (k, &n) in LENGTHS.iter().enumerate() {
        let z = inputs(10 + k as u64, n.max(10));
        let y = uniform(20 + k as u64, z.len(), -3.0, 3.0);
        let g = uniform(30 + k as u64, z.len(), -2.0, 2.0);
        let (mut out, mut g_y, mut g_z) = (vec![f32::NAN; z.len()], vec![f32::NAN; z.len()], vec![f32::NAN; z.len()]);
        act::gate(&y, &z, &mut out).unwrap();
        assert_bits("gate", &out, |i| y[i] * cpu::silu(z[i]));
        act::gate_backward(&y, &z, &g, &mut g_y, &mut g_z).unwrap();
        // The CPU mixers' order: g_y = g gate, g_z = (g y) silu'(z).
        assert_bits("gate g_y", &g_y, |i| g[i] * cpu::silu(z[i]));
        assert_bits("gate g_z", &g_z, |i| g[i] * y[i] * cpu::silu_grad(z[i]));
    }
}

/// A grid far smaller than the buffer: the grid-stride loop must still visit every element
/// exactly once (each written once from NaN).
#[test]
fn a_capped_grid_covers_every_element() {
    let x = inputs(7, 10_007);
    let mut y = vec![f32::NAN; x.len()];
    let l = Launch { grid: Dim3::x(3), block: Dim3::x(64) };
    shim::act_silu_fwd(l, &x, &mut y).unwrap();
    assert_bits("silu (3 x 64 threads)", &y, |i| cpu::silu(x[i]));
    // The default shape of a large buffer is capped too.
    assert!(elementwise(10_000_000).grid.x < (10_000_000 / 256) as u32);
}

#[test]
fn mismatched_buffers_are_refused_before_launch() {
    let mut y = vec![0.0f32; 3];
    let err = act::silu(&[1.0; 4], &mut y).unwrap_err();
    assert_eq!(err.kernel, "act_silu_fwd");
    assert!(err.to_string().contains("y has 3 elements, expected 4"), "{err}");
    let l = Launch { grid: Dim3::x(1), block: Dim3::x(1025) };
    assert!(shim::act_silu_fwd(l, &[1.0; 4], &mut [0.0; 4]).unwrap_err().why.contains("1 to 1024"));
    let l = Launch { grid: Dim3::xy(1, 2), block: Dim3::x(32) };
    assert!(shim::act_silu_fwd(l, &[1.0; 4], &mut [0.0; 4]).unwrap_err().why.contains("1-D"));
}

/// The kernels that replace host loops: the sum, the decays and their backward, and the
/// fill, bit for bit against the host expressions they replace (`-a_log.exp()`, `g + ga * a`).
#[test]
fn the_sum_decay_and_fill_kernels_match_the_host_expressions() {
    use boldcast_cuda::ops::layout;
    for (k, &n) in LENGTHS.iter().enumerate() {
        let a_log = uniform(200 + k as u64, n, -3.0, 3.0);
        let mut a = vec![f32::NAN; n];
        act::decay(&a_log, &mut a).unwrap();
        assert_bits("decay", &a, |i| -a_log[i].exp());
        let (g_a, g0) = (uniform(300 + k as u64, n, -1.0, 1.0), uniform(400 + k as u64, n, -1.0, 1.0));
        let mut g = g0.clone();
        act::decay_backward(&a, &g_a, &mut g).unwrap();
        assert_bits("decay_backward", &g, |i| g0[i] + g_a[i] * a[i]);
        let mut y = g0.clone();
        act::add(&g_a, &mut y).unwrap();
        assert_bits("add", &y, |i| g0[i] + g_a[i]);
        layout::fill(&mut y, -0.5).unwrap();
        assert!(y.iter().all(|&v| v == -0.5));
    }
    // Lengths are checked.
    assert!(act::add(&[1.0; 3], &mut [0.0; 4]).is_err());
}
