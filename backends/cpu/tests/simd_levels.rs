//! The vector instruction set chosen at run time (`ops::simd`, overridable with
//! `BOLDCAST_SIMD`) must not change a single bit: the kernels fix their order of operations
//! and never fuse a multiply-add. The level is fixed once per process, so this test runs its
//! own executable once per level (the `print_model_bits` helper below, which is ignored in
//! normal runs) and compares what each run printed.

use boldcast_core::{Adjacency, Model, ModelConfig, Temporal, TokenShape, Tokens};
use boldcast_cpu::CpuModel;
use std::process::Command;

/// Small models with every kind of block (the Mamba-1 scan with d_inner not a multiple of the
/// vector width, the Mamba-2 mixer with several heads and chunks, attention):
/// their losses and every gradient entry, as bits.
fn model_bits() -> String {
    [Temporal::Mamba, Temporal::Mamba2].into_iter().map(one_model_bits).collect()
}

/// [`model_bits`] for one temporal mixer.
fn one_model_bits(temporal: Temporal) -> String {
    let cfg = ModelConfig {
        temporal,
        d_in: 1,
        d_model: 12,
        n_layers: 2,
        d_state: 5,
        expand: 2,
        d_conv: 4,
        headdim: 8,
        chunk_size: 8,
        k_neighbors: 3,
        horizons: vec![1, 3],
    };
    let (b, t, p) = (2, 40, 6);
    let mut model = CpuModel::<f32>::new(cfg, Some(Adjacency::ring(p, 3).expect("a ring")), 7).expect("a model");
    let mut tokens = Tokens::<f32>::zeros(TokenShape::new(b, t, p, 1));
    let mut s = 5u64;
    for v in tokens.data_mut() {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *v = ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0;
    }
    let loss = model.loss_and_grads(&tokens).expect("a finite loss");
    let mut out = format!("{temporal:?} loss {:016x}\n", loss.to_bits());
    for g in model.grads() {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for v in &g.data {
            h = (h ^ u64::from(v.to_bits())).wrapping_mul(0x100_0000_01b3);
        }
        out.push_str(&format!("{} {h:016x}\n", g.name));
    }
    out
}

#[test]
#[ignore = "a helper run by every_simd_level_gives_the_same_bits in a child process"]
fn print_model_bits() {
    println!("BITS-BEGIN\n{}BITS-END", model_bits());
}

#[test]
fn every_simd_level_gives_the_same_bits() {
    let exe = std::env::current_exe().expect("the test executable");
    let run = |level: &str| {
        let out = Command::new(&exe)
            .args(["--exact", "print_model_bits", "--ignored", "--nocapture", "--test-threads", "1"])
            .env("BOLDCAST_SIMD", level)
            .output()
            .expect("the test executable runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (a, b) = (text.find("BITS-BEGIN").expect("bits printed"), text.find("BITS-END").expect("bits end"));
        text[a..b].to_string()
    };
    let base = run("baseline");
    assert!(base.lines().count() > 60, "every gradient of both models printed:\n{base}");
    for level in ["avx2", "avx512"] {
        // A level the CPU lacks falls back to the best it has: still a valid comparison.
        assert_eq!(run(level), base, "BOLDCAST_SIMD={level} differs from the baseline build");
    }
    assert_eq!(model_bits(), base["BITS-BEGIN\n".len()..], "the detected level differs from the baseline build");
}
