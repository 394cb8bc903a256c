//! Initial weights when none are loaded (MODEL.md, "Initialization"): the core's seeded draw
//! ([`ParamStore::initialize`]) on the host, copied to the device afterwards. One seed
//! gives the same model here as on the other backends.

use boldcast_core::model::NamedTensor;
use boldcast_core::params::ParamStore;
use boldcast_core::{Elem, Error, ModelConfig};

/// Every parameter of `cfg`, initialized from `seed`, in state-dict order.
pub fn init_params<E: Elem>(cfg: &ModelConfig, seed: u64) -> Result<Vec<NamedTensor<E>>, Error> {
    let mut store = ParamStore::zeros(cfg.param_specs());
    store.initialize(seed)?;
    Ok(store.named())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_distributions() {
        let cfg = ModelConfig::boldcast_demo();
        let ps = init_params::<f64>(&cfg, 3).unwrap();
        let get = |n: &str| ps.iter().find(|t| t.name == n).unwrap();
        let a = get("layers.0.mamba.mamba.A_log");
        assert_eq!(a.data[..3], [1f64.ln(), 2f64.ln(), 3f64.ln()]);
        assert!(get("layers.0.knn.norm.weight").data.iter().all(|&v| v == 1.0));
        let w = get("layers.1.knn.q.weight");
        let b = 1.0 / 128f64.sqrt();
        assert!(w.data.iter().all(|v| v.abs() <= b) && w.data.iter().any(|v| v.abs() > 0.9 * b));
        let conv = get("layers.0.mamba.mamba.conv1d.bias");
        assert!(conv.data.iter().all(|v| v.abs() <= 0.5) && conv.data.iter().any(|v| v.abs() > 0.4));
        let dtb = get("layers.0.mamba.mamba.dt_proj.bias");
        for &v in &dtb.data {
            let dt = v.exp().ln_1p(); // softplus(bias) is the time step
            assert!((1e-3 * 0.999..=0.1 * 1.001).contains(&dt), "{dt}");
        }
        assert_eq!(init_params::<f64>(&cfg, 3).unwrap(), ps);
        assert_ne!(init_params::<f64>(&cfg, 4).unwrap(), ps);
    }

    #[test]
    fn mamba2_follows_the_distributions() {
        let cfg = ModelConfig::builder().temporal(boldcast_core::Temporal::Mamba2).build().unwrap();
        let ps = init_params::<f64>(&cfg, 3).unwrap();
        let names: Vec<String> = cfg.param_specs().into_iter().map(|s| s.name).collect();
        assert_eq!(ps.iter().map(|t| t.name.clone()).collect::<Vec<_>>(), names);
        let get = |n: &str| ps.iter().find(|t| t.name == format!("layers.1.mamba.mamba.{n}")).unwrap();
        // nheads = 256 / 64 = 4: A_log[h] = ln(h + 1), D = 1, norm.weight = 1.
        assert_eq!(get("A_log").data, [1f64.ln(), 2f64.ln(), 3f64.ln(), 4f64.ln()]);
        assert_eq!(get("D").data, [1.0; 4]);
        assert!(get("norm.weight").data.iter().all(|&v| v == 1.0) && get("norm.weight").data.len() == 256);
        for &v in &get("dt_bias").data {
            let dt = v.exp().ln_1p();
            assert!((1e-3 * 0.999..=0.1 * 1.001).contains(&dt), "{dt}");
        }
        // The conv's fan-in is K = 4 over Di + 2N = 288 channels.
        let conv = get("conv1d.weight");
        assert_eq!(conv.shape, [288, 1, 4]);
        assert!(conv.data.iter().all(|v| v.abs() <= 0.5) && conv.data.iter().any(|v| v.abs() > 0.45));
        let w = get("in_proj.weight");
        assert_eq!(w.shape, [2 * 256 + 2 * 16 + 4, 128]);
        let b = 1.0 / 128f64.sqrt();
        assert!(w.data.iter().all(|v| v.abs() <= b) && w.data.iter().any(|v| v.abs() > 0.9 * b));
    }
}
