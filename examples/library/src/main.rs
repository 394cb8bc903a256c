//! `cargo run -p boldcast-example-library -- [OUT_DIR]`: a training run through the library
//! alone, on the profiling backend [`Timed`] over the CPU backend. The run stops cleanly after
//! half its steps (`stop_after`, no kill), then continues from its newest checkpoint in the
//! same directory, as a new process would: the configuration comes from the checkpoint. Each
//! part prints its events and where its backend spent the time. `OUT_DIR` (default
//! `runs/example-library`) must be new or empty.

use boldcast_cpu::CpuModel;
use boldcast_example_library::training::{quick_config, Printer};
use boldcast_example_library::Timed;
use boldcast_train::checkpoint::resume_point;
use boldcast_train::data::TrainData;
use boldcast_train::{Run, StopReason};
use std::error::Error;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn Error>> {
    let out = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "runs/example-library".into()));
    if out.exists() && std::fs::read_dir(&out)?.next().is_some() {
        return Err(format!("{} is not empty: give a new or empty directory", out.display()).into());
    }

    // Part 1: a fresh run of 24 steps (validation and checkpoint every 8), stopped after 12.
    let cfg = quick_config(24, 8, 8)?;
    let data = TrainData::load(&cfg)?;
    let mut model = Timed::new(CpuModel::<f32>::new(cfg.model_config(), data.adjacency.clone(), cfg.train.seed)?);
    let mut printer = Printer { every: 4 };
    let report = Run::new(&cfg, &data, &out).stop_after(Some(12)).run(&mut model, &mut [&mut printer])?;
    assert_eq!(report.reason, StopReason::StopAfter);
    print!("part 1, the backend's time:\n{}", model.table());

    // Part 2: the newest checkpoint and the configuration stored in it, a fresh model (the run
    // loads the checkpoint's weights and optimizer state into it), and on to `max_steps`.
    let (cfg, loaded) = resume_point(&out)?.ok_or("no checkpoint to resume from")?;
    let data = TrainData::load(&cfg)?;
    let mut model = Timed::new(CpuModel::<f32>::new(cfg.model_config(), data.adjacency.clone(), cfg.train.seed)?);
    let report = Run::new(&cfg, &data, &out).resume(Some(loaded)).run(&mut model, &mut [&mut printer])?;
    print!("part 2, the backend's time:\n{}", model.table());
    println!("steps {}..{} of {} ({})", report.start_step, report.steps, report.max_steps, report.reason.as_str());
    if let Some(v) = &report.verdict {
        let word = if v.passed { "passed" } else { "not passed" };
        println!("held-out loss {:.5} -> {:.5}: {word} (last <= {} x first)", v.first, v.last, v.ratio);
    }
    println!("red flags: {}; summary in {}", report.red_flags.len(), out.join("summary.json").display());
    Ok(())
}
