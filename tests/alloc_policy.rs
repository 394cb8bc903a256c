//! `boldcast::cpu::alloc::retain_freed_memory`: after it, a step's worth of large buffers freed and
//! allocated again costs no page faults (with glibc's defaults, the freed heap top is trimmed
//! and every page faults again). With `bc-cli`'s global allocator, `CacheAligned`, so the
//! two are checked together, and every buffer is checked to start on a cache line. Its own test binary, since the policy is process-wide and the
//! page-fault count is the process's. Without the test harness (`harness = false`), so that
//! the buffers come from the main thread's heap, as `bc-cli`'s training step's do.

use std::hint::black_box;

#[global_allocator]
static ALLOC: boldcast::cpu::alloc::CacheAligned = boldcast::cpu::alloc::CacheAligned;

/// Minor page faults of this process so far (`getrusage`).
fn minor_faults() -> i64 {
    // SAFETY: `getrusage` writes one `rusage` it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut u), 0);
        u.ru_minflt
    }
}

/// Six 16 MiB buffers alive at once (like a step's activations), every page written, then
/// all freed.
fn one_step() {
    let bufs: Vec<Vec<f32>> = (0..6)
        .map(|k| {
            let mut v = vec![0.0f32; 4 << 20];
            assert_eq!(v.as_ptr() as usize % 64, 0, "a buffer off the cache line");
            for i in (0..v.len()).step_by(1024) {
                v[i] = k as f32;
            }
            v
        })
        .collect();
    black_box(&bufs);
}

fn main() {
    assert!(boldcast::cpu::alloc::retain_freed_memory(), "glibc on Linux: the policy applies");
    one_step();
    let before = minor_faults();
    for _ in 0..4 {
        one_step();
    }
    let faults = minor_faults() - before;
    // Without the policy: 4 steps x 96 MiB / 4 KiB = 98,304 faults.
    assert!(faults < 2_000, "{faults} minor page faults in 4 steps after the first");
    println!("alloc_policy: {faults} minor page faults in 4 steps after the first (98,304 pages written): ok");
}
