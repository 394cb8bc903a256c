//! The two backends against each other in f64: the tape gradients of this crate check the
//! hand-written gradients of `boldcast-cpu` (and the other way round) far below the golden
//! files' f32 tolerances, on a model with every block (two layers, dt_rank 2, kNN attention,
//! d_in 2). Weights move between the two through `state` / `load_state`, the checkpoint path.

use boldcast_core::model::NamedTensor;
use boldcast_core::optim::{Adam, OptimConfig};
use boldcast_core::{Adjacency, Model, ModelConfig, TokenShape, Tokens};
use boldcast_cpu::CpuModel;
use boldcast_dfdx::{cpu_device, Cpu, DfdxModel};

fn cfg() -> ModelConfig {
    ModelConfig {
        d_in: 2,
        d_model: 20,
        n_layers: 2,
        d_state: 5,
        expand: 2,
        d_conv: 4,
        k_neighbors: 3,
        horizons: vec![1, 3],
        ..ModelConfig::boldcast_demo()
    }
}

fn tokens() -> Tokens<f64> {
    let (b, t, p, d) = (2, 12, 6, 2);
    let data = (0..b * t * p * d).map(|i| ((i as f64) * 0.71).sin() * 1.3 + ((i % 5) as f64 - 2.0) * 0.2).collect();
    Tokens::new(TokenShape::new(b, t, p, d), data).unwrap()
}

fn pair() -> (CpuModel<f64>, DfdxModel<f64, Cpu>) {
    let adj = Adjacency::ring(6, 3).unwrap();
    let cpu = CpuModel::<f64>::new(cfg(), Some(adj.clone()), 17).unwrap();
    let mut dfdx = DfdxModel::<f64, _>::new(cfg(), Some(adj), 99, cpu_device()).unwrap();
    dfdx.load_state(&cpu.state()).unwrap();
    (cpu, dfdx)
}

fn assert_close(what: &str, a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= 1e-10 + 1e-8 * y.abs(), "{what}[{i}]: dfdx {x:e}, cpu {y:e}");
    }
}

fn assert_states_close(what: &str, a: &[NamedTensor<f64>], b: &[NamedTensor<f64>]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!((&x.name, &x.shape), (&y.name, &y.shape));
        assert_close(&format!("{what} {}", x.name), &x.data, &y.data);
    }
}

#[test]
fn forward_loss_and_every_gradient_agree() {
    let (mut cpu, mut dfdx) = pair();
    let x = tokens();
    assert_close("pred", dfdx.forward(&x).unwrap().data(), cpu.forward(&x).unwrap().data());
    assert_close("embed", dfdx.embed(&x).unwrap().data(), cpu.embed(&x).unwrap().data());
    let (ld, lc) = (dfdx.loss_and_grads(&x).unwrap(), cpu.loss_and_grads(&x).unwrap());
    assert_close("loss", &[ld], &[lc]);
    assert_states_close("grad", &dfdx.grads(), &cpu.grads());
    assert_close("grad norm^2", &[dfdx.grad_sq_norm()], &[cpu.grad_sq_norm()]);
}

#[test]
fn training_steps_agree_and_checkpoints_cross_over() {
    let (mut cpu, mut dfdx) = pair();
    let x = tokens();
    let ocfg = OptimConfig::adamw(0.05, (0.9, 0.95));
    let (mut oc, mut od) = (Adam::<f64>::new(ocfg.clone()).unwrap(), Adam::<f64>::new(ocfg).unwrap());
    for s in 0..3 {
        let (lc, ld) = (cpu.loss_and_grads(&x).unwrap(), dfdx.loss_and_grads(&x).unwrap());
        assert_close(&format!("loss at step {s}"), &[ld], &[lc]);
        cpu.scale_grads(0.5);
        dfdx.scale_grads(0.5);
        cpu.apply_optimizer(&mut oc, 1e-2).unwrap();
        dfdx.apply_optimizer(&mut od, 1e-2).unwrap();
        assert_states_close(&format!("params after step {s}"), &dfdx.state(), &cpu.state());
    }
    // A checkpoint written by the dfdx model loads into the CPU model, and back.
    let mut fresh_cpu = CpuModel::<f64>::new(cfg(), Some(Adjacency::ring(6, 3).unwrap()), 1).unwrap();
    fresh_cpu.load_state(&dfdx.state()).unwrap();
    assert_close("pred after crossing", fresh_cpu.forward(&x).unwrap().data(), dfdx.forward(&x).unwrap().data());
    let mut fresh_dfdx =
        DfdxModel::<f64, _>::new(cfg(), Some(Adjacency::ring(6, 3).unwrap()), 2, cpu_device()).unwrap();
    fresh_dfdx.load_state(&cpu.state()).unwrap();
    assert_close("pred after crossing back", fresh_dfdx.forward(&x).unwrap().data(), cpu.forward(&x).unwrap().data());
}
