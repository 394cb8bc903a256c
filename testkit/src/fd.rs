//! Finite differences for the gradient checks of the backends' hand-written backwards.
//!
//! The helpers take the point as a value and a `nudge` that moves one coordinate of a copy, so
//! they serve a slice, a parameter struct or a whole model alike, and they know nothing of a
//! backend's types. Each difference evaluates the loss at `+` first, then at `-`.

/// The central difference `(at(h) - at(-h)) / 2h` of `at(d)`, the loss with the point moved by
/// `d` along one coordinate or direction.
pub fn along(h: f64, mut at: impl FnMut(f64) -> f64) -> f64 {
    let plus = at(h);
    (plus - at(-h)) / (2.0 * h)
}

/// [`along`] for a point `x` moved by `nudge(y, d)`, which adds `d` to one coordinate of the
/// copy `y` of `x`.
pub fn central<T: Clone>(x: &T, h: f64, mut nudge: impl FnMut(&mut T, f64), mut loss: impl FnMut(&T) -> f64) -> f64 {
    along(h, |d| {
        let mut y = x.clone();
        nudge(&mut y, d);
        loss(&y)
    })
}

/// [`central`] along entry `i` of a slice.
pub fn central_at(x: &[f64], i: usize, h: f64, mut loss: impl FnMut(&[f64]) -> f64) -> f64 {
    central(&x.to_vec(), h, |y, d| y[i] += d, |y| loss(y))
}

/// The five-point difference `(8 (f(h) - f(-h)) - (f(2h) - f(-2h))) / 12h` of `at(d)`, the loss
/// with the coordinate moved by `d`: its error is of order `h^4` where [`central`]'s is `h^2`.
pub fn five_point(h: f64, mut at: impl FnMut(f64) -> f64) -> f64 {
    let d1 = at(h) - at(-h);
    let d2 = at(2.0 * h) - at(-2.0 * h);
    (8.0 * d1 - d2) / (12.0 * h)
}

/// `|analytic - numeric| / (abs + rel |numeric|)`: a derivative passes at 1 or below.
pub fn ratio(analytic: f64, numeric: f64, rel: f64, abs: f64) -> f64 {
    (analytic - numeric).abs() / (abs + rel * numeric.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn central_differences_of_a_cubic() {
        // d/dx x^3 = 3 x^2; the central difference adds h^2 exactly for a cubic.
        let cube = |v: &[f64]| v[1].powi(3);
        let got = central_at(&[5.0, 2.0], 1, 1e-3, cube);
        assert!((got - (12.0 + 1e-6)).abs() < 1e-9, "{got}");
        // The five-point rule is exact for a cubic (up to rounding).
        let five = five_point(1e-2, |d| (2.0f64 + d).powi(3));
        assert!((five - 12.0).abs() < 1e-9, "{five}");
        assert!((along(1e-3, |d| (2.0f64 + d).powi(3)) - (12.0 + 1e-6)).abs() < 1e-9);
        assert_eq!(ratio(1.0, 1.0, 1e-5, 1e-8), 0.0);
        assert!((ratio(1.1, 1.0, 0.1, 0.0) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn central_moves_only_the_nudged_coordinate() {
        let x = vec![1.0, 2.0, 3.0];
        let got = central(&x, 0.5, |y, d| y[0] += d, |y| y[0] * 10.0 + y[1] * 100.0 + y[2] * 1000.0);
        assert_eq!(got, 10.0);
    }
}
