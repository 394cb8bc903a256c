//! Timed training steps of a [`CudaModel`] with the counters that say whether the step stayed
//! on the device: per timed step the [`Traffic`] (staged host bytes, synchronizations,
//! uploads, launches, products) and the pool's new allocations. `examples/gpu_check.rs`
//! reports these on a GPU; the shim tests run the same function, so the numbers a GPU run
//! prints are the ones the tests hold to 0 staged bytes, at most 2 synchronizations and no
//! allocation.

use crate::exec::{traffic, Traffic};
use crate::CudaModel;
use boldcast_core::{Adam, OptimConfig, ScheduleConfig, StepRecord, Tokens, Trainer};
use std::time::{Duration, Instant};

/// What [`timed_steps`] measured.
#[derive(Clone, Debug, Default)]
pub struct TimedSteps {
    /// The warm-up step's seconds (the first step: it allocates the pool's buffers).
    pub warmup_s: Option<f64>,
    /// Each timed step's seconds, its queued work waited for.
    pub step_s: Vec<f64>,
    /// The last step's record.
    pub last: Option<StepRecord>,
    /// The counters summed over the timed steps (the final wait of each left out).
    pub traffic: Traffic,
    /// The pool's allocations over the timed steps.
    pub allocated: usize,
    /// The first error, which ended the steps.
    pub error: Option<String>,
    /// Why fewer steps ran than asked.
    pub note: Option<String>,
}

impl TimedSteps {
    /// The median timed step, if any ran.
    pub fn median_s(&self) -> Option<f64> {
        let mut t = self.step_s.clone();
        t.sort_by(f64::total_cmp);
        t.get(t.len() / 2).copied()
    }
}

/// One warm-up step then up to `steps` timed ones of AdamW (weight decay 0.05, betas 0.9 and
/// 0.95, learning rate 3e-4, clipping at 1.0) on `tokens`, each started only when the last
/// step's time still fits before `deadline` (no timed step at all is an error, fewer a note).
/// Each step ends with one synchronization outside the counts, so its time covers the device.
pub fn timed_steps(m: &mut CudaModel, tokens: &Tokens<f32>, steps: usize, deadline: Instant) -> TimedSteps {
    let opt = match Adam::<f32>::new(OptimConfig::adamw(0.05, (0.9, 0.95))) {
        Ok(o) => o,
        Err(e) => return TimedSteps { error: Some(e.to_string()), ..TimedSteps::default() },
    };
    let mut tr = Trainer::new(m, opt, ScheduleConfig::Constant { lr: 3e-4 }, (), Some(1.0));
    let mut out = TimedSteps::default();
    let mut allocated = tr.model.pool().stats().allocated;
    for i in 0..=steps {
        let last = out.step_s.last().copied().or(out.warmup_s).unwrap_or(0.0);
        if i > 0 && Instant::now() + Duration::from_secs_f64(last) > deadline {
            let why = format!("stopped after {} of {steps} timed step(s): out of time", i - 1);
            match i {
                1 => out.error = Some(why),
                _ => out.note = Some(why),
            }
            break;
        }
        let (t0, before) = (Instant::now(), traffic());
        let step = tr.step(tokens).map_err(|e| e.to_string());
        let counted = traffic().since(before);
        let waited = step.and_then(|rec| tr.model.wait().map(|()| rec).map_err(|e| e.to_string()));
        let dt = t0.elapsed().as_secs_f64();
        let rec = match waited {
            Ok(rec) => rec,
            Err(e) => {
                out.error = Some(format!("{} step: {e}", if i == 0 { "warm-up" } else { "timed" }));
                break;
            }
        };
        out.last = Some(rec);
        let now = tr.model.pool().stats().allocated;
        if i == 0 {
            out.warmup_s = Some(dt);
        } else {
            out.step_s.push(dt);
            out.traffic = out.traffic.plus(counted);
            out.allocated += now - allocated;
        }
        allocated = now;
    }
    out
}
