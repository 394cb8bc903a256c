//! `cargo fuzz run lock_file`: the harness target `lock_file` of `cargo test` under libFuzzer.
#![no_main]

#[path = "../../testkit/tests/fuzz/train_targets.rs"]
mod train_targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // An error is a fine answer; a panic, a hang or a blown allocation is what libFuzzer finds.
    let _ = train_targets::lock_file(data);
});
