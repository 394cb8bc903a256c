//! The conformance suite on the example's backend, [`Timed`] over the CPU backend: every
//! golden case of the repository (forward, embed, loss, gradients, optimizer, a training
//! series against PyTorch) and randomized configurations against the CPU backend, with the
//! resume step and the flat gradient buffer of data-parallel training.

use boldcast_core::Temporal;
use boldcast_cpu::CpuModel;
use boldcast_example_library::Timed;

boldcast_testkit::conformance_tests! {
    build = |cfg, adj| CpuModel::<f32>::new(cfg, adj, 1).map(Timed::new),
    temporals = [Temporal::Mamba, Temporal::Mamba2],
    golden = boldcast_testkit::conformance::default_golden_cases(),
    random_cases = 8,
}
