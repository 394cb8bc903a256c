//! The dfdx backend on the Cpu device against the PyTorch golden cases (MODEL.md, "Golden
//! files"): forward, embedding, loss, every gradient, and a real training-loss series.

mod common;

use boldcast_dfdx::{cpu_device, DfdxModel};
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
fn mamba2_is_a_clear_config_error() {
    let case = Case::load("tiny-mamba2");
    let e = DfdxModel::<f32, _>::new(case.model.clone(), case.adjacency.clone(), 0, cpu_device()).err().unwrap();
    assert!(matches!(e, boldcast_core::Error::Config { .. }), "{e:?}");
    assert!(e.to_string().contains("model.temporal"), "{e}");
}
