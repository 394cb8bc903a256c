//! The conformance suite on the dfdx backend (its `Cpu` device, f32): every golden case, with
//! either temporal mixer, against PyTorch, and randomized configurations of both mixers against
//! the CPU backend's hand-written gradients. Three fixed Mamba-2 shapes besides: the random
//! draws may or may not put a chunk boundary inside a sequence, so these make sure partial last
//! chunks, several chunks and several heads are always compared.

use boldcast::core::{Adjacency, ModelConfig, Temporal, TokenShape};
use boldcast::dfdx::DfdxCpuModel;
use boldcast_testkit::conformance::{assert_random_vs_cpu, compare_with_cpu, random_case, RandomCase};

boldcast_testkit::conformance_tests! {
    build = |cfg, adj| DfdxCpuModel::<f32>::new_cpu(cfg, adj, 1),
    temporals = [Temporal::Mamba, Temporal::Mamba2],
    golden = boldcast_testkit::conformance::default_golden_cases(),
    random_cases = 8,
}

/// A Mamba-2 case: `d_model` 8 (Di 16) in heads of `headdim`, `time` tokens in chunks of
/// `chunk`, kNN attention with k 2 over 3 parcels, `d_in` 2.
fn mamba2_case(headdim: usize, chunk: usize, time: usize, n_layers: usize) -> RandomCase {
    let model = ModelConfig::builder()
        .temporal(Temporal::Mamba2)
        .d_in(2)
        .d_model(8)
        .n_layers(n_layers)
        .d_state(3)
        .expand(2)
        .d_conv(3)
        .headdim(headdim)
        .chunk_size(chunk)
        .k_neighbors(2)
        .horizons(&[1, 3])
        .build()
        .unwrap();
    RandomCase {
        adjacency: Some(Adjacency::ring(3, 2).unwrap()),
        tokens: TokenShape::new(2, time, 3, 2),
        rho: 0.8,
        model,
    }
}

#[test]
fn mamba2_chunk_boundaries_partial_chunks_and_heads_match_the_cpu_backend() {
    let build = |cfg, adj| DfdxCpuModel::<f32>::new_cpu(cfg, adj, 1);
    let cases = [
        // 4 heads of 4; 13 tokens in chunks 5, 5, 3.
        mamba2_case(4, 5, 13, 2),
        // 8 heads of 2; 11 tokens in chunks of 2 (the last one a single step).
        mamba2_case(2, 2, 11, 1),
        // 2 heads of 8; 12 tokens in chunks 0..7, 7..12.
        mamba2_case(8, 7, 12, 2),
    ];
    for (i, case) in cases.iter().enumerate() {
        let (t, q) = (case.tokens.time, case.model.chunk_size);
        assert!(t > q && t % q != 0 && case.model.nheads() >= 2, "case {i} must exercise what it claims");
        let checks = compare_with_cpu(case, &build, 40 + i as u64).unwrap();
        assert!(checks.iter().any(|c| c.group == "grad"), "case {i}: no gradient compared");
        let failing: Vec<String> = checks
            .iter()
            .filter(|c| !c.passed())
            .map(|c| format!("{} ratio {:.3e} (got {:e}, cpu {:e})", c.tensor, c.worst_ratio, c.got, c.want))
            .collect();
        assert!(failing.is_empty(), "case {i} ({:?}): {failing:?}", case.model);
    }
}

#[test]
fn the_random_draws_include_mamba2_across_chunk_boundaries() {
    // What `conformance_random_configs_match_the_cpu_backend` above compares (same seed and
    // count): both mixers, and at least one Mamba-2 draw whose chunk boundary falls inside the
    // sequence, so the random part checks the chunked scan too, not only single-chunk runs.
    let drawn: Vec<RandomCase> =
        (0..8).map(|i| random_case(0xB01D_CA57, i, &[Temporal::Mamba, Temporal::Mamba2])).collect();
    assert!(drawn.iter().any(|c| c.model.temporal == Temporal::Mamba));
    assert!(
        drawn.iter().any(|c| c.model.temporal == Temporal::Mamba2
            && c.model.n_layers > 0
            && c.tokens.time > c.model.chunk_size
            && c.tokens.time % c.model.chunk_size != 0),
        "{drawn:#?}"
    );
    // And a second, independent stream of Mamba-2 draws only, compared in full.
    let build = |cfg, adj| DfdxCpuModel::<f32>::new_cpu(cfg, adj, 1);
    assert_random_vs_cpu(&build, &[Temporal::Mamba2], 4, 0x5EED_0002);
}
