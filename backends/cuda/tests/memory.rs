//! The memory model (`memory`) against the pool: the peak the pool saw over one Mamba-1
//! layer's forward and backward at a reduced shape is within 10 % of the model's layer terms;
//! and the prediction for `boldcast-demo` (batch 4, 1,024 parcels, window 256) fits 8 GB in
//! f32 and 5 GB in bf16. `cargo test -p boldcast-cuda --test memory -- --nocapture` prints
//! the breakdowns.

use boldcast_core::config::ModelConfig;
use boldcast_core::memory::format_bytes;
use boldcast_cuda::mamba1::layer::{backward, forward, LayerDims, Mamba1Params};
use boldcast_cuda::memory::{layer_workspace, step_peak, Breakdown, Precision, StepShape};
use boldcast_cuda::pool::{Pool, F32};

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
        let (out, mut saved) = forward(&p, &z, seqs, &u, &pool).unwrap();
        let mut g = Mamba1Params::zeros(&z);
        let g_u = backward(&p, &z, seqs, &u, &u, &mut saved, &mut g, &pool).unwrap();
        drop((out, g_u, saved));
        // The layer's terms: its output (the next layer's kept input), its checkpoints, the
        // input gradient it returns, and one group's workspace with the pool's allowance.
        let ws = layer_workspace(&z, z.group, Precision::F32);
        let live = F32 * (2 * rows * z.m + z.ckpt_len(seqs)) + ws;
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
fn boldcast_demo_fits_8_gb_in_f32_and_5_gb_in_bf16() {
    let cfg = ModelConfig::boldcast_demo();
    let preset = include_str!("../../../configs/presets/boldcast-demo.toml");
    // The preset's model is the one ModelConfig::boldcast_demo builds.
    for (key, v) in [("d_model", cfg.d_model), ("n_layers", cfg.n_layers), ("d_state", cfg.d_state)] {
        assert!(preset.contains(&format!("\n{key} = {v}\n")), "{key}");
    }
    assert!(preset.contains("\nbatch_size = 4\n") && preset.contains("\nwindow = 256\n"));
    assert!(preset.contains("\nparcels = 1024\n"));
    let shape = StepShape { batch: 4, window: 256, parcels: 1024, q: 64, group: 64 };
    let f32 = step_peak(&cfg, &shape, Precision::F32);
    let bf16 = step_peak(&cfg, &shape, Precision::Bf16);
    show("boldcast-demo f32", &f32);
    show("boldcast-demo bf16", &bf16);
    assert!(f32.total() <= 8_000_000_000, "{}", format_bytes(f32.total() as f64));
    assert!(bf16.total() <= 5_000_000_000, "{}", format_bytes(bf16.total() as f64));
}
