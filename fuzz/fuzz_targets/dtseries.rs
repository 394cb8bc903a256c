//! `cargo fuzz run dtseries`: the harness target `dtseries` of `cargo test` (a `.dtseries.nii` parcellated by the
//! fixture label file) under
//! libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // An error is a fine answer; a panic, a hang or a blown allocation is what libFuzzer finds.
    let _ = boldcast_testkit::fuzz::targets::dtseries(data);
});
