//! Every golden case (the conformance suite's loader, [`default_golden_cases`]) with
//! [`CudaModel`] in bf16 autocast ([`Precision::Bf16`]: bf16 matrix-product operands, f32
//! accumulation, everything else f32), measured against the golden values (PyTorch in f32):
//! the loss, the forecast, the embedding, every gradient tensor and the case's real
//! training-loss series. MODEL.md's tolerances are for f32 and bf16 cannot meet them; this
//! test holds bf16 to looser ones picked from the measurements below, and checks that the
//! mode is not a silent no-op (the bf16 forecast differs from the f32 one by far more than
//! f32 rounding) and that bf16 training decreases the loss.
//!
//! The measures and the judgement are the test kit's ([`boldcast_testkit::loose`]): a tensor's
//! error is `max |a - b| / max |b|`, the loss's plain relative error.
//!
//! Measured (`cargo test -p boldcast-cuda --test cuda bf16_golden -- --nocapture`, shim mode,
//! the six cases of golden/cases; BENCHMARKS.md, "CUDA backend bf16 autocast (shim mode)"):
//!
//! ```text
//! case           loss     pred     embed    worst grad (tensor)                      train.loss
//! deep-k0        2.61e-4  2.37e-3  2.09e-3  1.98e-2 (layers.0 dt_proj.weight)       1.21e-3
//! flat-d3        4.56e-4  3.78e-3  1.81e-3  6.72e-3 (final_norm.weight)              4.56e-4
//! mamba2-full-k  1.72e-4  7.68e-3  6.08e-3  1.09e-2 (layers.0 in_proj.weight)        3.24e-4
//! tiny           2.48e-5  3.71e-3  2.72e-3  4.55e-2 (layers.1 x_proj.weight)         7.89e-4
//! tiny-l2-clip   6.04e-4  6.66e-3  5.51e-3  1.66e-2 (layers.0 knn.q.weight)          6.24e-4
//! tiny-mamba2    1.06e-3  7.13e-3  4.67e-3  3.94e-2 (layers.1 A_log)                 1.51e-3
//! worst          1.06e-3  7.68e-3  6.08e-3  4.55e-2                                  1.51e-3
//! tolerance      5e-3     3e-2     3e-2     1.2e-1                                   5e-3
//! ```
//!
//! The tolerances are 2.6x (gradients) to 4x (forecast and embedding) the worst measured,
//! the loss and the series sharing one (3.3x the series' worst). The errors are
//! deterministic here (fixed inputs, fixed summation order); the margin is for what a device
//! changes (cuBLAS's summation order, which moves the f32 accumulation only, about 1e-7) and
//! for new golden cases of the same sizes. The f32 model measured the same way stays at or
//! below 1.3e-6 (tiny-l2-clip and tiny-mamba2, kproj.bias aside), so the errors above are
//! bf16's: 2^-9 (2e-3) relative per rounded operand, grown through the layers and, for the
//! gradients, the backward; the bf16 forecast differs from the f32 one by 2.4e-3 or more.

use boldcast_core::Model;
use boldcast_cuda::{CudaModel, Precision};
use boldcast_testkit::conformance::default_golden_cases;
use boldcast_testkit::golden::GoldenCase;
use boldcast_testkit::loose::{judge, measure, BF16_AUTOCAST};

fn model(case: &GoldenCase, p: Precision) -> CudaModel {
    let mut m = CudaModel::new(case.model_config(), case.adjacency()).unwrap().with_precision(p);
    m.load_state(&case.weights()).unwrap();
    m
}

#[test]
fn every_golden_case_in_bf16_is_within_the_measured_tolerance() {
    let (mut bad, mut ran) = (Vec::new(), 0);
    for dir in default_golden_cases() {
        let case = GoldenCase::load(&dir).unwrap();
        let f32_pred = model(&case, Precision::F32).forward(&case.tokens()).unwrap();
        let e = measure(&case, &mut model(&case, Precision::Bf16), f32_pred.data()).unwrap();
        println!(
            "{:<14} loss {:.2e}  pred {:.2e}  embed {:.2e}  grad {:.2e} ({})  train.loss {:.2e}  bf16 vs f32 pred {:.2e}  \
             series {:.4?}",
            case.name(),
            e.loss,
            e.pred,
            e.embed,
            e.grad.0,
            e.grad.1,
            e.train,
            e.vs_f32,
            e.series
        );
        bad.extend(judge(&e, &BF16_AUTOCAST).into_iter().map(|w| format!("{}: {w}", case.name())));
        ran += 1;
    }
    assert!(ran >= 6, "only {ran} golden cases");
    assert!(bad.is_empty(), "bf16 outside its tolerance:\n{}", bad.join("\n"));
}
