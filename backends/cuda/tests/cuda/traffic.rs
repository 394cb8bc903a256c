//! The device-resident step, proved in shim mode by the crate's counters
//! ([`boldcast_cuda::exec::Traffic`], the pool's allocations): every training step after the
//! first stages no host buffer, waits for the device at most twice (the loss and the gradient
//! norm), uploads only its tokens (and a forecast offset) and allocates nothing new, at two
//! shapes for both temporal mixers, with and without attention, in f32 and bf16.

use boldcast_core::{Adam, Adjacency, ModelConfig, OptimConfig, ScheduleConfig, Temporal, TokenShape, Trainer};
use boldcast_core::{ForecastShape, Forecasts, Model};
use boldcast_cuda::exec::{traffic, Traffic};
use boldcast_cuda::{CudaModel, Precision};

/// One of the two shapes: a model and its batch.
struct Shape {
    cfg: ModelConfig,
    adjacency: Option<Adjacency>,
    tokens: TokenShape,
}

fn shapes(temporal: Temporal) -> [Shape; 2] {
    let base = || ModelConfig::builder().temporal(temporal).d_in(1).horizons(&[1, 3]).headdim(8);
    let with_attention = base().d_model(8).n_layers(1).d_state(4).expand(2).k_neighbors(3).build().unwrap();
    let deeper = base().d_model(16).n_layers(2).d_state(8).expand(2).k_neighbors(0).build().unwrap();
    [
        Shape {
            cfg: with_attention,
            adjacency: Some(Adjacency::ring(6, 3).unwrap()),
            tokens: TokenShape::new(2, 12, 6, 1),
        },
        Shape { cfg: deeper, adjacency: None, tokens: TokenShape::new(3, 20, 4, 1) },
    ]
}

/// The counts of each of `steps` training steps (clipping on, so the scaling runs too), and
/// the pool's allocations and bytes in use after each.
fn steps(model: CudaModel, tokens: &boldcast_core::Tokens<f32>, steps: usize) -> Vec<(Traffic, usize, usize)> {
    let opt = Adam::<f32>::new(OptimConfig::adamw(0.01, (0.9, 0.999))).unwrap();
    let mut t = Trainer::new(model, opt, ScheduleConfig::Constant { lr: 1e-3 }, (), Some(1e-3));
    (0..steps)
        .map(|_| {
            let before = traffic();
            let rec = t.step(tokens).unwrap();
            assert!(rec.loss.is_finite() && rec.grad_norm > 1e-3, "{rec:?}: the clipping ran");
            let s = t.model.pool().stats();
            (traffic().since(before), s.allocated, s.in_use)
        })
        .collect()
}

#[test]
fn a_training_step_after_the_first_stays_on_the_device() {
    for temporal in [Temporal::Mamba, Temporal::Mamba2] {
        for (i, s) in shapes(temporal).into_iter().enumerate() {
            for precision in [Precision::F32, Precision::Bf16] {
                let what = format!("{temporal:?} shape {i} {precision:?}");
                let m = CudaModel::seeded(s.cfg.clone(), s.adjacency.clone(), 7).unwrap().with_precision(precision);
                let held = m.pool().in_use();
                let tokens = boldcast_fixtures::ar1_tokens(s.tokens, 0.8, 3);
                let counts = steps(m, &tokens, 3);
                for (k, &(t, allocated, in_use)) in counts.iter().enumerate().skip(1) {
                    assert_eq!(t.staged_bytes, 0, "{what}, step {k}: {t:?}");
                    assert_eq!(t.staged, 0, "{what}, step {k}");
                    assert!(t.syncs <= 2, "{what}, step {k}: {t:?}");
                    assert_eq!(t.uploaded_bytes, 4 * tokens.data().len() as u64, "{what}, step {k}");
                    assert_eq!(allocated, counts[0].1, "{what}, step {k}: new pool allocations");
                    // Only the stores and the adjacency stay taken between steps.
                    assert_eq!(in_use, held, "{what}, step {k}");
                    assert!(t.launches > 10 && t.products > 10, "{what}: {t:?}");
                }
                // The two reads a step must make.
                assert_eq!(counts[1].0.syncs, 2, "{what}");
            }
        }
    }
}

/// The host-staging fallback is counted: a launch given a plain host buffer stages it.
#[test]
fn a_host_buffer_given_to_a_launch_is_counted_as_staged() {
    let (x, mut y) = (vec![1.0f32; 10], vec![0.0f32; 10]);
    let before = traffic();
    boldcast_cuda::ops::act::silu(&x, &mut y).unwrap();
    let t = traffic().since(before);
    assert_eq!((t.launches, t.staged, t.staged_bytes), (1, 2, 80));
    let pool = boldcast_cuda::pool::Pool::new();
    let (px, mut py) = (pool.upload(&x), pool.zeros(10));
    let before = traffic();
    boldcast_cuda::ops::act::silu(&px, &mut py).unwrap();
    let t = traffic().since(before);
    assert_eq!((t.launches, t.staged, t.staged_bytes), (1, 0, 0));
    assert_eq!(&py[..], &y[..]);
}

/// A step with a forecast offset (the linear path's) uploads the offset beside the tokens and
/// still stages nothing after the first.
#[test]
fn an_offset_step_uploads_the_offset_and_stages_nothing() {
    let s = shapes(Temporal::Mamba).into_iter().next().unwrap();
    let mut m = CudaModel::seeded(s.cfg.clone(), s.adjacency.clone(), 7).unwrap();
    let tokens = boldcast_fixtures::ar1_tokens(s.tokens, 0.8, 3);
    let t = s.tokens;
    let shape = ForecastShape::new(t.batch, t.time, t.parcels, s.cfg.n_horizons(), t.d_in);
    let n = t.batch * t.time * t.parcels * s.cfg.n_horizons() * t.d_in;
    let offset = Forecasts::new(shape, (0..n).map(|i| (i as f32 * 0.1).sin()).collect()).unwrap();
    m.loss_and_grads_offset(&tokens, &offset).unwrap();
    let before = traffic();
    let loss = m.loss_and_grads_offset(&tokens, &offset).unwrap();
    let c = traffic().since(before);
    assert_eq!((c.staged, c.syncs), (0, 1), "{c:?}");
    assert_eq!(c.uploaded_bytes, 4 * (tokens.data().len() + offset.data().len()) as u64);
    // The offset reached the loss: without it the loss differs.
    assert_ne!(loss.to_bits(), m.loss_and_grads(&tokens).unwrap().to_bits());
}

/// What `examples/gpu_check.rs` reports on a GPU, run here in the shim: the same function
/// (`timed::timed_steps`) gives, per timed step, no staged byte, two synchronizations (the
/// loss and the gradient norm) and no new allocation, in both precisions.
#[test]
fn the_gpu_checks_timed_steps_report_a_device_resident_step() {
    use boldcast_cuda::timed::timed_steps;
    let s = shapes(Temporal::Mamba2).into_iter().next().unwrap();
    let tokens = boldcast_fixtures::ar1_tokens(s.tokens, 0.8, 3);
    for precision in [Precision::F32, Precision::Bf16] {
        let mut m = CudaModel::seeded(s.cfg.clone(), s.adjacency.clone(), 7).unwrap().with_precision(precision);
        let far = std::time::Instant::now() + std::time::Duration::from_secs(3600);
        let r = timed_steps(&mut m, &tokens, 3, far);
        assert!(r.error.is_none() && r.note.is_none(), "{r:?}");
        assert_eq!(r.step_s.len(), 3);
        assert!(r.warmup_s.is_some() && r.median_s().is_some());
        let t = r.traffic;
        assert_eq!((t.staged, t.staged_bytes, t.syncs, r.allocated), (0, 0, 6, 0), "{precision:?}: {t:?}");
        assert_eq!(t.uploaded_bytes, 3 * 4 * tokens.data().len() as u64);
        assert!(r.last.is_some_and(|rec| rec.loss.is_finite()));
    }
    // A deadline already past: the warm-up runs, no timed step does, and that is an error.
    let mut m = CudaModel::seeded(s.cfg.clone(), s.adjacency.clone(), 7).unwrap();
    let r = timed_steps(&mut m, &tokens, 3, std::time::Instant::now());
    assert!(r.warmup_s.is_some() && r.step_s.is_empty());
    assert!(r.error.as_deref().is_some_and(|e| e.contains("0 of 3")), "{r:?}");
}
