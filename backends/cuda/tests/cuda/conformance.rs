//! The conformance suite on the CUDA backend in shim mode ([`CudaModel`], its kernels run on
//! the CPU through the C++ shim): the golden cases of both temporal mixers, Mamba-1 and
//! Mamba-2 (forward, embed, loss, every gradient, the optimizer and the training-loss series,
//! against the files PyTorch wrote), and randomized configurations against the CPU backend,
//! each drawing its temporal mixer from both (with and without attention; forward, embed,
//! loss, every gradient, one AdamW step, three training steps, the resumed step and the flat
//! gradient buffer).

use boldcast_core::Temporal;
use boldcast_cuda::CudaModel;

boldcast_testkit::conformance_tests! {
    build = CudaModel::new,
    temporals = [Temporal::Mamba, Temporal::Mamba2],
    golden = boldcast_testkit::conformance::default_golden_cases(),
    random_cases = 12,
}
