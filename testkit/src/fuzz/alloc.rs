//! [`CountingAlloc`]: the global allocator of a fuzz harness, which counts the bytes live and
//! their peak during a case, so the checker can hold each case to its allocation bound.
//!
//! A harness installs it once:
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOC: boldcast_testkit::fuzz::CountingAlloc = boldcast_testkit::fuzz::CountingAlloc;
//! # fn main() {}
//! ```
//!
//! During a case, an allocation that would take the case's live bytes beyond its hard cap
//! (the bound plus [`HARD_CAP_SLACK`]) is refused: the allocator writes the target and case
//! to standard error and returns null, and the process stops with Rust's "memory allocation
//! failed" (a parser asking for a terabyte must not get the machine's memory first). Above
//! the bound and below the cap, the allocation succeeds and the checker reports the case.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

/// Bytes beyond a case's bound that are still allocated (and reported); beyond them the
/// allocation is refused.
pub const HARD_CAP_SLACK: usize = 1 << 30;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// The live bytes above which an allocation is refused (`usize::MAX` outside a case).
static CAP: AtomicUsize = AtomicUsize::new(usize::MAX);
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The case running, for the message of a refused allocation.
pub(crate) static CURRENT: Mutex<String> = Mutex::new(String::new());

/// The counting allocator (the system allocator underneath).
pub struct CountingAlloc;

impl CountingAlloc {
    fn grow(&self, by: usize) -> bool {
        let live = LIVE.fetch_add(by, Relaxed).saturating_add(by);
        if live > CAP.load(Relaxed) {
            LIVE.fetch_sub(by, Relaxed);
            refused(by);
            return false;
        }
        PEAK.fetch_max(live, Relaxed);
        true
    }
}

// SAFETY: every method forwards to `System` with the same layout and pointer; the counters
// are atomics and nothing here allocates (the refusal message is written from a stack buffer).
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        INSTALLED.store(true, Relaxed);
        if !self.grow(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        INSTALLED.store(true, Relaxed);
        if !self.grow(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        // SAFETY: `ptr` was allocated by `System` with `layout` (through this allocator).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size > old && !self.grow(new_size - old) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's pointer, layout and size, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            if new_size > old {
                LIVE.fetch_sub(new_size - old, Relaxed);
            }
        } else if new_size < old {
            LIVE.fetch_sub(old - new_size, Relaxed);
        }
        p
    }
}

/// Writes the refusal to standard error without allocating.
fn refused(size: usize) {
    let mut buf = [0u8; 20];
    let mut err = std::io::stderr();
    let _ = err.write_all(b"fuzz: refused an allocation of ");
    let _ = err.write_all(decimal(size, &mut buf));
    let _ = err.write_all(b" bytes, beyond the hard cap of the case ");
    if let Ok(case) = CURRENT.try_lock() {
        let _ = err.write_all(case.as_bytes());
    }
    let _ = err.write_all(b"\n");
}

fn decimal(mut n: usize, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// Whether [`CountingAlloc`] is the global allocator (it has served an allocation).
pub fn installed() -> bool {
    INSTALLED.load(Relaxed)
}

/// Starts counting a case: the peak is reset to the bytes live now, and allocations beyond
/// `cap` bytes above them are refused. Returns the bytes live.
pub(crate) fn begin(cap: usize) -> usize {
    let live = LIVE.load(Relaxed);
    PEAK.store(live, Relaxed);
    CAP.store(live.saturating_add(cap), Relaxed);
    live
}

/// Ends the case begun at `base` live bytes: the peak bytes above `base` during it.
pub(crate) fn end(base: usize) -> usize {
    CAP.store(usize::MAX, Relaxed);
    PEAK.load(Relaxed).saturating_sub(base)
}

/// Lifts the cap (the panic hook runs inside a case and allocates its report).
pub(crate) fn lift_cap() {
    CAP.store(usize::MAX, Relaxed);
}
