//! What the conformance suite does not exercise of [`CudaModel`]: its refusals (an optimizer
//! other than the core's Adam, moments of the wrong size, a step that does not follow the held
//! moments), each leaving the model unchanged, and that a second training step of the same
//! shapes takes every buffer from the pool's cache; and that its precision (bf16 autocast)
//! holds for its own calls only.

use boldcast_core::optim::{Moments, ParamMut};
use boldcast_core::{Adam, Model, OptimConfig, Optimizer, Temporal};
use boldcast_cpu::CpuModel;
use boldcast_cuda::CudaModel;
use boldcast_testkit::conformance::random_case;

/// A model with the CPU backend's initial weights on a random case with one layer and
/// attention, and its tokens.
fn model() -> (CudaModel, boldcast_core::Tokens<f32>) {
    let case =
        (0..).map(|i| random_case(7, i, &[Temporal::Mamba])).find(|c| c.model.n_layers == 1 && c.model.k_neighbors > 0);
    let case = case.expect("the stream has such a case");
    let cpu = CpuModel::<f32>::new(case.model.clone(), case.adjacency.clone(), 3).unwrap();
    let mut m = CudaModel::new(case.model.clone(), case.adjacency.clone()).unwrap();
    m.load_state(&cpu.state()).unwrap();
    (m, boldcast_fixtures::ar1_tokens(case.tokens, case.rho, 5))
}

/// Plain SGD: an optimizer the backend does not implement.
struct Sgd(u64);

impl Optimizer<f32> for Sgd {
    fn name(&self) -> &str {
        "sgd"
    }
    fn begin_step(&mut self) {
        self.0 += 1;
    }
    fn update(&mut self, p: ParamMut<'_, f32>, lr: f64) {
        p.value.iter_mut().zip(p.grad).for_each(|(w, g)| *w -= lr as f32 * g);
    }
    fn steps(&self) -> u64 {
        self.0
    }
}

#[test]
fn refusals_name_the_cause_and_change_nothing() {
    let (mut m, tokens) = model();
    m.loss_and_grads(&tokens).unwrap();
    let before = m.state();
    let err = m.apply_optimizer(&mut Sgd(0), 0.1).unwrap_err().to_string();
    assert!(err.contains("sgd"), "{err}");
    assert_eq!(m.state(), before);

    // A host Adam two steps in while the model holds no moments: refused.
    let mut adam = Adam::<f32>::new(OptimConfig::adamw(0.1, (0.9, 0.99))).unwrap();
    adam.restore(2, Vec::new());
    let err = m.apply_optimizer(&mut adam, 0.1).unwrap_err().to_string();
    assert!(err.contains("restore_optimizer_state"), "{err}");
    assert_eq!(m.state(), before);

    // Moments of the wrong size for the third tensor: refused by its name, the held ones kept.
    m.apply_optimizer(&mut Adam::new(OptimConfig::adamw(0.1, (0.9, 0.99))).unwrap(), 0.1).unwrap();
    let held = m.optimizer_state().unwrap();
    let mut bad = held.1.clone();
    bad[2] = Moments { m: vec![0.0; 1], v: vec![0.0; 1] };
    let err = m.restore_optimizer_state(5, &bad).unwrap_err().to_string();
    assert!(err.contains(&m.state()[2].name), "{err}");
    assert_eq!(m.optimizer_state().unwrap(), held);
    assert_eq!(held.0, 1);
    assert!(held.1.iter().all(|mo| !mo.m.is_empty()), "every tensor was updated");
}

#[test]
fn a_second_step_of_the_same_shapes_allocates_nothing() {
    let (mut m, tokens) = model();
    // The stores (parameters, gradients, moments) and the adjacency stay in the pool.
    let held = m.pool().in_use();
    let n: usize = m.state().iter().map(|t| t.data.len()).sum();
    assert!(held > 4 * 4 * n, "{held} bytes for {n} parameters");
    let first = m.loss_and_grads(&tokens).unwrap();
    let allocated = m.pool().stats().allocated;
    let second = m.loss_and_grads(&tokens).unwrap();
    assert_eq!(first.to_bits(), second.to_bits());
    assert_eq!(m.pool().stats().allocated, allocated);
    assert!(m.pool().stats().reused > 0);
    assert_eq!(m.pool().in_use(), held, "every step buffer went back to the pool");
}

#[test]
fn a_seed_starts_the_same_model_as_on_the_cpu_backend() {
    let case = random_case(7, 0, &[Temporal::Mamba, Temporal::Mamba2]);
    for seed in [0, 3] {
        let cpu = CpuModel::<f32>::new(case.model.clone(), case.adjacency.clone(), seed).unwrap();
        let cuda = CudaModel::seeded(case.model.clone(), case.adjacency.clone(), seed).unwrap();
        let (a, b) = (cpu.state(), cuda.state());
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!((&x.name, &x.shape), (&y.name, &y.shape));
            assert_eq!(x.data, y.data, "{}", x.name);
        }
        // Not all zero: the weights were drawn.
        assert!(b.iter().any(|t| t.name.ends_with("in_proj.weight") && t.data.iter().any(|&v| v != 0.0)));
    }
    let other = CudaModel::seeded(case.model.clone(), case.adjacency.clone(), 1).unwrap();
    let three = CudaModel::seeded(case.model.clone(), case.adjacency.clone(), 3).unwrap();
    assert_ne!(other.state(), three.state());
}

/// The precision is the model's, entered per call: f32 by default, bf16 changes the loss by
/// bf16's rounding (not f32's), and no call leaves the thread in the model's mode.
#[test]
fn the_precision_is_scoped_to_the_models_calls() {
    use boldcast_cuda::{autocast, Precision};
    let (mut m, tokens) = model();
    assert_eq!(m.precision(), Precision::F32);
    let f32_loss = m.loss(&tokens).unwrap();
    m.set_precision(Precision::Bf16);
    assert_eq!(m.precision(), Precision::Bf16);
    let bf16_loss = m.loss_and_grads(&tokens).unwrap();
    assert_eq!(autocast::current(), Precision::F32, "the model's scope ended with its call");
    let gap = (bf16_loss - f32_loss).abs() / f32_loss;
    assert!(gap > 1e-6 && gap < 5e-3, "bf16 loss {bf16_loss}, f32 {f32_loss}");
    // Inside a caller's bf16 scope an f32 model still computes in f32.
    m.set_precision(Precision::F32);
    let inside = autocast::with(Precision::Bf16, || m.loss(&tokens).unwrap());
    assert_eq!(inside.to_bits(), f32_loss.to_bits());
    assert_eq!(autocast::current(), Precision::F32);
}

/// Data-parallel training's all-reduce through the model's pooled flat buffer (on a device
/// the buffer NCCL sums in place): on two in-process ranks every rank ends with the mean of
/// the two ranks' gradients, the host path's result.
#[test]
fn the_all_reduce_through_the_pool_averages_the_ranks_gradients() {
    use boldcast_comm::threads::ThreadGroup;
    use boldcast_core::collective::Collective;
    use boldcast_core::collective::{all_reduce_grads, all_reduce_grads_on_host};
    let case = random_case(7, 1, &[Temporal::Mamba]);
    let tokens = |seed| boldcast_fixtures::ar1_tokens(case.tokens, case.rho, seed);
    let grads_of = |seed| {
        let mut m = CudaModel::seeded(case.model.clone(), case.adjacency.clone(), 3).unwrap();
        m.loss_and_grads(&tokens(seed)).unwrap();
        m.grads()
    };
    let (g0, g1) = (grads_of(10), grads_of(11));
    let run = |host: bool| {
        let ranks: Vec<_> = ThreadGroup::new(2)
            .into_iter()
            .map(|c| {
                let (cfg, adj) = (case.model.clone(), case.adjacency.clone());
                let t = tokens(10 + c.rank() as u64);
                std::thread::spawn(move || {
                    let mut m = CudaModel::seeded(cfg, adj, 3).unwrap();
                    m.loss_and_grads(&t).unwrap();
                    let mut scratch = Vec::new();
                    let before = m.pool().stats();
                    if host {
                        all_reduce_grads_on_host(&mut m, &c, &mut scratch).unwrap();
                    } else {
                        all_reduce_grads(&mut m, &c, &mut scratch).unwrap();
                    }
                    let after = m.pool().stats();
                    // Requests of the pool during the all-reduce: its one flat buffer, or none.
                    let took = (after.allocated + after.reused) - (before.allocated + before.reused);
                    assert_eq!((took, scratch.is_empty()), if host { (0, false) } else { (1, true) });
                    m.grads()
                })
            })
            .collect();
        ranks.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
    };
    let (pooled, host) = (run(false), run(true));
    for rank in &pooled {
        for ((g, a), b) in rank.iter().zip(&g0).zip(&g1) {
            let mean: Vec<f32> = a.data.iter().zip(&b.data).map(|(x, y)| (x + y) * 0.5).collect();
            for (v, w) in g.data.iter().zip(&mean) {
                assert!((v - w).abs() <= 1e-6 * (1.0 + w.abs()), "{}: {v} vs mean {w}", g.name);
            }
        }
    }
    assert_eq!(pooled, host, "the pooled buffer's all-reduce is the host path's");
    assert_ne!(g0, g1, "the ranks' batches differ");
}
