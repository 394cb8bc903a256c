//! `kernels/optim.cu` through the shim against the core's optimizer maths:
//!
//! - the Adam step, **bit for bit** against `boldcast_core::optim::Adam<f32>` over several
//!   steps (the same f64 scalars rounded once, the same f32 operations in the same order);
//! - the global norm against `boldcast_core::optim::global_norm` (f64, sequential) within a
//!   bound from the two summation orders (below);
//! - the clipping factor **bit for bit** against `clip_factor` (the same f64 operations) and
//!   the scaling bit for bit against the CPU backend's `scale_grads` (`g *= factor as f32`).

use crate::common;

use boldcast_core::optim::{clip_factor, global_norm, Adam, OptimConfig, Optimizer, ParamMut};
use boldcast_cuda::optim;
use common::{uniform, U64};

/// Tensors of awkward sizes that decay, do not decay by rank, and do not decay by name.
const TENSORS: [(&str, &[usize]); 3] =
    [("layers.0.mamba.in_proj.weight", &[37, 29]), ("head.bias", &[1001]), ("layers.0.mamba.mamba.A_log", &[13, 7])];

fn run_adam(cfg: OptimConfig) {
    let mut core = Adam::<f32>::new(cfg.clone()).unwrap();
    let sizes: Vec<usize> = TENSORS.iter().map(|(_, s)| s.iter().product()).collect();
    let mut host: Vec<Vec<f32>> = sizes.iter().enumerate().map(|(k, &n)| uniform(k as u64, n, -1.0, 1.0)).collect();
    let mut dev = host.clone();
    let mut moments: Vec<(Vec<f32>, Vec<f32>)> = sizes.iter().map(|&n| (vec![0.0; n], vec![0.0; n])).collect();
    for step in 1..=4u64 {
        core.begin_step();
        let lr = 1e-3 * step as f64;
        for (k, (name, shape)) in TENSORS.iter().enumerate() {
            // Gradients of mixed scales, so the second moments span orders of magnitude.
            let g: Vec<f32> =
                uniform(100 * step + k as u64, sizes[k], -1.0, 1.0).iter().map(|v| v * v * v * 10.0).collect();
            core.update(ParamMut { index: k, name, shape, value: &mut host[k], grad: &g }, lr);
            let args = optim::adam_args(&cfg, core.steps(), lr, name, shape);
            let (m, v) = &mut moments[k];
            optim::adam_step(&mut dev[k], &g, m, v, args).unwrap();
            for (i, (a, b)) in dev[k].iter().zip(&host[k]).enumerate() {
                assert_eq!(a.to_bits(), b.to_bits(), "{:?} step {step} {name}[{i}]: shim {a:e}, core {b:e}", cfg.kind);
            }
            assert_eq!(*m, core.moments()[k].m, "first moment of {name}");
            assert_eq!(*v, core.moments()[k].v, "second moment of {name}");
        }
    }
}

#[test]
fn adamw_matches_the_core_bitwise() {
    run_adam(OptimConfig::adamw(0.1, (0.9, 0.999)));
}

#[test]
fn adam_l2_matches_the_core_bitwise() {
    run_adam(OptimConfig::adam_l2(0.05, (0.8, 0.95)));
}

/// Tolerance: every square is exact in f64 (a float's 24-bit significand squared fits in 53
/// bits), so the two results differ only by the order of the additions. A sum of n positive
/// terms in any order is within (n - 1) u S of the exact S (u = 2^-53, first order), so the
/// two sums differ by at most 2 (n - 1) u S (the 1.01 covers the second-order terms), and the
/// norms, after a correctly rounded sqrt each, by half that relative plus 2u.
#[test]
fn the_global_norm_matches_the_core_within_its_reduction_bound() {
    for (k, n) in [1usize, 255, 16_385, 100_003].into_iter().enumerate() {
        let g: Vec<f32> = uniform(k as u64, n, -3.0, 3.0);
        let (sumsq, norm) = optim::global_norm(&g).unwrap();
        let want = global_norm([g.as_slice()]);
        let s = want * want;
        let bound_s = 1.01 * 2.0 * (n as f64 - 1.0) * U64 * s;
        assert!((sumsq - s).abs() <= bound_s + 4.0 * U64 * s, "n {n}: sum of squares {sumsq:e} vs {s:e}");
        let bound = 1.01 * (n as f64 - 1.0) * U64 * want + 2.0 * U64 * want;
        assert!((norm - want).abs() <= bound, "n {n}: norm {norm:e} vs {want:e}, bound {bound:e}");
    }
    // All zeros: exactly zero, not NaN.
    assert_eq!(optim::global_norm(&[0.0; 300]).unwrap(), (0.0, 0.0));
}

#[test]
fn clipping_matches_the_core_and_the_cpu_backend_bitwise() {
    let g = uniform(9, 20_011, -2.0, 2.0);
    for norm in [0.0, 0.5, 0.999_999, 1.0, 1.5, 1e6] {
        let mut dev = g.clone();
        let factor = optim::clip(&mut dev, norm, 1.0).unwrap();
        assert_eq!(factor.to_bits(), clip_factor(norm, 1.0).to_bits(), "factor at norm {norm}");
        let f = factor as f32;
        for (i, (a, b)) in dev.iter().zip(&g).enumerate() {
            assert_eq!(a.to_bits(), (b * f).to_bits(), "g[{i}] at norm {norm}");
        }
    }
}
