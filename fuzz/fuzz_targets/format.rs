//! `cargo fuzz run format`: the harness target `format` of `cargo test` (boldcast_testkit::fuzz::reader_targets) under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // An error is a fine answer; a panic, a hang or a blown allocation is what libFuzzer finds.
    let _ = boldcast_testkit::fuzz::reader_targets::format(data);
});
