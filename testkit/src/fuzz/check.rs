//! The checker: runs a [`Target`] on every case of its seeds and holds each case to the
//! rules of the harness.
//!
//! A case **passes** when the target returns (`Ok`: the parser gave a valid value, `Err`: an
//! error) and
//!
//! - it did not panic (caught with [`std::panic::catch_unwind`]; the message, location and
//!   backtrace are kept);
//! - it took at most [`Limits::time`] (a slower case is run once more, and fails only when it is
//!   slow again: a loaded machine is not a hang); a case still running after
//!   [`Limits::hang`] is reported by a watchdog thread, which ends the process;
//! - the bytes it allocated at its peak are at most
//!   `Limits::alloc_per_byte * (input + other input) + Limits::alloc_slack` (counted by
//!   [`super::CountingAlloc`], which the harness must install);
//! - an error names what the target says it must ([`Target::must_name`]: the file).
//!
//! A panic, a slow case or an over-allocation is a failure; so is an error that does not name
//! what it must.
//!
//! [`run_all`] runs several targets and prints one line per target,
//! `fuzz <target>: N cases, 0 panics, E errors, V valid; ...`, then the failures (each with
//! the case's description and the path its input was saved to), and a closing
//! `fuzz: N passed, M failed`.

use super::alloc;
use super::mutate::{cases, Plan, Seed};
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a target says of one input: `Ok(())` for a valid value, `Err(message)` for an error.
pub type Outcome = Result<(), String>;

/// A parser under test, as the checker calls it.
pub type TargetFn = Box<dyn Fn(&[u8]) -> Outcome>;

/// One parser under test.
pub struct Target {
    /// The target's name, as printed.
    pub name: &'static str,
    /// The valid files its cases start from.
    pub seeds: Vec<Seed>,
    /// How many cases of each kind a seed gives.
    pub plan: Plan,
    /// Bytes the target reads besides the input (the other files of a directory), counted
    /// into the allocation bound.
    pub other_input: usize,
    /// Texts of which every error must contain one (the name of the mutated file, or the
    /// words of an error naming a field instead); empty: no check.
    pub must_name: &'static [&'static str],
    /// The parser, called on each input.
    pub run: TargetFn,
}

/// The rules of a case (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// The longest a case may take.
    pub time: Duration,
    /// When the watchdog gives up on a case and ends the process.
    pub hang: Duration,
    /// Bytes of allocation allowed per byte of input.
    pub alloc_per_byte: usize,
    /// Bytes of allocation allowed on top.
    pub alloc_slack: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            time: Duration::from_secs(1),
            hang: Duration::from_secs(20),
            alloc_per_byte: 64,
            alloc_slack: 16 << 20,
        }
    }
}

impl Limits {
    /// The allocation bound of an input of `bytes` bytes.
    pub fn alloc_bound(&self, bytes: usize) -> usize {
        bytes.saturating_mul(self.alloc_per_byte).saturating_add(self.alloc_slack)
    }
}

/// Why a case failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// The target panicked.
    Panic,
    /// The target took longer than [`Limits::time`], twice.
    Slow,
    /// The target allocated more than the bound.
    Alloc,
    /// The error did not name what it must.
    Unnamed,
}

/// One failing case.
#[derive(Clone, Debug)]
pub struct Failure {
    /// What failed.
    pub kind: FailureKind,
    /// The case's number in its target (0-based, in the order of [`super::cases`] over the seeds).
    pub case: usize,
    /// How the input was made.
    pub how: String,
    /// The panic message and backtrace, the time, the bytes or the error text.
    pub detail: String,
    /// Where the input was saved.
    pub input: PathBuf,
}

/// What one target's run found.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// The target.
    pub name: &'static str,
    /// Cases run.
    pub cases: usize,
    /// Cases that returned an error.
    pub errors: usize,
    /// Cases that returned a valid value.
    pub valid: usize,
    /// The failing cases.
    pub failures: Vec<Failure>,
    /// The slowest case.
    pub slowest: Duration,
    /// The largest peak allocation of a case, in bytes.
    pub peak: usize,
    /// The time of the whole target.
    pub elapsed: Duration,
}

impl Summary {
    /// Failures of one kind.
    pub fn count(&self, kind: FailureKind) -> usize {
        self.failures.iter().filter(|f| f.kind == kind).count()
    }

    /// The line printed for the target.
    pub fn line(&self) -> String {
        format!(
            "fuzz {}: {} cases, {} panics, {} errors, {} valid; {} slow, {} over the allocation bound, {} errors \
             not naming the file; slowest case {:.1} ms, largest peak {:.1} KiB, {:.1} s",
            self.name,
            self.cases,
            self.count(FailureKind::Panic),
            self.errors,
            self.valid,
            self.count(FailureKind::Slow),
            self.count(FailureKind::Alloc),
            self.count(FailureKind::Unnamed),
            self.slowest.as_secs_f64() * 1e3,
            self.peak as f64 / 1024.0,
            self.elapsed.as_secs_f64()
        )
    }
}

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs the panic hook that records a panic's message, location and backtrace for the
/// checker instead of printing it (idempotent).
fn install_hook() {
    static DONE: AtomicBool = AtomicBool::new(false);
    if DONE.swap(true, Relaxed) {
        return;
    }
    std::panic::set_hook(Box::new(|info| {
        alloc::lift_cap();
        let bt = std::backtrace::Backtrace::force_capture();
        let text = format!("{info}\n{bt}");
        LAST_PANIC.with(|p| *p.borrow_mut() = Some(text));
    }));
}

/// The watchdog: the case in progress and since when (ms since `t0`, 0 when none).
struct Watch {
    t0: Instant,
    started_ms: AtomicU64,
    input: Mutex<Vec<u8>>,
}

fn spawn_watchdog(hang: Duration) -> Arc<Watch> {
    let w = Arc::new(Watch { t0: Instant::now(), started_ms: AtomicU64::new(0), input: Mutex::new(Vec::new()) });
    let w2 = Arc::clone(&w);
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(250));
        let s = w2.started_ms.load(Relaxed);
        if s != 0 && w2.t0.elapsed().as_millis() as u64 - s > hang.as_millis() as u64 {
            let case = alloc::CURRENT.lock().map(|c| c.clone()).unwrap_or_default();
            let path = failure_dir().join("hang.bin");
            let _ = std::fs::write(&path, &*w2.input.lock().unwrap_or_else(|e| e.into_inner()));
            eprintln!("fuzz: HANG: {case} still runs after {} s; its input is in {}", hang.as_secs(), path.display());
            std::process::exit(101);
        }
    });
    w
}

/// Where failing inputs are saved.
pub fn failure_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("boldcast-fuzz-failures-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&d);
    d
}

/// Runs one target on every case of its seeds (see the module documentation).
pub fn run_target(target: &Target, limits: &Limits) -> Summary {
    run_target_with(target, limits, &spawn_watchdog(limits.hang))
}

fn run_target_with(target: &Target, limits: &Limits, watch: &Watch) -> Summary {
    install_hook();
    let t0 = Instant::now();
    let mut s = Summary { name: target.name, ..Summary::default() };
    let only: Option<usize> = std::env::var("BOLDCAST_FUZZ_CASE").ok().and_then(|v| v.parse().ok());
    let mut index = 0usize;
    for seed in &target.seeds {
        for case in cases(seed, &target.plan) {
            let i = index;
            index += 1;
            if only.is_some_and(|o| o != i) {
                continue;
            }
            s.cases += 1;
            let label = format!("`{}` case {i} ({})", target.name, case.how);
            *alloc::CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = label;
            {
                let mut inp = watch.input.lock().unwrap_or_else(|e| e.into_inner());
                inp.clear();
                inp.extend_from_slice(&case.bytes);
            }
            let bound = limits.alloc_bound(case.bytes.len() + target.other_input);
            let mut attempt = 0;
            let (result, took, peak) = loop {
                attempt += 1;
                watch.started_ms.store((watch.t0.elapsed().as_millis() as u64).max(1), Relaxed);
                let base = alloc::begin(bound.saturating_add(alloc::HARD_CAP_SLACK));
                let start = Instant::now();
                let r = catch_unwind(AssertUnwindSafe(|| (target.run)(&case.bytes)));
                let took = start.elapsed();
                let peak = alloc::end(base);
                watch.started_ms.store(0, Relaxed);
                if took <= limits.time || attempt == 2 || r.is_err() {
                    break (r, took, peak);
                }
            };
            s.slowest = s.slowest.max(took);
            s.peak = s.peak.max(peak);
            let mut found: Vec<(FailureKind, String)> = Vec::new();
            let returned = result.is_ok();
            match result {
                Err(_) => {
                    let detail = LAST_PANIC.with(|p| p.borrow_mut().take()).unwrap_or_else(|| "(no message)".into());
                    found.push((FailureKind::Panic, detail));
                }
                Ok(Ok(())) => s.valid += 1,
                Ok(Err(e)) => {
                    s.errors += 1;
                    if !target.must_name.is_empty() && !target.must_name.iter().any(|n| e.contains(n)) {
                        let names = target.must_name.join("` or `");
                        found.push((FailureKind::Unnamed, format!("the error does not name `{names}`: {e}")));
                    }
                }
            }
            // A panic's time and peak hold the hook's backtrace: only a returning case is
            // timed and measured.
            if took > limits.time && returned {
                found.push((
                    FailureKind::Slow,
                    format!("took {:.2} s twice (limit {:.2} s)", took.as_secs_f64(), limits.time.as_secs_f64()),
                ));
            }
            if peak > bound && returned {
                found.push((FailureKind::Alloc, format!("allocated {peak} bytes at its peak, the bound is {bound}")));
            }
            for (kind, detail) in found {
                let input = failure_dir().join(format!("{}-{i}.bin", target.name));
                let _ = std::fs::write(&input, &case.bytes);
                s.failures.push(Failure { kind, case: i, how: case.how.clone(), detail, input });
            }
        }
    }
    s.elapsed = t0.elapsed();
    s
}

/// A probe of [`self_check`] that does `act` on the seed itself and passes everywhere.
fn on_seed(act: fn()) -> TargetFn {
    Box::new(move |b| {
        if b == b"12" {
            act();
        }
        Ok(())
    })
}

/// Checks the checker, with the counting allocator installed: a target that panics, one that
/// is slow, one that allocates beyond its bound, one whose error names no file, and one that
/// passes must give exactly those failures. Returns the line to print, or why the checker is
/// broken.
pub fn self_check() -> Result<String, String> {
    let seed = || vec![super::Seed::new("seed", super::Format::Binary, b"12".to_vec())];
    let plan = Plan { random: 2, ..Plan::default() };
    let limits = Limits { time: Duration::from_millis(30), alloc_slack: 1 << 20, ..Limits::default() };
    let target = |name: &'static str, must_name: &'static [&'static str], run: TargetFn| Target {
        name,
        seeds: seed(),
        plan,
        other_input: 0,
        must_name,
        run,
    };
    let cases = super::cases(&seed()[0], &plan).count();
    let probes: [(Target, Option<FailureKind>); 5] = [
        (target("self-check panic", &[], on_seed(|| panic!("the seed"))), Some(FailureKind::Panic)),
        (
            target("self-check slow", &[], on_seed(|| std::thread::sleep(Duration::from_millis(40)))),
            Some(FailureKind::Slow),
        ),
        (
            target("self-check alloc", &[], on_seed(|| drop(std::hint::black_box(vec![1u8; 4 << 20])))),
            Some(FailureKind::Alloc),
        ),
        (
            target(
                "self-check unnamed",
                &["seed.bin"],
                Box::new(|b| if b == b"12" { Err("no name".into()) } else { Err("seed.bin: bad".into()) }),
            ),
            Some(FailureKind::Unnamed),
        ),
        (
            target(
                "self-check clean",
                &["seed.bin"],
                Box::new(|b| if b.is_empty() { Err("seed.bin: empty".into()) } else { Ok(()) }),
            ),
            None,
        ),
    ];
    let watch = spawn_watchdog(limits.hang);
    for (t, want) in &probes {
        let s = run_target_with(t, &limits, &watch);
        let kinds: Vec<FailureKind> = s.failures.iter().map(|f| f.kind).collect();
        // Each probe misbehaves on the seed itself, and only there.
        let expected: Vec<FailureKind> = want.iter().copied().collect();
        if s.cases != cases || kinds != expected {
            return Err(format!(
                "`{}`: {} cases, failures {kinds:?}, expected {cases} cases and {expected:?}",
                t.name, s.cases
            ));
        }
    }
    Ok(format!(
        "fuzz self-check: the checker caught a panic, a slow case, an over-allocation and an unnamed error in {cases} cases each"
    ))
}

/// Writes the seeds of every target into `dir/<target>/` (the starting corpus of the
/// `cargo fuzz` target of the same name), one file per seed.
pub fn write_seeds(targets: &[Target], dir: &std::path::Path) {
    for t in targets {
        let d = dir.join(t.name);
        std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("creating {}: {e}", d.display()));
        for s in &t.seeds {
            let p = d.join(s.name.replace('/', "-"));
            std::fs::write(&p, &s.bytes).unwrap_or_else(|e| panic!("writing {}: {e}", p.display()));
        }
        println!("fuzz {}: {} seed(s) written to {}", t.name, t.seeds.len(), d.display());
    }
}

/// Runs every target (only `BOLDCAST_FUZZ_ONLY` when that variable names one), prints a line
/// per target as it ends, then the failures and `fuzz: N passed, M failed`. Whether all passed.
/// With `BOLDCAST_FUZZ_WRITE_SEEDS=<dir>` it runs nothing and writes the seeds instead
/// ([`write_seeds`]). It first runs [`self_check`], and fails when the checker is broken.
///
/// Panics when [`super::CountingAlloc`] is not the global allocator: the allocation bound
/// would not be checked.
pub fn run_all(targets: &[Target], limits: &Limits) -> bool {
    // One allocation through the global allocator, so that `installed` can tell.
    drop(std::hint::black_box(Box::new(0u64)));
    assert!(
        alloc::installed(),
        "the fuzz harness must install boldcast_testkit::fuzz::CountingAlloc as its global allocator"
    );
    let only = std::env::var("BOLDCAST_FUZZ_ONLY").ok();
    if let Some(dir) = std::env::var_os("BOLDCAST_FUZZ_WRITE_SEEDS") {
        write_seeds(targets, std::path::Path::new(&dir));
        return true;
    }
    if std::env::var_os("BOLDCAST_FUZZ_CASE").is_none() {
        let checked = self_check();
        // The probes' inputs are no failures of a target.
        let _ = std::fs::remove_dir_all(failure_dir());
        match checked {
            Ok(line) => println!("{line}"),
            Err(why) => {
                println!("fuzz self-check FAILED: {why}");
                return false;
            }
        }
    }
    let watch = spawn_watchdog(limits.hang);
    let t0 = Instant::now();
    let mut summaries = Vec::new();
    for t in targets.iter().filter(|t| only.as_deref().is_none_or(|o| o == t.name)) {
        let s = run_target_with(t, limits, &watch);
        println!("{}", s.line());
        summaries.push(s);
    }
    let failed: Vec<&Summary> = summaries.iter().filter(|s| !s.failures.is_empty()).collect();
    for s in &failed {
        println!("fuzz {}: {} failing case(s):", s.name, s.failures.len());
        for f in s.failures.iter().take(10) {
            println!(
                "  case {} [{:?}] {}\n    input saved to {}\n    {}",
                f.case,
                f.kind,
                f.how,
                f.input.display(),
                f.detail.replace('\n', "\n    ")
            );
        }
    }
    let total: usize = summaries.iter().map(|s| s.cases).sum();
    println!("fuzz: {} targets, {total} cases in {:.1} s", summaries.len(), t0.elapsed().as_secs_f64());
    println!("fuzz: {} passed, {} failed", summaries.len() - failed.len(), failed.len());
    failed.is_empty()
}
