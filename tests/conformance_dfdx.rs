//! The conformance suite on the dfdx backend (its `Cpu` device, f32): every golden case with a
//! Mamba-1 mixer against PyTorch, and randomized configurations against the CPU backend's
//! hand-written gradients. Mamba-2 is not implemented on dfdx yet, so only `mamba` is drawn.

use boldcast::core::Temporal;
use boldcast::dfdx::DfdxCpuModel;

boldcast::conformance_tests! {
    build = |cfg, adj| DfdxCpuModel::<f32>::new_cpu(cfg, adj, 1),
    temporals = [Temporal::Mamba],
    golden = boldcast::conformance::default_golden_roots(std::path::Path::new(env!("CARGO_MANIFEST_DIR"))),
    random_cases = 6,
}
