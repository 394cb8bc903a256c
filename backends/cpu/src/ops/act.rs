//! Scalar activations and their derivatives (BACKWARD.md, "Small pieces").

use boldcast_core::Elem;

/// The logistic function, computed without overflow for large `|x|`.
#[inline]
pub fn sigmoid<E: Elem>(x: E) -> E {
    if x >= E::zero() {
        E::one() / (E::one() + (-x).exp())
    } else {
        let e = x.exp();
        e / (E::one() + e)
    }
}

/// `silu(x) = x * sigmoid(x)`.
#[inline]
pub fn silu<E: Elem>(x: E) -> E {
    x * sigmoid(x)
}

/// `silu'(x) = s (1 + x (1 - s))`.
#[inline]
pub fn silu_grad<E: Elem>(x: E) -> E {
    let s = sigmoid(x);
    s * (E::one() + x * (E::one() - s))
}

/// Softplus with PyTorch's threshold 20: `v > 20 ? v : ln(1 + e^v)`.
#[inline]
pub fn softplus<E: Elem>(v: E) -> E {
    if v > E::of(20.0) {
        v
    } else {
        v.exp().ln_1p()
    }
}

/// Derivative of [`softplus`]: `v > 20 ? 1 : sigmoid(v)`.
#[inline]
pub fn softplus_grad<E: Elem>(v: E) -> E {
    if v > E::of(20.0) {
        E::one()
    } else {
        sigmoid(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fd(f: impl Fn(f64) -> f64, x: f64) -> f64 {
        (f(x + 1e-6) - f(x - 1e-6)) / 2e-6
    }

    #[test]
    fn derivatives_match_finite_differences() {
        for &x in &[-30.0, -3.0, -0.5, 0.0, 0.7, 4.0, 19.0, 25.0] {
            assert!((silu_grad(x) - fd(silu, x)).abs() < 1e-7, "silu' at {x}");
            assert!((softplus_grad(x) - fd(softplus, x)).abs() < 1e-7, "softplus' at {x}");
        }
        assert_eq!(softplus(25.0f64), 25.0);
        assert!((softplus(0.0f64) - 2f64.ln()).abs() < 1e-15);
    }
}
