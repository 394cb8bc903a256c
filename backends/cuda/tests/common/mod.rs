//! Seeded inputs for the kernel tests.
#![allow(dead_code)]

pub mod layer;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// `n` values uniform in `[lo, hi)` from `seed`.
pub fn uniform(seed: u64, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(lo..hi)).collect()
}

/// The f32 unit roundoff, 2^-24.
pub const U32: f64 = 1.0 / 16_777_216.0;

/// The f64 unit roundoff, 2^-53.
pub const U64: f64 = f64::EPSILON / 2.0;

/// A scan reference whose inputs are f64 vectors, for [`check_reference_gradients`].
pub trait Reference: Clone {
    /// The inputs, in the order of the analytic gradients.
    fn inputs_mut(&mut self) -> &mut [Vec<f64>];
    /// `<g, out>` of the reference's forward.
    fn loss_of(&self, g: &[f64]) -> f64;
}

/// The reference's analytic gradients `an` against central differences of its loss, on three
/// coordinates of each input (the first, one past the middle, the last), in f64: step
/// `h = 1e-5 max(1, |v|)`, tolerance 1e-6 (1 + |gradient|).
pub fn check_reference_gradients<R: Reference>(p: &R, g: &[f64], an: &[Vec<f64>], names: &[&str]) {
    let mut p = p.clone();
    for (k, name) in names.iter().enumerate() {
        let len = p.inputs_mut()[k].len();
        for i in [0, len / 2 + 1, len - 1] {
            let v = p.inputs_mut()[k][i];
            let h = 1e-5 * v.abs().max(1.0);
            let (mut hi, mut lo) = (p.clone(), p.clone());
            hi.inputs_mut()[k][i] += h;
            lo.inputs_mut()[k][i] -= h;
            let fd = (hi.loss_of(g) - lo.loss_of(g)) / (2.0 * h);
            let tol = 1e-6 * (1.0 + an[k][i].abs());
            assert!((fd - an[k][i]).abs() <= tol, "g_{name}[{i}]: analytic {:e}, central difference {fd:e}", an[k][i]);
        }
    }
}
