//! One Mamba-2 layer in shim mode (`mamba2::layer`) against an f64 reference written here
//! from MODEL.md: the forward output, and every parameter and input gradient against the
//! reference's own central differences in f64; then central differences of the f32 layer
//! itself on a few coordinates. Two groups (the second partial) and a partial last chunk.

use crate::common;

use boldcast_cuda::mamba2::layer::{backward, forward, Layer2Dims, Mamba2Params};
use boldcast_cuda::pool::Pool;
use boldcast_cuda::trunk::BackwardIn;
use common::layer::{conv_silu_ref, fill_uniform, reference_layer, Frame64};
use common::{silu, softplus};

const DIMS: Layer2Dims = Layer2Dims { m: 6, di: 12, n: 4, k: 3, nh: 3, time: 11, q: 4, group: 2 };
const SEQS: usize = 3;

fn params(z: &Layer2Dims, seed: u64) -> Mamba2Params<Vec<f32>> {
    let mut p = Mamba2Params::zeros(z);
    fill_uniform(p.view_mut().into_tensors(), seed);
    // Around MODEL.md's initialization: unit norm weights, A_log = ln(h + 1) plus noise,
    // D near 1, dt_bias near softplus^-1(0.05) so the decays stay in (0, 1) away from both.
    p.norm_w.iter_mut().for_each(|w| *w += 1.0);
    p.gnorm_w.iter_mut().for_each(|w| *w += 1.0);
    p.a_log.iter_mut().enumerate().for_each(|(i, a)| *a = (i as f32 + 1.0).ln() + 0.2 * *a);
    p.d.iter_mut().for_each(|d| *d += 1.0);
    p.dt_bias.iter_mut().for_each(|b| *b -= 3.0);
    p
}

/// MODEL.md's layer `u + Mamba2(LayerNorm(u))` in f64, for `u` `(seqs, T, M)`; `p` in
/// state-dict order.
fn reference(z: &Layer2Dims, p: &[Vec<f64>], u: &[f64]) -> Vec<f64> {
    let [nw, nb, dtb, cw, cb, inp, alog, dd, gw, outp] = p else { unreachable!() };
    let (di, n, nh) = (z.di, z.n, z.nh);
    let (cd, pd) = (di + 2 * n, di / nh);
    let f = Frame64 { norm: (nw, nb), in_proj: inp, out_proj: outp };
    // The in_proj rows of a step: z, then xBC, then dtr.
    let mix = |proj: &[Vec<f64>]| -> Vec<Vec<f64>> {
        let mut st = vec![0.0; nh * pd * n];
        (0..proj.len())
            .map(|i| {
                let xs = conv_silu_ref(proj, i, (di, cd), cw, cb);
                let (x, bc, cc) = (&xs[..di], &xs[di..di + n], &xs[di + n..]);
                let mut y = vec![0.0; di];
                for h in 0..nh {
                    let dt = softplus(proj[i][di + cd + h] + dtb[h]);
                    let decay = (dt * -alog[h].exp()).exp();
                    for e in 0..pd {
                        let c = h * pd + e;
                        let mut acc = dd[h] * x[c];
                        for q in 0..n {
                            let sv = &mut st[c * n + q];
                            *sv = decay * *sv + dt * x[c] * bc[q];
                            acc += *sv * cc[q];
                        }
                        y[c] = acc;
                    }
                }
                let v: Vec<f64> = (0..di).map(|c| y[c] * silu(proj[i][c])).collect();
                let r = 1.0 / (v.iter().map(|a| a * a).sum::<f64>() / di as f64 + 1e-5).sqrt();
                (0..di).map(|c| v[c] * r * gw[c]).collect()
            })
            .collect()
    };
    reference_layer(u, (z.m, z.time), f, mix)
}

// (tensor, index): dt_bias, the conv over a Bc channel, in_proj's xBC and dtr rows, A_log,
// D, the gated norm's weight, out_proj.
crate::layer_tests!(
    Mamba2Layer,
    Mamba2Params<Vec<f32>>,
    seeds: (20, 3, 4),
    names: ["norm_w", "norm_b", "dt_bias", "conv_w", "conv_b", "in_proj", "a_log", "d", "gnorm_w", "out_proj"],
    coords: [(2, 1), (3, 13 * 3 + 2), (5, 20 * 6 + 1), (5, 33 * 6 + 4), (6, 2), (7, 0), (8, 5), (9, 13)]
);
