//! Criterion benches of the CPU backend (`cargo bench --bench cpu`), every name prefixed with
//! the backend, `cpu/`:
//! - `cpu/mamba1_forward`, `cpu/mamba1_backward`: the Mamba-1 mixer (projections,
//!   convolution, selective scan, gate) over 16 sequences of 256 steps at the `cpu-demo`
//!   layer size (d_model 64, d_inner 128, d_state 16);
//! - `cpu/knn_forward`, `cpu/knn_backward`: the k-nearest-neighbour attention over 64 time
//!   steps of 64 parcels, k 8, d_model 64 (`cpu-demo`);
//! - `cpu/train_step_quick`: one full training step (forward, backward, clipping, AdamW) of
//!   the `quick` preset on its batch shape.
//!
//! Threads: rayon's global pool (`RAYON_NUM_THREADS`, else one per CPU). Sample counts are
//! small so that the whole file runs in about a minute. The full-step figures of the larger
//! presets come from `bc-cli bench` (BENCHMARKS.md).

mod common;

use boldcast::core::{Adjacency, Trainer};
use boldcast::cpu::knn::{self, KnnParams};
use boldcast::cpu::mamba1::{self, Mamba1Dims, Mamba1Params};
use boldcast::cpu::mixer::{BackwardIo, Seqs};
use boldcast::cpu::CpuModel;
use common::{demo_config, values, QuickStep};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;

fn mamba1_params(dims: Mamba1Dims) -> Mamba1Params<Vec<f32>> {
    let mut p = Mamba1Params::zeros(dims);
    for (i, (name, t)) in p.view_mut().named().into_iter().enumerate() {
        match name {
            "A_log" => {
                for (j, v) in t.iter_mut().enumerate() {
                    *v = ((j % dims.d_state) as f32 + 1.0).ln();
                }
            }
            "D" => t.fill(1.0),
            // dt = softplus(-3 + ...) is about 0.05, as after PyTorch's initialization.
            "dt_proj.bias" => t.fill(-3.0),
            _ => t.copy_from_slice(&values(t.len(), i as u64, 0.2)),
        }
    }
    p
}

fn mixer(c: &mut Criterion) {
    let dims = Mamba1Dims::from_config(&demo_config());
    let (batch, time, parcels) = (1, 256, 16);
    let p = mamba1_params(dims);
    let len = batch * time * parcels * dims.d_model;
    let (u, g_y) = (values(len, 11, 1.0), values(len, 12, 1.0));
    let mut y = vec![0.0; len];
    let mut g = c.benchmark_group("cpu");
    g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    g.bench_function("mamba1_forward", |b| {
        b.iter(|| mamba1::forward(dims, &p, black_box(&u), Seqs::new(batch, time, parcels), &mut y))
    });
    let mut grads = Mamba1Params::zeros(dims);
    let mut g_u = vec![0.0; len];
    g.bench_function("mamba1_backward", |b| {
        b.iter(|| {
            let io = BackwardIo { u: black_box(&u), g_y: &g_y, g_u: &mut g_u };
            mamba1::backward(dims, &p, Seqs::new(batch, time, parcels), io, &mut grads, None)
        })
    });
    g.finish();
}

fn attention(c: &mut Criterion) {
    let cfg = demo_config();
    let (m, parcels, groups) = (cfg.d_model, 64, 64);
    let adj = Adjacency::ring(parcels, cfg.k_neighbors).expect("a valid ring");
    let mut prm = KnnParams::zeros(m);
    for (i, (name, t)) in prm.view_mut().named().into_iter().enumerate() {
        if name == "norm.weight" {
            t.fill(1.0);
        } else {
            t.copy_from_slice(&values(t.len(), 100 + i as u64, 0.15));
        }
    }
    let len = groups * parcels * m;
    let (x, g_out) = (values(len, 21, 1.0), values(len, 22, 1.0));
    let mut out = vec![0.0; len];
    let mut g = c.benchmark_group("cpu");
    g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    g.bench_function("knn_forward", |b| b.iter(|| knn::forward(m, &adj, &prm, black_box(&x), groups, &mut out)));
    let mut grads = KnnParams::zeros(m);
    let mut g_x = vec![0.0; len];
    g.bench_function("knn_backward", |b| {
        b.iter(|| knn::backward(m, &adj, &prm, black_box(&x), groups, &g_out, &mut g_x, &mut grads))
    });
    g.finish();
}

fn train_step(c: &mut Criterion) {
    let q = QuickStep::new();
    let model = CpuModel::<f32>::new(q.model.clone(), q.adjacency.clone(), 0).expect("the quick model builds");
    let mut trainer = Trainer::new(model, q.optimizer(), q.run.schedule_config(), (), q.run.max_norm());
    let mut g = c.benchmark_group("cpu");
    g.sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    g.bench_function("train_step_quick", |b| {
        b.iter(|| black_box(trainer.step(&q.tokens).expect("a finite step")).loss)
    });
    g.finish();
}

criterion_group!(benches, mixer, attention, train_step);
criterion_main!(benches);
