//! `cargo fuzz run state_json`: the harness target `state_json` of `cargo test` under libFuzzer.
#![no_main]

#[path = "../../testkit/tests/fuzz/train_targets.rs"]
mod train_targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // An error is a fine answer; a panic, a hang or a blown allocation is what libFuzzer finds.
    let _ = train_targets::state_json(data);
});
