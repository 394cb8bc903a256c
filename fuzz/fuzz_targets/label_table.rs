//! `cargo fuzz run label_table`: the harness target `label_table` of `cargo test` (boldcast_testkit::fuzz::reader_targets) under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // An error is a fine answer; a panic, a hang or a blown allocation is what libFuzzer finds.
    let _ = boldcast_testkit::fuzz::reader_targets::label_table(data);
});
