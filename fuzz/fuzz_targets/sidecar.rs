//! `cargo fuzz run sidecar`: the harness target `sidecar` of `cargo test` (a BIDS JSON sidecar in a derivatives tree) under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // An error is a fine answer; a panic, a hang or a blown allocation is what libFuzzer finds.
    let _ = boldcast_testkit::fuzz::targets::sidecar(data);
});
