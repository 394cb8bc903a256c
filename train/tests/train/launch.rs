//! `Launch`: a run settled before its data and model, the one way `bc-cli train` and a
//! library user start, stop and continue a run.

use boldcast_cpu::CpuModel;
use boldcast_train::launch::{Launch, Start};
use boldcast_train::{presets, Dist, Recorder, TrainError, TrainReport};
use std::path::Path;

fn config(out: &Path) -> boldcast_train::config::RunConfig {
    let mut cfg = presets::preset("quick").unwrap();
    (cfg.train.max_steps, cfg.train.val_every, cfg.train.ckpt_every, cfg.train.warmup_steps) = (6, 3, 3, 1);
    cfg.train.out = Some(out.to_path_buf());
    cfg
}

fn train(launch: Launch) -> Result<TrainReport, TrainError> {
    let data = launch.load_data()?;
    let model = CpuModel::<f32>::new(launch.cfg.model_config(), data.adjacency.clone(), launch.cfg.train.seed)?;
    launch.run(&data, model, &mut [&mut Recorder::default()])
}

#[test]
fn a_run_launches_stops_resumes_and_then_is_finished() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let first = Launch::fresh(config(&out), Dist::default()).unwrap();
    assert!(matches!(first.start, Start::Fresh) && first.out == out);
    let stopped = train(first.stop_after(Some(3))).unwrap();
    assert_eq!(stopped.steps, 3);

    let Err(e) = Launch::fresh(config(&out), Dist::default()) else { panic!("a used directory is refused") };
    assert!(e.to_string().contains("already exists and is not empty"), "{e}");

    let again = Launch::resume(&out, Dist::default()).unwrap();
    match &again.start {
        Start::Checkpoint(l) => assert_eq!(l.state.step, 3),
        _ => panic!("resumes from the step-3 checkpoint"),
    }
    assert_eq!(train(again).unwrap().steps, 6);

    let done = Launch::resume(&out, Dist::default()).unwrap();
    match &done.start {
        Start::Finished { reason, step, done, .. } => {
            assert_eq!((reason.as_str(), *step, done.len()), ("max_steps", 6, 0));
        }
        _ => panic!("a finished run"),
    }
    let Err(e) = train(done) else { panic!("a finished run trains no more") };
    assert!(e.to_string().contains("already finished (max_steps) at step 6"), "{e}");
}

#[test]
fn a_directory_without_a_run_is_named() {
    let d = tempfile::tempdir().unwrap();
    let Err(e) = Launch::resume(d.path(), Dist::default()) else { panic!("no run there") };
    assert!(e.to_string().contains("not a run directory"), "{e}");
}

/// Every log line names its kind, and a training line's `step` is the count stdout prints, so
/// the validation after step 3 and training step 3 share the number 3.
#[test]
fn the_log_lines_carry_their_kind_and_one_step_numbering() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    train(Launch::fresh(config(&out), Dist::default()).unwrap()).unwrap();
    let text = std::fs::read_to_string(out.join("loss_log.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let of = |kind: &str| -> Vec<u64> {
        lines.iter().filter(|v| v["kind"] == kind).map(|v| v["step"].as_u64().unwrap()).collect()
    };
    assert_eq!(of("train"), [1, 2, 3, 4, 5, 6]);
    assert_eq!(of("validation"), [0, 3, 6]);
    assert_eq!(of("event"), [6]);
    assert!(lines.iter().all(|v| v["kind"].is_string()), "{text}");
    assert!(text.lines().all(|l| l.starts_with("{\"kind\":")), "kind comes first: {text}");
    let (train_curve, val_curve) = boldcast_train::log::read_curves(&out.join("loss_log.jsonl")).unwrap();
    assert_eq!(train_curve.iter().map(|p| p.0).collect::<Vec<_>>(), of("train"));
    assert_eq!(val_curve.iter().map(|p| p.0).collect::<Vec<_>>(), of("validation"));
}

/// Sets the stop flag when the step `at` (steps done) is reported, as a Ctrl-C handler would.
struct StopAt(u64, boldcast_train::run::StopFlag);

impl boldcast_train::Observer for StopAt {
    fn on_step(&mut self, rec: &boldcast_train::StepRecord) {
        if rec.step + 1 == self.0 {
            self.1.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

#[test]
fn a_stop_flag_stops_the_run_cleanly_after_its_step() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let flag = boldcast_train::run::StopFlag::default();
    let launch = Launch::fresh(config(&out), Dist::default()).unwrap().stop_when(Some(flag.clone()));
    let data = launch.load_data().unwrap();
    let model = CpuModel::<f32>::new(launch.cfg.model_config(), data.adjacency.clone(), 0).unwrap();
    let report = launch.run(&data, model, &mut [&mut StopAt(2, flag)]).unwrap();
    assert_eq!((report.steps, report.reason), (2, boldcast_train::StopReason::StopAfter));
    match Launch::resume(&out, Dist::default()).unwrap().start {
        Start::Checkpoint(l) => assert_eq!(l.state.step, 2),
        _ => panic!("a checkpoint at the stop"),
    }
}
