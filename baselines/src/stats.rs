//! The statistics of an identification accuracy: the exact Clopper-Pearson interval, the
//! percentile bootstrap over subjects and the exact McNemar test of two paired methods.
//!
//! Everything rests on the binomial distribution, summed term by term in log space
//! ([`binomial_cdf`]), which is exact to rounding for the counts of an identification (up to
//! millions of queries); no incomplete beta function is needed because for integer
//! parameters `I_p(k, n - k + 1) = P(Bin(n, p) >= k)`.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// A two-sided interval at confidence `level`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Interval {
    /// The lower end.
    pub lo: f64,
    /// The upper end.
    pub hi: f64,
    /// The confidence level, e.g. 0.95.
    pub level: f64,
}

/// `ln(i!)` for `i = 0..=n`, accumulated (the rounding grows like `n` ulps, far below what
/// an interval's fourth digit needs).
fn ln_factorials(n: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(n + 1);
    let mut acc = 0.0f64;
    out.push(0.0);
    for i in 1..=n {
        acc += (i as f64).ln();
        out.push(acc);
    }
    out
}

/// `P(X <= k)` for `X ~ Bin(n, p)`: `sum_{i <= k} C(n, i) p^i (1 - p)^(n - i)`, each term
/// computed as `exp(ln C(n, i) + i ln p + (n - i) ln(1 - p))` so that no power underflows
/// before it is multiplied.
pub fn binomial_cdf(k: usize, n: usize, p: f64) -> f64 {
    if k >= n || p <= 0.0 {
        return 1.0;
    }
    if p >= 1.0 {
        return 0.0;
    }
    let lf = ln_factorials(n);
    let (lp, lq) = (p.ln(), (-p).ln_1p());
    let sum: f64 = (0..=k).map(|i| (lf[n] - lf[i] - lf[n - i] + i as f64 * lp + (n - i) as f64 * lq).exp()).sum();
    sum.min(1.0)
}

/// The root of a monotone `f` on `[0, 1]` by bisection: `increasing` says its direction. 100
/// halvings shrink the bracket below the spacing of doubles near 1.
fn bisect(f: impl Fn(f64) -> f64, target: f64, increasing: bool) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if (f(mid) < target) == increasing {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// The Clopper-Pearson exact interval of a proportion `k / n` at confidence `level`:
///
/// ```text
/// lo = B^-1(a/2; k, n - k + 1)       (0 when k = 0),  a = 1 - level
/// hi = B^-1(1 - a/2; k + 1, n - k)   (1 when k = n)
/// ```
///
/// with `B^-1` the inverse of the regularized incomplete beta `I_x(a, b)`. Because
/// `I_p(k, n - k + 1) = P(Bin(n, p) >= k)`, `lo` solves `P(X >= k; lo) = a/2` and `hi` solves
/// `P(X <= k; hi) = a/2`, found by bisection on [`binomial_cdf`]. `n = 0` gives `[0, 1]`.
pub fn clopper_pearson(k: usize, n: usize, level: f64) -> Interval {
    let a = 1.0 - level;
    if n == 0 {
        return Interval { lo: 0.0, hi: 1.0, level };
    }
    let lo = if k == 0 { 0.0 } else { bisect(|p| 1.0 - binomial_cdf(k - 1, n, p), a / 2.0, true) };
    let hi = if k >= n { 1.0 } else { bisect(|p| binomial_cdf(k, n, p), a / 2.0, false) };
    Interval { lo, hi, level }
}

/// The exact two-sided McNemar test of paired outcomes: with `b` pairs where only the first
/// method is right and `c` where only the second is, under the null the `b + c` discordant
/// pairs split as `Bin(b + c, 1/2)`, and
///
/// ```text
/// p = min(1, 2 P(X <= min(b, c))),  X ~ Bin(b + c, 1/2)     (p = 1 when b + c = 0)
/// ```
///
/// (the doubled smaller tail, which for the symmetric `Bin(m, 1/2)` equals scipy's
/// `binomtest(b, b + c, 0.5).pvalue`).
pub fn mcnemar_exact(b: usize, c: usize) -> f64 {
    if b + c == 0 {
        return 1.0;
    }
    (2.0 * binomial_cdf(b.min(c), b + c, 0.5)).min(1.0)
}

/// The `q`-quantile of sorted values by linear interpolation between order statistics
/// (Hyndman-Fan type 7, numpy's default): `h = (n - 1) q`, `x[floor h] + (h - floor h)
/// (x[floor h + 1] - x[floor h])`.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let h = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let (i, f) = (h.floor() as usize, h - h.floor());
    let next = sorted[(i + 1).min(sorted.len() - 1)];
    sorted[i] + f * (next - sorted[i])
}

/// A uniform integer in `0..n` (`n >= 1`), without modulo bias: draws at or above the largest
/// multiple of `n` are rejected.
fn below(rng: &mut ChaCha8Rng, n: usize) -> usize {
    let n = n as u64;
    let zone = (u64::MAX / n) * n;
    loop {
        let x = rng.next_u64();
        if x < zone {
            return (x % n) as usize;
        }
    }
}

/// The percentile bootstrap of a statistic of groups (subjects): each of `resamples`
/// resamples draws `groups` indices with replacement (`ChaCha8Rng::seed_from_u64(seed)`) and
/// computes `stat` of them (`None`: the resample is left out); the interval is the
/// `(1 - level)/2` and `(1 + level)/2` [`quantile`]s of the statistics. The one resampler of
/// the crate: the fingerprint's accuracies and the evaluation's paired MSE differences.
pub fn bootstrap_groups(
    groups: usize,
    (resamples, seed, level): (usize, u64, f64),
    mut stat: impl FnMut(&[usize]) -> Option<f64>,
) -> Interval {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut values = Vec::with_capacity(resamples);
    let mut draw = vec![0usize; groups];
    for _ in 0..resamples {
        for d in draw.iter_mut() {
            *d = below(&mut rng, groups);
        }
        values.extend(stat(&draw));
    }
    values.sort_by(f64::total_cmp);
    Interval { lo: quantile(&values, (1.0 - level) / 2.0), hi: quantile(&values, (1.0 + level) / 2.0), level }
}

/// The percentile bootstrap interval of an accuracy over subjects: `groups[s] = (correct,
/// queries)` of subject `s`. Each resample ([`bootstrap_groups`]) takes the accuracy of all
/// its subjects' queries together, `sum correct / sum queries`. Subjects, not queries, are
/// resampled because a subject's queries are not independent of each other. No group gives
/// `[NaN, NaN]`.
pub fn bootstrap_subjects(groups: &[(usize, usize)], resamples: usize, seed: u64, level: f64) -> Interval {
    if groups.is_empty() {
        return Interval { lo: f64::NAN, hi: f64::NAN, level };
    }
    bootstrap_groups(groups.len(), (resamples, seed, level), |draw| {
        let (c, n) = draw.iter().fold((0usize, 0usize), |(c, n), &g| (c + groups[g].0, n + groups[g].1));
        (n > 0).then(|| c as f64 / n as f64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference values from scipy (10 digits printed with "%.10f"):
    //   from scipy.stats import beta, binom, binomtest
    //   cp = lambda k, n, a=0.05: (beta.ppf(a/2, k, n-k+1) if k else 0.0,
    //                              beta.ppf(1-a/2, k+1, n-k) if k < n else 1.0)
    //   cp(7, 10), cp(0, 10), cp(10, 10), cp(45, 50), cp(1, 19), cp(3, 200, 0.01)
    //   binom.cdf(3, 10, 0.3), binom.cdf(480, 1000, 0.5)
    //   binomtest(1, 7, 0.5).pvalue, binomtest(0, 5, 0.5).pvalue, binomtest(2, 12, 0.5).pvalue,
    //   binomtest(3, 6, 0.5).pvalue, binomtest(40, 100, 0.5).pvalue
    //   numpy.quantile([1, 2, 4, 8], 0.9)
    // (scipy 1.17.1).

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn the_binomial_cdf_matches_scipy() {
        assert!(close(binomial_cdf(3, 10, 0.3), 0.6496107184, 1e-9));
        assert!(close(binomial_cdf(480, 1000, 0.5), 0.1087241466, 1e-9));
        assert_eq!((binomial_cdf(10, 10, 0.3), binomial_cdf(2, 10, 0.0), binomial_cdf(2, 10, 1.0)), (1.0, 1.0, 0.0));
    }

    #[test]
    fn clopper_pearson_matches_scipy() {
        let cases = [
            (7, 10, 0.95, 0.3475471499, 0.9332604888),
            (0, 10, 0.95, 0.0, 0.3084971078),
            (10, 10, 0.95, 0.6915028922, 1.0),
            (45, 50, 0.95, 0.7818646336, 0.9667249064),
            (1, 19, 0.95, 0.0013316288, 0.2602806542),
            (3, 200, 0.99, 0.0016963810, 0.0538034452),
        ];
        for (k, n, level, lo, hi) in cases {
            let i = clopper_pearson(k, n, level);
            assert!(close(i.lo, lo, 1e-8) && close(i.hi, hi, 1e-8), "k={k} n={n}: {i:?} vs [{lo}, {hi}]");
        }
        assert_eq!(clopper_pearson(0, 0, 0.95), Interval { lo: 0.0, hi: 1.0, level: 0.95 });
    }

    #[test]
    fn mcnemar_matches_scipy_binomtest() {
        for (b, c, p) in [(1, 6, 0.125), (0, 5, 0.0625), (2, 10, 0.0385742188), (3, 3, 1.0), (40, 60, 0.0568879336)] {
            assert!(close(mcnemar_exact(b, c), p, 1e-7), "b={b} c={c}: {} vs {p}", mcnemar_exact(b, c));
            assert_eq!(mcnemar_exact(b, c), mcnemar_exact(c, b), "symmetric");
        }
        assert_eq!(mcnemar_exact(0, 0), 1.0);
    }

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let x = [1.0, 2.0, 4.0, 8.0];
        assert_eq!((quantile(&x, 0.0), quantile(&x, 1.0), quantile(&x, 0.5)), (1.0, 8.0, 3.0));
        assert!(close(quantile(&x, 0.9), 6.8, 1e-12));
    }

    #[test]
    fn the_bootstrap_spans_what_the_subjects_allow() {
        // Every subject right: every resample is 1.
        let all = bootstrap_subjects(&[(2, 2), (2, 2), (2, 2)], 500, 1, 0.95);
        assert_eq!((all.lo, all.hi), (1.0, 1.0));
        // One subject right, one wrong: resamples are 0, 1/2 or 1 with probabilities 1/4, 1/2,
        // 1/4, so the 95 % interval is [0, 1] and the median 1/2.
        let half = bootstrap_subjects(&[(1, 1), (0, 1)], 2000, 7, 0.95);
        assert_eq!((half.lo, half.hi), (0.0, 1.0));
        assert_eq!(bootstrap_subjects(&[(1, 1), (0, 1)], 2000, 7, 0.4), Interval { lo: 0.5, hi: 0.5, level: 0.4 });
        assert_eq!(half, bootstrap_subjects(&[(1, 1), (0, 1)], 2000, 7, 0.95), "the seed fixes it");
    }
}
