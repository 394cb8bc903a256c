//! What the commands' outputs and runs promise (issue 29): a result that cannot be written is
//! an error; weights whose outputs overflow, or whose tensors were altered, are refused by every
//! reader; bounded step counts and token lengths; a finished run killed at its very end is
//! completed by `--resume`; `forecast` leaves no stage behind on signals and removes those of
//! dead processes; and the smaller points (a subject listed twice, one subject to fingerprint,
//! two forecasts into one new directory, data paths stored absolute).

use crate::common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// A finished quick run of `steps` steps (checkpoints every 5, validation every 5) in `dir/run`.
fn checkpointed_run(dir: &Path, steps: &str) -> PathBuf {
    let out = dir.join("run");
    quick_run(&out, &["--max-steps", steps, "--val-every", "5", "--ckpt-every", "5"]);
    out
}

/// Runs `bc-cli args` with stdout on `/dev/full`.
fn to_dev_full(args: &[&str]) -> Output {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    bc().args(args).stdout(Stdio::from(full)).output().unwrap()
}

fn assert_exit(o: &Output, code: i32, needles: &[&str]) {
    let (so, se) = text(o);
    assert_eq!(o.status.code(), Some(code), "stdout:\n{so}\nstderr:\n{se}");
    for n in needles {
        assert!(se.contains(n), "`{n}` not in stderr:\n{se}");
    }
}

/// The entries of `dir` whose names start with `prefix`, sorted.
fn entries(dir: &Path, prefix: &str) -> Vec<String> {
    ls(dir).into_iter().filter(|n| n.starts_with(prefix)).collect()
}

// ---- item 5: a result that could not be written ----

#[test]
fn a_result_that_cannot_be_written_exits_2() {
    let d = tempfile::tempdir().unwrap();
    let out = checkpointed_run(d.path(), "5");
    let cases: [&[&str]; 5] = [
        &["floor", "--rho", "0.5", "--horizons", "1"],
        &["floor", "--rho", "0.5", "--horizons", "1", "--json"],
        &["eval", "--checkpoint", s(&out), "--json"],
        &["eval", "--checkpoint", s(&out)],
        &["bench", "--preset", "quick", "--steps", "1", "--warmup", "0"],
    ];
    for args in cases {
        let o = to_dev_full(args);
        assert_exit(&o, 2, &["standard output", "No space left on device"]);
    }
    // Progress lines are not the result: a training run with stdout on /dev/full finishes.
    let o = to_dev_full(&["train", "--preset", "quick", "--max-steps", "2", "--out", s(&d.path().join("t"))]);
    assert_verdict(&o);
}

// ---- item 6: outputs that overflow ----

#[test]
fn forecast_and_embed_refuse_weights_whose_outputs_overflow() {
    let d = tempfile::tempdir().unwrap();
    let out = checkpointed_run(d.path(), "5");
    let w = d.path().join("w.safetensors");
    edited_copy(&out.join("best.safetensors"), &w, |t| {
        if t.name == "layers.0.mamba.norm.weight" {
            t.data.iter_mut().for_each(|x| *x = 3e38);
        }
    });
    for (cmd, what) in [("forecast", "the forecasts of sub-"), ("embed", "the embeddings of sub-")] {
        let dest = d.path().join(cmd);
        let o = run(&[cmd, "--checkpoint", s(&w), "--out", s(&dest)]);
        assert_exit(&o, 2, &["w.safetensors", what, "non-finite value (NaN)", "overflows"]);
        assert!(!dest.exists(), "{cmd} wrote {}", dest.display());
        assert_eq!(entries(d.path(), &format!(".{cmd}.tmp-")), Vec::<String>::new());
    }
    let o = run(&["eval", "--checkpoint", s(&w)]);
    assert_exit(&o, 2, &["w.safetensors", "the `model` row's MSE per horizon", "non-finite"]);
}

// ---- item 11: every reader checks the tensors' hashes ----

#[test]
fn every_reader_refuses_a_flipped_bit_in_the_weights() {
    let d = tempfile::tempdir().unwrap();
    let out = checkpointed_run(d.path(), "5");
    let ckpt = out.join("checkpoints/step-000005");
    flip_tensor_bit(&ckpt.join("model.safetensors"));
    for cmd in ["eval", "forecast", "embed", "fingerprint"] {
        let dest = d.path().join(format!("{cmd}-out"));
        let mut args = vec![cmd, "--checkpoint", s(&ckpt)];
        if cmd == "forecast" || cmd == "embed" {
            args.extend(["--out", s(&dest)]);
        }
        let o = run(&args);
        assert_exit(&o, 2, &["step-000005/model.safetensors", "tensors_hash recorded", "altered"]);
    }
    // Rewritten whole, with a hash of its own that matches: the state's hash still tells.
    let model = ckpt.join("model.safetensors");
    flip_tensor_bit(&model);
    edited_copy(&model, &model, |t| {
        if t.name == "head.bias" {
            t.data[0] += 1.0;
        }
    });
    let o = run(&["eval", "--checkpoint", s(&ckpt)]);
    assert_exit(&o, 2, &["step-000005/model.safetensors", "state.json recorded", "altered"]);
    // best.safetensors carries its own hash.
    flip_tensor_bit(&out.join("best.safetensors"));
    let o = run(&["eval", "--checkpoint", s(&out)]);
    assert_exit(&o, 2, &["best.safetensors", "tensors_hash recorded", "altered"]);
}

// ---- item 14: d_in bounded ----

/// Runs `bc-cli args`, killing it after `limit`; `None` when it had to be killed.
fn run_within(args: &[&str], limit: Duration) -> Option<Output> {
    let mut child = bc().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    None
}

#[test]
fn floor_d_in_is_bounded_by_time_and_by_the_runs() {
    let lim = Duration::from_secs(30);
    let o = run_within(&["floor", "--rho", "0.9", "--horizons", "1,5", "--d-in", "18446744073709551615"], lim)
        .expect("floor --rho with d_in u64::MAX ends");
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert!(stdout(&o).contains("overall: 1.000000"), "{}", stdout(&o));
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    let o = run(&["synth", "--out", s(&data), "--subjects", "2", "--trs", "200", "--parcels", "3"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    for d_in in ["100000", "4611686018427387904", "201"] {
        let o = run_within(&["floor", "--data", s(&data), "--horizons", "1", "--d-in", d_in], lim).expect("floor ends");
        assert_exit(&o, 2, &["d_in", d_in, "(200 TRs)", "sub-01"]);
    }
    let o = run(&["floor", "--data", s(&data), "--horizons", "1", "--d-in", "200"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
}

// ---- item 15: bench step counts bounded ----

#[test]
fn bench_step_counts_are_bounded() {
    let max = "18446744073709551615";
    for (args, field) in [(["--warmup", "0", "--steps", max], "steps"), (["--warmup", max, "--steps", "1"], "warmup")] {
        let o = run_within(&[&["bench", "--preset", "quick"][..], &args].concat(), Duration::from_secs(60))
            .expect("bench ends");
        assert_exit(&o, 2, &[field, max, "at most 1000000"]);
    }
}

// ---- item 18: resume completes a finished run ----

#[test]
fn resume_draws_a_missing_figure_and_prunes_a_finished_run() {
    let d = tempfile::tempdir().unwrap();
    let out = checkpointed_run(d.path(), "20");
    let (ck, fig) = (out.join("checkpoints"), out.join("figures"));
    assert_eq!(entries(&ck, "step-"), ["step-000015", "step-000020"]);
    // A kill between writing step 20 and pruning step 10; a kill while drawing the figure.
    std::fs::create_dir(ck.join("step-000010")).unwrap();
    for f in ["model.safetensors", "optimizer.safetensors", "state.json"] {
        std::fs::copy(ck.join("step-000015").join(f), ck.join("step-000010").join(f)).unwrap();
    }
    std::fs::remove_file(fig.join("loss_curves.png")).unwrap();
    std::fs::write(fig.join(".loss_curves.png.tmp-4194303.png"), b"").unwrap();
    let o = run(&["train", "--resume", s(&out)]);
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{so}\nstderr:\n{se}");
    assert!(so.contains("completed it") && so.contains("step-000010") && so.contains("loss_curves.png"), "{so}");
    assert!(std::fs::metadata(fig.join("loss_curves.png")).unwrap().len() > 1000);
    assert_eq!(entries(&fig, "."), Vec::<String>::new());
    assert_eq!(entries(&ck, "step-"), ["step-000015", "step-000020"]);
    // Nothing is missing now: the run is finished.
    let o = run(&["train", "--resume", s(&out)]);
    assert_exit(&o, 2, &["already finished (max_steps) at step 20"]);
}

// ---- item 17: forecast's stage on signals, and stale stages ----

/// A run trained on 2 subjects x 8000 TRs (so that forecasting one takes a few seconds).
fn long_run(dir: &Path) -> PathBuf {
    let data = dir.join("data");
    let o = run(&["synth", "--out", s(&data), "--subjects", "2", "--trs", "8000", "--parcels", "4"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let out = dir.join("run");
    let o = run(&["train", "--preset", "quick", "--data", s(&data), "--max-steps", "2", "--out", s(&out)]);
    assert_verdict(&o);
    out
}

#[test]
fn forecast_removes_its_stage_on_signals_and_stale_stages_of_dead_processes() {
    let d = tempfile::tempdir().unwrap();
    let out = long_run(d.path());
    for sig in [libc_sig::TERM, libc_sig::INT, libc_sig::HUP] {
        let dest = d.path().join("fc");
        let mut child = bc()
            .args(["forecast", "--checkpoint", s(&out), "--out", s(&dest), "--subjects", "01"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stage = format!(".fc.tmp-{}", child.id());
        let t0 = Instant::now();
        while !d.path().join(&stage).exists() && t0.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(d.path().join(&stage).exists(), "the stage {stage} appears");
        let killed = std::process::Command::new("kill").args([&format!("-{sig}"), &child.id().to_string()]).status();
        assert!(killed.unwrap().success());
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(128 + libc_sig::number(sig)), "SIG{sig}");
        assert_eq!(entries(d.path(), ".fc.tmp-"), Vec::<String>::new(), "SIG{sig} left the stage");
        assert!(!dest.exists());
    }
    // A stage of a process that no longer runs (a kill -9) is removed by the next forecast.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let stale = d.path().join(format!(".fc.tmp-{pid}"));
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("x.npy"), b"half").unwrap();
    let ok = run(&["forecast", "--checkpoint", s(&out), "--out", s(&d.path().join("fc")), "--subjects", "02"]);
    assert_eq!(ok.status.code(), Some(0), "{:?}", text(&ok));
    assert!(!stale.exists(), "the stale stage is removed");
}

/// The signals by name, for `kill -NAME`, and their numbers on Linux.
mod libc_sig {
    pub const TERM: &str = "TERM";
    pub const INT: &str = "INT";
    pub const HUP: &str = "HUP";
    pub fn number(name: &str) -> i32 {
        match name {
            "HUP" => 1,
            "INT" => 2,
            _ => 15,
        }
    }
}

// ---- the smaller points ----

#[test]
fn a_subject_listed_twice_and_a_single_subject_fingerprint_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let out = checkpointed_run(d.path(), "5");
    let o = run(&["forecast", "--checkpoint", s(&out), "--out", s(&d.path().join("f")), "--subjects", "01,sub-01"]);
    assert_exit(&o, 2, &["--subjects", "sub-01", "listed twice"]);
    let o = run(&["fingerprint", "--checkpoint", s(&out), "--subjects", "01"]);
    assert_exit(&o, 2, &["one subject (sub-01)", "at least two"]);
}

#[test]
fn a_run_stores_its_data_directory_absolute() {
    let d = tempfile::tempdir().unwrap();
    let o = bc().current_dir(d.path()).args(["synth", "--out", "hcp", "--subjects", "3", "--trs", "200"]).output();
    assert_eq!(o.as_ref().unwrap().status.code(), Some(0));
    let o = bc()
        .current_dir(d.path())
        .args(["train", "--preset", "quick", "--data", "hcp", "--max-steps", "5", "--out", "run"])
        .output()
        .unwrap();
    assert_verdict(&o);
    let resolved = std::fs::read_to_string(d.path().join("run/config.resolved.toml")).unwrap();
    assert!(resolved.contains(&format!("dir = \"{}\"", d.path().join("hcp").display())), "{resolved}");
    // From another working directory, eval finds the data.
    let elsewhere = tempfile::tempdir().unwrap();
    let o = bc().current_dir(elsewhere.path()).args(["eval", "--checkpoint", s(&d.path().join("run"))]).output();
    let o = o.unwrap();
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    // A relative directory that does not exist says where it was looked for.
    let o = bc().current_dir(elsewhere.path()).args(["floor", "--data", "nothere", "--horizons", "1"]).output();
    let e = stderr(&o.unwrap());
    assert!(e.contains(&format!("looked for {}", elsewhere.path().join("nothere").display())), "{e}");
}

#[test]
fn a_run_larger_than_the_address_space_limit_is_refused_clearly() {
    // `ulimit -v` (RLIMIT_AS) of 1 GiB, far below this machine's memory: the estimate is
    // compared with it, instead of the run aborting on a failed allocation.
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("big.toml");
    std::fs::write(&cfg, "[model]\nd_model = 2048\n").unwrap();
    let out = d.path().join("run");
    let script =
        format!("ulimit -v 1048576 && exec \"$0\" train --preset quick --config {} --out {}", s(&cfg), s(&out));
    let o = std::process::Command::new("sh")
        .args(["-c", &script, env!("CARGO_BIN_EXE_bc-cli")])
        .env("RAYON_NUM_THREADS", "2")
        .output()
        .unwrap();
    assert_exit(&o, 2, &["would need about", "this machine has 1.0 GiB for this process (RLIMIT_AS, ulimit -v)"]);
    assert!(!out.exists(), "nothing is written");
}
