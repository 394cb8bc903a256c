//! LayerNorm over the last axis (MODEL.md: eps 1e-5, biased variance) and its backward
//! (BACKWARD.md, "Small pieces"):
//! `xh = (x - mean) r`, `r = (var + eps)^-1/2`, `y = xh w + b`;
//! `g_w += g_y xh`, `g_b += g_y`, `a = g_y w`, `g_x = r (a - mean(a) - xh mean(a xh))`.
//!
//! The `*_rows` functions are serial (for callers that already run per block); [`forward`]
//! and [`backward`] split the rows over rayon with the fixed partition of [`crate::par`].

use super::{simd, CpuElem};
use crate::{multiversion, par};

/// The epsilon added to the variance.
pub const EPS: f64 = 1e-5;

/// Rows per parallel block (small rows are cheap; fewer blocks mean fewer partial sums).
const MIN_ROWS: usize = 128;

/// Mean and `r = (var + eps)^-1/2` of one row (two passes: the variance of BOLD embeddings
/// can be small next to their mean, where `E[x^2] - E[x]^2` cancels). The sums use fixed lane
/// accumulators ([`simd::sum_map`]), so they vectorize and do not depend on the vector width.
#[inline(always)]
fn stats<E: CpuElem>(row: &[E]) -> (E, E) {
    let m = E::of(row.len() as f64);
    let mean = simd::sum_map(row, |v| v) / m;
    let var = simd::sum_map(row, |v| (v - mean) * (v - mean)) / m;
    (mean, (var + E::of(EPS)).sqrt().recip())
}

/// `y = LayerNorm(x)` for `rows` rows of width `m`, serially. Overwrites `y`.
pub fn forward_rows<E: CpuElem>(x: &[E], rows: usize, m: usize, w: &[E], b: &[E], y: &mut [E]) {
    assert!(x.len() == rows * m && y.len() == rows * m, "layernorm: buffers are not {rows}x{m}");
    assert!(w.len() == m && b.len() == m, "layernorm: affine parameters are not of width {m}");
    forward_kernel(x, m, w, b, y);
}

multiversion! {
    fn forward_kernel<E: CpuElem>(x: &[E], m: usize, w: &[E], b: &[E], y: &mut [E]) {
        let (w, b) = (&w[..m], &b[..m]);
        for (xr, yr) in x.chunks_exact(m).zip(y.chunks_exact_mut(m)) {
            let (mean, r) = stats(xr);
            let yr = &mut yr[..m];
            for i in 0..m {
                yr[i] = (xr[i] - mean) * r * w[i] + b[i];
            }
        }
    }
}

/// The gradients a backward adds to: of the input `x` and of the affine `w` and `b`.
#[derive(Debug)]
pub struct Grads<'a, E> {
    /// `(rows, m)`, like the input.
    pub x: &'a mut [E],
    /// `(m)`.
    pub w: &'a mut [E],
    /// `(m)`.
    pub b: &'a mut [E],
}

/// Backward of [`forward_rows`], serially: `g.x += ...`, `g.w += ...`, `g.b += ...`
/// (all three accumulate, so residual gradients and per-block partials add up in place).
pub fn backward_rows<E: CpuElem>(x: &[E], rows: usize, m: usize, w: &[E], g_y: &[E], g: Grads<'_, E>) {
    assert!(x.len() == rows * m && g_y.len() == rows * m && g.x.len() == rows * m, "layernorm: not {rows}x{m}");
    assert!(w.len() == m && g.w.len() == m && g.b.len() == m, "layernorm: parameters are not of width {m}");
    backward_kernel(x, m, w, g_y, g.x, g.w, g.b);
}

multiversion! {
    fn backward_kernel<E: CpuElem>(x: &[E], m: usize, w: &[E], g_y: &[E], g_x: &mut [E], g_w: &mut [E], g_b: &mut [E]) {
        let inv_m = E::of(1.0 / m as f64);
        let (w, g_w, g_b) = (&w[..m], &mut g_w[..m], &mut g_b[..m]);
        for ((xr, gyr), gxr) in x.chunks_exact(m).zip(g_y.chunks_exact(m)).zip(g_x.chunks_exact_mut(m)) {
            let (mean, r) = stats(xr);
            let (gyr, gxr) = (&gyr[..m], &mut gxr[..m]);
            for i in 0..m {
                let xh = (xr[i] - mean) * r;
                g_w[i] += gyr[i] * xh;
                g_b[i] += gyr[i];
            }
            // a = g_y w; sums of a and of a xh.
            let sa = simd::sum_zip(gyr, w, |g, wv| g * wv);
            let saxh = simd::sum_zip3(gyr, w, xr, |g, wv, xv| g * wv * ((xv - mean) * r));
            let (ma, maxh) = (sa * inv_m, saxh * inv_m);
            for i in 0..m {
                let xh = (xr[i] - mean) * r;
                gxr[i] += r * (gyr[i] * w[i] - ma - xh * maxh);
            }
        }
    }
}

/// `y = LayerNorm(x)`, rows in parallel. Overwrites `y`.
pub fn forward<E: CpuElem>(x: &[E], rows: usize, m: usize, w: &[E], b: &[E], y: &mut [E]) {
    assert_eq!(x.len(), rows * m, "layernorm: input is not {rows}x{m}");
    par::map_blocks(rows, MIN_ROWS, y, m, |r, yb| forward_rows(&x[r.start * m..r.end * m], r.len(), m, w, b, yb));
}

/// Backward of [`forward`], rows in parallel: `g.x += ...` per row; `g.w`, `g.b` accumulate
/// per-block partials reduced in block order (deterministic for any thread count).
pub fn backward<E: CpuElem>(x: &[E], rows: usize, m: usize, w: &[E], g_y: &[E], g: Grads<'_, E>) {
    assert!(x.len() == rows * m && g_y.len() == rows * m, "layernorm: buffers are not {rows}x{m}");
    let Grads { x: g_x, w: g_w, b: g_b } = g;
    let parts = par::map_blocks(rows, MIN_ROWS, g_x, m, |r, gx| {
        let mut p = vec![E::zero(); 2 * m];
        let (pw, pb) = p.split_at_mut(m);
        let s = r.start * m..r.end * m;
        backward_rows(&x[s.clone()], r.len(), m, w, &g_y[s], Grads { x: gx, w: pw, b: pb });
        p
    });
    let mut acc = vec![E::zero(); 2 * m];
    par::add_in_order(&mut acc, &parts);
    for i in 0..m {
        g_w[i] += acc[i];
        g_b[i] += acc[m + i];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boldcast_testkit::fd::central_at;

    fn lcg(seed: u64, n: usize) -> Vec<f64> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
            })
            .collect()
    }

    /// The loss `sum(c * LayerNorm(x))` for fixed random `c`.
    fn loss(x: &[f64], rows: usize, m: usize, w: &[f64], b: &[f64], c: &[f64]) -> f64 {
        let mut y = vec![0.0; rows * m];
        forward(x, rows, m, w, b, &mut y);
        y.iter().zip(c).map(|(a, b)| a * b).sum()
    }

    #[test]
    fn forward_is_normalised() {
        let (rows, m) = (3, 8);
        let x = lcg(1, rows * m);
        let mut y = vec![0.0; rows * m];
        forward(&x, rows, m, &[1.0; 8], &[0.0; 8], &mut y);
        for r in y.chunks(m) {
            let mean: f64 = r.iter().sum::<f64>() / m as f64;
            let var: f64 = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / m as f64;
            assert!(mean.abs() < 1e-12);
            // var(xh) = var / (var + eps): just under 1.
            assert!((var - 1.0).abs() < 1e-3 && var < 1.0, "{var}");
        }
    }

    #[test]
    fn backward_matches_finite_differences() {
        // Enough rows for several parallel blocks.
        let (rows, m) = (300, 5);
        let x = lcg(2, rows * m);
        let w: Vec<f64> = lcg(3, m).iter().map(|v| 1.0 + 0.3 * v).collect();
        let b = lcg(4, m);
        let c = lcg(5, rows * m);
        let (mut gx, mut gw, mut gb) = (vec![0.0; rows * m], vec![0.0; m], vec![0.0; m]);
        backward(&x, rows, m, &w, &c, Grads { x: &mut gx, w: &mut gw, b: &mut gb });
        let h = 1e-6;
        let check = |analytic: f64, num: f64, what: &str| {
            assert!((analytic - num).abs() <= 1e-6 + 1e-6 * num.abs(), "{what}: {analytic} vs {num}");
        };
        for i in [0, 7, 333, rows * m - 1] {
            check(gx[i], central_at(&x, i, h, |x| loss(x, rows, m, &w, &b, &c)), "g_x");
        }
        for i in 0..m {
            check(gw[i], central_at(&w, i, h, |w| loss(&x, rows, m, w, &b, &c)), "g_w");
            check(gb[i], central_at(&b, i, h, |b| loss(&x, rows, m, &w, b, &c)), "g_b");
        }
    }
}
