//! The dfdx backend on the Cpu device against the PyTorch golden cases (MODEL.md, "Golden
//! files"): forward, embedding, loss, every gradient, and a real training-loss series.

mod common;

use boldcast_dfdx::cpu_device;
use common::{check_case, Case};

fn assert_all_pass(name: &str, ratios: &[(String, f64)]) {
    let worst = ratios.iter().cloned().fold((String::new(), 0.0f64), |a, b| if b.1 > a.1 { b } else { a });
    for (what, r) in ratios {
        eprintln!("{name}: {what:<50} worst |a-b|/tol = {r:.4}");
    }
    let failing: Vec<_> = ratios.iter().filter(|(_, r)| *r > 1.0).collect();
    assert!(failing.is_empty(), "{name}: out of tolerance: {failing:?}");
    eprintln!("{name}: worst overall {} = {:.4}", worst.0, worst.1);
}

#[test]
fn tiny_f32_matches_pytorch() {
    assert_all_pass("tiny f32", &check_case::<f32, _>("tiny", cpu_device()));
}

#[test]
fn tiny_l2_clip_f32_matches_pytorch() {
    assert_all_pass("tiny-l2-clip f32", &check_case::<f32, _>("tiny-l2-clip", cpu_device()));
}

#[test]
fn tiny_f64_matches_pytorch() {
    // The f32 reference within the same tolerance, computed in f64 from the same weights.
    assert_all_pass("tiny f64", &check_case::<f64, _>("tiny", cpu_device()));
}

#[test]
fn tiny_mamba2_f32_matches_pytorch() {
    // The Mamba-2 mixer: 24 tokens in chunks of 8, two heads of width 8.
    assert_all_pass("tiny-mamba2 f32", &check_case::<f32, _>("tiny-mamba2", cpu_device()));
}

#[test]
fn tiny_mamba2_f64_matches_pytorch() {
    assert_all_pass("tiny-mamba2 f64", &check_case::<f64, _>("tiny-mamba2", cpu_device()));
}

/// `opt.*`: `steps` updates of the initial weights with the fixed gradient `grad.*`, clipped
/// once by `opt.grad_norm`, run by the device optimizer (tolerance `1e-6 + 1e-5 |b|`).
fn check_fixed_gradient_updates<E: dfdx::dtypes::Dtype + boldcast_core::Elem>(name: &str) -> f64
where
    boldcast_dfdx::Cpu: boldcast_dfdx::DfdxDevice<E>,
{
    use boldcast_core::model::NamedTensor;
    use boldcast_core::{Model, Schedule};
    let case = Case::load(name);
    let mut m = common::model::<E, _>(&case, &cpu_device());
    let grads: Vec<NamedTensor<E>> = case
        .model
        .param_specs()
        .iter()
        .map(|s| {
            let g = case.expected(&format!("grad.{}", s.name));
            NamedTensor {
                name: s.name.clone(),
                shape: g.shape.clone(),
                data: g.data.iter().map(|&v| E::of(v)).collect(),
            }
        })
        .collect();
    m.load_grads(&grads).unwrap();
    let norm = m.grad_sq_norm().sqrt();
    let want_norm = case.expected("opt.grad_norm").data[0];
    assert!((norm - want_norm).abs() <= 1e-6 * want_norm, "{name}: grad norm {norm}, expected {want_norm}");
    let f = boldcast_core::optim::clip_factor(want_norm, case.clip().unwrap_or(f64::INFINITY));
    m.scale_grads(f);
    let mut opt = boldcast_core::Adam::<E>::new(case.optim()).unwrap();
    let sched = case.schedule();
    for s in 0..case.steps() {
        m.apply_optimizer(&mut opt, sched.lr(s as u64)).unwrap();
    }
    let mut worst = 0.0f64;
    for p in m.state() {
        let want = &case.expected(&format!("opt.{}", p.name)).data;
        let got: Vec<f64> = p.data.iter().map(|v| v.f64()).collect();
        worst = worst.max(common::worst_ratio(&format!("{name}/opt.{}", p.name), &got, want, 1e-6, 1e-5));
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
fn extra_cases_match_pytorch() {
    // The repository's own cases made with the shared generator: n_layers 0 with d_in 3, a
    // deep model without the spatial attention (k = 0) trained with Adam-L2, and Mamba-2 with
    // k = P and 13 tokens in chunks of 5.
    let extra = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../golden/cases");
    for case in ["flat-d3", "deep-k0", "mamba2-full-k"] {
        assert_all_pass(case, &common::check_case_at::<f32, _>(&extra.join(case), cpu_device()));
    }
}
