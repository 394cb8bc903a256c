//! Build-time proof that `boldcast-core` stays `no_std`.
//!
//! This crate is `#![no_std]` and defines its own `#[panic_handler]` and global allocator.
//! If anything in `boldcast-core`'s no-default-features dependency graph links `std`, the
//! build fails with a duplicate `panic_impl` lang item. `.ci/run` builds it.
#![no_std]

extern crate alloc;

use alloc::vec;
use boldcast_core::floor::ar1_floor;
use boldcast_core::forecast::{build_forecast_targets, forecasting_loss};
use boldcast_core::optim::{Adam, OptimConfig, Optimizer, ParamMut};
use boldcast_core::schedule::{Schedule, ScheduleConfig};
use boldcast_core::{ModelConfig, TokenShape, Tokens};
use core::alloc::{GlobalAlloc, Layout};
use core::panic::PanicInfo;

/// An allocator that never allocates: this crate is only built, never run.
struct NoAlloc;

unsafe impl GlobalAlloc for NoAlloc {
    unsafe fn alloc(&self, _: Layout) -> *mut u8 {
        core::ptr::null_mut()
    }
    unsafe fn dealloc(&self, _: *mut u8, _: Layout) {}
}

#[global_allocator]
static ALLOC: NoAlloc = NoAlloc;

#[panic_handler]
fn panic(_: &PanicInfo) -> ! {
    loop {}
}

/// Touches each part of the core so that all of it is compiled and linked into this crate.
pub fn exercise() -> f64 {
    let cfg = ModelConfig::boldcast_demo();
    let tokens = Tokens::<f32>::zeros(TokenShape::new(1, 8, 2, 1));
    let target = build_forecast_targets::<f32, usize, usize, usize, usize, usize>(&tokens, &cfg.horizons);
    let mut loss = 0.0;
    if let Ok(t) = target {
        loss = forecasting_loss(&t, &t).unwrap_or(0.0);
    }
    let mut opt = Adam::<f32>::new(OptimConfig::adamw(0.05, (0.9, 0.95))).ok();
    if let Some(opt) = opt.as_mut() {
        let mut w = vec![1.0f32; 4];
        let g = vec![0.5f32; 4];
        opt.begin_step();
        opt.update(ParamMut { index: 0, name: "head.weight", shape: &[2, 2], value: &mut w, grad: &g }, 1e-3);
    }
    let lr = ScheduleConfig::Cosine { lr: 1e-3, warmup_steps: 10, max_steps: 100, min_lr: 0.0 }.lr(5);
    loss + lr + ar1_floor(0.9, &cfg.horizons, 1).unwrap_or(0.0) + cfg.n_params() as f64
}
