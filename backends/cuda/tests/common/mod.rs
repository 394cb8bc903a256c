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
