//! `kernels/knn.cu` through the shim: bit for bit against a reference in this file that
//! follows the kernels' order of operations (the gather by the adjacency, the softmax and the
//! scatter by the reverse adjacency are then checked exactly), and the whole layer against
//! the CPU backend's `knn::{forward, backward}` in f32, with the projections and LayerNorm
//! done by the CPU backend's own `ops::{linear, layernorm}` on the host (what cuBLAS will do on
//! a device), so the only differences are the attention's.
//!
//! Whole-layer tolerance (forward): the two sides differ only in the order of the score dot
//! products (the kernel: strided partials then a tree, depth `ceil(M/B) + log2 B + 1`; the
//! CPU: 16 fused lanes, a tail and a fold, depth `ceil(M/16) + 16`) and in the exponential
//! (CPU `exp_nonpos` within 2 ulp, glibc `expf` within 1 ulp: 4u and 2u relative). First order
//! in u = 2^-24: `|ds_j| <= c (D_k + D_c) u sum_i |q_i kk_i| + 2u |s_j|`; each side's softmax
//! weight is within `e_w = u|s_j - mx| + 4u + sum_l w_l (u|s_l - mx| + 4u) + k u` of its exact
//! value relative, so `|dw_j| <= w_j (|ds_j| + sum_l w_l |ds_l| + 2 e_w)`; then
//! `|datt_i| <= sum_j |dw_j| |v_ji| + 2 k u sum_j w_j |v_ji|` and, through the out product
//! evaluated on both sides' `att`, `|dout| <= sum_i |Wo| |datt_i| + 2 (M + 1) u m_out` with
//! `m_out = sum_i |Wo| |att_i| + |bo|`. Each element must lie within 1.1 times its bound
//! (second-order terms). With k = 1 the weight is exactly 1 on both sides, so forward and
//! backward are compared bit for bit. For k > 1 the backward is checked bit for bit against
//! the kernel-order reference only.

use crate::common;

use boldcast_core::Adjacency;
use boldcast_cpu::knn::{self as cpu, KnnParams};
use boldcast_cpu::ops::{layernorm, linear};
use boldcast_cuda::knn::{attend, attend_backward, Neighbours};
use boldcast_cuda::launch::rows as row_launch;
use common::{uniform, U32 as U};

/// (P, M, k, groups): P not a multiple of anything, M below one block and over three
/// elements per thread; k = 1 (self only) and 5; several groups (neighbours stay within one).
const SHAPES: [(usize, usize, usize, usize); 4] = [(13, 37, 5, 3), (7, 300, 5, 2), (11, 20, 1, 3), (6, 64, 6, 2)];

/// A ring adjacency, or for the last shape an irregular one (some parcels used by many).
fn adjacency(p: usize, k: usize) -> Adjacency {
    if k < p {
        return Adjacency::ring(p, k).unwrap();
    }
    let idx = (0..p).flat_map(|a| std::iter::once(a).chain((0..p).filter(move |&b| b != a).take(k - 1))).collect();
    Adjacency::new(p, k, idx).unwrap()
}

fn params(seed: u64, m: usize) -> KnnParams<Vec<f32>> {
    let mut prm = KnnParams::zeros(m);
    for (i, (name, t)) in prm.view_mut().named().into_iter().enumerate() {
        let scale = if name.ends_with("weight") && name != "norm.weight" { 1.0 / (m as f32).sqrt() } else { 0.5 };
        let v = uniform(seed + i as u64, t.len(), -scale, scale);
        for (o, x) in t.iter_mut().zip(v) {
            *o = if name == "norm.weight" { 1.0 + x } else { x };
        }
    }
    prm
}

/// `<a, b>` in the kernels' order for blocks of `block` threads.
fn tree_dot(a: &[f32], b: &[f32], block: usize) -> f32 {
    let mut s = vec![0.0f32; block];
    for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
        s[i % block] += x * y;
    }
    let mut h = block / 2;
    while h > 0 {
        for t in 0..h {
            s[t] += s[t + h];
        }
        h /= 2;
    }
    s[0]
}

/// The test's reference of the forward, in the kernel's order: (w, att).
fn reference_forward(adj: &Adjacency, m: usize, groups: usize, qkv: &[f32], block: usize) -> (Vec<f32>, Vec<f32>) {
    let (np, k, sc) = (adj.parcels(), adj.k(), (1.0 / (m as f64).sqrt()) as f32);
    let (mut w, mut att) = (vec![0.0f32; groups * np * k], vec![0.0f32; groups * np * m]);
    for row in 0..groups * np {
        let (base, nb) = (row - row % np, adj.row(row % np));
        let col = |a: usize, c: usize| &qkv[(base + a) * 3 * m + c * m..][..m];
        let mut s: Vec<f32> = nb.iter().map(|&a| tree_dot(col(row - base, 0), col(a, 1), block) * sc).collect();
        let mx = s.iter().copied().fold(s[0], f32::max);
        let mut sum = 0.0f32;
        for v in s.iter_mut() {
            *v = (*v - mx).exp();
            sum += *v;
        }
        for (j, &a) in nb.iter().enumerate() {
            s[j] /= sum;
            w[row * k + j] = s[j];
            for i in 0..m {
                att[row * m + i] += s[j] * col(a, 2)[i];
            }
        }
    }
    (w, att)
}

/// The test's reference of the backward, in the kernels' order: g_qkv.
fn reference_backward(
    adj: &Adjacency,
    m: usize,
    groups: usize,
    qkv: &[f32],
    w: &[f32],
    ga: &[f32],
    block: usize,
) -> Vec<f32> {
    let (np, k, sc) = (adj.parcels(), adj.k(), (1.0 / (m as f64).sqrt()) as f32);
    let mut g = vec![0.0f32; qkv.len()];
    for row in 0..groups * np {
        let (base, nb, wr) = (row - row % np, adj.row(row % np), &w[row * k..][..k]);
        let gar = &ga[row * m..][..m];
        let gw: Vec<f32> = nb.iter().map(|&a| tree_dot(gar, &qkv[(base + a) * 3 * m + 2 * m..][..m], block)).collect();
        let wg = (0..k).fold(0.0f32, |acc, j| acc + wr[j] * gw[j]);
        for (j, &a) in nb.iter().enumerate() {
            let gs = wr[j] * (gw[j] - wg) * sc;
            for i in 0..m {
                g[row * 3 * m + i] += gs * qkv[(base + a) * 3 * m + m + i];
                // The scatters, in (p, j) order as the reverse lists hold them.
                g[(base + a) * 3 * m + m + i] += gs * qkv[row * 3 * m + i];
                g[(base + a) * 3 * m + 2 * m + i] += wr[j] * gar[i];
            }
        }
    }
    g
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn attention_matches_the_reference_in_kernel_order_bit_for_bit() {
    for (s, &(np, m, k, groups)) in SHAPES.iter().enumerate() {
        let adj = adjacency(np, k);
        let nb = Neighbours::new(&adj).unwrap();
        let rows = groups * np;
        let qkv = uniform(100 + s as u64, rows * 3 * m, -1.0, 1.0);
        let (mut w, mut att) = (vec![f32::NAN; rows * k], vec![f32::NAN; rows * m]);
        attend(&nb, m, groups, &qkv, &mut w, &mut att).unwrap();
        let block = row_launch(rows, m).block.x as usize;
        let (rw, ratt) = reference_forward(&adj, m, groups, &qkv, block);
        assert_eq!(bits(&w), bits(&rw), "w of {np}x{m}, k {k}");
        assert_eq!(bits(&att), bits(&ratt), "att of {np}x{m}, k {k}");
        let ga = uniform(200 + s as u64, rows * m, -1.0, 1.0);
        let mut g = vec![f32::NAN; rows * 3 * m];
        attend_backward(&nb, m, groups, &qkv, &w, &ga, &mut g).unwrap();
        let rg = reference_backward(&adj, m, groups, &qkv, &w, &ga, block);
        assert_eq!(bits(&g), bits(&rg), "g_qkv of {np}x{m}, k {k}");
    }
}

/// The layer's forward with the attention on the kernels and the rest on the CPU backend's
/// ops, as `knn::forward` calls them: (h, qkv, w, att, out).
struct Layer {
    h: Vec<f32>,
    qkv: Vec<f32>,
    w: Vec<f32>,
    att: Vec<f32>,
    out: Vec<f32>,
}

fn stacked(prm: &KnnParams<Vec<f32>>) -> (Vec<f32>, Vec<f32>) {
    ([&prm.q_w[..], &prm.k_w, &prm.v_w].concat(), [&prm.q_b[..], &prm.k_b, &prm.v_b].concat())
}

fn layer_forward(nb: &Neighbours, k: usize, m: usize, groups: usize, prm: &KnnParams<Vec<f32>>, x: &[f32]) -> Layer {
    let rows = x.len() / m;
    let (sw, sb) = stacked(prm);
    let mut h = vec![0.0f32; rows * m];
    layernorm::forward_rows(x, rows, m, &prm.norm_w, &prm.norm_b, &mut h);
    let mut qkv = vec![0.0f32; rows * 3 * m];
    linear::forward(&h, rows, m, &sw, Some(&sb), 3 * m, &mut qkv);
    let (mut w, mut att, mut out) = (vec![0.0f32; rows * k], vec![0.0f32; rows * m], vec![0.0f32; rows * m]);
    attend(nb, m, groups, &qkv, &mut w, &mut att).unwrap();
    linear::forward(&att, rows, m, &prm.out_w, Some(&prm.out_b), m, &mut out);
    Layer { h, qkv, w, att, out }
}

/// The forward bound of the module doc for one row's outputs, from the f64 values of the
/// shim's side (`q`, `kk`, `v`, `w`, `att` of the row).
fn row_bound(adj: &Adjacency, m: usize, prm: &KnnParams<Vec<f32>>, l: &Layer, row: usize, block: usize) -> Vec<f64> {
    let (np, k) = (adj.parcels(), adj.k());
    let base = row - row % np;
    let c = 1.0 / (m as f64).sqrt();
    let depth = (m.div_ceil(block) as f64 + (block as f64).log2() + 1.0) + (m.div_ceil(16) + 16) as f64;
    let col = |a: usize, s: usize| &l.qkv[(base + a) * 3 * m + s * m..][..m];
    let wr: Vec<f64> = l.w[row * k..][..k].iter().map(|&v| v as f64).collect();
    let nbr = adj.row(row % np);
    let s: Vec<f64> = nbr
        .iter()
        .map(|&a| (0..m).map(|i| col(row - base, 0)[i] as f64 * col(a, 1)[i] as f64).sum::<f64>() * c)
        .collect();
    let ds: Vec<f64> = nbr
        .iter()
        .zip(&s)
        .map(|(&a, sj)| {
            c * depth * U * (0..m).map(|i| (col(row - base, 0)[i] * col(a, 1)[i]).abs() as f64).sum::<f64>()
                + 2.0 * U * sj.abs()
        })
        .collect();
    let mx = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let own: Vec<f64> = s.iter().map(|sj| U * (sj - mx).abs() + 4.0 * U).collect();
    let e_w: Vec<f64> = own.iter().map(|o| o + (0..k).map(|l| wr[l] * own[l]).sum::<f64>() + k as f64 * U).collect();
    let mean_ds: f64 = (0..k).map(|l| wr[l] * ds[l]).sum();
    let dw: Vec<f64> = (0..k).map(|j| wr[j] * (ds[j] + mean_ds + 2.0 * e_w[j])).collect();
    let datt: Vec<f64> = (0..m)
        .map(|i| (0..k).map(|j| (dw[j] + 2.0 * k as f64 * U * wr[j]) * (col(nbr[j], 2)[i] as f64).abs()).sum())
        .collect();
    let att = &l.att[row * m..][..m];
    (0..m)
        .map(|o| {
            let wo = &prm.out_w[o * m..][..m];
            let prop: f64 = (0..m).map(|i| (wo[i] as f64).abs() * datt[i]).sum();
            let mag: f64 = (0..m).map(|i| (wo[i] * att[i]).abs() as f64).sum::<f64>() + (prm.out_b[o] as f64).abs();
            prop + 2.0 * (m + 1) as f64 * U * mag
        })
        .collect()
}

#[test]
fn the_layer_forward_matches_the_cpu_backend_within_the_score_bound() {
    let mut worst = 0.0f64;
    for (s, &(np, m, k, groups)) in SHAPES.iter().enumerate() {
        let adj = adjacency(np, k);
        let nb = Neighbours::new(&adj).unwrap();
        let prm = params(10 * s as u64, m);
        let x = uniform(300 + s as u64, groups * np * m, -2.0, 2.0);
        let l = layer_forward(&nb, k, m, groups, &prm, &x);
        let mut want = vec![0.0f32; x.len()];
        cpu::forward(m, &adj, &prm, &x, groups, &mut want);
        if k == 1 {
            assert_eq!(bits(&l.out), bits(&want), "k = 1 of {np}x{m}: the weight is 1 on both sides");
            continue;
        }
        let block = row_launch(groups * np, m).block.x as usize;
        for row in 0..groups * np {
            for (o, b) in row_bound(&adj, m, &prm, &l, row, block).into_iter().enumerate() {
                let (got, cw) = (l.out[row * m + o], want[row * m + o]);
                let err = (got as f64 - cw as f64).abs();
                assert!(
                    err <= 1.1 * b,
                    "out[{row}, {o}] of {np}x{m}, k {k}: {got:e} vs cpu {cw:e}, |diff| {err:e} > {b:e}"
                );
                worst = worst.max(err / b);
            }
        }
    }
    println!("knn layer forward: worst |diff| / bound = {worst:.3}");
}

/// The layer's backward from `g_out`: the CPU backend's ops around the kernels, as
/// `knn::backward` calls them; returns `g_x` and the parameter gradients.
fn layer_backward(
    nb: &Neighbours,
    k: usize,
    m: usize,
    groups: usize,
    prm: &KnnParams<Vec<f32>>,
    x: &[f32],
    g_out: &[f32],
) -> (Vec<f32>, KnnParams<Vec<f32>>) {
    let rows = x.len() / m;
    let l = layer_forward(nb, k, m, groups, prm, x);
    let mut g = KnnParams::zeros(m);
    let mut g_att = vec![0.0f32; rows * m];
    linear::backward(
        &l.att,
        rows,
        m,
        &prm.out_w,
        m,
        g_out,
        &mut g.out_w,
        Some(&mut g.out_b),
        Some((&mut g_att, false)),
    );
    let mut g_qkv = vec![0.0f32; rows * 3 * m];
    attend_backward(nb, m, groups, &l.qkv, &l.w, &g_att, &mut g_qkv).unwrap();
    let (sw, _) = stacked(prm);
    let (mut g_sw, mut g_sb, mut g_h) = (vec![0.0f32; 3 * m * m], vec![0.0f32; 3 * m], vec![0.0f32; rows * m]);
    linear::backward(&l.h, rows, m, &sw, 3 * m, &g_qkv, &mut g_sw, Some(&mut g_sb), Some((&mut g_h, false)));
    let mut g_x = vec![0.0f32; rows * m];
    let lg = layernorm::Grads { x: &mut g_x, w: &mut g.norm_w, b: &mut g.norm_b };
    layernorm::backward_rows(x, rows, m, &prm.norm_w, &g_h, lg);
    for (dst, src) in [&mut g.q_w, &mut g.k_w, &mut g.v_w].into_iter().zip(g_sw.chunks_exact(m * m)) {
        dst.copy_from_slice(src);
    }
    for (dst, src) in [&mut g.q_b, &mut g.k_b, &mut g.v_b].into_iter().zip(g_sb.chunks_exact(m)) {
        dst.copy_from_slice(src);
    }
    (g_x, g)
}

/// With k = 1 the softmax's backward is `w (g_w - w g_w) = 0` exactly on both sides and
/// `g_v = 1 g_att`: the whole layer's gradients agree bit for bit.
#[test]
fn the_layer_backward_with_k_1_is_the_cpu_backends_bit_for_bit() {
    for (s, &(np, m, k, groups)) in SHAPES.iter().enumerate().filter(|(_, sh)| sh.2 == 1) {
        let adj = adjacency(np, k);
        let nb = Neighbours::new(&adj).unwrap();
        let prm = params(10 * s as u64, m);
        let x = uniform(300 + s as u64, groups * np * m, -2.0, 2.0);
        let g_out = uniform(400 + s as u64, x.len(), -1.0, 1.0);
        let (gx, g) = layer_backward(&nb, k, m, groups, &prm, &x, &g_out);
        let (mut cx, mut cg) = (vec![0.0f32; x.len()], KnnParams::zeros(m));
        cpu::backward(m, &adj, &prm, &x, groups, &g_out, &mut cx, &mut cg);
        assert_eq!(bits(&gx), bits(&cx), "g_x");
        for ((name, a), (_, b)) in g.view().named().into_iter().zip(cg.view().named()) {
            assert_eq!(bits(a), bits(b), "{name}");
        }
    }
}

/// Every sum of the kernels has a fixed order: two runs give the same bits.
#[test]
fn repeated_runs_give_the_same_bits() {
    let (np, m, k, groups) = (13, 300, 5, 3);
    let adj = adjacency(np, k);
    let nb = Neighbours::new(&adj).unwrap();
    let rows = groups * np;
    let qkv = uniform(7, rows * 3 * m, -1.0, 1.0);
    let ga = uniform(8, rows * m, -1.0, 1.0);
    let run = || {
        let (mut w, mut att, mut g) = (vec![0.0f32; rows * k], vec![0.0f32; rows * m], vec![0.0f32; rows * 3 * m]);
        attend(&nb, m, groups, &qkv, &mut w, &mut att).unwrap();
        attend_backward(&nb, m, groups, &qkv, &w, &ga, &mut g).unwrap();
        bits(&[w, att, g].concat())
    };
    assert_eq!(run(), run());
}
