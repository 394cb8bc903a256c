//! The linear path ([`boldcast_train::linear_path`]) around the CPU backend: with the head
//! zeroed the model forecasts exactly what the fit does, training steps see the fit as their
//! offset, the path travels with the state, and bad path tensors are refused by name.

use boldcast_core::model::NamedTensor;
use boldcast_core::{Adjacency, Forecasts, LinearPath, Model, ModelConfig, Tokens};
use boldcast_cpu::CpuModel;
use boldcast_data::{Dataset, WindowSpec};
use boldcast_fixtures::{Layout, Var1Spec};
use boldcast_train::linear_path::{fit_path, LinearPathModel, PREFIX};

const PARCELS: usize = 4;

fn cfg(kind: LinearPath) -> ModelConfig {
    ModelConfig::builder()
        .d_model(8)
        .n_layers(1)
        .d_state(4)
        .k_neighbors(2)
        .horizons(&[1, 3])
        .linear_path(kind)
        .build()
        .unwrap()
}

fn data() -> Dataset {
    let layout = Layout { subjects: 6, runs: 1, trs: 3000, parcels: PARCELS, seed: 5 };
    let fx = Var1Spec { layout, self_coef: 0.5, neighbor_coef: 0.3, k: 3 };
    Dataset::from_synth(&fx.generate().unwrap(), None).unwrap()
}

fn backend(c: &ModelConfig) -> CpuModel<f32> {
    CpuModel::new(c.clone(), Some(Adjacency::ring(PARCELS, c.k_neighbors).unwrap()), 3).unwrap()
}

/// A model of `kind` fitted on the first 4 subjects, and 8 held-out windows of 32 TRs.
fn fitted(kind: LinearPath) -> (LinearPathModel<CpuModel<f32>>, Tokens<f32>, Tokens<f64>) {
    let (ds, c) = (data(), cfg(kind));
    let spec = WindowSpec { window: 32, stride: 32, d_in: 1 };
    let (fit, choice) = fit_path(kind, &ds, &[0, 1, 2, 3], &c, &spec).unwrap();
    assert_eq!(choice.kind, if kind == LinearPath::Ar { "ar" } else { "var" }, "{choice:?}");
    let windows = &ds.windows_of(&spec, &[4, 5]).unwrap()[..8];
    let (t32, t64) = (ds.tokens::<f32>(windows, &spec).unwrap(), ds.tokens::<f64>(windows, &spec).unwrap());
    (LinearPathModel::with_fit(backend(&c), kind, fit), t32, t64)
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

#[test]
fn with_the_head_zeroed_the_model_forecasts_what_the_fit_does() {
    for kind in [LinearPath::Ar, LinearPath::Var, LinearPath::Auto] {
        let (mut m, t32, t64) = fitted(kind);
        let want: Vec<f32> = m.fit().unwrap().forecasts(&t64, &[1, 3]).data().iter().map(|&v| v as f32).collect();
        let before = m.forward(&t32).unwrap();
        assert!(max_diff(before.data(), &want) > 1e-3, "{kind:?}: the untrained head adds its own forecasts");
        m.zero_head().unwrap();
        let got = m.forward(&t32).unwrap();
        assert!(max_diff(got.data(), &want) < 1e-6, "{kind:?}: {}", max_diff(got.data(), &want));
        // On the VAR(1) fixture the fit is far better than predicting zero.
        let targets =
            boldcast_core::forecast::build_forecast_targets::<f32, usize, usize, usize, usize, usize>(&t32, &[1, 3])
                .unwrap();
        let zero = targets.data().iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / targets.data().len() as f64;
        let loss = m.loss(&t32).unwrap();
        assert!(loss < 0.9 * zero, "{kind:?}: loss {loss} vs {zero} predicting zero");
    }
}

#[test]
fn a_training_step_sees_the_fit_as_its_offset() {
    let (mut m, t32, _) = fitted(LinearPath::Var);
    let off = m.offset(&t32).unwrap().unwrap();
    let loss = m.loss_and_grads(&t32).unwrap();
    let grads = m.grads();
    let mut plain = backend(&cfg(LinearPath::Var));
    assert_eq!(loss, plain.loss_and_grads_offset(&t32, &off).unwrap());
    assert_eq!(grads, plain.grads());
    // The evaluation loss is computed on the host from the same forecasts.
    assert!((loss - m.loss(&t32).unwrap()).abs() < 1e-6 * loss);
    assert_ne!(loss, plain.loss_and_grads(&t32).unwrap(), "the offset changes the loss");
}

#[test]
fn the_path_travels_with_the_state() {
    let (m, t32, _) = fitted(LinearPath::Var);
    let state = m.state();
    let names: Vec<&str> = state.iter().filter(|t| t.name.starts_with(PREFIX)).map(|t| t.name.as_str()).collect();
    let p = m.fit().unwrap().order();
    assert_eq!(names.len(), p, "{names:?}");
    assert_eq!(names[0], "linear_path.var.1");
    let first = state.iter().find(|t| t.name == "linear_path.var.1").unwrap();
    assert_eq!(first.shape, vec![PARCELS, 2 * PARCELS]);
    let mut back = LinearPathModel::unfitted(backend(&cfg(LinearPath::Var)), LinearPath::Var);
    back.load_state(&state).unwrap();
    assert_eq!(back.state(), state);
    // The stored coefficients are f32: the forecasts agree to f32 rounding.
    assert!(max_diff(back.forward(&t32).unwrap().data(), m.forward(&t32).unwrap().data()) < 1e-5);
}

fn refused(kind: LinearPath, tensors: &[NamedTensor<f32>]) -> String {
    let mut m = LinearPathModel::unfitted(backend(&cfg(kind)), kind);
    format!("{}", m.load_state(tensors).unwrap_err())
}

#[test]
fn bad_path_tensors_are_refused_by_name() {
    let (m, _, _) = fitted(LinearPath::Var);
    let state = m.state();
    let plain: Vec<NamedTensor<f32>> = state.iter().filter(|t| !t.name.starts_with(PREFIX)).cloned().collect();
    let e = refused(LinearPath::Var, &plain);
    assert!(e.contains("linear_path") && e.contains("no linear_path tensors"), "{e}");
    let e = refused(LinearPath::Off, &state);
    assert!(e.contains("linear_path.var.1") && e.contains("off"), "{e}");
    let mut renamed = state.clone();
    renamed.iter_mut().filter(|t| t.name == "linear_path.var.1").for_each(|t| t.name = "linear_path.ar.1".into());
    let e = refused(LinearPath::Var, &renamed);
    assert!(e.contains("linear_path.ar.1"), "{e}");
    let mut reshaped = state.clone();
    let t = reshaped.iter_mut().find(|t| t.name == "linear_path.var.1").unwrap();
    t.shape = vec![PARCELS + 1, 2 * PARCELS];
    let e = refused(LinearPath::Var, &reshaped);
    assert!(e.contains("linear_path.var.1") && e.contains("shape"), "{e}");
    // Nothing changed on a refusal: the model still has no path to forecast with.
    let mut m2 = LinearPathModel::unfitted(backend(&cfg(LinearPath::Var)), LinearPath::Var);
    assert!(m2.load_state(&reshaped).is_err());
    assert!(m2.fit().is_none());
}

#[test]
fn with_the_path_off_the_wrapper_is_the_model() {
    let c = cfg(LinearPath::Off);
    let (m, inner) = (LinearPathModel::unfitted(backend(&c), LinearPath::Off), backend(&c));
    let ds = data();
    let spec = WindowSpec { window: 32, stride: 32, d_in: 1 };
    let t = ds.tokens::<f32>(&ds.windows_of(&spec, &[4]).unwrap()[..2], &spec).unwrap();
    assert_eq!(m.state(), inner.state());
    let (a, b): (Forecasts<f32>, Forecasts<f32>) = (m.forward(&t).unwrap(), inner.forward(&t).unwrap());
    assert_eq!(a.data(), b.data());
    assert_eq!(m.loss(&t).unwrap(), inner.loss(&t).unwrap());
}
