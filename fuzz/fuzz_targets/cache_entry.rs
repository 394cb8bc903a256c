//! `cargo fuzz run cache_entry`: the harness target `cache_entry` of `cargo test` (a conversion cache entry's JSON, which must never stop a load or change its numbers) under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // An error is a fine answer; a panic, a hang or a blown allocation is what libFuzzer finds.
    let _ = boldcast_testkit::fuzz::targets::cache_entry(data);
});
