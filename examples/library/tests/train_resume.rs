//! A training run through the library alone (no `bc-cli`), on the example's backend: a run
//! stopped by `stop_after` and resumed from its newest checkpoint ends bit for bit where the
//! uninterrupted run ends: every weight, the bytes of `loss_log.jsonl`, the validation
//! history, and the last checkpoint's files.

use boldcast_cpu::CpuModel;
use boldcast_example_library::training::{quick_config, Printer};
use boldcast_example_library::{Op, Timed};
use boldcast_storage::tensorfile::SafetensorsFile;
use boldcast_train::checkpoint::resume_point;
use boldcast_train::checkpoint::{step_dir_name, CKPT_DIR};
use boldcast_train::config::RunConfig;
use boldcast_train::data::TrainData;
use boldcast_train::{Model, Recorder, Run, StopReason, TrainReport};
use std::collections::BTreeMap;
use std::path::Path;

const MAX_STEPS: u64 = 12;
const VAL_EVERY: u64 = 4;
const STOP_AFTER: u64 = 6;

type Backend = Timed<CpuModel<f32>>;

fn backend(cfg: &RunConfig, data: &TrainData) -> Backend {
    Timed::new(CpuModel::<f32>::new(cfg.model_config(), data.adjacency.clone(), cfg.train.seed).unwrap())
}

/// Runs `run` on a fresh backend with a recorder and a printer; the backend after the run.
fn train(run: Run<'_>, cfg: &RunConfig, data: &TrainData) -> (TrainReport, Recorder, Backend) {
    let (mut model, mut rec, mut printer) = (backend(cfg, data), Recorder::default(), Printer { every: 0 });
    let report = run.run(&mut model, &mut [&mut rec, &mut printer]).unwrap();
    (report, rec, model)
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A safetensors file's tensors (name, shape, bits) and its metadata, sorted: the header's
/// metadata is a map whose order on disk varies from one write to the next.
type Contents = (Vec<(String, Vec<usize>, Vec<u32>)>, Option<BTreeMap<String, String>>);

fn contents(p: &Path) -> Contents {
    let f = SafetensorsFile::open(p).unwrap();
    let mut tensors: Vec<_> = f
        .all::<f32>()
        .unwrap()
        .into_iter()
        .map(|t| (t.name, t.shape, t.data.iter().map(|x| x.to_bits()).collect()))
        .collect();
    tensors.sort();
    (tensors, f.metadata().map(|m| m.into_iter().collect()))
}

/// Forward calls of the validations: one per batch of validation windows.
fn forward_calls(data: &TrainData, cfg: &RunConfig, validations: usize) -> u64 {
    (data.val_windows.len().div_ceil(cfg.train.batch_size) * validations) as u64
}

#[test]
fn a_stopped_and_resumed_run_ends_bit_for_bit_where_the_uninterrupted_one_ends() {
    let cfg = quick_config(MAX_STEPS, VAL_EVERY, VAL_EVERY).unwrap();
    let data = TrainData::load(&cfg).unwrap();
    let (whole, split) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());

    // The uninterrupted run.
    let (a, a_rec, a_model) = train(Run::new(&cfg, &data, whole.path()), &cfg, &data);
    assert_eq!((a.reason, a.steps, a.start_step), (StopReason::MaxSteps, MAX_STEPS, 0));
    let vals = (MAX_STEPS / VAL_EVERY + 1) as usize; // steps 0, 4, 8, 12
    assert_eq!((a_rec.steps.len(), a_rec.validations.len(), a_rec.ended), (MAX_STEPS as usize, vals, true));
    assert_eq!(a_model.stats(Op::LossAndGrads).calls, MAX_STEPS);
    assert_eq!(a_model.stats(Op::ApplyOptimizer).calls, MAX_STEPS);
    assert_eq!(a_model.stats(Op::Forward).calls, forward_calls(&data, &cfg, vals));
    assert_eq!((a_model.stats(Op::Loss).calls, a_model.stats(Op::Embed).calls), (0, 0));
    assert!(a_model.stats(Op::LossAndGrads).total > std::time::Duration::ZERO);

    // Stopped after STOP_AFTER steps without a kill: a checkpoint there, no summary.
    let (b1, b1_rec, b1_model) = train(Run::new(&cfg, &data, split.path()).stop_after(Some(STOP_AFTER)), &cfg, &data);
    assert_eq!((b1.reason, b1.steps), (StopReason::StopAfter, STOP_AFTER));
    assert_eq!(b1_rec.checkpoints.iter().map(|c| c.0).collect::<Vec<_>>(), vec![4, STOP_AFTER]);
    assert!(!split.path().join("summary.json").exists());
    assert_eq!(b1_model.stats(Op::LossAndGrads).calls, STOP_AFTER);
    assert_eq!(b1_model.stats(Op::Forward).calls, forward_calls(&data, &cfg, 2)); // steps 0, 4

    // Resumed from the directory alone: its newest checkpoint and the configuration in it.
    let (cfg2, loaded) = resume_point(split.path()).unwrap().expect("a checkpoint");
    assert_eq!(loaded.state.step, STOP_AFTER);
    let data2 = TrainData::load(&cfg2).unwrap();
    let (b2, b2_rec, b2_model) = train(Run::new(&cfg2, &data2, split.path()).resume(Some(loaded)), &cfg2, &data2);
    assert_eq!((b2.reason, b2.steps, b2.start_step), (StopReason::MaxSteps, MAX_STEPS, STOP_AFTER));
    assert_eq!(b2_rec.steps.len() as u64, MAX_STEPS - STOP_AFTER);
    assert_eq!(b2_model.stats(Op::LossAndGrads).calls, MAX_STEPS - STOP_AFTER);
    assert_eq!(b2_model.stats(Op::ApplyOptimizer).calls, MAX_STEPS - STOP_AFTER);
    assert_eq!(b2_model.stats(Op::Forward).calls, forward_calls(&data, &cfg, 2)); // steps 8, 12

    // Every weight, bit for bit.
    let (wa, wb) = (a_model.state(), b2_model.state());
    assert_eq!(wa.len(), wb.len());
    for (ta, tb) in wa.iter().zip(&wb) {
        assert_eq!((&ta.name, &ta.shape), (&tb.name, &tb.shape));
        let bits = |t: &[f32]| t.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
        assert!(bits(&ta.data) == bits(&tb.data), "tensor {} differs after the resume", ta.name);
    }
    // The log, the validation history and the best weights.
    let log = |d: &Path| read(&d.join("loss_log.jsonl"));
    assert!(log(whole.path()) == log(split.path()), "loss_log.jsonl differs");
    assert_eq!(a.val_history, b2.val_history);
    assert_eq!(a.val_history.iter().map(|v| v.0).collect::<Vec<_>>(), vec![0, 4, 8, 12]);
    assert_eq!(a.best, b2.best);
    assert_eq!(a.last_val, b2.last_val);
    let (best_a, best_b) = (whole.path().join("best.safetensors"), split.path().join("best.safetensors"));
    assert!(contents(&best_a) == contents(&best_b), "best.safetensors differs");
    // The checkpoints: the last one's files hold the same; both runs keep theirs.
    let last = step_dir_name(MAX_STEPS);
    for d in [whole.path(), split.path()] {
        assert!(d.join(CKPT_DIR).join(&last).join("state.json").is_file(), "{}", d.display());
        assert!(d.join("summary.json").is_file());
    }
    let (ca, cb) = (whole.path().join(CKPT_DIR).join(&last), split.path().join(CKPT_DIR).join(&last));
    for f in ["model.safetensors", "optimizer.safetensors"] {
        assert!(contents(&ca.join(f)) == contents(&cb.join(f)), "{f} of the last checkpoint differs");
    }
    assert!(read(&ca.join("state.json")) == read(&cb.join("state.json")), "state.json differs");
}
