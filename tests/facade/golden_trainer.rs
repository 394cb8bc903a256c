//! Every golden case through the facade's checker on the CPU backend: forward (`pred`,
//! `embed`, `target`, `loss`), every `grad.*`, the fixed-gradient optimizer (`opt.*`) and
//! `steps` real training steps through the core's `Trainer` (`train.*`), each within the
//! tolerances of MODEL.md. The cases are the repository's `golden/cases` (and those of
//! `../shared/golden` when present); when the repository's are missing the tests fail, never
//! skip.

use crate::common;

use boldcast::core::Model;
use boldcast::cpu::CpuModel;
use boldcast_testkit::golden::{check_case_dir, check_model, Report};

#[test]
fn every_golden_case_passes_on_the_cpu_backend() {
    let mut checked = Vec::new();
    for dir in common::all_cases() {
        let case = common::load(dir.file_name().unwrap().to_str().unwrap());
        match check_case_dir(&dir, |cfg, adj| CpuModel::<f32>::new(cfg, adj, 0)) {
            Ok(report) => {
                println!("{report}");
                assert!(report.passed(), "{report}");
                for group in
                    ["pred", "embed", "target", "loss", "grad", "opt", "train.loss", "train.lr", "train.grad_norm"]
                {
                    assert!(report.worst(group).is_some(), "{}: group {group} was not checked", case.name());
                }
                checked.push(case.name());
            }
            Err(e) => panic!("golden case {}: {e}", dir.display()),
        }
    }
    // Every case ran: both Mamba-1 cases (AdamW with kNN attention; d_in 2 with Adam-L2 and
    // clipping) and the Mamba-2 case.
    for name in ["tiny", "tiny-l2-clip", "tiny-mamba2"] {
        assert!(checked.iter().any(|n| n == name), "{name} not checked: {checked:?}");
    }
}

#[test]
fn the_model_check_bites_on_a_perturbed_weight() {
    let case = common::load("tiny");
    let mut model = CpuModel::<f32>::new(case.model_config(), case.adjacency(), 0).unwrap();
    let mut w = case.weights();
    // One entry of the output head, nudged by 1e-2: forecasts, loss and gradients move.
    let head = w.iter_mut().find(|t| t.name == "head.weight").unwrap();
    head.data[3] += 1e-2;
    model.load_state(&w).unwrap();
    let report = Report::new(&case, check_model(&case, &mut model).unwrap());
    assert!(!report.passed(), "a perturbed weight passes:\n{report}");
    assert!(report.worst("pred").unwrap() > 1.0, "{report}");
    assert!(report.worst("grad").unwrap() > 1.0, "{report}");
    // The targets depend only on the tokens.
    assert!(report.worst("target").unwrap() == 0.0, "{report}");

    // A model that never received the case's weights fails everywhere it could.
    let mut fresh = CpuModel::<f32>::new(case.model_config(), case.adjacency(), 1).unwrap();
    let report = Report::new(&case, check_model(&case, &mut fresh).unwrap());
    assert!(report.worst("pred").unwrap() > 1.0 && report.worst("train.loss").unwrap() > 1.0, "{report}");
    assert!(report.worst("train.lr").unwrap() == 0.0, "{report}");
}
