//! Data-parallel training with ranks as threads ([`ThreadGroup`]) equals one process on the
//! global batch: the same loss series (f32 reduction order apart) and the same weights, and
//! the ranks end bit-identical to each other. The same arithmetic runs under `mpirun` (see
//! `cli/tests/train_mpi.rs`); this test needs no MPI.

use boldcast_comm::threads::ThreadGroup;
use boldcast_core::collective::shard_range;
use boldcast_core::{
    Adam, Adjacency, Collective, Model, ModelConfig, OptimConfig, ScheduleConfig, TokenShape, Tokens, Trainer,
};
use boldcast_cpu::CpuModel;
use std::sync::Arc;

const STEPS: u64 = 8;
const BATCH: usize = 8;
const T: usize = 16;
const P: usize = 4;

fn config() -> ModelConfig {
    ModelConfig::builder()
        .temporal(boldcast_core::Temporal::Mamba)
        .d_in(1)
        .d_model(8)
        .n_layers(1)
        .d_state(4)
        .expand(2)
        .d_conv(4)
        .headdim(4)
        .chunk_size(8)
        .k_neighbors(2)
        .horizons(&[1, 3])
        .build()
        .unwrap()
}

fn batch(step: u64) -> Tokens<f32> {
    boldcast_fixtures::ar1_tokens(TokenShape::new(BATCH, T, P, 1), 0.9, 100 + step)
}

/// Windows `range` of a batch (the token layout is `(B, T, P, D)`, row-major).
fn slice(tokens: &Tokens<f32>, r: std::ops::Range<usize>) -> Tokens<f32> {
    let per = T * P;
    let data = tokens.data()[r.start * per..r.end * per].to_vec();
    Tokens::new(TokenShape::new(r.len(), T, P, 1), data).unwrap()
}

/// Trains `STEPS` steps as rank `c.rank()` of `c.size()`: the loss series and the weights.
fn train(c: Arc<dyn Collective>) -> (Vec<f64>, Vec<f32>) {
    let model = CpuModel::<f32>::new(config(), Some(Adjacency::ring(P, 2).unwrap()), 3).unwrap();
    let sched = ScheduleConfig::Cosine { lr: 3e-3, warmup_steps: 2, max_steps: STEPS, min_lr: 0.0 };
    let adam = Adam::<f32>::new(OptimConfig::adamw(0.05, (0.9, 0.95))).unwrap();
    // A low clipping threshold, so that clipping (on the averaged gradient) is exercised.
    let mut tr = Trainer::new(model, adam, sched, Vec::new(), Some(0.5)).with_collective(c.clone());
    for s in 0..STEPS {
        let shard = shard_range(BATCH, c.rank(), c.size()).unwrap();
        tr.step(&slice(&batch(s), shard)).unwrap();
    }
    let losses = tr.logger.iter().map(|r| r.loss).collect();
    let clipped = tr.logger.iter().filter(|r| r.grad_norm > 0.5).count();
    assert!(clipped > 0, "no step was clipped: the test would not check clipping");
    (losses, tr.model.state().into_iter().flat_map(|t| t.data).collect())
}

#[test]
fn two_thread_ranks_equal_one_process_on_the_global_batch() {
    let (one_loss, one_w) = train(Arc::new(boldcast_core::SingleProcess));
    let ranks = ThreadGroup::new(2);
    let results: Vec<(Vec<f64>, Vec<f32>)> = std::thread::scope(|s| {
        let hs: Vec<_> =
            ranks.into_iter().map(|g| s.spawn(move || train(Arc::new(g) as Arc<dyn Collective>))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(results[0], results[1], "the two ranks ended differently");
    let (loss, w) = &results[0];
    assert_eq!(loss.len(), STEPS as usize);
    for (s, (a, b)) in loss.iter().zip(&one_loss).enumerate() {
        let rel = (a - b).abs() / b.abs();
        assert!(rel < 1e-5, "step {s}: loss {a} with 2 ranks, {b} with one process (relative {rel:e})");
    }
    // The loss falls, so the comparison is of a real training run.
    assert!(loss[STEPS as usize - 1] < loss[0], "{loss:?}");
    let worst = w.iter().zip(&one_w).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(worst < 1e-4, "weights differ by up to {worst:e}");
    assert_ne!(
        w,
        &CpuModel::<f32>::new(config(), Some(Adjacency::ring(P, 2).unwrap()), 3)
            .unwrap()
            .state()
            .into_iter()
            .flat_map(|t| t.data)
            .collect::<Vec<_>>()
    );
}

#[test]
fn an_uneven_split_of_the_loss_would_not_be_the_global_mean() {
    // The shards are equal, so the mean of the shard means is the global mean; check it on
    // the loss of the model itself (f64 arithmetic on f32 predictions).
    let model = CpuModel::<f32>::new(config(), Some(Adjacency::ring(P, 2).unwrap()), 3).unwrap();
    let b = batch(0);
    let whole = model.loss(&b).unwrap();
    let halves = [slice(&b, 0..4), slice(&b, 4..8)].map(|t| model.loss(&t).unwrap());
    let mean = (halves[0] + halves[1]) / 2.0;
    assert!((mean - whole).abs() <= 1e-6 * whole, "{mean} vs {whole}");
    // An uneven split (3 + 5 windows) weighted equally is not the global mean.
    let uneven = [slice(&b, 0..3), slice(&b, 3..8)].map(|t| model.loss(&t).unwrap());
    assert!(((uneven[0] + uneven[1]) / 2.0 - whole).abs() > 1e-4 * whole);
}
