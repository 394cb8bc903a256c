//! The dfdx backend on the Cpu device against the PyTorch golden cases (MODEL.md, "Golden
//! files"): forward, embedding, loss, every gradient, and a real training-loss series, in f32
//! and (for `tiny` and `tiny-mamba2`) f64, through the test kit's checker
//! (`boldcast_testkit::golden::check_model`, generic over the element type). The cases are the
//! repository's `golden/cases`, and those of `../shared/golden` when present.

use boldcast_core::model::NamedTensor;
use boldcast_core::{Elem, Model, Schedule};
use boldcast_dfdx::{cpu_device, Cpu, DfdxDevice, DfdxModel};
use boldcast_testkit::cases::{repo_case, CaseSet};
use boldcast_testkit::golden::{check_model, compare_values, Check, GoldenCase, Report, Tolerance};
use dfdx::dtypes::Dtype;
use std::path::Path;

/// The case's model on the Cpu device in element type `E`, holding the case's weights.
fn model<E: Dtype + Elem>(case: &GoldenCase) -> DfdxModel<E, Cpu>
where
    Cpu: DfdxDevice<E>,
{
    let mut m = DfdxModel::<E, Cpu>::new(case.model_config(), case.adjacency(), 0, cpu_device()).unwrap();
    m.load_state(&case.weights_as::<E>()).unwrap();
    m
}

/// Every model check of the case in `dir` (`pred`, `embed`, `target`, `loss`, `grad.*`,
/// `train.*`, tolerance `1e-4 + 1e-3 |b|`) in element type `E`; panics listing every tensor
/// outside tolerance.
fn assert_case_passes<E: Dtype + Elem>(dir: &Path)
where
    Cpu: DfdxDevice<E>,
{
    let case = GoldenCase::load(dir).unwrap_or_else(|e| panic!("{e}"));
    let mut m = model::<E>(&case);
    let checks = check_model::<E, _>(&case, &mut m).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let report = Report::new(&case, checks);
    eprintln!("{} ({}):\n{report}", case.name(), E::NAME);
    assert!(report.passed(), "{} {}: out of tolerance:\n{report}", case.name(), E::NAME);
    // One gradient per parameter, and the training steps went through the device optimizer.
    assert_eq!(m.grads().len(), case.model_config().param_specs().len(), "{}", case.name());
    assert_eq!(m.optimizer_steps(), case.steps(), "{}", case.name());
}

#[test]
fn tiny_f32_matches_pytorch() {
    assert_case_passes::<f32>(&repo_case("tiny"));
}

#[test]
fn tiny_l2_clip_f32_matches_pytorch() {
    assert_case_passes::<f32>(&repo_case("tiny-l2-clip"));
}

#[test]
fn tiny_f64_matches_pytorch() {
    // The f32 reference within the same tolerance, computed in f64 from the same weights.
    assert_case_passes::<f64>(&repo_case("tiny"));
}

#[test]
fn tiny_mamba2_f32_matches_pytorch() {
    // The Mamba-2 mixer: 24 tokens in chunks of 8, two heads of width 8.
    assert_case_passes::<f32>(&repo_case("tiny-mamba2"));
}

#[test]
fn tiny_mamba2_f64_matches_pytorch() {
    assert_case_passes::<f64>(&repo_case("tiny-mamba2"));
}

/// `opt.*`: `steps` updates of the initial weights with the fixed gradient `grad.*`, clipped
/// once by `opt.grad_norm`, run by the device optimizer (tolerance `1e-6 + 1e-5 |b|`).
fn check_fixed_gradient_updates<E: Dtype + Elem>(name: &str) -> f64
where
    Cpu: DfdxDevice<E>,
{
    let case = GoldenCase::load(repo_case(name)).unwrap();
    let expected = |n: &str| case.expected(n).unwrap_or_else(|| panic!("{name}: no expected {n}"));
    let mut m = model::<E>(&case);
    let grads: Vec<NamedTensor<E>> = case
        .model_config()
        .param_specs()
        .iter()
        .map(|s| {
            let (shape, data) = expected(&format!("grad.{}", s.name));
            NamedTensor { name: s.name.clone(), shape, data: data.iter().map(|&v| E::of(v)).collect() }
        })
        .collect();
    m.load_grads(&grads).unwrap();
    let norm = m.grad_sq_norm().sqrt();
    let want_norm = expected("opt.grad_norm").1[0];
    assert!((norm - want_norm).abs() <= 1e-6 * want_norm, "{name}: grad norm {norm}, expected {want_norm}");
    let f = boldcast_core::optim::clip_factor(want_norm, case.grad_clip_norm().unwrap_or(f64::INFINITY));
    m.scale_grads(f);
    let mut opt = boldcast_core::Adam::<E>::new(case.optim_config()).unwrap();
    let sched = case.schedule();
    for s in 0..case.steps() {
        m.apply_optimizer(&mut opt, sched.lr(s)).unwrap();
    }
    let mut worst = 0.0f64;
    for p in m.state() {
        let tensor = format!("opt.{}", p.name);
        let (shape, want) = expected(&tensor);
        let got: Vec<f64> = p.data.iter().map(|v| v.f64()).collect();
        let c: Check = compare_values("opt", &tensor, &p.shape, &got, &shape, &want, Tolerance::OPTIMIZER);
        assert!(c.note.is_none(), "{name}/{tensor}: {:?}", c.note);
        assert!(c.worst_ratio.is_finite(), "{name}/{tensor}: non-finite value {} (expected {})", c.got, c.want);
        worst = worst.max(c.worst_ratio);
    }
    eprintln!("{name}: opt.* worst |a-b|/tol = {worst:.4}");
    worst
}

#[test]
fn fixed_gradient_updates_match_pytorch() {
    for name in ["tiny", "tiny-l2-clip", "tiny-mamba2"] {
        assert!(check_fixed_gradient_updates::<f32>(name) <= 1.0, "{name} f32");
        assert!(check_fixed_gradient_updates::<f64>(name) <= 1.0, "{name} f64");
    }
}

#[test]
fn the_other_cases_match_pytorch() {
    // Every case but the three above (each has its own tests): the repository's own cases
    // made with the generator (n_layers 0 with d_in 3, a deep model without the spatial
    // attention (k = 0) trained with Adam-L2, Mamba-2 with k = P and 13 tokens in chunks of
    // 5), and the cases of ../shared/golden when present (the line saying which is printed).
    let set = CaseSet::repository();
    let covered = ["tiny", "tiny-l2-clip", "tiny-mamba2"].map(repo_case);
    let others: Vec<_> = set.all().into_iter().filter(|d| !covered.contains(d)).collect();
    for name in ["flat-d3", "deep-k0", "mamba2-full-k"] {
        assert!(others.contains(&repo_case(name)), "{name} is not run: {others:?}");
    }
    for dir in &others {
        assert_case_passes::<f32>(dir);
    }
}
