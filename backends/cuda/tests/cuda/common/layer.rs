//! The checks of a whole layer against an f64 reference, shared by the Mamba-1 and Mamba-2
//! layer tests: the forward output, every gradient against the reference's own central
//! differences in f64, and central differences of the f32 layer on a few coordinates.

use boldcast_cuda::pool::Pool;
use boldcast_testkit::fd;

/// A layer under test: its f32 passes and its f64 reference, parameters in state-dict order.
pub trait Layer {
    /// The parameters (and gradients).
    type Params: Clone;
    /// The parameters' tensors, in state-dict order.
    fn tensors(p: &Self::Params) -> Vec<&[f32]>;
    /// The same, mutably.
    fn tensors_mut(p: &mut Self::Params) -> Vec<&mut [f32]>;
    /// The f32 forward's output for `u`.
    fn forward(p: &Self::Params, u: &[f32], pool: &Pool) -> Vec<f32>;
    /// The f32 layer's output, input gradient and parameter gradients for `g_out`.
    fn run(p: &Self::Params, u: &[f32], g_out: &[f32], pool: &Pool) -> (Vec<f32>, Vec<f32>, Self::Params);
    /// The f64 reference's output, parameters as [`to64`] gives them.
    fn reference(p: &[Vec<f64>], u: &[f64]) -> Vec<f64>;
}

/// Every tensor uniform in [-0.5, 0.5), tensor i from `seed + i`: the noise a test's
/// parameters start from.
pub fn fill_uniform<'a>(tensors: impl IntoIterator<Item = &'a mut [f32]>, seed: u64) {
    for (i, t) in tensors.into_iter().enumerate() {
        t.copy_from_slice(&super::uniform(seed + i as u64, t.len(), -0.5, 0.5));
    }
}

/// The tensors of MODEL.md's layer skeleton in f64: the pre-norm's weight and bias, `in_proj`
/// and `out_proj`.
pub struct Frame64<'a> {
    /// `norm.weight`, `norm.bias`.
    pub norm: (&'a [f64], &'a [f64]),
    /// `in_proj.weight` (rows, M).
    pub in_proj: &'a [f64],
    /// `out_proj.weight` (M, Di).
    pub out_proj: &'a [f64],
}

/// MODEL.md's layer `u + out_proj(mix(in_proj(LayerNorm(u))))` in f64 for `u` `(seqs, T, M)`:
/// per sequence, `mix` maps every step's `in_proj` rows to its `out_proj` input.
pub fn reference_layer(
    u: &[f64],
    (m, t): (usize, usize),
    f: Frame64<'_>,
    mix: impl Fn(&[Vec<f64>]) -> Vec<Vec<f64>>,
) -> Vec<f64> {
    let (nw, nb) = f.norm;
    let (w, di) = (f.in_proj.len() / m, f.out_proj.len() / m);
    let mut out = u.to_vec();
    for s in 0..u.len() / (t * m) {
        let proj: Vec<Vec<f64>> = (0..t)
            .map(|i| {
                let v = &u[(s * t + i) * m..(s * t + i + 1) * m];
                let mean = v.iter().sum::<f64>() / m as f64;
                let var = v.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / m as f64;
                let ln: Vec<f64> = (0..m).map(|j| (v[j] - mean) / (var + 1e-5).sqrt() * nw[j] + nb[j]).collect();
                (0..w).map(|o| (0..m).map(|j| f.in_proj[o * m + j] * ln[j]).sum()).collect()
            })
            .collect();
        for (i, y) in mix(&proj).iter().enumerate() {
            for o in 0..m {
                out[(s * t + i) * m + o] += (0..di).map(|d| f.out_proj[o * di + d] * y[d]).sum::<f64>();
            }
        }
    }
    out
}

/// The causal depthwise convolution with SiLU at step i in f64: channel d of `width` reads
/// column `col + d` of the rows, weights `cw` `(width, k)`, bias `cb`.
pub fn conv_silu_ref(rows: &[Vec<f64>], i: usize, (col, width): (usize, usize), cw: &[f64], cb: &[f64]) -> Vec<f64> {
    let k = cw.len() / width;
    (0..width)
        .map(|d| {
            let conv: f64 =
                (0..k).filter(|&j| i + j >= k - 1).map(|j| cw[d * k + j] * rows[i + j + 1 - k][col + d]).sum();
            super::silu(cb[d] + conv)
        })
        .collect()
}

/// One input of a layer test.
pub struct Case<P> {
    /// The parameters.
    pub p: P,
    /// The layer input.
    pub u: Vec<f32>,
    /// The output gradient.
    pub g_out: Vec<f32>,
}

fn widen(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&v| f64::from(v)).collect()
}

/// The parameters in f64, tensor by tensor.
pub fn to64<L: Layer>(p: &L::Params) -> Vec<Vec<f64>> {
    L::tensors(p).iter().map(|t| widen(t)).collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}

/// The forward against the reference: every value is a few sums of tens of O(1) terms, so
/// f32 rounding stays near 1e-6.
pub fn check_forward<L: Layer>(c: &Case<L::Params>) {
    let out = L::forward(&c.p, &c.u, &Pool::new());
    let want = L::reference(&to64::<L>(&c.p), &widen(&c.u));
    for (i, (g, w)) in out.iter().zip(&want).enumerate() {
        assert!((f64::from(*g) - w).abs() <= 2e-5 * (1.0 + w.abs()), "out[{i}] {g} vs {w}");
    }
}

/// `d <g_out, layer(u)> / d v` for every coordinate of `v` (tensor `which`, or `u`), by
/// central differences of the f64 reference (step 1e-5: truncation about 1e-10,
/// cancellation about 1e-11).
fn reference_gradient<L: Layer>(c: &Case<L::Params>, which: Option<usize>) -> Vec<f64> {
    let (mut p, mut u, go) = (to64::<L>(&c.p), widen(&c.u), widen(&c.g_out));
    let len = which.map_or(u.len(), |t| p[t].len());
    let h = 1e-5;
    (0..len)
        .map(|i| {
            let x0 = match which {
                Some(t) => p[t][i],
                None => u[i],
            };
            let mut at = |x: f64| {
                match which {
                    Some(t) => p[t][i] = x,
                    None => u[i] = x,
                }
                dot(&go, &L::reference(&p, &u))
            };
            let fd = fd::along(h, |d| at(x0 + d));
            at(x0);
            fd
        })
        .collect()
}

fn assert_close(what: &str, got: &[f32], want: &[f64]) {
    // Relative to the tensor's largest entry: the f32 products sum up to ~100 terms.
    let scale = want.iter().fold(1.0f64, |a, w| a.max(w.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((f64::from(*g) - w).abs() <= 1e-4 * scale, "{what}[{i}]: {g} vs {w} (scale {scale})");
    }
}

/// The input gradient and every parameter gradient (`names` in state-dict order) against
/// the reference's central differences.
pub fn check_gradients<L: Layer>(c: &Case<L::Params>, names: &[&str]) {
    let (_, g_u, g) = L::run(&c.p, &c.u, &c.g_out, &Pool::new());
    assert_close("g_u", &g_u, &reference_gradient::<L>(c, None));
    let tensors = L::tensors(&g);
    assert_eq!(tensors.len(), names.len());
    for (t, (name, got)) in names.iter().zip(tensors).enumerate() {
        assert_close(name, got, &reference_gradient::<L>(c, Some(t)));
    }
}

/// The gradient at each `(tensor, index)` against central differences of the f32 layer's
/// `<g_out, layer(u)>` (step 1e-2).
pub fn check_f32_differences<L: Layer>(c: &Case<L::Params>, coords: &[(usize, usize)]) {
    let pool = Pool::new();
    let (_, _, g) = L::run(&c.p, &c.u, &c.g_out, &pool);
    let loss = |p: &L::Params| {
        let out = L::forward(p, &c.u, &pool);
        out.iter().zip(&c.g_out).map(|(o, g)| f64::from(*o) * f64::from(*g)).sum::<f64>()
    };
    for &(t, i) in coords {
        let h = 1e-2f32;
        let fd = fd::central(&c.p, f64::from(h), |p, d| L::tensors_mut(p)[t][i] += d as f32, |p| loss(p));
        let got = f64::from(L::tensors(&g)[t][i]);
        // Truncation O(h^2) and f32 rounding of the losses over h: 1e-3 absolute, 1 % relative.
        assert!((got - fd).abs() <= 1e-3 + 1e-2 * fd.abs(), "tensor {t}[{i}]: {got} vs {fd}");
    }
}

/// `struct $name` implementing [`Layer`] for a test file that imports its layer's `forward`
/// and `backward` and defines `DIMS`, `SEQS` and `reference(&DIMS, p, u)`.
#[macro_export]
macro_rules! layer_under_test {
    ($name:ident, $params:ty) => {
        struct $name;

        impl $crate::common::layer::Layer for $name {
            type Params = $params;
            fn tensors(p: &$params) -> Vec<&[f32]> {
                p.view().into_tensors().into()
            }
            fn tensors_mut(p: &mut $params) -> Vec<&mut [f32]> {
                p.view_mut().into_tensors().into()
            }
            fn forward(p: &$params, u: &[f32], pool: &Pool) -> Vec<f32> {
                forward(&p.view(), &DIMS, SEQS, u, pool).unwrap().to_vec()
            }
            fn run(p: &$params, u: &[f32], g_out: &[f32], pool: &Pool) -> (Vec<f32>, Vec<f32>, $params) {
                let out = forward(&p.view(), &DIMS, SEQS, u, pool).unwrap();
                let mut g = <$params>::zeros(&DIMS);
                let b = BackwardIn { seqs: SEQS, u: u.into(), g_out };
                let g_u = backward(&p.view(), &DIMS, b, &mut g.view_mut(), pool).unwrap();
                (out.to_vec(), g_u.to_vec(), g)
            }
            fn reference(p: &[Vec<f64>], u: &[f64]) -> Vec<f64> {
                reference(&DIMS, p, u)
            }
        }
    };
}

/// [`layer_under_test`], `case()` (parameters from `params(&DIMS, $p)`, input and output gradient uniform from the
/// seeds `$u` and `$g`) and the layer tests: the forward and every gradient against the f64 reference
/// (`$names`, the tensors in state-dict order), central differences of the f32 layer at
/// `$coords` (tensor, index), and every buffer back in the pool.
#[macro_export]
macro_rules! layer_tests {
    ($name:ident, $params:ty, seeds: ($p:expr, $u:expr, $g:expr), names: $names:expr, coords: $coords:expr) => {
        $crate::layer_under_test!($name, $params);

        fn case() -> $crate::common::layer::Case<$params> {
            let rows = SEQS * DIMS.time;
            let u = $crate::common::uniform($u, rows * DIMS.m, -1.5, 1.5);
            let g_out = $crate::common::uniform($g, rows * DIMS.m, -1.0, 1.0);
            $crate::common::layer::Case { p: params(&DIMS, $p), u, g_out }
        }

        #[test]
        fn forward_matches_the_f64_reference() {
            $crate::common::layer::check_forward::<$name>(&case());
        }

        #[test]
        fn every_gradient_matches_the_f64_reference() {
            $crate::common::layer::check_gradients::<$name>(&case(), &$names);
        }

        #[test]
        fn gradients_match_central_differences_of_the_f32_layer() {
            $crate::common::layer::check_f32_differences::<$name>(&case(), &$coords);
        }

        #[test]
        fn the_layer_returns_every_buffer_to_the_pool() {
            let c = case();
            let pool = Pool::new();
            drop(<$name as $crate::common::layer::Layer>::run(&c.p, &c.u, &c.g_out, &pool));
            assert_eq!(pool.in_use(), 0);
        }
    };
}
