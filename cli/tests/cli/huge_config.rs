//! Huge sizes in a configuration or on `bc-cli synth`'s flags (issue 17): each is refused
//! with exit status 2 before anything is allocated or written, by an error that names the field
//! and says how much memory the configuration would need; never a panic, an abort or a hang.
//!
//! The binary runs under `ulimit -v` (so that, should a check be missing, an allocation fails
//! at once instead of pressing the shared machine) and is killed after a time limit (so that a
//! missing check shows as a failed test, not a hung one).

use crate::common;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

/// 2^62.
const HUGE: &str = "4611686018427387904";

/// Virtual memory the binary may map, in KiB (ulimit -v): far more than a refused
/// configuration uses, far less than a missing check would ask for.
const VMEM_KIB: u64 = 8 << 20;

/// Runs `bc-cli args...` under [`VMEM_KIB`], killed after 60 s; `None` when it had to be killed.
fn run_limited(args: &[&str]) -> Option<Output> {
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(format!("ulimit -v {VMEM_KIB} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_bc-cli"))
        .args(args)
        .env("RAYON_NUM_THREADS", "2")
        .env("RUST_BACKTRACE", "0")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("sh runs");
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().expect("kill");
            child.wait().expect("reap");
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(child.wait_with_output().expect("output"))
}

/// Checks a refusal: exit status 2, `error: ` naming `field` and a memory size, no panic, and
/// no `out`. Returns standard error, or what is wrong.
fn refused(what: &str, o: Option<Output>, field: &str, out: &Path) -> Result<String, String> {
    let o = o.ok_or_else(|| format!("{what}: still running after 60 s"))?;
    let (stdout, stderr) = common::text(&o);
    let fail = |why: &str| Err(format!("{what}: {why}\nstatus {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", o.status));
    if o.status.code() != Some(2) {
        return fail("exit status is not 2");
    }
    if stderr.contains("panicked") || stderr.contains("memory allocation") || !stderr.starts_with("error: ") {
        return fail("not an error message");
    }
    if !stderr.contains(field) {
        return fail(&format!("the error does not name {field}"));
    }
    if !stderr.contains("memory") || !["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"].iter().any(|u| stderr.contains(u)) {
        return fail("the error does not say how much memory");
    }
    if out.exists() {
        return fail(&format!("{} was created", out.display()));
    }
    Ok(stderr)
}

/// Panics listing every failure of `results`.
/// Trains each `(name, toml, field)` case in `dir` and checks it is refused naming `field`.
fn all_refused<T: AsRef<str>>(dir: &Path, cases: &[(&str, T, &str)]) -> Vec<String> {
    all_ok(
        cases
            .iter()
            .map(|(name, toml, field)| {
                let (o, out) = train(dir, name, toml.as_ref());
                refused(name, o, field, &out)
            })
            .collect(),
    )
}

fn all_ok(results: Vec<Result<String, String>>) -> Vec<String> {
    let bad: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        bad.is_empty(),
        "{} of {} cases failed:\n\n{}",
        bad.len(),
        results.len(),
        bad.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n\n")
    );
    results.into_iter().map(|r| r.unwrap()).collect()
}

/// `bc-cli CMD --config DIR/NAME.toml --out DIR/out-NAME EXTRA...` with `toml` as the file,
/// within the time limit.
fn with_config(cmd: &str, dir: &Path, name: &str, toml: &str, extra: &[&str]) -> (Option<Output>, PathBuf) {
    let cfg = common::write_file(dir, &format!("{name}.toml"), toml);
    let out = dir.join(format!("out-{name}"));
    let o = run_limited(&[&[cmd, "--config", common::s(&cfg), "--out", common::s(&out)][..], extra].concat());
    (o, out)
}

/// `bc-cli train --config FILE --out DIR` with `toml` as the file.
fn train(dir: &Path, name: &str, toml: &str) -> (Option<Output>, PathBuf) {
    with_config("train", dir, name, toml, &["--max-steps", "1", "--val-every", "1"])
}

/// The four cases quoted in the issue, and the other size fields of `[model]`, `[window]`,
/// `[train]` and `[data.synthetic]` that used to panic, abort, hang or create `--out`.
#[test]
fn huge_sizes_in_a_train_configuration_are_refused_naming_the_field() {
    let d = tempfile::tempdir().unwrap();
    let cases: &[(&str, String, &str)] = &[
        // From the issue.
        ("d_model", format!("[model]\nd_model = {HUGE}\n"), "model.d_model"),
        ("trs", format!("[data.synthetic]\ntrs = {HUGE}\n"), "data.synthetic.trs"),
        ("parcels", "[data.synthetic]\nparcels = 4294967296\n".into(), "data.synthetic.parcels"),
        ("d_state", "[model]\nd_state = 100000000000\n".into(), "model.d_state"),
        // The other sizes.
        ("subjects", format!("[data.synthetic]\nsubjects = {HUGE}\n"), "data.synthetic.subjects"),
        ("runs", format!("[data.synthetic]\nruns = {HUGE}\n"), "data.synthetic.runs"),
        ("expand", format!("[model]\nexpand = {HUGE}\n"), "model.expand"),
        ("n_layers", "[model]\nn_layers = 1099511627776\n".into(), "model.n_layers"),
        ("d_conv", format!("[model]\nd_conv = {HUGE}\n"), "model.d_conv"),
        ("batch_size", format!("[train]\nbatch_size = {HUGE}\n"), "train.batch_size"),
        ("mamba2", "[model]\ntemporal = \"mamba2\"\nd_model = 2305843009213693952\n".into(), "model.d_model"),
    ];
    all_refused(d.path(), cases);
}

/// Sizes that fit in a 64-bit count but not in this machine: the error adds up what the run
/// would hold and compares it with the machine's memory.
#[cfg(target_os = "linux")]
#[test]
fn a_configuration_larger_than_the_machine_says_what_it_would_need() {
    let d = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, &str)] = &[
        ("d_state", "[model]\nd_state = 100000000000\n", "model.d_state"),
        ("d_model", "[model]\nd_model = 1000000\n", "model.d_model"),
        ("trs", "[data.synthetic]\ntrs = 1000000000\n", "data.synthetic.trs"),
        (
            "window",
            "[data.synthetic]\ntrs = 100000000\nsubjects = 2\nruns = 1\n[window]\nwindow = 100000000\n",
            "window.window",
        ),
        ("batch", "[train]\nbatch_size = 1000000\n", "train.batch_size"),
    ];
    let errors = all_refused(d.path(), cases);
    for (e, (name, _, _)) in errors.iter().zip(cases) {
        assert!(e.contains("the configuration would need about") && e.contains("this machine has"), "{name}: {e}");
        for part in ["data ", "parameters and optimizer ", "activations "] {
            assert!(e.contains(part), "{name}: the error should break the memory down ({part}): {e}");
        }
    }
}

/// `bc-cli synth --parcels 100000 --trs 100000` (the case): 320 GB of runs.
#[cfg(target_os = "linux")]
#[test]
fn a_synthetic_dataset_larger_than_the_machine_is_refused_before_generating() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("s");
    let o = run_limited(&["synth", "--out", out.to_str().unwrap(), "--parcels", "100000", "--trs", "100000"]);
    let e = all_ok(vec![refused("synth", o, "parcels = 100000", &out)]).remove(0);
    assert!(e.contains("would need about") && e.contains("this machine has"), "{e}");
    assert!(std::fs::read_dir(d.path()).unwrap().next().is_none(), "nothing written beside --out");
}

/// A synthetic dataset whose size overflows a 64-bit count.
#[test]
fn a_synthetic_dataset_whose_size_overflows_is_refused_naming_the_flag() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("s");
    let o = out.to_str().unwrap();
    all_ok(vec![
        refused("synth --trs", run_limited(&["synth", "--out", o, "--trs", HUGE]), "trs = 4611686018427387904", &out),
        refused(
            "synth --subjects",
            run_limited(&["synth", "--out", o, "--subjects", HUGE]),
            "subjects = 4611686018427387904",
            &out,
        ),
        refused(
            "synth --var1 --parcels",
            run_limited(&["synth", "--out", o, "--var1", "--parcels", "4294967296"]),
            "parcels = 4294967296",
            &out,
        ),
    ]);
}

/// `bc-cli overfit` builds the same model on 4 windows: a model larger than the machine is
/// refused before its batch or model is made, and `--out` is not created.
#[cfg(target_os = "linux")]
#[test]
fn the_overfit_check_refuses_a_model_larger_than_the_machine() {
    let d = tempfile::tempdir().unwrap();
    let mut results = Vec::new();
    for (name, toml, field) in [
        ("d_state", "[model]\nd_state = 100000000000\n", "model.d_state"),
        ("parcels", "[data.synthetic]\nparcels = 10000000\n", "data.synthetic.parcels"),
    ] {
        let (o, out) = with_config("overfit", d.path(), name, toml, &[]);
        results.push(refused(name, o, field, &out).and_then(|e| {
            if e.contains("the configuration would need about") && e.contains("this machine has") {
                Ok(e)
            } else {
                Err(format!("{name}: {e}"))
            }
        }));
    }
    all_ok(results);
}
