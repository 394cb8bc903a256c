//! The exponential of non-positive arguments, in place over a slice: the scan's decays
//! `exp(dt A)` (`dt >= 0`, `A < 0`) are most of its work.
//!
//! In f32 (the training type) a branch-free polynomial replaces the library call, so the
//! compiler can vectorize the loop; it is within 2 ulp of the correctly rounded result (tested
//! below). In f64 (the gradient checks) the library `exp` is kept, so the finite-difference
//! tests see the reference function.

use crate::ops::CpuElem;
use std::any::TypeId;

/// `v[i] = exp(v[i])` for `v[i] <= 0` (positive arguments are not supported by the f32 path).
#[inline]
pub(super) fn exp_nonpos_in_place<E: CpuElem>(v: &mut [E]) {
    if TypeId::of::<E>() == TypeId::of::<f32>() {
        // SAFETY: `E` is `f32` (the type ids are equal), so this reinterprets the slice as its
        // own type: same length, layout and lifetime.
        let v32 = unsafe { &mut *(v as *mut [E] as *mut [f32]) };
        exp_nonpos_f32(v32);
    } else {
        for x in v {
            *x = x.exp();
        }
    }
}

/// `exp(x)` for `x <= 0` in f32: `x = k ln 2 + r` with `|r| <= ln(2) / 2` (Cody and Waite's
/// split of ln 2, so `k ln 2` is exact), `exp(r)` by its degree-7 Taylor polynomial (truncation
/// below 1e-8 relative), and `2^k` assembled from its exponent bits. Arguments below the
/// smallest normal's logarithm give 0 (the true value is below 1.2e-38).
fn exp_nonpos_f32(v: &mut [f32]) {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // Adding 1.5 * 2^23 to a value of magnitude below 2^22 rounds it to an integer.
    const ROUND: f32 = 12_582_912.0;
    const LN2_HI: f32 = 0.693_359_4; // 355/512: 9 significant bits, so k * LN2_HI is exact
    const LN2_LO: f32 = -2.121_944_4e-4; // ln 2 - LN2_HI
    const MIN: f32 = -87.336_55; // just above ln(f32::MIN_POSITIVE): 2^k stays normal
    for x in v {
        let xv = *x;
        let xc = if xv < MIN { MIN } else { xv };
        // `t` holds the integer k = round(x log2 e) in its low mantissa bits.
        let t = xc * LOG2E + ROUND;
        let k = t - ROUND;
        let r = (xc - k * LN2_HI) - k * LN2_LO;
        let p = 1.0
            + r * (1.0
                + r * (1.0 / 2.0
                    + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
        // 2^k has the biased exponent k + 127, in [1, 127] since k lies in [-126, 0]. The bits of
        // `t` are 0x4B40_0000 + k, and 0x4B40_0000 << 23 wraps to 0, so shifting the bits of
        // `t` plus 127 by 23 gives exactly those exponent bits; integer-only, so it vectorizes.
        let scale = f32::from_bits(t.to_bits().wrapping_add(127) << 23);
        *x = if xv < MIN { 0.0 } else { p * scale };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_exp_is_within_two_ulp() {
        let mut xs: Vec<f32> = (0..=2_000_000).map(|i| -(i as f32) * 4.4e-5).collect();
        xs.extend([
            0.0,
            -0.0,
            -1e-30,
            -f32::MIN_POSITIVE,
            -87.3,
            -87.33,
            -87.3365,
            -87.34,
            -88.0,
            -1e3,
            f32::NEG_INFINITY,
        ]);
        let mut got = xs.clone();
        exp_nonpos_f32(&mut got);
        let mut worst = 0.0f64;
        for (&x, &g) in xs.iter().zip(&got) {
            let want = (x as f64).exp();
            if want < f32::MIN_POSITIVE as f64 {
                assert!(g >= 0.0 && (g as f64) < 1.3 * f32::MIN_POSITIVE as f64, "exp({x}) = {g}, want {want}");
                continue;
            }
            // One ulp of the result: 2^(floor(log2 want) - 23).
            let ulp = 2f64.powi(want.log2().floor() as i32 - 23);
            let err = (g as f64 - want).abs() / ulp;
            worst = worst.max(err);
            assert!(err <= 2.0, "exp({x}) = {g}, want {want}: {err} ulp");
        }
        assert_eq!(got[got.len() - 11], 1.0);
        assert!(worst > 0.0);
        let nan = &mut [f32::NAN];
        exp_nonpos_f32(nan);
        assert!(nan[0].is_nan(), "NaN must propagate so a broken model is noticed");
    }

    #[test]
    fn f64_keeps_the_library_exp() {
        let mut v = [-0.5f64, -3.0, 0.0];
        exp_nonpos_in_place(&mut v);
        assert_eq!(v, [(-0.5f64).exp(), (-3.0f64).exp(), 1.0]);
    }
}
