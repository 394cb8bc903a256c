//! The fixed-gradient optimizer check of every golden case (MODEL.md, "Golden files",
//! `opt.*`): the core's Adam/AdamW, weight-decay groups, clipping and schedule against
//! PyTorch's own optimizers run in f64. No model is involved.

use crate::common;

use boldcast::core::optim::OptimizerKind;
use boldcast::core::ScheduleConfig;
use boldcast_testkit::golden::{check_optimizer, check_optimizer_with, Report};

#[test]
fn every_golden_case_passes_the_optimizer_check() {
    let mut kinds = Vec::new();
    for dir in common::all_cases() {
        let case = boldcast_testkit::golden::GoldenCase::load(&dir)
            .unwrap_or_else(|e| panic!("loading golden case {}: {e}", dir.display()));
        let checks = check_optimizer(&case);
        // grad_norm plus one opt.<param> per parameter.
        assert_eq!(checks.len(), 1 + case.weights().len(), "{}", case.name());
        let report = Report::new(&case, checks);
        println!("{report}");
        assert!(report.passed(), "{report}");
        kinds.push((case.name(), case.optim_config().kind));
    }
    let has = |name: &str, kind| kinds.iter().any(|(n, k)| n == name && *k == kind);
    assert!(has("tiny", OptimizerKind::AdamW), "{kinds:?}");
    assert!(has("tiny-mamba2", OptimizerKind::AdamW), "{kinds:?}");
    assert!(has("tiny-l2-clip", OptimizerKind::AdamL2), "{kinds:?}");
}

#[test]
fn clipping_bites_in_the_l2_clip_case() {
    // tiny-l2-clip is meant to exercise clipping: its gradient norm exceeds the threshold.
    let l2 = common::load("tiny-l2-clip");
    let (_, norm) = l2.expected("opt.grad_norm").unwrap();
    assert!(norm[0] > 2.0 * l2.grad_clip_norm().unwrap(), "norm {} vs max {:?}", norm[0], l2.grad_clip_norm());
    // Without clipping the check must fail there.
    let mut unclipped = l2.clone();
    unclipped.config_mut().grad_clip_norm = None;
    let report = Report::new(&unclipped, check_optimizer(&unclipped));
    assert!(!report.passed(), "the optimizer check ignores clipping:\n{report}");
}

/// Runs the check with a modified configuration and returns the report, which must fail.
fn must_fail(name: &str, what: &str, edit: impl FnOnce(&mut boldcast_testkit::golden::GoldenConfig)) {
    let mut case = common::load(name);
    edit(case.config_mut());
    let report = Report::new(&case, check_optimizer(&case));
    assert!(!report.passed(), "{name} with {what} still passes the optimizer check:\n{report}");
    // opt.grad_norm does not depend on the optimizer: only the parameters fail.
    assert!(report.failures().iter().all(|c| c.tensor.starts_with("opt.") && c.tensor != "opt.grad_norm"));
}

#[test]
fn the_optimizer_check_bites_on_wrong_decay_or_schedule() {
    must_fail("tiny", "weight decay 0", |c| c.weight_decay = 0.0);
    must_fail("tiny", "coupled L2 instead of AdamW", |c| c.optimizer = OptimizerKind::AdamL2);
    must_fail("tiny-l2-clip", "AdamW instead of coupled L2", |c| c.optimizer = OptimizerKind::AdamW);
    must_fail("tiny-l2-clip", "weight decay 0", |c| c.weight_decay = 0.0);
    must_fail("tiny-mamba2", "weight decay 0", |c| c.weight_decay = 0.0);
    // With a fixed gradient, AdamW's m_hat / sqrt(v_hat) is g / |g| whatever the betas, so the
    // betas only show where the gradient changes between steps: through coupled L2.
    must_fail("tiny-l2-clip", "betas (0.8, 0.9)", |c| c.betas = Some((0.8, 0.9)));
    must_fail("tiny", "one step fewer", |c| c.steps -= 1);
    // A constant schedule instead of the warm-up + cosine.
    let case = common::load("tiny");
    let constant = ScheduleConfig::Constant { lr: case.config().lr };
    let report = Report::new(&case, check_optimizer_with(&case, &case.optim_config(), &constant));
    assert!(!report.passed(), "a constant schedule passes:\n{report}");
}
