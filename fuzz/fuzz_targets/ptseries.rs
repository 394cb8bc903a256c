//! `cargo fuzz run ptseries`: the harness target `ptseries` of `cargo test` (a `.ptseries.nii`) under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // An error is a fine answer; a panic, a hang or a blown allocation is what libFuzzer finds.
    let _ = boldcast_testkit::fuzz::targets::ptseries(data);
});
