//! The memory model (`memory`) against the pool: the peak the pool saw over one Mamba-1
//! layer's forward and backward at a reduced shape is within 10 % of the model's layer terms,
//! and over one Mamba-2 layer's at three shapes within 10 % of its terms either way; a
//! Mamba-2 configuration gets the Mamba-2 terms; a whole training step of `CudaModel` (both
//! mixers, attention, f32 and bf16) is within 10 % of the model's prediction for it; and the
//! prediction for `boldcast-demo` (batch 4, 1,024 parcels, window 256) fits 7 GiB in f32 and
//! 4 GiB in bf16, with Mamba-2 layers too. `cargo nextest run -p boldcast-cuda memory
//! --no-capture` prints the breakdowns.

use boldcast_core::config::{ModelConfig, Temporal};
use boldcast_core::memory::format_bytes;
use boldcast_cuda::mamba1::layer::{backward, forward, LayerDims, Mamba1Params};
use boldcast_cuda::mamba2::layer::{self as layer2, Layer2Dims, Mamba2Params};
use boldcast_cuda::memory::{
    best_chunk, layer2_dims, layer2_highs, layer2_workspace, layer_workspace, step_peak, Breakdown, Precision,
    StepShape,
};
use boldcast_cuda::pool::{Pool, F32};
use boldcast_cuda::trunk::BackwardIn;

fn show(what: &str, b: &Breakdown) {
    println!("{what}: total {} = {b:?}", format_bytes(b.total() as f64));
}

#[test]
fn the_pool_peak_of_one_layer_matches_the_model() {
    for (z, seqs) in [
        (LayerDims { m: 16, di: 32, n: 8, k: 4, r: 1, time: 64, q: 8, group: 4 }, 12),
        (LayerDims { m: 32, di: 64, n: 16, k: 4, r: 2, time: 32, q: 16, group: 3 }, 8),
    ] {
        let rows = seqs * z.time;
        let mut p = Mamba1Params::zeros(&z);
        p.norm_w.fill(1.0);
        let u: Vec<f32> = (0..rows * z.m).map(|i| (i as f32 * 0.1).sin()).collect();
        let pool = Pool::new();
        let out = forward(&p.view(), &z, seqs, &u, &pool).unwrap();
        let mut g = Mamba1Params::zeros(&z);
        let b = BackwardIn { seqs, u: u[..].into(), g_out: &u };
        let g_u = backward(&p.view(), &z, b, &mut g.view_mut(), &pool).unwrap();
        drop((out, g_u));
        // The layer's terms: its output (the next layer's kept input), one group's
        // checkpoints, the input gradient it returns, and one group's workspace with the
        // pool's allowance.
        let ws = layer_workspace(&z, z.group, Precision::F32);
        let live = F32 * (2 * rows * z.m + z.ckpt_len(z.group)) + ws;
        // The buffers live at once are exactly the formula's (its terms are the code's buffers).
        assert_eq!(pool.stats().peak_in_use, live, "{z:?}");
        let want = live + ws / 8;
        let got = pool.peak();
        println!("{z:?} x {seqs}: pool peak {got} (in use {}), model {want}", pool.stats().peak_in_use);
        let err = (got as f64 - want as f64).abs() / want as f64;
        assert!(err <= 0.10, "pool peak {got} vs model {want}: {:.1} %", 100.0 * err);
    }
}

#[test]
fn boldcast_demo_fits_7_gib_in_f32_and_4_gib_in_bf16() {
    let cfg = ModelConfig::boldcast_demo();
    let preset = include_str!("../../../../configs/presets/boldcast-demo.toml");
    // The preset's model is the one ModelConfig::boldcast_demo builds.
    for (key, v) in [("d_model", cfg.d_model), ("n_layers", cfg.n_layers), ("d_state", cfg.d_state)] {
        assert!(preset.contains(&format!("\n{key} = {v}\n")), "{key}");
    }
    assert!(preset.contains("\nbatch_size = 4\n") && preset.contains("\nwindow = 256\n"));
    assert!(preset.contains("\nparcels = 1024\n"));
    // At the chunk CudaModel takes for the step (the memory model's best).
    let shape = StepShape { batch: 4, window: 256, parcels: 1024, q: 1, group: 64 };
    let (q32, q16) = (best_chunk(&cfg, &shape, Precision::F32), best_chunk(&cfg, &shape, Precision::Bf16));
    println!("boldcast-demo: best chunk {q32} (f32), {q16} (bf16)");
    assert!((1..=256).contains(&q32) && (1..=256).contains(&q16), "{q32} {q16}");
    let f32 = step_peak(&cfg, &StepShape { q: q32, ..shape }, Precision::F32);
    let bf16 = step_peak(&cfg, &StepShape { q: q16, ..shape }, Precision::Bf16);
    // No other chunk does better (the search is over every q of the window).
    for q in [1, 8, 16, 32, 64, 128, 256] {
        assert!(step_peak(&cfg, &StepShape { q, ..shape }, Precision::F32).total() >= f32.total(), "q {q}");
    }
    show("boldcast-demo f32", &f32);
    show("boldcast-demo bf16", &bf16);
    assert!(f32.total() <= 7 << 30, "{}", format_bytes(f32.total() as f64));
    assert!(bf16.total() <= 4 << 30, "{}", format_bytes(bf16.total() as f64));
}

/// The pool's in-use and reserved peaks over one Mamba-2 layer's forward and backward of
/// `seqs` sequences.
fn mamba2_layer_peaks(z: &Layer2Dims, seqs: usize) -> (usize, usize) {
    let rows = seqs * z.time;
    let mut p = Mamba2Params::zeros(z);
    p.norm_w.fill(1.0);
    p.gnorm_w.fill(1.0);
    let u: Vec<f32> = (0..rows * z.m).map(|i| (i as f32 * 0.1).sin()).collect();
    let pool = Pool::new();
    let out = layer2::forward(&p.view(), z, seqs, &u, &pool).unwrap();
    let mut g = Mamba2Params::zeros(z);
    let b = BackwardIn { seqs, u: u[..].into(), g_out: &u };
    let g_u = layer2::backward(&p.view(), z, b, &mut g.view_mut(), &pool).unwrap();
    assert!(g_u.iter().chain(&g.in_proj).all(|v| v.is_finite()));
    drop((out, g_u));
    assert_eq!(pool.in_use(), 0);
    (pool.stats().peak_in_use, pool.peak())
}

#[test]
fn the_pool_peak_of_one_mamba2_layer_matches_the_model() {
    // Groups of 4, 3 (a short last group of 2) and 5; q 8, 16 and 1; N 8, 16, 16; 4, 2, 2
    // heads. The first two peak at the scan backward, the third (q = 1, N = Di) at the
    // convolution backward.
    for (z, seqs, scan_higher) in [
        (Layer2Dims { m: 16, di: 32, n: 8, k: 4, nh: 4, time: 64, q: 8, group: 4 }, 12, true),
        (Layer2Dims { m: 32, di: 64, n: 16, k: 4, nh: 2, time: 32, q: 16, group: 3 }, 8, true),
        (Layer2Dims { m: 8, di: 16, n: 16, k: 3, nh: 2, time: 48, q: 1, group: 5 }, 10, false),
    ] {
        let rows = seqs * z.time;
        let h = layer2_highs(&z, z.group, Precision::F32);
        assert_eq!(h.scan > h.conv, scan_higher, "{h:?}");
        assert_eq!(layer2_workspace(&z, z.group, Precision::F32), h.workspace());
        // The layer's terms: its output (the next layer's kept input), one group's
        // checkpoints, the input gradient it returns, one group's workspace, and its slack.
        let live = F32 * (2 * rows * z.m + z.ckpt_len(z.group)) + h.workspace();
        let (in_use, got) = mamba2_layer_peaks(&z, seqs);
        // Every buffer the formula counts is live at the high; the pool lends some above
        // their request, which is all the in-use peak has besides.
        let over = in_use as f64 / live as f64;
        assert!((1.0..=1.1).contains(&over), "in use {in_use} vs {live}: {over:.3}");
        let want = live + h.slack();
        let ratio = got as f64 / want as f64;
        println!("{z:?} x {seqs}: {h:?}");
        println!("  pool peak {got} (in use {in_use}, {over:.3} of the terms'), model {want}: {ratio:.3}");
        assert!((0.9..=1.1).contains(&ratio), "pool peak {got} vs model {want}: ratio {ratio:.3}");
    }
}

/// boldcast-demo with a Mamba-2 temporal mixer (Pd 64: 4 heads of the 256 inner channels).
fn demo_mamba2() -> ModelConfig {
    ModelConfig::builder().temporal(Temporal::Mamba2).build().unwrap()
}

#[test]
fn step_peak_takes_the_terms_of_the_configured_mixer() {
    let (m1, m2) = (ModelConfig::boldcast_demo(), demo_mamba2());
    let shape = StepShape { batch: 4, window: 256, parcels: 1024, q: 64, group: 64 };
    for prec in [Precision::F32, Precision::Bf16] {
        let (b1, b2) = (step_peak(&m1, &shape, prec), step_peak(&m2, &shape, prec));
        // 16 (b, t) groups of 1,024 parcels a pass fill 64 sequences of 256 steps.
        let rows = 16 * 1024;
        let unpack = if prec == Precision::Bf16 { 4 * rows * 128 } else { 0 };
        let attn = 4 * rows * (12 * 128 + 2 * 8) + unpack;
        let h = layer2_highs(&layer2_dims(&m2, 256, &shape), 64, prec);
        assert_eq!((b2.workspace, b2.slack), (h.workspace() + attn, h.slack() + attn / 8));
        assert_eq!(b2.params, 16 * m2.n_params());
        assert!(m2.n_params() < m1.n_params());
        // The states are (nh, Pd, N) = (Di, N) per sequence: the checkpoints are Mamba-1's,
        // one group's.
        assert_eq!(b1.ckpts, 4 * 64 * 4 * 16 * 256);
        assert_eq!(b2.ckpts, b1.ckpts);
        assert_eq!((b2.kept, b2.grads, b2.head), (b1.kept, b1.grads, b1.head));
        assert_ne!(b2.workspace, b1.workspace);
    }
}

#[test]
fn boldcast_demo_with_mamba2_fits_7_gib_in_f32_and_4_gib_in_bf16() {
    let cfg = demo_mamba2();
    assert_eq!((cfg.d_inner(), cfg.nheads(), cfg.d_state), (256, 4, 16));
    let peak = |q: usize, prec: Precision| {
        let b = step_peak(&cfg, &StepShape { batch: 4, window: 256, parcels: 1024, q, group: 64 }, prec);
        show(&format!("boldcast-demo Mamba-2 q {q} {prec:?}"), &b);
        b.total()
    };
    // At the chunk CudaModel takes (the memory model's best).
    let shape = StepShape { batch: 4, window: 256, parcels: 1024, q: 1, group: 64 };
    let (q32, q16) = (best_chunk(&cfg, &shape, Precision::F32), best_chunk(&cfg, &shape, Precision::Bf16));
    assert!((1..=256).contains(&q32) && (1..=256).contains(&q16), "{q32} {q16}");
    let (f32, bf16) = (peak(q32, Precision::F32), peak(q16, Precision::Bf16));
    assert!(f32 <= 7 << 30, "{}", format_bytes(f32 as f64));
    assert!(bf16 <= 4 << 30, "{}", format_bytes(bf16 as f64));
    // The checkpoints are one group's (the forward keeps none), so no chunk costs gigabytes:
    // the worst is within 1 GiB of the best.
    for q in [1, 16, 256] {
        assert!(peak(q, Precision::F32) <= f32 + (1 << 30), "q {q}");
    }
}

/// A whole training step of `CudaModel` (both mixers, with attention, a last short group of
/// sequences) against the memory model's prediction for it (`CudaModel::predicted_peak`): the
/// pool's peak over the step within 10 %.
#[test]
fn the_pool_peak_of_a_whole_step_matches_the_model() {
    use boldcast_core::{Adam, Adjacency, Model, OptimConfig, ScheduleConfig, TokenShape, Trainer};
    use boldcast_cuda::CudaModel;
    for temporal in [Temporal::Mamba, Temporal::Mamba2] {
        for prec in [Precision::F32, Precision::Bf16] {
            let cfg = ModelConfig::builder()
                .temporal(temporal)
                .d_in(1)
                .d_model(16)
                .n_layers(2)
                .d_state(8)
                .expand(2)
                .headdim(8)
                .k_neighbors(4)
                .horizons(&[1, 4])
                .build()
                .unwrap();
            // 160 sequences: two groups of 64 and a short one; 5,120 rows.
            let shape = TokenShape::new(4, 32, 40, 1);
            let m = CudaModel::seeded(cfg, Some(Adjacency::ring(40, 4).unwrap()), 1).unwrap().with_precision(prec);
            let want = m.predicted_peak(shape);
            let tokens = boldcast_fixtures::ar1_tokens(shape, 0.8, 2);
            let opt = Adam::<f32>::new(OptimConfig::adamw(0.01, (0.9, 0.999))).unwrap();
            let mut t = Trainer::new(m, opt, ScheduleConfig::Constant { lr: 1e-3 }, (), Some(1.0));
            t.step(&tokens).unwrap();
            let got = t.model.pool().peak();
            let ratio = got as f64 / want.total() as f64;
            show(&format!("{temporal:?} {prec:?} step: pool peak {got}, model"), &want);
            assert!(
                (0.9..=1.1).contains(&ratio),
                "{temporal:?} {prec:?}: pool {got} vs model {}: {ratio:.3}",
                want.total()
            );
            let _ = t.model.state();
        }
    }
}
