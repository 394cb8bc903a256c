//! The `Model` contract beyond the numbers: errors instead of panics, `load_state` checks,
//! state round trips through safetensors bytes, and gradients overwritten per call.

use boldcast_core::model::NamedTensor;
use boldcast_core::{Adjacency, Error, Model, ModelConfig, TokenShape, Tokens};
use boldcast_dfdx::{cpu_device, Cpu, DfdxModel};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};

fn cfg() -> ModelConfig {
    ModelConfig::builder().d_model(8).n_layers(1).d_state(2).k_neighbors(2).horizons(&[1, 2]).build().unwrap()
}

fn model(seed: u64) -> DfdxModel<f32, Cpu> {
    DfdxModel::new(cfg(), Some(Adjacency::ring(3, 2).unwrap()), seed, cpu_device()).unwrap()
}

fn tokens(p: usize) -> Tokens<f32> {
    let (b, t) = (2, 6);
    Tokens::new(TokenShape::new(b, t, p, 1), (0..b * t * p).map(|i| (i as f32 * 0.3).cos()).collect()).unwrap()
}

#[test]
fn bad_inputs_are_errors() {
    let m = model(0);
    assert!(matches!(m.forward(&tokens(4)), Err(Error::Shape { .. })));
    let short = Tokens::new(TokenShape::new(1, 2, 3, 1), vec![0.0; 6]).unwrap();
    assert!(matches!(m.loss(&short), Err(Error::Config { .. })));
    let e = DfdxModel::<f32, Cpu>::new(cfg(), None, 0, cpu_device()).err().unwrap();
    assert!(e.to_string().contains("adjacency"), "{e}");
    let e = DfdxModel::<f32, Cpu>::new(cfg(), Some(Adjacency::ring(3, 3).unwrap()), 0, cpu_device()).err().unwrap();
    assert!(e.to_string().contains("k_neighbors"), "{e}");
}

#[test]
fn load_state_rejects_and_changes_nothing() {
    let mut m = model(1);
    let before = m.state();
    let mut bad = model(2).state();
    bad[3].shape = vec![1, 2, 3];
    assert!(matches!(m.load_state(&bad), Err(Error::Param { .. })));
    bad.pop();
    let e = m.load_state(&bad[..bad.len() - 1]).unwrap_err();
    assert!(matches!(e, Error::Param { .. }), "{e}");
    assert_eq!(m.state(), before);
    let names: Vec<_> = before.iter().map(|t| t.name.clone()).collect();
    let specs: Vec<_> = cfg().param_specs().into_iter().map(|s| s.name).collect();
    assert_eq!(names, specs);
}

fn to_safetensors(state: &[NamedTensor<f32>]) -> Vec<u8> {
    let bytes: Vec<Vec<u8>> = state.iter().map(|t| t.data.iter().flat_map(|v| v.to_le_bytes()).collect()).collect();
    let views: Vec<(String, TensorView<'_>)> = state
        .iter()
        .zip(&bytes)
        .map(|(t, b)| (t.name.clone(), TensorView::new(Dtype::F32, t.shape.clone(), b).unwrap()))
        .collect();
    safetensors::serialize(views, None).unwrap()
}

fn from_safetensors(bytes: &[u8]) -> Vec<NamedTensor<f32>> {
    let st = SafeTensors::deserialize(bytes).unwrap();
    st.tensors()
        .into_iter()
        .map(|(name, v)| NamedTensor {
            name,
            shape: v.shape().to_vec(),
            data: v.data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect(),
        })
        .collect()
}

#[test]
fn state_round_trips_through_safetensors() {
    let a = model(3);
    let mut b = model(4);
    let x = tokens(3);
    assert_ne!(a.forward(&x).unwrap(), b.forward(&x).unwrap());
    b.load_state(&from_safetensors(&to_safetensors(&a.state()))).unwrap();
    assert_eq!(a.state(), b.state());
    assert_eq!(a.forward(&x).unwrap(), b.forward(&x).unwrap());
}

#[test]
fn gradients_are_overwritten_and_parameters_untouched() {
    let mut m = model(5);
    let x = tokens(3);
    let before = m.state();
    let l1 = m.loss_and_grads(&x).unwrap();
    let g1 = m.grads();
    let l2 = m.loss_and_grads(&x).unwrap();
    assert_eq!(l1, l2);
    assert_eq!(m.grads(), g1, "a second call must overwrite, not accumulate");
    assert_eq!(m.state(), before);
    assert_eq!(m.loss(&x).unwrap(), l1);
    let f = m.forward(&x).unwrap();
    assert_eq!(f.shape().horizons, 2);
    assert_eq!(f.shape().time, 6);
}

#[test]
fn cpu_constructor_and_cuda_requests() {
    let a = DfdxModel::<f32, Cpu>::new_cpu(cfg(), Some(Adjacency::ring(3, 2).unwrap()), 7).unwrap();
    assert_eq!(a.state(), model(7).state());
    assert_eq!(boldcast_dfdx::BACKEND_NAMES, ["dfdx-cpu", "dfdx-cuda"]);
    #[cfg(not(feature = "cuda"))]
    {
        const { assert!(!boldcast_dfdx::CUDA_BUILT) };
        let e = boldcast_dfdx::cuda_device(0).unwrap_err();
        assert!(matches!(e, Error::Backend(_)));
        assert!(e.to_string().contains("--features cuda"), "{e}");
    }
}
