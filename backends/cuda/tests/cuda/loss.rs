//! `kernels/loss.cu` through the shim against a reference written here from MODEL.md
//! ("Targets and loss") and BACKWARD.md ("Loss"), in the order of the CPU backend's private
//! `loss_of` (model.rs): elements in (b, t, p, h, d) order, each squared f32 difference
//! summed in f64 from 0.
//!
//! Tolerance of the loss: the squares are exact in f64 (a product of two 24-bit significands
//! has at most 48 bits), so the two sides sum the same non-negative terms in different orders:
//! the reference sequentially (depth n - 1), the kernels through strided partials, a tree,
//! then the chunks' sums likewise (depth `ceil(chunk / B) + log2 B + ceil(parts / B) +
//! log2 B`). Each sum is within its depth times u64 = 2^-53 of the exact sum S (first order,
//! non-negative terms), and the divisions by n add one rounding each: `|diff| <= (D_ref +
//! D_ker) u64 S / n + 2 u64 loss`. The gradient's arithmetic is the reference's, bit for bit.

use crate::common;

use boldcast_cuda::launch::{NORM_BLOCK, NORM_CHUNK};
use boldcast_cuda::loss::{mse, mse_backward};
use boldcast_cuda::shim::LossShape;
use common::{uniform, U64};

/// (B, T, P, D, horizons): a single element's worth, and one over two chunks with odd sizes.
const SHAPES: [(usize, usize, usize, usize, &[i32]); 3] =
    [(1, 2, 3, 1, &[1]), (2, 40, 13, 17, &[1, 3]), (3, 9, 5, 4, &[2, 1, 5])];

/// (sum of squares, n) and the gradient, in the CPU backend's order.
fn reference(s: LossShape, pred: &[f32], tokens: &[f32]) -> (f64, f64, Vec<f32>) {
    let (nh, tv) = (s.horizons.len(), s.t_valid());
    let n = (s.b * tv * s.p * nh * s.d) as f64;
    let scale = (2.0 / n) as f32;
    let (mut sum, mut g) = (0.0f64, vec![0.0f32; pred.len()]);
    for b in 0..s.b {
        for t in 0..tv {
            for p in 0..s.p {
                let base = ((b * s.t + t) * s.p + p) * nh * s.d;
                for (hi, &h) in s.horizons.iter().enumerate() {
                    let tgt = ((b * s.t + t + h as usize) * s.p + p) * s.d;
                    for j in 0..s.d {
                        let diff = pred[base + hi * s.d + j] - tokens[tgt + j];
                        sum += diff as f64 * diff as f64;
                        g[base + hi * s.d + j] = scale * diff;
                    }
                }
            }
        }
    }
    (sum, n, g)
}

fn inputs(k: u64, s: LossShape) -> (Vec<f32>, Vec<f32>) {
    (uniform(k, s.total(), -2.0, 2.0), uniform(k + 1, s.b * s.t * s.p * s.d, -2.0, 2.0))
}

#[test]
fn loss_and_gradient_match_the_reference() {
    for (k, &(b, t, p, d, horizons)) in SHAPES.iter().enumerate() {
        let s = LossShape { b, t, p, d, horizons };
        let (pred, tokens) = inputs(10 * k as u64, s);
        let (sum, n, want_g) = reference(s, &pred, &tokens);
        let got = mse(s, &pred, &tokens).unwrap();
        let want = sum / n;
        let parts = s.valid().div_ceil(NORM_CHUNK);
        let lb = (NORM_BLOCK as f64).log2();
        let depth = (n - 1.0)
            + NORM_CHUNK.div_ceil(NORM_BLOCK as usize) as f64
            + lb
            + parts.div_ceil(NORM_BLOCK as usize) as f64
            + lb;
        let bound = depth * U64 * sum / n + 2.0 * U64 * want;
        assert!((got - want).abs() <= bound, "{s:?}: loss {got:e} vs {want:e}, bound {bound:e}");
        let mut g = vec![f32::NAN; pred.len()];
        mse_backward(s, &pred, &tokens, &mut g).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
        assert_eq!(bits(&g), bits(&want_g), "{s:?}: gradient");
    }
    const { assert!(2 * 37 * 13 * 2 * 17 > NORM_CHUNK, "the second shape must span two chunks") };
}

/// The two-stage sum has a fixed order: two runs give the same bits.
#[test]
fn repeated_runs_give_the_same_bits() {
    let s = LossShape { b: 2, t: 40, p: 13, d: 17, horizons: &[1, 3] };
    let (pred, tokens) = inputs(5, s);
    assert_eq!(mse(s, &pred, &tokens).unwrap().to_bits(), mse(s, &pred, &tokens).unwrap().to_bits());
}

/// A horizon reaching past the series is refused before the kernel indexes by it.
#[test]
fn a_horizon_past_the_series_is_refused() {
    let s = LossShape { b: 1, t: 3, p: 2, d: 2, horizons: &[3] };
    let (pred, tokens) = inputs(1, s);
    assert!(mse(s, &pred, &tokens).is_err());
}
