//! `kernels/layernorm.cu` through the shim against the CPU backend's
//! `ops::layernorm::{forward, backward}` in f32, on rows shorter and longer than a block.
//!
//! Tolerance: the per-element arithmetic is the CPU backend's, in its order; only the sums
//! differ in order (the kernel: each thread's strided elements, then a shared tree over the
//! block; the CPU: 16 lane accumulators, a tail, then a fixed tree; over rows, chunks in
//! order). A sum whose every term passes through at most d additions is within d u sum|t|
//! of the exact sum (u = 2^-24, first order), with d = ceil(m / B) + log2 B for the kernel
//! and d = ceil(m / 16) + 16 for the CPU (lanes, the 15-term tail, the fold). [`Row`]
//! carries those differences through the forward and backward formulas, term by term (each
//! rounding of the per-element arithmetic counted once per side), with exact row statistics
//! from f64; each element must lie within its bound (times 1.1 for second-order terms).

use crate::common;

use boldcast_cpu::ops::layernorm as cpu;
use boldcast_cuda::launch::{rows as row_launch, ROWS_PER_CHUNK};
use boldcast_cuda::ops::layernorm;
use boldcast_cuda::pool::Pool;
use common::{uniform, U32 as U};

/// The first-order bound on the difference of the two backends' intermediate values of one
/// row (f64).
struct Row {
    /// `r` and the per-element `|x - mean|`.
    r: f64,
    dx: Vec<f64>,
    /// Bounds on the differences of the mean and of r (relative).
    d_mean: f64,
    rho: f64,
    /// Combined summation depth of the two orders, per unit of `u`.
    depth: f64,
}

impl Row {
    fn new(x: &[f32], block: usize) -> Row {
        let m = x.len();
        let depth = (m.div_ceil(block) as f64 + (block as f64).log2()) + (m.div_ceil(16) + 16) as f64;
        let xs: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let mean = xs.iter().sum::<f64>() / m as f64;
        let abs = xs.iter().map(|v| v.abs()).sum::<f64>() / m as f64;
        let dx: Vec<f64> = xs.iter().map(|v| (v - mean).abs()).collect();
        let var = dx.iter().map(|d| d * d).sum::<f64>() / m as f64;
        let d_mean = depth * U * abs + 2.0 * U * mean.abs();
        // Each side: squares (3u), the sum (d u), the division (u); plus the shifted mean.
        let d_var = (depth + 8.0) * U * var + 2.0 * d_mean * d_mean;
        let v = var + cpu::EPS;
        let rho = 0.5 * (d_var + 2.0 * U * v) / v + 4.0 * U;
        Row { r: 1.0 / v.sqrt(), dx, d_mean, rho, depth }
    }
    /// The bound on the difference of `xh` at column i, and `|xh|`.
    fn xh(&self, i: usize) -> (f64, f64) {
        let xh = self.dx[i] * self.r;
        (self.r * (self.d_mean + 2.0 * U * self.dx[i]) + xh * (self.rho + 2.0 * U), xh)
    }
}

fn check(what: &str, got: f32, want: f32, bound: f64, worst: &mut f64) {
    let err = (got as f64 - want as f64).abs();
    assert!(err <= 1.1 * bound, "{what}: shim {got:e}, cpu {want:e}, |diff| {err:e} > bound {bound:e}");
    if bound > 0.0 {
        *worst = worst.max(err / bound);
    }
}

/// Shapes: rows narrower than the smallest block (m < 32), a few elements per thread, and
/// wider than the largest block (m > 4096 uses 1024 threads of 5 elements); row counts that
/// leave a partial chunk of rows.
const SHAPES: [(usize, usize); 5] = [(1, 1), (7, 5), (300, 64), (5, 1000), (3, 4099)];

fn data(k: u64, rows: usize, m: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    // An offset mean, as embeddings have, so the mean's rounding matters.
    let x: Vec<f32> = uniform(k, rows * m, -1.0, 1.0).iter().map(|v| 3.0 + v).collect();
    let w: Vec<f32> = uniform(k + 1, m, -1.0, 1.0).iter().map(|v| 1.0 + 0.3 * v).collect();
    (x, w, uniform(k + 2, m, -1.0, 1.0))
}

#[test]
fn forward_matches_the_cpu_backend_within_the_reduction_bound() {
    let mut worst = 0.0f64;
    for (k, &(rows, m)) in SHAPES.iter().enumerate() {
        let (x, w, b) = data(10 * k as u64, rows, m);
        let (mut got, mut want) = (vec![f32::NAN; rows * m], vec![0.0f32; rows * m]);
        layernorm::forward(&x, rows, m, &w, &b, &mut got).unwrap();
        cpu::forward(&x, rows, m, &w, &b, &mut want);
        let block = row_launch(rows, m).block.x as usize;
        for r in 0..rows {
            let row = Row::new(&x[r * m..][..m], block);
            for i in 0..m {
                let (d_xh, xh) = row.xh(i);
                let (wi, y) = (w[i].abs() as f64, want[r * m + i].abs() as f64);
                let bound = wi * d_xh + 2.0 * U * xh * wi + 2.0 * U * y;
                check(&format!("y[{r}, {i}] of {rows}x{m}"), got[r * m + i], want[r * m + i], bound, &mut worst);
            }
        }
    }
    println!("layernorm forward: worst |diff| / bound = {worst:.3}");
}

#[test]
fn backward_matches_the_cpu_backend_within_the_reduction_bound() {
    let mut worst = 0.0f64;
    for (k, &(rows, m)) in SHAPES.iter().enumerate() {
        let (x, w, _) = data(10 * k as u64, rows, m);
        let g_y = uniform(10 * k as u64 + 5, rows * m, -1.0, 1.0);
        // Non-zero starting gradients: all three accumulate.
        let (gx0, gw0, gb0) = (uniform(7, rows * m, -1.0, 1.0), uniform(8, m, -1.0, 1.0), uniform(9, m, -1.0, 1.0));
        let (mut gx, mut gw, mut gb) = (gx0.clone(), gw0.clone(), gb0.clone());
        layernorm::backward(
            &x,
            rows,
            m,
            &w,
            &g_y,
            layernorm::Grads { x: &mut gx, w: &mut gw, b: &mut gb },
            &Pool::new(),
        )
        .unwrap();
        let (mut cx, mut cw, mut cb) = (gx0, gw0, gb0);
        cpu::backward(&x, rows, m, &w, &g_y, cpu::Grads { x: &mut cx, w: &mut cw, b: &mut cb });
        let block = row_launch(rows, m).block.x as usize;
        let (mut bw, mut bb) = (vec![0.0f64; m], vec![0.0f64; m]);
        let depth_rows = 2.0 * (rows + 2) as f64;
        for r in 0..rows {
            let row = Row::new(&x[r * m..][..m], block);
            let (gr, cxr) = (&g_y[r * m..][..m], &cx[r * m..][..m]);
            let a: Vec<f64> = (0..m).map(|i| gr[i] as f64 * w[i] as f64).collect();
            let (sa, sax) =
                (a.iter().map(|v| v.abs()).sum::<f64>(), (0..m).map(|i| (a[i] * row.xh(i).1).abs()).sum::<f64>());
            let maxh = (0..m).map(|i| a[i] * row.dx[i] * row.r).sum::<f64>().abs() / m as f64;
            let ma = a.iter().sum::<f64>().abs() / m as f64;
            let d_ma = row.depth * U * sa / m as f64 + 2.0 * U * ma;
            let d_maxh = (0..m).map(|i| a[i].abs() * row.xh(i).0).sum::<f64>() / m as f64
                + (row.depth + 4.0) * U * sax / m as f64
                + 2.0 * U * maxh;
            for i in 0..m {
                let (d_xh, xh) = row.xh(i);
                let inner = a[i].abs() + ma + xh * maxh;
                let d_inner = d_ma + xh * d_maxh + maxh * d_xh + 6.0 * U * inner;
                let bound = row.r * d_inner + row.r * inner * (row.rho + 2.0 * U) + 2.0 * U * cxr[i].abs() as f64;
                check(&format!("g_x[{r}, {i}] of {rows}x{m}"), gx[r * m + i], cxr[i], bound, &mut worst);
                let g = gr[i].abs() as f64;
                bw[i] += g * d_xh + depth_rows * U * g * xh;
                bb[i] += depth_rows * U * g;
            }
        }
        for i in 0..m {
            let bound_w = bw[i] + 2.0 * U * cw[i].abs() as f64;
            check(&format!("g_w[{i}] of {rows}x{m}"), gw[i], cw[i], bound_w, &mut worst);
            check(&format!("g_b[{i}] of {rows}x{m}"), gb[i], cb[i], bb[i] + 2.0 * U * cb[i].abs() as f64, &mut worst);
        }
    }
    const { assert!(ROWS_PER_CHUNK < 300, "the 300-row shape must span several chunks") };
    println!("layernorm backward: worst |diff| / bound = {worst:.3}");
}

/// The kernels' sums have a fixed order: two runs give the same bits (threads racing on the
/// shared memory would not).
#[test]
fn repeated_runs_give_the_same_bits() {
    let (rows, m) = (9, 777);
    let (x, w, b) = data(3, rows, m);
    let run = || {
        let mut y = vec![0.0f32; rows * m];
        layernorm::forward(&x, rows, m, &w, &b, &mut y).unwrap();
        let (mut gx, mut gw, mut gb) = (vec![0.0f32; rows * m], vec![0.0f32; m], vec![0.0f32; m]);
        layernorm::backward(&x, rows, m, &w, &y, layernorm::Grads { x: &mut gx, w: &mut gw, b: &mut gb }, &Pool::new())
            .unwrap();
        [y, gx, gw, gb].concat().iter().map(|v| v.to_bits()).collect::<Vec<u32>>()
    };
    assert_eq!(run(), run());
}
