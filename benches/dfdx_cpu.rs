//! Criterion benches of the dfdx backend on the CPU device (`cargo bench --bench dfdx_cpu`),
//! the same pieces and sizes as `benches/cpu.rs`, every name prefixed with the backend,
//! `dfdx-cpu/`:
//! - `dfdx-cpu/mamba1_forward`, `dfdx-cpu/mamba1_backward`: the Mamba-1 mixer
//!   (`boldcast_dfdx::mamba1::mamba1`) over 16 sequences of 256 steps at the `cpu-demo` layer
//!   size; the backward is a traced forward and dfdx's tape backward of `sum(y * g_y)`, which
//!   gives the same gradients the CPU backend's backward computes from `g_y`;
//! - `dfdx-cpu/knn_forward`, `dfdx-cpu/knn_backward`: the k-nearest-neighbour attention
//!   (`boldcast_dfdx::knn::knn_attention`) over 64 groups of 64 parcels, k 8, d_model 64;
//! - `dfdx-cpu/train_step_quick`: one full training step of the `quick` preset through the
//!   core's `Trainer`, as `cpu/train_step_quick`.
//!
//! Sample counts are small: the dfdx scan runs step by step as small tensor operations, far
//! slower than the CPU backend's (BENCHMARKS.md, "Criterion benches", has both).

mod common;

use boldcast::core::{Adjacency, ModelConfig, Trainer};
use boldcast::dfdx::dfdx::prelude::*;
use boldcast::dfdx::knn::{knn_attention, KnnParams};
use boldcast::dfdx::mamba1::{mamba1, Mamba1Params};
use boldcast::dfdx::{cpu_device, Cpu, DfdxModel};
use common::{demo_config, values, QuickStep};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;

type M<T> = Tensor<(usize, usize), f32, Cpu, T>;
type V<T> = Tensor<(usize,), f32, Cpu, T>;

fn mat(dev: &Cpu, v: Vec<f32>, rows: usize, cols: usize) -> M<NoneTape> {
    dev.tensor_from_vec(v, (rows, cols))
}

fn vector(dev: &Cpu, v: Vec<f32>) -> V<NoneTape> {
    let n = v.len();
    dev.tensor_from_vec(v, (n,))
}

/// The Mamba-1 parameters of `benches/cpu.rs` on the device: the same values (seeded by each
/// tensor's position in the state dict, `A_log = ln(n + 1)`, `D = 1`, `dt_proj.bias = -3`).
struct Mixer {
    /// `conv1d.weight` `(Di, K)`, `in_proj`, `x_proj`, `dt_proj.weight`, `A_log`, `out_proj`.
    w: [M<NoneTape>; 6],
    /// `conv1d.bias`, `dt_proj.bias`, `D`.
    b: [V<NoneTape>; 3],
}

impl Mixer {
    fn new(dev: &Cpu, cfg: &ModelConfig) -> Self {
        let (m, di, n, r, k) = (cfg.d_model, cfg.d_inner(), cfg.d_state, cfg.dt_rank(), cfg.d_conv);
        let a_log = (0..di * n).map(|j| ((j % n) as f32 + 1.0).ln()).collect();
        Self {
            w: [
                mat(dev, values(di * k, 0, 0.2), di, k),
                mat(dev, values(2 * di * m, 2, 0.2), 2 * di, m),
                mat(dev, values((r + 2 * n) * di, 3, 0.2), r + 2 * n, di),
                mat(dev, values(di * r, 4, 0.2), di, r),
                mat(dev, a_log, di, n),
                mat(dev, values(m * di, 8, 0.2), m, di),
            ],
            b: [vector(dev, values(di, 1, 0.2)), vector(dev, vec![-3.0; di]), vector(dev, vec![1.0; di])],
        }
    }

    /// The parameters with tape `T` (a fresh empty tape each, merged into the input's).
    fn params<T: Tape<f32, Cpu>>(&self) -> Mamba1Params<f32, Cpu, T> {
        let [conv_w, in_proj, x_proj, dt_w, a_log, out_proj] = self.w.clone().map(|t| t.retaped::<T>());
        let [conv_b, dt_b, d] = self.b.clone().map(|t| t.retaped::<T>());
        Mamba1Params { conv_w, conv_b, in_proj, x_proj, dt_w, dt_b, a_log, d, out_proj }
    }
}

fn mixer(c: &mut Criterion) {
    let dev = cpu_device();
    let cfg = demo_config();
    let (time, seqs, m) = (256, 16, cfg.d_model);
    let p = Mixer::new(&dev, &cfg);
    let u = mat(&dev, values(time * seqs * m, 11, 1.0), time * seqs, m);
    let g_y = mat(&dev, values(time * seqs * m, 12, 1.0), time * seqs, m);
    let mut g = c.benchmark_group("dfdx-cpu");
    g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(5));
    g.bench_function("mamba1_forward", |b| b.iter(|| mamba1(black_box(u.clone()), p.params(), time, seqs)));
    g.bench_function("mamba1_backward", |b| {
        b.iter(|| {
            let y = mamba1(black_box(u.clone()).leaky_traced(), p.params(), time, seqs);
            (y * g_y.clone()).sum::<(), Axes2<0, 1>>().backward()
        })
    });
    g.finish();
}

/// One linear layer: weight and bias.
type Linear = (M<NoneTape>, V<NoneTape>);

/// The attention's parameters on the device: the norm, then q, k, v and out.
struct Attention {
    norm: (V<NoneTape>, V<NoneTape>),
    lin: [Linear; 4],
}

impl Attention {
    /// The parameters with tape `T`.
    fn params<T: Tape<f32, Cpu>>(&self) -> KnnParams<f32, Cpu, T> {
        let r = |(w, b): Linear| (w.retaped::<T>(), b.retaped::<T>());
        let [q, k, v, out] = self.lin.clone().map(r);
        KnnParams { norm: (self.norm.0.retaped::<T>(), self.norm.1.retaped::<T>()), q, k, v, out }
    }
}

fn attention(c: &mut Criterion) {
    let dev = cpu_device();
    let cfg = demo_config();
    let (m, parcels, groups) = (cfg.d_model, 64, 64);
    let adj = Adjacency::ring(parcels, cfg.k_neighbors).expect("a valid ring");
    let idx: Tensor<(usize,), usize, Cpu> = dev.tensor_from_vec(adj.indices().to_vec(), (adj.indices().len(),));
    // The values of `benches/cpu.rs`: norm weight 1, the rest from seeds 100 + position.
    let w = |i: u64| mat(&dev, values(m * m, 100 + i, 0.15), m, m);
    let v = |i: u64| vector(&dev, values(m, 100 + i, 0.15));
    let prm = Attention {
        norm: (vector(&dev, vec![1.0; m]), v(1)),
        lin: [(w(2), v(3)), (w(4), v(5)), (w(6), v(7)), (w(8), v(9))],
    };
    let len = groups * parcels * m;
    let x = mat(&dev, values(len, 21, 1.0), groups * parcels, m);
    let g_out = mat(&dev, values(len, 22, 1.0), groups * parcels, m);
    let mut g = c.benchmark_group("dfdx-cpu");
    g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    g.bench_function("knn_forward", |b| {
        b.iter(|| knn_attention(black_box(x.clone()), prm.params::<NoneTape>(), parcels, &idx))
    });
    g.bench_function("knn_backward", |b| {
        b.iter(|| {
            let y = knn_attention(black_box(x.clone()).leaky_traced(), prm.params(), parcels, &idx);
            (y * g_out.clone()).sum::<(), Axes2<0, 1>>().backward()
        })
    });
    g.finish();
}

fn train_step(c: &mut Criterion) {
    let q = QuickStep::new();
    let model =
        DfdxModel::<f32, Cpu>::new_cpu(q.model.clone(), q.adjacency.clone(), 0).expect("the quick model builds");
    let mut trainer = Trainer::new(model, q.optimizer(), q.run.schedule_config(), (), q.run.max_norm());
    let mut g = c.benchmark_group("dfdx-cpu");
    g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    g.bench_function("train_step_quick", |b| {
        b.iter(|| black_box(trainer.step(&q.tokens).expect("a finite step")).loss)
    });
    g.finish();
}

criterion_group!(benches, mixer, attention, train_step);
criterion_main!(benches);
