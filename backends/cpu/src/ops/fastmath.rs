//! Branch-free f32 versions of the few transcendental functions the model needs per element:
//! the exponential of non-positive arguments (the scan's decays `exp(dt A)`), the logistic
//! function, and softplus with its derivative. Each is a plain arithmetic expression (a
//! polynomial, selects instead of branches, integer bit moves), `#[inline(always)]`, so that a
//! loop calling it over a slice vectorizes, which a library call (`expf`, `log1pf`) prevents.
//!
//! They are used for `f32` only, through [`super::CpuElem`]; the `f64` model (the gradient
//! checks) keeps the library functions, so the finite-difference tests see the reference
//! functions. Accuracy is tested below against the f64 library functions.

/// `a * b + c` rounded once: [`f32::mul_add`], correctly rounded by definition, so a hardware
/// FMA (the AVX2 and AVX-512 builds) and the baseline build (a call to the C library's `fmaf`,
/// also correctly rounded) give the same bits. This is the only way the kernels fuse a
/// multiply-add: a plain `a * b + c` is never contracted by Rust.
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    a.mul_add(b, c)
}

/// `exp(x)` for `x <= 0`: `x = k ln 2 + r` with `|r| <= ln(2) / 2` (Cody and Waite's split of
/// ln 2, so `k ln 2` is exact), `exp(r)` by a degree-6 polynomial (the degree-7 Taylor
/// polynomial economized; error 1.4e-8 relative) in Horner form with fused multiply-adds ([`fma`]: one rounding per step, and
/// half the instructions of separate products and sums), and `2^k` assembled from its exponent
/// bits. Within 2 ulp of the correctly rounded result; arguments below the smallest normal's
/// logarithm give 0 (the true value is below 1.2e-38); NaN propagates. Positive arguments are
/// not supported.
#[inline(always)]
pub fn exp_nonpos(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // Adding 1.5 * 2^23 to a value of magnitude below 2^22 rounds it to an integer.
    const ROUND: f32 = 12_582_912.0;
    // 355/512: 9 significant bits, so k * LN2_HI is exact.
    const LN2_HI: f32 = 0.693_359_4;
    // ln 2 - LN2_HI.
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Just above ln(f32::MIN_POSITIVE): 2^k stays normal.
    const MIN: f32 = -87.336_55;
    // The degree-7 Taylor polynomial economized to degree 6 on |r| <= ln(2)/2 (Chebyshev: its
    // r^7 term replaced by the best lower-degree fit, which moves 1/5040 r^7 into the r^5,
    // r^3 and r terms; the r coefficient stays 1 in f32). Relative error 1.4e-8 with these
    // f32 coefficients (the Taylor polynomial it replaces: 7.0e-9), both well below f32's
    // rounding (6e-8), at one fused multiply-add less.
    const C3: f32 = 0.166_664_17;
    const C4: f32 = 1.0 / 24.0;
    const C5: f32 = 0.008_375_039;
    const C6: f32 = 1.0 / 720.0;
    let xc = if x < MIN { MIN } else { x };
    // `t` holds the integer k = round(x log2 e) in its low mantissa bits (the fused product
    // and sum round once, to that integer).
    let t = fma(xc, LOG2E, ROUND);
    let k = t - ROUND;
    // `xc - k LN2_HI` is exact (as without fusing), the low part is then folded in exactly
    // rounded.
    let r = fma(-k, LN2_LO, fma(-k, LN2_HI, xc));
    let p = fma(C6, r, C5);
    let p = fma(p, r, C4);
    let p = fma(p, r, C3);
    let p = fma(p, r, 0.5);
    let p = fma(p, r, 1.0);
    let p = fma(p, r, 1.0);
    // 2^k has the biased exponent k + 127, in [1, 127] since k lies in [-126, 0]. The bits of
    // `t` are 0x4B40_0000 + k, and 0x4B40_0000 << 23 wraps to 0, so shifting the bits of `t`
    // plus 127 by 23 gives exactly those exponent bits; integer-only, so it vectorizes.
    let scale = f32::from_bits(t.to_bits().wrapping_add(127) << 23);
    if x < MIN {
        0.0
    } else {
        p * scale
    }
}

/// The logistic function `1 / (1 + e^-x)` from `e = exp(-|x|) <= 1`, so nothing overflows:
/// `1 / (1 + e)` for `x >= 0`, `e / (1 + e)` below.
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    let e = exp_nonpos(-x.abs());
    let num = if x >= 0.0 { 1.0 } else { e };
    num / (1.0 + e)
}

/// `ln(1 + u)` for `u` in `[0, 1]`: `2 atanh(s)` with `s = u / (2 + u) <= 1/3`, by the odd
/// series of atanh to `s^15` (truncation below 3e-9 relative), Horner with [`fma`].
#[inline(always)]
fn log1p_unit(u: f32) -> f32 {
    let s = u / (2.0 + u);
    let s2 = s * s;
    let p = fma(1.0 / 15.0, s2, 1.0 / 13.0);
    let p = fma(p, s2, 1.0 / 11.0);
    let p = fma(p, s2, 1.0 / 9.0);
    let p = fma(p, s2, 1.0 / 7.0);
    let p = fma(p, s2, 1.0 / 5.0);
    let p = fma(p, s2, 1.0 / 3.0);
    let p = fma(p, s2, 1.0);
    2.0 * s * p
}

/// Softplus with PyTorch's threshold 20 and its derivative, `(softplus(v), sigmoid(v))`:
/// `ln(1 + e^v) = max(v, 0) + ln(1 + e^-|v|)`, both from the one exponential `e^-|v|`. Above
/// 20, `(v, 1)` as PyTorch (in f32 the formula gives the same values there).
#[inline(always)]
pub fn softplus_and_grad(v: f32) -> (f32, f32) {
    let e = exp_nonpos(-v.abs());
    let sp = v.max(0.0) + log1p_unit(e);
    let num = if v >= 0.0 { 1.0 } else { e };
    let sg = num / (1.0 + e);
    if v > 20.0 {
        (v, 1.0)
    } else {
        (sp, sg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance of `got` from `want` in units of the last place of `want` (as f32).
    fn ulps(got: f32, want: f64) -> f64 {
        let ulp = 2f64.powi(want.abs().log2().floor() as i32 - 23);
        (got as f64 - want).abs() / ulp
    }

    #[test]
    fn exp_is_within_two_ulp() {
        let mut xs: Vec<f32> = (0..=2_000_000).map(|i| -(i as f32) * 4.4e-5).collect();
        xs.extend([0.0, -0.0, -1e-30, -f32::MIN_POSITIVE, -87.3, -87.33, -87.3365, -87.34, -88.0, -1e3]);
        xs.push(f32::NEG_INFINITY);
        let mut worst = 0.0f64;
        for &x in &xs {
            let (g, want) = (exp_nonpos(x), (x as f64).exp());
            if want < f32::MIN_POSITIVE as f64 {
                assert!(g >= 0.0 && (g as f64) < 1.3 * f32::MIN_POSITIVE as f64, "exp({x}) = {g}, want {want}");
                continue;
            }
            let err = ulps(g, want);
            worst = worst.max(err);
            assert!(err <= 2.0, "exp({x}) = {g}, want {want}: {err} ulp");
        }
        assert_eq!(exp_nonpos(0.0), 1.0);
        assert!(worst > 0.0);
        assert!(exp_nonpos(f32::NAN).is_nan(), "NaN must propagate so a broken model is noticed");
    }

    #[test]
    fn sigmoid_and_softplus_are_within_a_few_ulp() {
        let (mut w_sig, mut w_sp, mut w_sg) = (0.0f64, 0.0f64, 0.0f64);
        for i in -400_000..=400_000 {
            let x = i as f32 * 1e-4 * 3.0; // [-120, 120]
            let xd = x as f64;
            let sig = 1.0 / (1.0 + (-xd).exp());
            if sig > 1e-30 {
                let e = ulps(sigmoid(x), sig);
                w_sig = w_sig.max(e);
                assert!(e <= 4.0, "sigmoid({x}) = {}, want {sig}: {e} ulp", sigmoid(x));
            }
            let (sp, sg) = softplus_and_grad(x);
            let sp_want = if xd > 20.0 { xd } else { xd.exp().ln_1p() };
            let sg_want = if xd > 20.0 { 1.0 } else { sig };
            if sp_want > 1e-30 {
                let e = ulps(sp, sp_want);
                w_sp = w_sp.max(e);
                assert!(e <= 4.0, "softplus({x}) = {sp}, want {sp_want}: {e} ulp");
            }
            if sg_want > 1e-30 {
                let e = ulps(sg, sg_want);
                w_sg = w_sg.max(e);
                assert!(e <= 4.0, "softplus'({x}) = {sg}, want {sg_want}: {e} ulp");
            }
        }
        assert_eq!(softplus_and_grad(25.0), (25.0, 1.0));
        assert_eq!(sigmoid(0.0), 0.5);
        assert!(sigmoid(f32::NAN).is_nan() && softplus_and_grad(f32::NAN).0.is_nan());
        eprintln!("worst ulp: sigmoid {w_sig}, softplus {w_sp}, softplus' {w_sg}");
    }
}
