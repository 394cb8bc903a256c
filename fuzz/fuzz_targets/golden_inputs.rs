//! `cargo fuzz run golden_inputs`: the harness target `golden_inputs` of `cargo test` under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // An error is a fine answer; a panic, a hang or a blown allocation is what libFuzzer finds.
    let _ = boldcast_testkit::fuzz::targets::golden_inputs(data);
});
