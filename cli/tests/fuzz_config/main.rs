//! The fuzz harness of the command line's `--config` layers (issue 17): mutated presets and
//! partial configuration files through `presets::resolve`, each case checked for panics, hangs
//! and allocation beyond its bound (`boldcast_testkit::fuzz`), with one printed line,
//! `fuzz cli_config: N cases, 0 panics, E errors, V valid; ...`. The other parsers' harness is
//! `testkit/tests/fuzz`.

mod target;

use boldcast_testkit::fuzz::{run_all, targets, CountingAlloc, Limits};
use std::process::ExitCode;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn main() -> ExitCode {
    let ok = run_all(&[target::cli_target()], &Limits::default());
    targets::remove_scratch();
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
