//! The PCA-reduced VAR baseline (`var_pca`): every parcel forecast from the last `p` TRs of
//! the first `r` principal components of the parcels (a reduced-rank VAR whose inputs are
//! the components of largest variance), fitted directly for every lead by ridge regression.
//!
//! The components are the eigenvectors of the lag-0 moments `sum x(n) x(n)'` of the training
//! samples (of a fold's training part in cross-validation, so a held-out fold does not pick
//! them). The moments of the projected features are `T' X'X T` and `T' X'Y`, `T` the
//! components at every lag, computed from the VAR's moments ([`super::var`]) without
//! revisiting the data. The rank `r` ([`ranks`]: powers of two below `P`), the order `p` (up
//! to the VAR's `p_max`) and the penalty ([`RIDGE_GRID`]) are chosen together by
//! cross-validation ([`super::cv`]); candidates go simplest first: fewer inputs `r p`, then
//! the lower order, then the larger penalty. The coefficients are mapped back to the parcels
//! (`T w`), so the fit forecasts like a VAR of order `p` and rank at most `r p`. Without
//! cross-validation the default is the largest rank, order 1 and [`DEFAULT_RIDGE`].

use super::cv::{choose, cv_mse, FoldError};
use super::linear::{Coupling, LinearFit};
use super::moments::Moments;
use super::ridge::{sse, RidgeFactor};
use super::var::{CvPoint, VarBaseline, VarChoice, DEFAULT_RIDGE, RIDGE_GRID};
use crate::BaselineError;
use nalgebra::{DMatrix, SymmetricEigen};

/// The ranks `var_pca` considers: 1, 2, 4, ... below `parcels` (a rank of `P` is `var_p`).
pub fn ranks(parcels: usize) -> Vec<usize> {
    (0..usize::BITS).map(|k| 1usize << k).take_while(|&r| r < parcels).collect()
}

/// The parcels' principal directions (columns, by decreasing variance) of the lag-0 block of
/// `m`.
fn components(m: &Moments, np: usize) -> DMatrix<f64> {
    let e = SymmetricEigen::new(m.xx.view((0, 0), (np, np)).into_owned());
    let mut idx: Vec<usize> = (0..np).collect();
    idx.sort_by(|&a, &b| e.eigenvalues[b].total_cmp(&e.eigenvalues[a]));
    DMatrix::from_fn(np, np, |i, j| e.eigenvectors[(i, idx[j])])
}

/// `T`: the first `r` components at each of `order` lags (`order P x order r`, lag-major).
fn lift(u: &DMatrix<f64>, r: usize, order: usize) -> DMatrix<f64> {
    let np = u.nrows();
    let mut t = DMatrix::zeros(order * np, order * r);
    for k in 0..order {
        t.view_mut((k * np, k * r), (np, r)).copy_from(&u.columns(0, r));
    }
    t
}

/// The moments of the projected features `T' x` (the leading `T.nrows()` features of `m`).
fn project(m: &Moments, t: &DMatrix<f64>) -> Moments {
    let f = t.nrows();
    let xx = t.transpose() * m.xx.view((0, 0), (f, f)) * t;
    Moments { xx, xy: t.transpose() * m.xy.rows(0, f), yy: m.yy.clone(), rows: m.rows }
}

/// A candidate: rank, order, penalty.
type Candidate = (usize, usize, f64);

/// Every candidate, simplest first (see the module documentation).
fn candidates(ranks: &[usize], p_max: usize) -> Vec<Candidate> {
    let mut c: Vec<Candidate> =
        ranks.iter().flat_map(|&r| (1..=p_max).flat_map(move |q| RIDGE_GRID.iter().map(move |&a| (r, q, a)))).collect();
    // A stable sort keeps the grid's order (larger penalties first) within a rank and order.
    c.sort_by_key(|&(r, q, _)| (r * q, q));
    c
}

/// `errors[c][f]` of the candidates `cands`: fitted without fold `f` (components included),
/// scored on it; an infinite error where a penalty cannot be factored.
fn cv_errors(
    fm: &[Moments],
    all: &Moments,
    cands: &[Candidate],
    (p_max, np, nl): (usize, usize, usize),
) -> Vec<Vec<FoldError>> {
    let mut errors = vec![vec![FoldError::default(); fm.len()]; cands.len()];
    if fm.len() < 2 {
        return errors;
    }
    for (f, fold) in fm.iter().enumerate() {
        let train = all.minus(fold);
        let u = components(&train, np);
        for r in ranks(np) {
            let t = lift(&u, r, p_max);
            let (tz, fz) = (project(&train, &t), project(fold, &t));
            for &alpha in &RIDGE_GRID {
                let factor = RidgeFactor::new(&tz, p_max * r, alpha);
                for q in 1..=p_max {
                    let err = factor.as_ref().map_or(f64::INFINITY, |fa| sse(&fa.solve(&tz, q * r), &fz));
                    let c = cands.iter().position(|&x| x == (r, q, alpha)).unwrap_or(0);
                    errors[c][f] = FoldError { sse: err, count: fold.rows * nl * np };
                }
            }
        }
    }
    errors
}

/// Fits `var_pca` from the VAR's fold moments `fm` (of order `p_max`) and their total `all`,
/// for `n_leads` leads of `np` parcels.
pub fn fit_var_pca(
    fm: &[Moments],
    all: &Moments,
    (p_max, np, n_leads): (usize, usize, usize),
) -> Result<VarBaseline, BaselineError> {
    let rs = ranks(np);
    let Some(&largest) = rs.last() else {
        return Ok(VarBaseline::skipped(format!("{np} parcel: no rank below the parcels' to reduce to")));
    };
    let cands = candidates(&rs, p_max);
    let errors = cv_errors(fm, all, &cands, (p_max, np, n_leads));
    let default = cands.iter().position(|&c| c == (largest, 1, DEFAULT_RIDGE)).unwrap_or(0);
    let (r, p, lambda) = cands[choose(&errors, default)];
    let cross = fm.len() >= 2;
    let cv = if cross {
        cands
            .iter()
            .zip(&errors)
            .map(|(&(r, p, lambda), e)| CvPoint { p, rank: Some(r), lambda, mse: cv_mse(e) })
            .collect()
    } else {
        Vec::new()
    };
    let u = components(all, np);
    let z = project(all, &lift(&u, r, p));
    let factor = RidgeFactor::new(&z, p * r, lambda).ok_or_else(|| BaselineError::Fit {
        name: "var_pca".into(),
        reason: format!("the ridge system of rank {r}, order {p} with penalty {lambda:e} is not positive definite"),
    })?;
    let coefs = (1..=p).map(|q| lift(&u, r, q) * factor.solve(&z, q * r)).collect();
    Ok(VarBaseline {
        fit: Some(LinearFit { coupling: Coupling::Full, parcels: np, coefs }),
        choice: VarChoice::Fitted { p, rank: Some(r), lambda, p_max, cv },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_go_simplest_first_and_ranks_stay_below_the_parcels() {
        assert_eq!(ranks(8), [1, 2, 4]);
        assert_eq!(ranks(9), [1, 2, 4, 8]);
        assert!(ranks(1).is_empty());
        let c = candidates(&[1, 2], 2);
        let g = RIDGE_GRID.len();
        assert_eq!(c.len(), 4 * g);
        // r p = 1 first (rank 1, order 1), then r p = 2: rank 2 order 1 before rank 1 order 2.
        assert_eq!((c[0], c[g - 1]), ((1, 1, RIDGE_GRID[0]), (1, 1, RIDGE_GRID[g - 1])));
        assert_eq!((c[g].0, c[g].1, c[2 * g].0, c[2 * g].1), (2, 1, 1, 2));
    }

    #[test]
    fn the_projection_of_the_moments_is_the_moments_of_the_projection() {
        // Two samples of 2 parcels at order 1: x = (1, 2), (3, -1); one target y = (1, 0).
        let x = DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 3.0, -1.0]);
        let y = DMatrix::from_row_slice(2, 1, &[1.0, 0.0]);
        let m = Moments {
            xx: x.transpose() * &x,
            xy: x.transpose() * &y,
            yy: nalgebra::DVector::from_element(1, 1.0),
            rows: 2,
        };
        let u = components(&m, 2);
        // The first component carries the larger variance, and the columns are orthonormal.
        let var = |j: usize| (&x * u.column(j)).norm_squared();
        assert!(var(0) >= var(1));
        assert!((u.transpose() * &u - DMatrix::<f64>::identity(2, 2)).abs().max() < 1e-12);
        let t = lift(&u, 1, 1);
        let z = &x * &t;
        let p = project(&m, &t);
        assert!((p.xx[(0, 0)] - z.norm_squared()).abs() < 1e-12);
        assert!((p.xy[(0, 0)] - (z.transpose() * &y)[(0, 0)]).abs() < 1e-12);
    }
}
