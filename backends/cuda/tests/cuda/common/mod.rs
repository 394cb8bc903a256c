//! Seeded inputs for the kernel tests.
#![allow(dead_code)]

pub mod layer;
pub mod scan;

use boldcast_testkit::fd;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// `n` values uniform in `[lo, hi)` from `seed`.
pub fn uniform(seed: u64, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(lo..hi)).collect()
}

/// The logistic function, in f64.
pub fn sig(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

/// `v sigmoid(v)`, in f64.
pub fn silu(v: f64) -> f64 {
    v / (1.0 + (-v).exp())
}

/// `ln(1 + e^v)` with PyTorch's threshold 20, in f64.
pub fn softplus(v: f64) -> f64 {
    if v > 20.0 {
        v
    } else {
        v.exp().ln_1p()
    }
}

/// The values widened to f64.
pub fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// Every `|got[i] - want[i]|` within `bound[i]`; prints the worst ratio of the two.
pub fn check(what: &str, got: &[f32], want: &[f64], bound: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let mut worst = 0.0f64;
    for i in 0..got.len() {
        let err = (got[i] as f64 - want[i]).abs();
        assert!(
            err <= bound[i],
            "{what}[{i}]: kernel {:e}, reference {:e}, |diff| {err:e} > bound {:e}",
            got[i],
            want[i],
            bound[i]
        );
        if bound[i] > 0.0 {
            worst = worst.max(err / bound[i]);
        }
    }
    println!("{what}: worst |diff| / bound = {worst:.3}");
}

/// The f32 unit roundoff, 2^-24.
pub const U32: f64 = 1.0 / 16_777_216.0;

/// The f64 unit roundoff, 2^-53.
pub const U64: f64 = f64::EPSILON / 2.0;

/// A few coordinates of each input: the first, one past the middle, the last.
pub fn coords(len: usize) -> [usize; 3] {
    [0, len / 2 + 1, len - 1]
}

/// The analytic gradients `an[k]` against central differences of `loss` on [`coords`] of each
/// input `v[k]`, in f64: step `h = 1e-5 max(1, |v|)`, tolerance 1e-6 (1 + |gradient|).
/// `names[k]` names input `k` in a failure.
pub fn check_central(names: &[&str], v: &[Vec<f64>], an: &[Vec<f64>], loss: impl Fn(&[Vec<f64>]) -> f64) {
    let mut v = v.to_vec();
    for (k, name) in names.iter().enumerate() {
        for i in coords(v[k].len()) {
            let (x0, h) = (v[k][i], 1e-5 * v[k][i].abs().max(1.0));
            let fd = fd::along(h, |d| {
                v[k][i] = x0 + d;
                loss(&v)
            });
            v[k][i] = x0;
            let tol = 1e-6 * (1.0 + an[k][i].abs());
            assert!((fd - an[k][i]).abs() <= tol, "g_{name}[{i}]: analytic {:e}, central difference {fd:e}", an[k][i]);
        }
    }
}
