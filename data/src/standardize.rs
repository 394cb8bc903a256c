//! Run-wise standardization: each parcel of a run to mean 0 and population standard deviation 1,
//! in f64; a constant parcel becomes zeros, a non-finite value is an error.
//!
//! The two-pass formula `(x - mean) / sd` overflows when a parcel's values are near 1e200
//! (their squares are infinite) or underflows near 1e-300 (their squares are 0), and either
//! way the parcel looked constant. So each parcel is first scaled by the power of two nearest
//! below its largest magnitude, which brings every value into `[-2, 2]`: scaling by a power of
//! two is exact, and so commutes with every rounding of the formula, so an ordinary parcel
//! standardizes to exactly the bits the unscaled formula gives, and an extreme one to what it
//! would give had f64 more exponent. A parcel is constant when its values are all equal
//! (tested as such: the rounded mean of equal values such as 0.1 need not equal them, and the
//! formula then made noise of a constant); it alone becomes zeros.

use std::borrow::Cow;

/// A non-finite value in [`standardize`]'s input.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct NonFinite {
    /// The 0-based row (TR).
    pub row: usize,
    /// The 0-based parcel (column).
    pub parcel: usize,
    /// The value (NaN or an infinity).
    pub value: f64,
}

/// `2^k` for `k` in the normal exponents `-1022..=1023`.
fn pow2(k: i32) -> f64 {
    debug_assert!((-1022..=1023).contains(&k));
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// `floor(log2 m)` of a finite `m > 0`, subnormals included.
fn exponent(m: f64) -> i32 {
    let e = ((m.to_bits() >> 52) & 0x7ff) as i32;
    if e == 0 {
        exponent(m * pow2(64)) - 64
    } else {
        e - 1023
    }
}

/// `x * 2^k` for `k` in `-1074 - 1023 ..= 1074 + 1022`, in two exact steps.
fn scale(x: f64, k: i32) -> f64 {
    let a = k.clamp(-1022, 1023);
    x * pow2(a) * pow2(k - a)
}

/// How one parcel of a run is standardized: `z = (x 2^shift - mean) / sd`, where `mean` and
/// `sd` are those of the shifted values (population standard deviation). A constant parcel has
/// `sd == 0`, `shift == 0` and `mean` its value, and standardizes to zeros. [`ParcelStats::apply`]
/// is the one formula: a run standardized in place and a run standardized when its tokens are
/// made give the same bits.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct ParcelStats {
    /// The power of two the values are first scaled by (exact).
    pub shift: i32,
    /// The mean of the scaled values.
    pub mean: f64,
    /// Their population standard deviation; 0 for a constant parcel.
    pub sd: f64,
}

impl ParcelStats {
    /// The standardized value of `x`.
    #[inline]
    pub fn apply(&self, x: f64) -> f64 {
        if self.sd == 0.0 {
            0.0
        } else {
            (scale(x, self.shift) - self.mean) / self.sd
        }
    }

    /// The value in the run's own units whose standardized value is `z` (up to rounding; for
    /// a constant parcel, its value).
    pub fn undo(&self, z: f64) -> f64 {
        scale(z * self.sd + self.mean, -self.shift)
    }

    /// The parcel's mean in the run's own units.
    pub fn mean_in_units(&self) -> f64 {
        scale(self.mean, -self.shift)
    }

    /// Its standard deviation in the run's own units.
    pub fn sd_in_units(&self) -> f64 {
        scale(self.sd, -self.shift)
    }
}

/// The statistics of every parcel of `x[n, p]` held in memory (row-major), or the first
/// non-finite value in row-major order.
pub fn parcel_stats(data: &[f64], n: usize, p: usize) -> Result<Vec<ParcelStats>, NonFinite> {
    let rows = |t0: usize, t1: usize| Ok::<_, std::convert::Infallible>(Cow::Borrowed(&data[t0 * p..t1 * p]));
    match parcel_stats_rows(n, p, n.max(1), rows) {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

/// A visit of one row (its index, its values) by a pass of [`parcel_stats_rows`].
type RowVisit<'f> = dyn FnMut(usize, &[f64]) -> Result<(), NonFinite> + 'f;

/// The statistics of every parcel of a run of `n` rows of `p` values read `chunk` rows at a
/// time by `rows(t0, t1)` (row-major values of rows `t0..t1`), in three passes: the largest
/// magnitude, equality and finiteness; the mean of the scaled values; their variance. Each sum
/// runs over the rows in order, so a run read from disk in chunks gets the bits of one held in
/// memory. The outer error is `rows`'s, the inner the first non-finite value.
pub fn parcel_stats_rows<'a, E>(
    n: usize,
    p: usize,
    chunk: usize,
    mut rows: impl FnMut(usize, usize) -> Result<Cow<'a, [f64]>, E>,
) -> Result<Result<Vec<ParcelStats>, NonFinite>, E> {
    let chunk = chunk.max(1);
    let mut each_row = |f: &mut RowVisit<'_>| -> Result<Result<(), NonFinite>, E> {
        for t0 in (0..n).step_by(chunk) {
            let t1 = (t0 + chunk).min(n);
            let block = rows(t0, t1)?;
            for (i, row) in block.chunks_exact(p.max(1)).enumerate() {
                if let Err(e) = f(t0 + i, row) {
                    return Ok(Err(e));
                }
            }
        }
        Ok(Ok(()))
    };
    let (mut first, mut equal, mut big) = (vec![0.0f64; p], vec![true; p], vec![0.0f64; p]);
    let pass1 = each_row(&mut |t, row| {
        for (q, &v) in row.iter().enumerate() {
            if !v.is_finite() {
                return Err(NonFinite { row: t, parcel: q, value: v });
            }
            if t == 0 {
                first[q] = v;
            }
            // All values equal: constant, whatever the rounding of their mean would make of them.
            equal[q] &= v == first[q];
            big[q] = big[q].max(v.abs());
        }
        Ok(())
    })?;
    if let Err(e) = pass1 {
        return Ok(Err(e));
    }
    // y = x / 2^e lies in (-2, 2).
    let shift: Vec<i32> = big.iter().map(|&b| if b > 0.0 { -exponent(b) } else { 0 }).collect();
    let mut sum = vec![0.0f64; p];
    let _ = each_row(&mut |_, row| {
        for (q, &v) in row.iter().enumerate() {
            sum[q] += scale(v, shift[q]);
        }
        Ok(())
    })?;
    let mean: Vec<f64> = sum.iter().map(|s| s / n as f64).collect();
    let mut sq = vec![0.0f64; p];
    let _ = each_row(&mut |_, row| {
        for (q, &v) in row.iter().enumerate() {
            sq[q] += (scale(v, shift[q]) - mean[q]).powi(2);
        }
        Ok(())
    })?;
    // Not all equal, and the largest magnitude is in [1, 2): some value lies at least 2^-53
    // from the mean, so var > 0.
    Ok(Ok((0..p)
        .map(|q| {
            if equal[q] {
                ParcelStats { shift: 0, mean: first[q], sd: 0.0 }
            } else {
                ParcelStats { shift: shift[q], mean: mean[q], sd: (sq[q] / n as f64).sqrt() }
            }
        })
        .collect()))
}

/// Standardizes `x[n, p]` per parcel in place (mean 0, population std 1); returns each
/// parcel's statistics (a constant parcel, `sd == 0`, is set to zeros), or the first
/// non-finite value (row-major order), leaving `data` unchanged.
pub fn standardize(data: &mut [f64], n: usize, p: usize) -> Result<Vec<ParcelStats>, NonFinite> {
    let stats = parcel_stats(data, n, p)?;
    for (i, v) in data[..n * p].iter_mut().enumerate() {
        *v = stats[i % p].apply(*v);
    }
    Ok(stats)
}

/// The parcels of `stats` that are constant.
pub fn constant_parcels(stats: &[ParcelStats]) -> Vec<usize> {
    stats.iter().enumerate().filter(|(_, s)| s.sd == 0.0).map(|(q, _)| q).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponents_and_exact_scaling() {
        for (m, e) in [(1.0, 0), (1.5, 0), (2.0, 1), (0.75, -1), (f64::MAX, 1023), (f64::MIN_POSITIVE, -1022)] {
            assert_eq!(exponent(m), e, "{m}");
        }
        assert_eq!(exponent(5e-324), -1074);
        assert_eq!(exponent(3.0 * 5e-324), -1073);
        assert_eq!(scale(5e-324, 1074), 1.0);
        assert_eq!(scale(f64::MAX, -1023), f64::MAX / pow2(1023));
        assert_eq!(scale(1.7e308, -exponent(1.7e308)).abs().floor(), 1.0);
    }

    #[test]
    fn the_values_of_one_parcel_scale_into_minus_two_two() {
        for v in [1e300, -1e-310, 3.0, f64::MAX, 5e-324] {
            let y = scale(v, -exponent(v.abs()));
            assert!((1.0..2.0).contains(&y.abs()), "{v} -> {y}");
        }
    }

    #[test]
    fn a_non_finite_value_is_refused_with_its_place() {
        let mut x = vec![1.0, 2.0, 3.0, f64::NEG_INFINITY, 5.0, f64::NAN];
        let before = x.clone();
        assert_eq!(standardize(&mut x, 3, 2), Err(NonFinite { row: 1, parcel: 1, value: f64::NEG_INFINITY }));
        assert_eq!(x[..3], before[..3], "unchanged");
    }

    #[test]
    fn constant_parcels_at_any_scale_have_zero_variance() {
        for c in [0.0, 1e200, -1e-310, f64::MAX, 7.0, 0.1, 3e200] {
            let n = 20;
            let mut x: Vec<f64> = (0..n).flat_map(|t| [c, t as f64]).collect();
            assert_eq!(constant_parcels(&standardize(&mut x, n, 2).unwrap()), vec![0], "{c}");
            assert!((0..n).all(|t| x[2 * t] == 0.0), "{c}: {x:?}");
        }
    }

    #[test]
    fn undo_gives_the_values_back() {
        let (n, p) = (30, 3);
        let x: Vec<f64> = (0..n * p).map(|i| ((i * 13) % 17) as f64 * [1.0, 1e250, 3e-200][i % p] + 5.0).collect();
        let mut z = x.clone();
        let stats = standardize(&mut z, n, p).unwrap();
        for (i, (a, b)) in x.iter().zip(&z).enumerate() {
            let back = stats[i % p].undo(*b);
            assert!(
                (back - a).abs() <= 4.0 * f64::EPSILON * a.abs().max(stats[i % p].sd_in_units()),
                "{i}: {a} vs {back}"
            );
        }
        assert!((stats[0].mean_in_units() - x.iter().step_by(3).sum::<f64>() / n as f64).abs() < 1e-12);
        let c = ParcelStats { shift: 0, mean: 7.5, sd: 0.0 };
        assert_eq!((c.apply(7.5), c.undo(0.0)), (0.0, 7.5));
    }
}
