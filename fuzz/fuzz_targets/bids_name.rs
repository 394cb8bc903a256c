//! `cargo fuzz run bids_name`: the harness target `bids_name` of `cargo test` (a BIDS file name) under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // An error is a fine answer; a panic, a hang or a blown allocation is what libFuzzer finds.
    let _ = boldcast_testkit::fuzz::targets::bids_name(data);
});
