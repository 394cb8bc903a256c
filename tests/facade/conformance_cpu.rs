//! The conformance suite on the CPU backend. Its golden part checks the hand-written
//! gradients against PyTorch on every case; its random part compares a model with a second
//! instance loaded through `state`/`load_state` (the CPU backend is the suite's reference).

use boldcast::core::Temporal;
use boldcast::cpu::CpuModel;

boldcast_testkit::conformance_tests! {
    build = |cfg, adj| CpuModel::<f32>::new(cfg, adj, 1),
    temporals = [Temporal::Mamba, Temporal::Mamba2],
    golden = boldcast_testkit::conformance::default_golden_cases(),
    random_cases = 8,
}
