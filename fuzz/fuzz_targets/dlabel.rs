//! `cargo fuzz run dlabel`: the harness target `dlabel` of `cargo test` (a `.dlabel.nii` parcellating the
//! fixture dense series) under
//! libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // An error is a fine answer; a panic, a hang or a blown allocation is what libFuzzer finds.
    let _ = boldcast_testkit::fuzz::targets::dlabel(data);
});
