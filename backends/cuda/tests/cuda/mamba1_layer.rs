//! One Mamba-1 layer in shim mode (`mamba1::layer`) against an f64 reference written here
//! from MODEL.md: the forward output, and every parameter and input gradient against the
//! reference's own central differences in f64 (accurate to about 1e-8, far below the f32
//! layer's rounding); then central differences of the f32 layer itself on a few coordinates.

use crate::common;

use boldcast_cuda::mamba1::layer::{backward, forward, LayerDims, Mamba1Params};
use boldcast_cuda::pool::Pool;
use boldcast_cuda::trunk::BackwardIn;
use common::layer::{conv_silu_ref, fill_uniform, reference_layer, Frame64};
use common::{silu, softplus};

const DIMS: LayerDims = LayerDims { m: 6, di: 12, n: 4, k: 3, r: 2, time: 11, q: 4, group: 2 };
const SEQS: usize = 3;

fn params(z: &LayerDims, seed: u64) -> Mamba1Params<Vec<f32>> {
    let mut p = Mamba1Params::zeros(z);
    fill_uniform(p.view_mut().into_tensors(), seed);
    // Around MODEL.md's initialization: unit LayerNorm weight, A_log = ln(n + 1) plus noise,
    // D near 1, dt's bias near softplus^-1(0.05) so the decays stay in (0, 1) away from both.
    p.norm_w.iter_mut().for_each(|w| *w += 1.0);
    let n = z.n;
    p.a_log.iter_mut().enumerate().for_each(|(i, a)| *a = ((i % n) as f32 + 1.0).ln() + 0.2 * *a);
    p.d.iter_mut().for_each(|d| *d += 1.0);
    p.dt_b.iter_mut().for_each(|b| *b -= 3.0);
    p
}

/// MODEL.md's layer `u + Mamba1(LayerNorm(u))` in f64, for `u` `(seqs, T, M)`; `p` in
/// state-dict order.
fn reference(z: &LayerDims, p: &[Vec<f64>], u: &[f64]) -> Vec<f64> {
    let [nw, nb, cw, cb, inp, xp, dtw, dtb, alog, dd, outp] = p else { unreachable!() };
    let (di, n, r) = (z.di, z.n, z.r);
    let f = Frame64 { norm: (nw, nb), in_proj: inp, out_proj: outp };
    // The in_proj rows of a step: x, then z.
    let mix = |proj: &[Vec<f64>]| -> Vec<Vec<f64>> {
        let mut h = vec![0.0; di * n];
        (0..proj.len())
            .map(|i| {
                let xs = conv_silu_ref(proj, i, (0, di), cw, cb);
                let w: Vec<f64> = (0..r + 2 * n).map(|o| (0..di).map(|d| xp[o * di + d] * xs[d]).sum()).collect();
                let (dr, bc, cc) = (&w[..r], &w[r..r + n], &w[r + n..]);
                let mut y = vec![0.0; di];
                for d in 0..di {
                    let dt = softplus((0..r).map(|j| dtw[d * r + j] * dr[j]).sum::<f64>() + dtb[d]);
                    let mut acc = dd[d] * xs[d];
                    for q in 0..n {
                        let a = -alog[d * n + q].exp();
                        h[d * n + q] = (dt * a).exp() * h[d * n + q] + dt * bc[q] * xs[d];
                        acc += cc[q] * h[d * n + q];
                    }
                    y[d] = acc * silu(proj[i][di + d]);
                }
                y
            })
            .collect()
    };
    reference_layer(u, (z.m, z.time), f, mix)
}

// (tensor, index): one coordinate of the conv, x_proj's Bc rows, dt_proj, A_log, D, out_proj.
crate::layer_tests!(
    Mamba1Layer,
    Mamba1Params<Vec<f32>>,
    seeds: (10, 1, 2),
    names: ["norm_w", "norm_b", "conv_w", "conv_b", "in_proj", "x_proj", "dt_w", "dt_b", "a_log", "d", "out_proj"],
    coords: [(2, 5), (5, 2 * 12 + 3), (6, 7), (8, 9), (9, 4), (10, 13), (4, 100)]
);
