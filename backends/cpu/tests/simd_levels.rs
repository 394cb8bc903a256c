//! The vector instruction set chosen at run time (`ops::simd`, overridable with
//! `BOLDCAST_SIMD`) must not change a single bit: the kernels fix their order of operations
//! and never fuse a multiply-add. The level is fixed once per process, so this test runs its
//! own executable once per level (the `print_model_bits` helper below, which is ignored in
//! normal runs) and compares what each run printed. Each run also prints the level it ran
//! at; a level the CPU supports (`is_x86_feature_detected!`) that did not run fails the test.

use boldcast_core::{Adjacency, Model, ModelConfig, Temporal, TokenShape, Tokens};
use boldcast_cpu::ops::simd::{self, Level};
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
    let cfg = ModelConfig::builder()
        .temporal(temporal)
        .d_in(1)
        .d_model(12)
        .n_layers(2)
        .d_state(5)
        .expand(2)
        .d_conv(4)
        .headdim(8)
        .chunk_size(8)
        .k_neighbors(3)
        .horizons(&[1, 3])
        .build()
        .expect("a valid configuration");
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

/// The name `BOLDCAST_SIMD` gives a level.
fn level_name(level: Level) -> &'static str {
    match level {
        Level::Baseline => "baseline",
        Level::Avx2 => "avx2",
        Level::Avx512 => "avx512",
    }
}

/// The levels this CPU supports, by its own feature flags (the same conditions as the
/// crate's detection: AVX2 needs FMA, AVX-512 needs F, VL, AVX2 and FMA).
fn supported_levels() -> Vec<&'static str> {
    let mut v = vec!["baseline"];
    #[cfg(target_arch = "x86_64")]
    {
        let (avx2, fma) = (is_x86_feature_detected!("avx2"), is_x86_feature_detected!("fma"));
        if avx2 && fma {
            v.push("avx2");
        }
        if avx2 && fma && is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vl") {
            v.push("avx512");
        }
    }
    v
}

#[test]
#[ignore = "a helper run by every_simd_level_gives_the_same_bits in a child process"]
fn print_model_bits() {
    println!("LEVEL {}", level_name(simd::level()));
    println!("BITS-BEGIN\n{}BITS-END", model_bits());
}

/// Every level the CPU supports runs (in a child process of its own) and gives the baseline's
/// bits; the test fails if a supported level did not run, and says which levels it compared.
#[test]
fn every_simd_level_gives_the_same_bits() {
    let exe = std::env::current_exe().expect("the test executable");
    // The level the child ran at and the bits it printed.
    let run = |level: &str| {
        let out = Command::new(&exe)
            .args(["--exact", "print_model_bits", "--ignored", "--nocapture", "--test-threads", "1"])
            .env("BOLDCAST_SIMD", level)
            .output()
            .expect("the test executable runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // The test harness prints "test print_model_bits ... " before the helper's first line.
        let ran = text
            .split("LEVEL ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("BOLDCAST_SIMD={level}: the child printed no level:\n{text}"))
            .to_string();
        let (a, b) = (text.find("BITS-BEGIN").expect("bits printed"), text.find("BITS-END").expect("bits end"));
        (ran, text[a..b].to_string())
    };
    let supported = supported_levels();
    let (ran, base) = run("baseline");
    assert_eq!(ran, "baseline", "BOLDCAST_SIMD=baseline ran at {ran}");
    assert!(base.lines().count() > 60, "every gradient of both models printed:\n{base}");
    let mut tested = vec!["baseline"];
    for level in ["avx2", "avx512"] {
        let (ran, bits) = run(level);
        assert_eq!(bits, base, "BOLDCAST_SIMD={level} (ran at {ran}) differs from the baseline build");
        if ran == level {
            tested.push(level);
        } else {
            // A level the CPU lacks falls back to the best it has.
            assert!(!supported.contains(&level), "the CPU supports {level} but BOLDCAST_SIMD={level} ran at {ran}");
            println!("BOLDCAST_SIMD={level}: not supported by this CPU, ran at {ran}");
        }
    }
    println!("SIMD levels compared bit for bit with the baseline: {tested:?} (this CPU supports {supported:?})");
    assert_eq!(tested, supported, "every level the CPU supports must be tested");
    let detected = level_name(simd::level());
    if std::env::var_os("BOLDCAST_SIMD").is_none() {
        assert_eq!(detected, *supported.last().expect("baseline"), "this process did not detect the best level");
    }
    assert_eq!(
        model_bits(),
        base["BITS-BEGIN\n".len()..],
        "the detected level ({detected}) differs from the baseline build"
    );
}
