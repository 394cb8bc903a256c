//! `cargo fuzz run cli_config`: the harness target `cli_config` of `cargo test` under libFuzzer.
#![no_main]

#[path = "../../cli/tests/fuzz_config/target.rs"]
mod target;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // An error is a fine answer; a panic, a hang or a blown allocation is what libFuzzer finds.
    let _ = target::cli_config(data);
});
