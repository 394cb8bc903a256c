//! `cargo run -p boldcast-example-library -- [OUT_DIR]`: a run through the library alone, on
//! the profiling backend [`Timed`] over the CPU backend. The run stops cleanly after half its
//! steps (`stop_after`, no kill), then continues from its newest checkpoint in the same
//! directory, as a new process would (`Launch::resume`: the configuration comes from the
//! checkpoint); then the run is evaluated beside the baselines and its figures are drawn.
//! `OUT_DIR` (default `runs/example-library`) must be new or empty.

use boldcast_analysis::eval::request::{evaluate_request, EvalRequest};
use boldcast_analysis::text;
use boldcast_cpu::CpuModel;
use boldcast_example_library::training::{quick_config, Printer};
use boldcast_example_library::Timed;
use boldcast_train::launch::Launch;
use boldcast_train::{Dist, StopReason};
use std::error::Error;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn Error>> {
    let out = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "runs/example-library".into()));
    let mut printer = Printer { every: 4 };

    // Part 1: a fresh run of 24 steps (validation and checkpoint every 8), stopped after 12.
    let mut cfg = quick_config(24, 8, 8)?;
    cfg.train.out = Some(out.clone());
    let launch = Launch::fresh(cfg, Dist::default())?.stop_after(Some(12));
    let data = launch.load_data()?;
    let cfg = &launch.cfg;
    let mut model = Timed::new(CpuModel::<f32>::new(cfg.model_config(), data.adjacency.clone(), cfg.train.seed)?);
    let report = launch.run(&data, &mut model, &mut [&mut printer])?;
    assert_eq!(report.reason, StopReason::StopAfter);
    print!("part 1, the backend's time:\n{}", model.table());

    // Part 2: on from the newest checkpoint (its weights, optimizer state and configuration).
    let launch = Launch::resume(&out, Dist::default())?;
    let data = launch.load_data()?;
    let cfg = &launch.cfg;
    let mut model = Timed::new(CpuModel::<f32>::new(cfg.model_config(), data.adjacency.clone(), cfg.train.seed)?);
    let report = launch.run(&data, &mut model, &mut [&mut printer])?;
    print!("part 2, the backend's time:\n{}", model.table());
    println!("steps {}..{} of {} ({})", report.start_step, report.steps, report.max_steps, report.reason.as_str());

    // Part 3: the best weights against the baselines on the held-out subjects, and the figures.
    let req = EvalRequest { checkpoint: out.clone(), ..EvalRequest::default() };
    let eval = evaluate_request(&req, CpuModel::<f32>::new, &mut |note| eprintln!("{note}"))?;
    print!("{}", text::eval_table(&eval));
    boldcast_plot::complete_run_figure(&out)?;
    boldcast_plot::eval::eval_figure(&out.join("figures/eval.png"), &eval, false)?;
    println!("figures in {}", out.join("figures").display());
    Ok(())
}
