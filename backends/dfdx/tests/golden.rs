//! The dfdx backend on the Cpu device against the PyTorch golden cases (MODEL.md, "Golden
//! files"): forward, embedding, loss, every gradient, and a real training-loss series.

mod common;

use boldcast_core::optim::Adam;
use boldcast_core::{Elem, Model, StepRecord, Trainer};
use boldcast_dfdx::{cpu_device, Cpu, DfdxDevice, DfdxModel};
use common::{worst_ratio, Case};
use dfdx::dtypes::Dtype;

const ABS: f64 = 1e-4;
const REL: f64 = 1e-3;

fn model<E: Dtype + Elem>(case: &Case) -> DfdxModel<E, Cpu>
where
    Cpu: DfdxDevice<E>,
{
    let mut m = DfdxModel::<E, _>::new(case.model.clone(), case.adjacency.clone(), 0, cpu_device()).unwrap();
    m.load_state(&case.weights::<E>()).unwrap();
    m
}

fn f64s<E: Elem>(v: &[E]) -> Vec<f64> {
    v.iter().map(|x| x.f64()).collect()
}

/// Checks one case in element type `E`; returns the worst ratio per item for the report.
fn check_case<E: Dtype + Elem>(name: &str) -> Vec<(String, f64)>
where
    Cpu: DfdxDevice<E>,
{
    let case = Case::load(name);
    let tokens = case.tokens::<E>();
    let mut m = model::<E>(&case);
    let mut ratios = Vec::new();
    let mut check = |what: &str, got: &[f64], want: &[f64]| {
        let r = worst_ratio(&format!("{name}/{what}"), got, want, ABS, REL);
        ratios.push((what.to_string(), r));
    };

    let pred = m.forward(&tokens).unwrap();
    check("pred", &f64s(pred.data()), &case.expected("pred").data);
    let emb = m.embed(&tokens).unwrap();
    check("embed", &f64s(emb.data()), &case.expected("embed").data);
    let loss = m.loss(&tokens).unwrap();
    check("loss", &[loss], &case.expected("loss").data);

    let loss2 = m.loss_and_grads(&tokens).unwrap();
    check("loss (with grads)", &[loss2], &case.expected("loss").data);
    let grads = m.grads();
    assert_eq!(grads.len(), case.model.param_specs().len());
    for g in &grads {
        let want = case.expected(&format!("grad.{}", g.name));
        assert_eq!(g.shape, want.shape, "{name}: grad.{} shape", g.name);
        check(&format!("grad.{}", g.name), &f64s(&g.data), &want.data);
    }

    // Real training steps through the core's trainer, optimizer and schedule.
    let opt = Adam::<E>::new(case.optim()).unwrap();
    let mut trainer = Trainer::new(model::<E>(&case), opt, case.schedule(), Vec::<StepRecord>::new(), case.clip());
    for _ in 0..case.steps() {
        trainer.step(&tokens).unwrap();
    }
    let recs = &trainer.logger;
    check("train.loss", &recs.iter().map(|r| r.loss).collect::<Vec<_>>(), &case.expected("train.loss").data);
    check("train.lr", &recs.iter().map(|r| r.lr).collect::<Vec<_>>(), &case.expected("train.lr").data);
    check(
        "train.grad_norm",
        &recs.iter().map(|r| r.grad_norm).collect::<Vec<_>>(),
        &case.expected("train.grad_norm").data,
    );
    assert_eq!(trainer.model.optimizer_steps(), case.steps() as u64);
    ratios
}

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
    assert_all_pass("tiny f32", &check_case::<f32>("tiny"));
}

#[test]
fn tiny_l2_clip_f32_matches_pytorch() {
    assert_all_pass("tiny-l2-clip f32", &check_case::<f32>("tiny-l2-clip"));
}

#[test]
fn tiny_f64_matches_pytorch() {
    // The f32 reference within the same tolerance, computed in f64 from the same weights.
    assert_all_pass("tiny f64", &check_case::<f64>("tiny"));
}

#[test]
fn mamba2_is_a_clear_config_error() {
    let case = Case::load("tiny-mamba2");
    let e = DfdxModel::<f32, _>::new(case.model.clone(), case.adjacency.clone(), 0, cpu_device()).err().unwrap();
    assert!(matches!(e, boldcast_core::Error::Config { .. }), "{e:?}");
    assert!(e.to_string().contains("model.temporal"), "{e}");
}
