//! Tape gradients against central finite differences, in f64 on the Cpu device, for entries
//! of every parameter tensor of a small model with every block (two layers, kNN attention,
//! d_in 2, three horizons), with either mixer (Mamba-2: four heads, 9 tokens in chunks of 4).

use boldcast_core::model::NamedTensor;
use boldcast_core::{Adjacency, Model, ModelConfig, Temporal, TokenShape, Tokens};
use boldcast_dfdx::{cpu_device, Cpu, DfdxModel};
use boldcast_testkit::fd;

fn small(temporal: Temporal) -> (DfdxModel<f64, Cpu>, Tokens<f64>) {
    let cfg = ModelConfig::builder()
        .temporal(temporal)
        .d_in(2)
        .d_model(8)
        .n_layers(2)
        .d_state(3)
        .expand(2)
        .d_conv(3)
        .k_neighbors(3)
        .horizons(&[1, 2, 4])
        // Mamba-2 only: Di = 16 in four heads of 4; 9 tokens in chunks 0..4, 4..8, 8..9.
        .headdim(4)
        .chunk_size(4)
        .build()
        .unwrap();
    let model = DfdxModel::new(cfg, Some(Adjacency::ring(5, 3).unwrap()), 11, cpu_device()).unwrap();
    let (b, t, p, d) = (2, 9, 5, 2);
    let data = (0..b * t * p * d).map(|i| ((i as f64) * 0.37).sin() + 0.1 * ((i * i) as f64 * 0.013).cos()).collect();
    (model, Tokens::new(TokenShape::new(b, t, p, d), data).unwrap())
}

fn with_entry(state: &[NamedTensor<f64>], name: &str, i: usize, delta: f64) -> Vec<NamedTensor<f64>> {
    let mut s = state.to_vec();
    let t = s.iter_mut().find(|t| t.name == name).unwrap();
    t.data[i] += delta;
    s
}

fn every_parameter_matches_finite_differences(temporal: Temporal) {
    let (mut m, tokens) = small(temporal);
    m.loss_and_grads(&tokens).unwrap();
    let grads = m.grads();
    let state = m.state();
    let h = 1e-5;
    let mut worst = 0.0f64;
    let mut checked = 0;
    for (g, p) in grads.iter().zip(&state) {
        assert_eq!(g.name, p.name);
        let n = p.data.len();
        // The first, the last, and one entry in between.
        let mut picks = vec![0, n - 1, (n * 7 / 13).min(n - 1)];
        picks.dedup();
        for &i in &picks {
            let fd = fd::along(h, |d| {
                m.load_state(&with_entry(&state, &p.name, i, d)).unwrap();
                m.loss(&tokens).unwrap()
            });
            let tape = g.data[i];
            let err = (fd - tape).abs() / (1e-8 + 1e-5 * fd.abs().max(tape.abs()));
            assert!(err <= 1.0, "{}[{i}]: finite difference {fd:e}, tape {tape:e}", p.name);
            worst = worst.max(err);
            checked += 1;
        }
    }
    m.load_state(&state).unwrap();
    eprintln!("{temporal:?}: {checked} entries checked, worst |fd - tape| / (1e-8 + 1e-5 |g|) = {worst:.3}");
    assert!(checked > 60);
}

#[test]
fn mamba1_every_parameter_matches_finite_differences() {
    every_parameter_matches_finite_differences(Temporal::Mamba);
}

#[test]
fn mamba2_every_parameter_matches_finite_differences() {
    every_parameter_matches_finite_differences(Temporal::Mamba2);
}
