//! The shim itself: its barrier and shared memory behave as a GPU's, and it refuses what a
//! GPU refuses. Exact comparisons throughout (integers held exactly in f32).

use boldcast_cuda::launch::{Dim3, Launch};
use boldcast_cuda::shim::{self, raw};
use std::os::unix::process::ExitStatusExt;
use std::process::Command;

/// Every thread reads its neighbour's shared slot after `__syncthreads()` while one thread
/// (first, middle, last) sleeps before writing its own: without a real barrier the neighbour
/// of the sleeper reads the slot before it is written (the previous block's value, or zero),
/// so this fails if threads do not wait. Several blocks check that each block sees only its
/// own writes through the one static shared array.
#[test]
fn the_barrier_makes_every_write_visible() {
    for (block, slow) in [(32u32, 0u32), (100, 57), (1024, 1023)] {
        let grid = 3u32;
        let mut out = vec![-1.0f32; (grid * block) as usize];
        shim::selftest_barrier_probe(Launch { grid: Dim3::x(grid), block: Dim3::x(block) }, slow, &mut out).unwrap();
        for b in 0..grid {
            for t in 0..block {
                let want = (b * 10_000 + (t + 1) % block) as f32;
                assert_eq!(out[(b * block + t) as usize], want, "block {b} thread {t} of {block} (slow {slow})");
            }
        }
    }
}

/// A shared-memory tree sum per block of integers (exact in f32 in any order), with the last
/// thread sleeping: a level that did not wait would drop that thread's contribution.
#[test]
fn a_block_tree_sum_is_exact() {
    for block in [1u32, 2, 64, 512] {
        let grid = 5u32;
        let x: Vec<f32> = (0..grid * block).map(|i| ((i * 7919) % 1000) as f32).collect();
        let mut out = vec![0.0f32; grid as usize];
        shim::selftest_tree_sum(Launch { grid: Dim3::x(grid), block: Dim3::x(block) }, &x, &mut out).unwrap();
        for b in 0..grid as usize {
            let want: f32 = x[b * block as usize..][..block as usize].iter().sum();
            assert_eq!(out[b], want, "block {b} of {block} threads");
        }
    }
}

/// A read of another thread's shared slot in the same phase (no barrier between) sees the
/// write in odd blocks (threads run in decreasing index) and misses it in even ones, so a
/// kernel with such a race gives block-dependent values instead of a lucky match. Thread
/// B - 1 reads thread 0's slot, the other way round.
#[test]
fn a_race_in_shared_memory_shows_in_alternate_blocks() {
    for block in [2u32, 32, 100] {
        let grid = 4u32;
        let mut out = vec![-1.0f32; (grid * block) as usize];
        shim::selftest_race(Launch { grid: Dim3::x(grid), block: Dim3::x(block) }, &mut out).unwrap();
        for b in 0..grid {
            for t in 0..block {
                let n = (t + 1) % block;
                let fresh = (b * 10_000 + n + 1) as f32;
                // The neighbour runs first: in odd blocks for t < B - 1, in even ones for B - 1.
                let sees_write = (b % 2 == 1) == (t + 1 < block);
                let got = out[(b * block + t) as usize];
                if sees_write {
                    assert_eq!(got, fresh, "block {b} thread {t} of {block}");
                } else if b == 0 {
                    // What an earlier launch left in the static array.
                    assert_ne!(got, fresh, "block {b} thread {t} of {block}");
                } else {
                    assert_eq!(got, ((b - 1) * 10_000 + n + 1) as f32, "block {b} thread {t} of {block}");
                }
            }
        }
    }
}

const CHILD: &str = "BOLDCAST_SHIM_CHILD";

/// Runs the ignored test `name` of this module in a child process; returns its signal and
/// standard error. The children abort, which a test in this process could not survive.
fn child(name: &str) -> (Option<i32>, String) {
    let exe = std::env::current_exe().expect("test binary");
    let path = format!("{}::{name}", module_path!().split_once("::").map_or("", |(_, m)| m));
    let out = Command::new(exe)
        .args(["--exact", path.as_str(), "--ignored", "--nocapture", "--test-threads", "1"])
        .env(CHILD, "1")
        .output()
        .expect("run the test binary");
    (out.status.signal(), String::from_utf8_lossy(&out.stderr).into_owned())
}

const SIGABRT: i32 = 6;

#[test]
fn a_block_over_1024_threads_aborts_with_a_message() {
    let (signal, stderr) = child("child_launches_1025_threads");
    assert_eq!(signal, Some(SIGABRT), "{stderr}");
    assert!(stderr.contains("act_silu_fwd: refused launch: more than 1024 threads per block (1025, 1, 1)"), "{stderr}");
}

#[test]
fn threads_at_different_barriers_abort_with_a_message() {
    let (signal, stderr) = child("child_diverges_at_a_barrier");
    assert_eq!(signal, Some(SIGABRT), "{stderr}");
    assert!(stderr.contains("selftest_divergent: threads of block (0, 0, 0) met at different barriers"), "{stderr}");
}

#[test]
#[ignore = "a child of a_block_over_1024_threads_aborts_with_a_message"]
fn child_launches_1025_threads() {
    if std::env::var_os(CHILD).is_some() {
        let (x, mut y) = ([1.0f32; 4], [0.0f32; 4]);
        // SAFETY: the buffers hold n = 4 elements; the launch itself is what is refused.
        unsafe { raw::act_silu_fwd(Dim3::x(1), Dim3::x(1025), &x, &mut y, 4) };
    }
}

#[test]
#[ignore = "a child of threads_at_different_barriers_abort_with_a_message"]
fn child_diverges_at_a_barrier() {
    if std::env::var_os(CHILD).is_some() {
        let mut out = [0.0f32; 8];
        // SAFETY: out holds the block's 8 elements.
        unsafe { raw::selftest_divergent(Dim3::x(1), Dim3::x(8), &mut out) };
    }
}
