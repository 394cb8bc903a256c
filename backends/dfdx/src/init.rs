//! Initial weights when none are loaded (MODEL.md, "Initialization"), drawn on the host from
//! one seeded RNG in state-dict order and then copied to the device.
//!
//! The distributions are MODEL.md's; the RNG stream is this crate's own (ChaCha8 over the
//! specs in order), so a seed fixes a model here but not the same model as another backend.

use boldcast_core::model::NamedTensor;
use boldcast_core::{Elem, ModelConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Every parameter of `cfg`, initialized from `seed`, in state-dict order.
pub fn init_params<E: Elem>(cfg: &ModelConfig, seed: u64) -> Vec<NamedTensor<E>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let specs = cfg.param_specs();
    let mut out = Vec::with_capacity(specs.len());
    for s in specs {
        let n = s.numel();
        let name = s.name.as_str();
        let last = name.rsplit('.').next().unwrap_or(name);
        let data: Vec<f64> = if name.ends_with("norm.weight") {
            vec![1.0; n]
        } else if name.ends_with("norm.bias") {
            vec![0.0; n]
        } else if last == "A_log" {
            // Mamba-1: A_log[d, n] = ln(n + 1); Mamba-2: A_log[h] = ln(h + 1).
            let cols = if s.shape.len() == 2 { s.shape[1] } else { n };
            (0..n).map(|i| (((if s.shape.len() == 2 { i % cols } else { i }) + 1) as f64).ln()).collect()
        } else if last == "D" {
            vec![1.0; n]
        } else if name.ends_with("dt_proj.bias") || last == "dt_bias" {
            (0..n).map(|_| dt_bias(&mut rng)).collect()
        } else if name.ends_with("dt_proj.weight") {
            let b = 1.0 / (cfg.dt_rank() as f64).sqrt();
            uniform(&mut rng, n, b)
        } else {
            // Linear and Conv1d weights and biases: U(+-1/sqrt(fan_in)); the conv's fan_in is K.
            let fan_in = if name.contains("conv1d") {
                cfg.d_conv
            } else if name.ends_with(".bias") {
                fan_in_of_bias(cfg, name)
            } else {
                s.shape[1..].iter().product()
            };
            uniform(&mut rng, n, 1.0 / (fan_in.max(1) as f64).sqrt())
        };
        out.push(NamedTensor {
            name: s.name.clone(),
            shape: s.shape.clone(),
            data: data.into_iter().map(E::of).collect(),
        });
    }
    out
}

/// `U(-b, b)` draws.
fn uniform(rng: &mut ChaCha8Rng, n: usize, b: f64) -> Vec<f64> {
    (0..n).map(|_| (rng.random::<f64>() * 2.0 - 1.0) * b).collect()
}

/// `dt + ln(-expm1(-dt))` with `dt = max(exp(U(ln 1e-3, ln 1e-1)), 1e-4)`: the inverse
/// softplus of a log-uniform time step.
fn dt_bias(rng: &mut ChaCha8Rng) -> f64 {
    let (lo, hi) = (1e-3f64.ln(), 1e-1f64.ln());
    let dt = (lo + rng.random::<f64>() * (hi - lo)).exp().max(1e-4);
    dt + (-(-dt).exp_m1()).ln()
}

/// The fan-in of a Linear's bias: the input width of its weight.
fn fan_in_of_bias(cfg: &ModelConfig, bias: &str) -> usize {
    let weight = format!("{}weight", bias.trim_end_matches("bias"));
    cfg.param_specs().into_iter().find(|s| s.name == weight).map(|s| s.shape[1..].iter().product()).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_distributions() {
        let cfg = ModelConfig::boldcast_demo();
        let ps = init_params::<f64>(&cfg, 3);
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
        assert_eq!(init_params::<f64>(&cfg, 3), ps);
        assert_ne!(init_params::<f64>(&cfg, 4), ps);
    }

    #[test]
    fn mamba2_follows_the_distributions() {
        let cfg = ModelConfig::builder().temporal(boldcast_core::Temporal::Mamba2).build().unwrap();
        let ps = init_params::<f64>(&cfg, 3);
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
