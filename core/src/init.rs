//! Seeded initialization (MODEL.md, "Initialization"): PyTorch's defaults, drawn from one
//! `ChaCha8Rng` in state-dict order, so a seed fixes a model.
//!
//! - `Linear` and `Conv1d` weights and biases: `U(-1/sqrt(fan_in), 1/sqrt(fan_in))` with
//!   `fan_in` the weight's elements per output row (`K` for the depthwise conv, `R` for
//!   `dt_proj`, so `dt_proj.weight ~ U(+-R^-0.5)` falls out of the same rule).
//! - LayerNorm (and the Mamba-2 gated norm) weight 1, bias 0.
//! - `A_log[d, n] = ln(n + 1)` (Mamba-1) or `A_log[h] = ln(h + 1)` (Mamba-2); `D = 1`.
//! - `dt_proj.bias` / `dt_bias = dt + ln(-expm1(-dt))` (the inverse softplus of dt) with
//!   `dt = max(exp(U(ln 1e-3, ln 1e-1)), 1e-4)`.
//!
//! Values are drawn in `f64` and rounded to the element type, so an `f32` and an `f64` model
//! with the same seed hold the same numbers up to that rounding. Every backend initializes
//! through [`initialize`], so one seed gives one model on all of them.

use crate::{Elem, Error, ParamSpec};
use alloc::format;
use alloc::string::ToString;
use alloc::vec::Vec;
use num_traits::Float;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How one tensor is initialized.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Rule {
    /// Every entry equal to the value (norm weights 1, norm biases 0, `D` 1).
    Const(f64),
    /// `U(-bound, bound)`.
    Uniform(f64),
    /// `ln(i + 1)` along the last axis (`A_log`).
    ALog,
    /// The inverse softplus of a log-uniform dt (`dt_proj.bias`, `dt_bias`).
    DtBias,
}

/// The rule for `spec`, looking up the matching weight in `specs` for a `Linear`/`Conv1d`
/// bias (its bound uses the weight's fan-in). Unknown names are an [`Error::Param`].
pub fn rule_for(spec: &ParamSpec, specs: &[ParamSpec]) -> Result<Rule, Error> {
    let n = spec.name.as_str();
    let fan_in = |s: &ParamSpec| s.numel() / s.shape.first().copied().unwrap_or(1).max(1);
    let uniform = |fan: usize| Rule::Uniform(1.0 / Float::sqrt(fan.max(1) as f64));
    Ok(if n.ends_with("norm.weight") {
        Rule::Const(1.0)
    } else if n.ends_with("norm.bias") {
        Rule::Const(0.0)
    } else if n.ends_with("mamba.A_log") {
        Rule::ALog
    } else if n.ends_with("mamba.D") {
        Rule::Const(1.0)
    } else if n.ends_with("dt_proj.bias") || n.ends_with("mamba.dt_bias") {
        Rule::DtBias
    } else if n.ends_with(".weight") {
        uniform(fan_in(spec))
    } else if let Some(stem) = n.strip_suffix(".bias") {
        let w = format!("{stem}.weight");
        let ws = specs.iter().find(|s| s.name == w).ok_or_else(|| Error::Param {
            name: n.to_string(),
            reason: format!("no weight `{w}` to take the fan-in from"),
        })?;
        uniform(fan_in(ws))
    } else {
        return Err(Error::Param { name: n.to_string(), reason: "no initialization rule for this name".to_string() });
    })
}

/// Fills `out` by `rule`, drawing from `rng` (nothing is drawn for the constant rules).
pub fn fill<E: Elem>(rule: Rule, shape: &[usize], rng: &mut ChaCha8Rng, out: &mut [E]) {
    match rule {
        Rule::Const(c) => out.fill(E::of(c)),
        Rule::Uniform(b) => {
            for v in out.iter_mut() {
                *v = E::of((rng.random::<f64>() * 2.0 - 1.0) * b);
            }
        }
        Rule::ALog => {
            let last = shape.last().copied().unwrap_or(1).max(1);
            for (i, v) in out.iter_mut().enumerate() {
                *v = E::of(Float::ln((i % last) as f64 + 1.0));
            }
        }
        Rule::DtBias => {
            let (lo, hi) = (Float::ln(1e-3f64), Float::ln(1e-1f64));
            for v in out.iter_mut() {
                let dt = Float::max(Float::exp(lo + rng.random::<f64>() * (hi - lo)), 1e-4);
                *v = E::of(dt + Float::ln(-Float::exp_m1(-dt)));
            }
        }
    }
}

/// Initializes every tensor of `specs` (state-dict order) into `outs` (same order and sizes)
/// from `ChaCha8Rng::seed_from_u64(seed)`.
pub fn initialize<E: Elem>(specs: &[ParamSpec], outs: Vec<&mut [E]>, seed: u64) -> Result<(), Error> {
    if specs.len() != outs.len() {
        return Err(Error::Backend(format!("initialize: {} specs for {} tensors", specs.len(), outs.len())));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for (s, o) in specs.iter().zip(outs) {
        if o.len() != s.numel() {
            return Err(Error::Param { name: s.name.clone(), reason: format!("{} values for {:?}", o.len(), s.shape) });
        }
        fill(rule_for(s, specs)?, &s.shape, &mut rng, o);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ModelConfig;
    use alloc::vec;

    #[test]
    fn rules_follow_the_spec() {
        let c = ModelConfig::boldcast_demo();
        let specs = c.param_specs();
        let rule = |n: &str| rule_for(specs.iter().find(|s| s.name == n).unwrap(), &specs).unwrap();
        assert_eq!(rule("embed_proj.weight"), Rule::Uniform(1.0));
        assert_eq!(rule("embed_proj.bias"), Rule::Uniform(1.0));
        assert_eq!(rule("layers.0.mamba.mamba.conv1d.weight"), Rule::Uniform(0.5));
        assert_eq!(rule("layers.0.mamba.mamba.conv1d.bias"), Rule::Uniform(0.5));
        assert_eq!(rule("layers.0.mamba.mamba.in_proj.weight"), Rule::Uniform(1.0 / 128f64.sqrt()));
        assert_eq!(rule("layers.0.mamba.mamba.x_proj.weight"), Rule::Uniform(1.0 / 256f64.sqrt()));
        assert_eq!(rule("layers.0.mamba.mamba.dt_proj.weight"), Rule::Uniform(1.0 / 8f64.sqrt()));
        assert_eq!(rule("layers.0.mamba.mamba.dt_proj.bias"), Rule::DtBias);
        assert_eq!(rule("layers.0.mamba.mamba.A_log"), Rule::ALog);
        assert_eq!(rule("layers.0.mamba.mamba.D"), Rule::Const(1.0));
        assert_eq!(rule("layers.3.knn.norm.weight"), Rule::Const(1.0));
        assert_eq!(rule("layers.3.knn.out.bias"), Rule::Uniform(1.0 / 128f64.sqrt()));
        assert_eq!(rule("final_norm.bias"), Rule::Const(0.0));
        assert_eq!(rule("head.bias"), Rule::Uniform(1.0 / 128f64.sqrt()));
    }

    #[test]
    fn rules_follow_the_spec_for_mamba2() {
        // d_inner 256, 32 heads of 8, conv channels 256 + 2 * 16 = 288.
        let c = ModelConfig::builder().temporal(crate::Temporal::Mamba2).headdim(8).build().unwrap();
        let specs = c.param_specs();
        let rule = |n: &str| rule_for(specs.iter().find(|s| s.name == n).unwrap(), &specs).unwrap();
        let mm = |s: &str| format!("layers.1.mamba.mamba.{s}");
        assert_eq!(rule(&mm("dt_bias")), Rule::DtBias);
        assert_eq!(rule(&mm("conv1d.weight")), Rule::Uniform(0.5));
        assert_eq!(rule(&mm("conv1d.bias")), Rule::Uniform(0.5));
        assert_eq!(rule(&mm("in_proj.weight")), Rule::Uniform(1.0 / 128f64.sqrt()));
        assert_eq!(rule(&mm("A_log")), Rule::ALog);
        assert_eq!(rule(&mm("D")), Rule::Const(1.0));
        assert_eq!(rule(&mm("norm.weight")), Rule::Const(1.0));
        assert_eq!(rule(&mm("out_proj.weight")), Rule::Uniform(1.0 / 256f64.sqrt()));
        // A_log over the heads: ln(h + 1).
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut a = vec![0.0f64; 32];
        fill(Rule::ALog, &[32], &mut rng, &mut a);
        assert!(a.iter().enumerate().all(|(h, &v)| v == (h as f64 + 1.0).ln()));
    }

    #[test]
    fn dt_bias_is_the_inverse_softplus_of_a_dt_in_range() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut v = vec![0.0f64; 1000];
        fill(Rule::DtBias, &[1000], &mut rng, &mut v);
        for b in v {
            let dt = Float::ln_1p(Float::exp(b));
            assert!((1e-3 - 1e-12..=1e-1 + 1e-12).contains(&dt), "{dt}");
        }
    }
}
