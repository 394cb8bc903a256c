//! Data-parallel `train` and `bench` under `mpirun -np 2` (Open MPI): the same loss series and
//! weights as one process on the global batch; a killed rank stops the run with the last
//! checkpoint intact, and the run resumes to the uninterrupted run's result; an indivisible
//! batch is refused. Built only with the `mpi` feature (`.ci/run` runs it:
//! `cargo test -p bc-cli --features mpi --test train_mpi`), and it needs `mpirun` on the PATH.
#![cfg(feature = "mpi")]

mod common;
use common::*;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const FLAGS: &[&str] =
    &["--preset", "quick", "--batch-size", "8", "--max-steps", "40", "--val-every", "20", "--ckpt-every", "10"];

/// `mpirun -np 2 bc-cli args...`, one rayon thread per rank.
fn mpirun(args: &[&str]) -> Command {
    let mut c = Command::new("mpirun");
    c.args(["--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "RAYON_NUM_THREADS=1"])
        .arg(env!("CARGO_BIN_EXE_bc-cli"))
        .args(args)
        .env("RAYON_NUM_THREADS", "1")
        // Containers often forbid the cross-memory attach of Open MPI's shared-memory transport.
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        .env_remove(bc_cli::train::PAUSE_HOOK_ENV);
    c
}

fn train_args<'a>(out: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["train", "--out", out.to_str().unwrap()];
    a.extend_from_slice(FLAGS);
    a.extend_from_slice(extra);
    a
}

fn one_process(out: &Path) -> Output {
    bc().env("RAYON_NUM_THREADS", "1").args(train_args(out, &[])).output().unwrap()
}

fn two_ranks(args: &[&str]) -> Output {
    mpirun(args).output().expect("mpirun runs (apt-get install openmpi-bin)")
}

/// `(step, field)` of every line of a log that has `field`.
fn series(path: &Path, field: &str) -> Vec<(u64, f64)> {
    log_lines(path).iter().filter_map(|v| Some((v.get("step")?.as_u64()?, v.get(field)?.as_f64()?))).collect()
}

fn max_rel(a: &[(u64, f64)], b: &[(u64, f64)]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|((sa, va), (sb, vb))| {
            assert_eq!(sa, sb);
            (va - vb).abs() / vb.abs()
        })
        .fold(0.0, f64::max)
}

#[test]
fn two_ranks_equal_one_process_on_the_global_batch() {
    let d = tempfile::tempdir().unwrap();
    let (one, two) = (d.path().join("one"), d.path().join("two"));
    let o = one_process(&one);
    assert_verdict(&o);
    let o = two_ranks(&train_args(&two, &[]));
    let (out, err) = text(&o);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{out}{err}");
    assert!(out.contains("data-parallel over 2 ranks (mpi): global batch 8, 4 windows per rank"), "{out}");
    // Only rank 0 prints.
    assert_eq!(out.matches("train: preset quick").count(), 1, "{out}");
    assert_eq!(out.matches("verdict:").count(), 1, "{out}");

    let (l1, l2) = (one.join("loss_log.jsonl"), two.join("loss_log.jsonl"));
    let loss = max_rel(&series(&l2, "loss"), &series(&l1, "loss"));
    let gnorm = max_rel(&series(&l2, "grad_norm"), &series(&l1, "grad_norm"));
    let val = max_rel(&series(&l2, "val_loss"), &series(&l1, "val_loss"));
    assert_eq!(series(&l2, "loss").len(), 40);
    assert_eq!(series(&l2, "val_loss").len(), 3);
    assert_eq!(series(&l2, "lr"), series(&l1, "lr"));
    let (w1, w2) = (
        tensors(&one.join("checkpoints/step-000040/model.safetensors")),
        tensors(&two.join("checkpoints/step-000040/model.safetensors")),
    );
    let (mut wmax, mut wrel) = (0.0f32, 0.0f32);
    for (a, b) in w1.iter().zip(&w2) {
        assert_eq!(a.name, b.name);
        for (x, y) in a.data.iter().zip(&b.data) {
            wmax = wmax.max((x - y).abs());
            wrel = wrel.max((x - y).abs() / x.abs().max(1e-3));
        }
    }
    eprintln!(
        "mpirun -np 2 vs one process, 40 steps: max relative difference of loss {loss:e}, grad_norm {gnorm:e}, \
         val_loss {val:e}; weights max |diff| {wmax:e} (relative {wrel:e})"
    );
    assert!(loss < 1e-5, "loss series differ by up to {loss:e} (relative)");
    assert!(gnorm < 1e-4, "grad_norm series differ by up to {gnorm:e} (relative)");
    assert!(val < 1e-5, "validation losses differ by up to {val:e} (relative)");
    assert!(wmax < 1e-4, "final weights differ by up to {wmax:e}");
    // Training happened: the weights still moved in the last ten steps.
    let w0 = tensors(&one.join("checkpoints/step-000030/model.safetensors"));
    assert!(w0.iter().zip(&w1).any(|(a, b)| a.data != b.data));
    // The same files as a one-process run: summary, figure, best weights.
    for f in ["summary.json", "figures/loss_curves.png", "best.safetensors", "config.resolved.toml"] {
        assert!(two.join(f).is_file(), "{f} missing");
    }
}

#[test]
fn an_indivisible_global_batch_is_refused_and_nothing_is_written() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("odd");
    let o = two_ranks(&["train", "--preset", "quick", "--batch-size", "7", "--out", out.to_str().unwrap()]);
    let (so, se) = text(&o);
    assert_ne!(o.status.code(), Some(0), "{so}{se}");
    assert!(se.contains("invalid train.batch_size = 7") && se.contains("number of processes (2)"), "{se}");
    assert!(!out.exists(), "{} was created", out.display());
}

/// The pid of rank `rank` among the children of `parent` (Open MPI's `mpirun` starts the
/// ranks of its own node itself; their environment holds `OMPI_COMM_WORLD_RANK`).
fn rank_pid(parent: u32, rank: usize) -> Option<u32> {
    for e in std::fs::read_dir("/proc").ok()? {
        let Ok(pid) = e.ok()?.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let ppid: Option<u32> = stat.rsplit(')').next()?.split_whitespace().nth(1).and_then(|s| s.parse().ok());
        if ppid != Some(parent) {
            continue;
        }
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        if env.split(|&b| b == 0).any(|kv| kv == format!("OMPI_COMM_WORLD_RANK={rank}").as_bytes()) {
            return Some(pid);
        }
    }
    None
}

#[test]
fn a_killed_rank_stops_the_run_and_it_resumes_to_the_uninterrupted_result() {
    let d = tempfile::tempdir().unwrap();
    let (full, cut) = (d.path().join("full"), d.path().join("cut"));
    let o = two_ranks(&train_args(&full, &[]));
    assert_verdict(&o);

    // Rank 0 pauses inside the checkpoint write of step 20 (the one of step 10 is complete);
    // rank 1 waits for it in the next all-reduce. Then rank 1 is killed.
    let cmd = mpirun(&train_args(&cut, &[]));
    let Paused { mut child, mut err, mut seen } =
        spawn_paused(cmd, "20", "test hook: paused in the checkpoint write of step 20");
    let victim = rank_pid(child.id(), 1).expect("rank 1 is a child of mpirun");
    assert!(Command::new("kill").args(["-9", &victim.to_string()]).status().unwrap().success());
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "rank 0 did not stop after rank 1 was killed");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    seen.push_str(&rest);
    assert!(!status.success(), "{seen}");
    // mpirun names the rank that died.
    assert!(seen.contains("rank 1") && seen.contains("signal 9"), "{seen}");
    // The last complete checkpoint is the one of step 10, intact; the half-written one is not
    // a checkpoint.
    assert_eq!(latest(&cut), cut.join("checkpoints/step-000010"));
    assert!(!cut.join("checkpoints/step-000020").exists());
    assert_eq!(tensors(&latest(&cut).join("model.safetensors")).len(), tensors(&full.join("best.safetensors")).len());

    let o = two_ranks(&["train", "--resume", cut.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{out}{err}");
    assert!(out.contains("resuming from") && out.contains("step 10 of 40"), "{out}");
    let (la, lb) =
        (std::fs::read(full.join("loss_log.jsonl")).unwrap(), std::fs::read(cut.join("loss_log.jsonl")).unwrap());
    assert!(la == lb, "the resumed log differs from the uninterrupted one");
    for f in ["model.safetensors", "optimizer.safetensors"] {
        assert_same_tensors(
            &full.join("checkpoints/step-000040").join(f),
            &cut.join("checkpoints/step-000040").join(f),
        );
    }
    assert_same_tensors(&full.join("best.safetensors"), &cut.join("best.safetensors"));
}

#[test]
fn bench_reports_scaling_over_two_ranks() {
    let o = two_ranks(&["bench", "--preset", "quick", "--steps", "3", "--warmup", "1"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with('{')).collect();
    assert_eq!(lines.len(), 1, "only rank 0 prints: {out}");
    let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(v["ranks"], 2);
    assert_eq!(v["collective"], "mpi");
    assert_eq!(v["batch"], 4, "the preset's global batch");
    let (t, t1, eff) = (
        v["median_step_s"].as_f64().unwrap(),
        v["single_process_step_s"].as_f64().unwrap(),
        v["scaling_efficiency"].as_f64().unwrap(),
    );
    assert!(t > 0.0 && t1 > 0.0, "{v}");
    assert!((eff - t1 / t / 2.0).abs() < 1e-9 * eff, "{v}");
    assert!(v["last_loss"].as_f64().unwrap().is_finite());
}
