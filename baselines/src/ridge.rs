//! A ridge (or least-squares) solve from [`Moments`] and its squared error on other moments,
//! which is how a cross-validation fold is scored without revisiting its data.
//!
//! The penalty is relative: `alpha` minimizes `sum (y - w'x)^2 + alpha n |w|^2` over the `n`
//! training samples, i.e. the mean squared error plus `alpha |w|^2`; on standardized data
//! (unit variance) `X'X / n` has a unit diagonal, so `alpha` is in units of that diagonal and
//! does not depend on how much data there is. The solve is nalgebra's Cholesky of
//! `X'X + alpha n I`, for every target at once.
//!
//! [`RidgeFactor`] serves every order of a VAR at once: the Cholesky factor `L` of the
//! leading `q` rows and columns of `A = X'X + alpha n I` is the leading block of `A`'s, and
//! so is `L^-1`'s, so one factor and one triangular inverse give `A_q^-1 = L_q^-T L_q^-1` for
//! every `q`, and the coefficients are two matrix products (nalgebra's `matrixmultiply`
//! kernels, much faster than a triangular solve per right-hand side).

use super::moments::Moments;
use nalgebra::{Cholesky, DMatrix};

/// The inverse Cholesky factor `L^-1` of `X'X + alpha n I` of some moments.
pub struct RidgeFactor {
    linv: DMatrix<f64>,
}

impl RidgeFactor {
    /// The factor of the leading `features` of `m` with relative penalty `alpha`; `None` when
    /// the system is not positive definite.
    pub fn new(m: &Moments, features: usize, alpha: f64) -> Option<RidgeFactor> {
        let mut a = m.xx.view((0, 0), (features, features)).into_owned();
        let ridge = alpha * m.rows as f64;
        for i in 0..features {
            a[(i, i)] += ridge;
        }
        let l = Cholesky::new(a)?.unpack();
        let mut linv = DMatrix::identity(features, features);
        l.solve_lower_triangular_mut(&mut linv).then_some(())?;
        linv.iter().all(|v| v.is_finite()).then_some(RidgeFactor { linv })
    }

    /// The coefficients (the leading `q` features x every target of `m`), `L_q^-T L_q^-1 X'Y`.
    pub fn solve(&self, m: &Moments, q: usize) -> DMatrix<f64> {
        let li = self.linv.view((0, 0), (q, q));
        let y = li * m.xy.rows(0, q);
        li.transpose() * y
    }
}

/// The coefficients (the leading `q` features x every target) of the ridge fit with
/// relative penalty `alpha` on the moments `m`; `None` when `X'X + alpha n I` is not
/// positive definite (too few samples for an unpenalized fit).
pub fn solve(m: &Moments, q: usize, alpha: f64) -> Option<DMatrix<f64>> {
    let mut a = m.xx.view((0, 0), (q, q)).into_owned();
    let ridge = alpha * m.rows as f64;
    for i in 0..q {
        a[(i, i)] += ridge;
    }
    let w = Cholesky::new(a)?.solve(&m.xy.rows(0, q));
    w.iter().all(|v| v.is_finite()).then_some(w)
}

/// The squared error of the coefficients `w` (q x targets) on the samples of `m`, summed
/// over samples and targets: `sum_t (y_t'y_t - 2 w_t'X'y_t + w_t'X'X w_t)`.
pub fn sse(w: &DMatrix<f64>, m: &Moments) -> f64 {
    let q = w.nrows();
    let gw = m.xx.view((0, 0), (q, q)) * w;
    (m.yy.sum() - 2.0 * w.dot(&m.xy.rows(0, q)) + w.dot(&gw)).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::moments::Design;
    use boldcast_data::Dataset;
    use boldcast_fixtures::{Ar1Spec, Layout};

    #[test]
    fn the_solve_is_least_squares_and_its_error_is_the_residual() {
        let fx = Ar1Spec::new(Layout { subjects: 1, runs: 1, trs: 300, parcels: 2, seed: 9 }, 0.8);
        let ds = Dataset::from_synth(&fx.generate().unwrap(), None).unwrap();
        let d = Design { order: 2, leads: vec![1], parcel: Some(0), parcels: 2 };
        let mut m = Moments::zeros(&d);
        m.add_run(&d, &ds.runs[0]).unwrap();
        let x: Vec<f64> = ds.series().unwrap()[0][0].clone();
        // Least squares of x(n+1) on x(n), x(n-1) by the normal equations, by hand.
        let ns: Vec<usize> = (1..x.len() - 1).collect();
        let s = |a: usize, b: usize| ns.iter().map(|&n| x[n - a] * x[n - b]).sum::<f64>();
        let r = |a: usize| ns.iter().map(|&n| x[n - a] * x[n + 1]).sum::<f64>();
        let det = s(0, 0) * s(1, 1) - s(0, 1).powi(2);
        let w0 = (r(0) * s(1, 1) - r(1) * s(0, 1)) / det;
        let w1 = (r(1) * s(0, 0) - r(0) * s(0, 1)) / det;
        let w = solve(&m, 2, 0.0).unwrap();
        assert!((w[(0, 0)] - w0).abs() < 1e-10 && (w[(1, 0)] - w1).abs() < 1e-10, "{w} vs {w0} {w1}");
        let resid: f64 = ns.iter().map(|&n| (x[n + 1] - w0 * x[n] - w1 * x[n - 1]).powi(2)).sum();
        assert!((sse(&w, &m) - resid).abs() < 1e-8 * resid);
        // The order-1 fit from the leading block: sum x(n) x(n+1) / sum x(n)^2.
        let w = solve(&m, 1, 0.0).unwrap();
        assert!((w[(0, 0)] - r(0) / s(0, 0)).abs() < 1e-12);
        // A penalty shrinks: alpha n is added to the diagonal.
        let w = solve(&m, 1, 0.5).unwrap();
        assert!((w[(0, 0)] - r(0) / (s(0, 0) + 0.5 * ns.len() as f64)).abs() < 1e-12);
        // No samples, no unpenalized fit.
        assert!(solve(&Moments::zeros(&d), 2, 0.0).is_none());
        // The factor of order 2 gives the same coefficients for orders 1 and 2.
        let f = RidgeFactor::new(&m, 2, 1e-3).unwrap();
        for q in [1, 2] {
            let (a, b) = (f.solve(&m, q), solve(&m, q, 1e-3).unwrap());
            assert!((a - b).abs().max() < 1e-12, "order {q}");
        }
        assert!(RidgeFactor::new(&Moments::zeros(&d), 2, 0.0).is_none());
    }
}
