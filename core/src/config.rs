//! The model configuration and the parameter names and shapes it implies (MODEL.md,
//! "Parameter names and shapes"). Both backends and the checkpoint format take their names
//! from [`ModelConfig::param_specs`], so the names are written once.

use crate::error::{Error, Result};
use crate::params::Prefix;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// The temporal mixer.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Temporal {
    /// Mamba-1 selective scan (`mamba_ssm.Mamba`), the public demo's mixer.
    #[default]
    Mamba,
    /// Mamba-2 / SSD with a scalar decay per head.
    Mamba2,
}

impl Temporal {
    /// The config spelling: `"mamba"` or `"mamba2"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Temporal::Mamba => "mamba",
            Temporal::Mamba2 => "mamba2",
        }
    }
}

/// The linear autoregressive path added to the forecasts (`model.linear_path`): a direct
/// linear forecaster fitted on the training subjects before training, whose forecasts the
/// Mamba stack learns to correct. Backends never see it: `boldcast-train`'s `LinearPath`
/// wraps any backend's model and hands the fitted forecasts to
/// [`Model::loss_and_grads_offset`](crate::Model::loss_and_grads_offset).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LinearPath {
    /// No linear path: the model as MODEL.md describes it (the demo presets).
    #[default]
    Off,
    /// Whichever of `ar` and `var` has the lower cross-validated MSE.
    Auto,
    /// Each parcel from its own past (direct AR(p), p by cross-validation).
    Ar,
    /// Every parcel from every parcel's past (ridge VAR(p), p and penalty by cross-validation).
    Var,
}

impl LinearPath {
    /// The config spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            LinearPath::Off => "off",
            LinearPath::Auto => "auto",
            LinearPath::Ar => "ar",
            LinearPath::Var => "var",
        }
    }

    /// Whether there is a path.
    pub fn is_on(&self) -> bool {
        *self != LinearPath::Off
    }

    fn is_off(&self) -> bool {
        !self.is_on()
    }
}

/// The sizes of a BOLDcast model (MODEL.md, "Notation").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// The temporal mixer.
    #[serde(default)]
    pub temporal: Temporal,
    /// D: TRs per token.
    pub d_in: usize,
    /// M: model width.
    pub d_model: usize,
    /// Number of (temporal, spatial) layer pairs; 0 is allowed.
    pub n_layers: usize,
    /// N: SSM state size.
    pub d_state: usize,
    /// Di / M.
    pub expand: usize,
    /// K: causal conv width.
    pub d_conv: usize,
    /// Mamba-2 head width Pd (ignored by Mamba-1).
    #[serde(default = "default_headdim")]
    pub headdim: usize,
    /// Mamba-2 SSD chunk length (an evaluation choice; ignored by Mamba-1).
    #[serde(default = "default_chunk")]
    pub chunk_size: usize,
    /// k: neighbours per parcel in the spatial attention, self included; 0 for none.
    pub k_neighbors: usize,
    /// Forecast horizons in tokens, each at least 1 and none twice.
    pub horizons: Vec<usize>,
    /// The linear path ([`LinearPath`]); left out of the TOML text when off, so that the
    /// configurations of earlier runs keep their text and hash.
    #[serde(default, skip_serializing_if = "LinearPath::is_off")]
    pub linear_path: LinearPath,
}

/// The most (temporal, spatial) layer pairs [`ModelConfig::validate`] accepts.
pub const MAX_LAYERS: usize = 1024;

fn default_headdim() -> usize {
    64
}
fn default_chunk() -> usize {
    64
}

/// The Mamba-1 mixer's tensor names after [`mixer_prefix`], in state-dict order (that of
/// transformers' `MambaMixer`). Backends take their tensors in this order.
pub const MAMBA1_PARAMS: [&str; 9] = [
    "conv1d.weight",
    "conv1d.bias",
    "in_proj.weight",
    "x_proj.weight",
    "dt_proj.weight",
    "dt_proj.bias",
    "A_log",
    "D",
    "out_proj.weight",
];

/// The Mamba-2 mixer's tensor names after [`mixer_prefix`], in state-dict order (that of
/// transformers' `Mamba2Mixer`).
pub const MAMBA2_PARAMS: [&str; 8] =
    ["dt_bias", "conv1d.weight", "conv1d.bias", "in_proj.weight", "A_log", "D", "norm.weight", "out_proj.weight"];

/// The spatial mixer's tensor names after `layers.{i}.knn.`, in state-dict order (that of
/// the reference `KnnAttention`). Backends take their tensors in this order.
pub const KNN_PARAMS: [&str; 10] = [
    "norm.weight",
    "norm.bias",
    "q.weight",
    "q.bias",
    "kproj.weight",
    "kproj.bias",
    "v.weight",
    "v.bias",
    "out.weight",
    "out.bias",
];

/// The prefix of layer `i`'s temporal-mixer tensors: `layers.{i}.mamba.mamba.`.
pub fn mixer_prefix(i: usize) -> String {
    format!("{}.", Prefix::root().pp("layers").pp(i).pp("mamba").pp("mamba").as_str())
}

/// One named parameter: its MODEL.md name and PyTorch shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamSpec {
    /// The state-dict name, e.g. `layers.0.mamba.mamba.A_log`.
    pub name: String,
    /// The shape, PyTorch layout.
    pub shape: Vec<usize>,
}

impl ParamSpec {
    fn new(name: String, shape: &[usize]) -> Self {
        Self { name, shape: shape.to_vec() }
    }
    /// Number of elements (saturating at `usize::MAX`, which no configuration that
    /// [`ModelConfig::validate`] accepts reaches).
    pub fn numel(&self) -> usize {
        self.shape.iter().fold(1usize, |a, &d| a.saturating_mul(d))
    }
    /// Whether weight decay applies (MODEL.md: tensors of two or more dimensions except
    /// `A_log`).
    pub fn decays(&self) -> bool {
        crate::optim::decays(&self.name, &self.shape)
    }
}

impl ModelConfig {
    /// Di = `expand * d_model` (saturating: [`ModelConfig::validate`] refuses a configuration
    /// whose sizes overflow).
    pub fn d_inner(&self) -> usize {
        self.expand.saturating_mul(self.d_model)
    }
    /// R = `ceil(d_model / 16)` (Mamba-1).
    pub fn dt_rank(&self) -> usize {
        self.d_model.div_ceil(16)
    }
    /// Mamba-2 heads: `Di / headdim`.
    pub fn nheads(&self) -> usize {
        self.d_inner() / self.headdim.max(1)
    }
    /// H: number of horizons.
    pub fn n_horizons(&self) -> usize {
        self.horizons.len()
    }
    /// The largest horizon.
    pub fn max_horizon(&self) -> usize {
        self.horizons.iter().copied().max().unwrap_or(0)
    }

    /// Checks every size; the error names the field and value. Sizes are at least 1, there are
    /// at most [`MAX_LAYERS`] layers (so [`ModelConfig::param_specs`] stays a short list: a file
    /// claiming `n_layers = 9223372036854775807` is an error, not a loop that allocates without
    /// end), and every tensor's element count, the parameter count and the bytes training holds
    /// per parameter fit in `usize` ([`ModelConfig::param_memory`]; an overflow names the field
    /// of the largest factor). Whether the machine has that memory is the caller's check.
    pub fn validate(&self) -> Result<()> {
        let pos = |field: &str, v: usize| -> Result<()> {
            if v == 0 {
                Err(Error::config(format!("model.{field}"), v, "must be at least 1"))
            } else {
                Ok(())
            }
        };
        pos("d_in", self.d_in)?;
        pos("d_model", self.d_model)?;
        pos("d_state", self.d_state)?;
        pos("expand", self.expand)?;
        pos("d_conv", self.d_conv)?;
        if self.horizons.is_empty() {
            return Err(Error::config("model.horizons", "[]", "at least one horizon is needed"));
        }
        if let Some(h) = self.horizons.iter().find(|&&h| h == 0) {
            return Err(Error::config("model.horizons", h, "horizons are counted in tokens and must be at least 1"));
        }
        for (i, h) in self.horizons.iter().enumerate() {
            if let Some(first) = self.horizons[..i].iter().position(|g| g == h) {
                return Err(Error::config(
                    "model.horizons",
                    h,
                    format!("duplicate horizon (entries {} and {}): list each horizon once", first + 1, i + 1),
                ));
            }
        }
        let bytes = self.param_memory()?;
        if self.n_layers > MAX_LAYERS {
            let need = crate::memory::format_bytes(bytes as f64);
            return Err(Error::config(
                "model.n_layers",
                self.n_layers,
                format!(
                    "must be at most {MAX_LAYERS} (the parameters with their Adam state would need {need} of memory)"
                ),
            ));
        }
        if self.temporal == Temporal::Mamba2 {
            pos("headdim", self.headdim)?;
            pos("chunk_size", self.chunk_size)?;
            if !self.d_inner().is_multiple_of(self.headdim) {
                return Err(Error::config(
                    "model.headdim",
                    self.headdim,
                    format!("must divide expand * d_model = {}", self.d_inner()),
                ));
            }
        }
        Ok(())
    }

    /// Checks a batch of tokens against the model: `d_in` must match and `T` must exceed the
    /// largest horizon (so `T_valid >= 1`).
    pub fn check_tokens(&self, shape: &crate::shape::TokenShape) -> Result<()> {
        if shape.d_in != self.d_in {
            return Err(Error::shape("tokens.d_in", self.d_in, shape.d_in));
        }
        if shape.time <= self.max_horizon() {
            return Err(Error::config(
                "tokens.time",
                shape.time,
                format!("must exceed the largest horizon {} (T_valid = T - max(horizons) >= 1)", self.max_horizon()),
            ));
        }
        if shape.batch == 0 || shape.parcels == 0 {
            return Err(Error::config(
                "tokens",
                format!("{} windows of {} parcels", shape.batch, shape.parcels),
                "batch and parcels must be at least 1",
            ));
        }
        if self.k_neighbors > shape.parcels {
            return Err(Error::config(
                "model.k_neighbors",
                self.k_neighbors,
                format!("exceeds the {} parcels of the data", shape.parcels),
            ));
        }
        Ok(())
    }

    /// Every parameter in state-dict order (the order PyTorch's `named_parameters` gives).
    ///
    /// Sizes are computed saturating, so a configuration that [`ModelConfig::validate`] refuses
    /// gives nonsense shapes rather than a panic; validate first.
    pub fn param_specs(&self) -> Vec<ParamSpec> {
        let (m, d, di, n, k) = (self.d_model, self.d_in, self.d_inner(), self.d_state, self.d_conv);
        let (two_di, two_n) = (di.saturating_mul(2), n.saturating_mul(2));
        let root = Prefix::root();
        let mut v = Vec::new();
        let push = |v: &mut Vec<ParamSpec>, p: &Prefix, leaf: &str, shape: &[usize]| {
            v.push(ParamSpec::new(p.name(leaf), shape))
        };
        // `Linear(inp, out)` and `LayerNorm(M)`: a weight and a bias each.
        let linear = |v: &mut Vec<ParamSpec>, p: &Prefix, out: usize, inp: usize| {
            push(v, p, "weight", &[out, inp]);
            push(v, p, "bias", &[out]);
        };
        let norm = |v: &mut Vec<ParamSpec>, p: &Prefix| {
            push(v, p, "weight", &[m]);
            push(v, p, "bias", &[m]);
        };
        linear(&mut v, &root.pp("embed_proj"), m, d);
        for i in 0..self.n_layers {
            let layer = root.pp("layers").pp(i);
            norm(&mut v, &layer.pp("mamba").pp("norm"));
            let mixer = layer.pp("mamba").pp("mamba");
            match self.temporal {
                Temporal::Mamba => {
                    let r = self.dt_rank();
                    let shapes: [&[usize]; 9] = [
                        &[di, 1, k],
                        &[di],
                        &[two_di, m],
                        &[r.saturating_add(two_n), di],
                        &[di, r],
                        &[di],
                        &[di, n],
                        &[di],
                        &[m, di],
                    ];
                    MAMBA1_PARAMS.iter().zip(shapes).for_each(|(s, sh)| push(&mut v, &mixer, s, sh));
                }
                Temporal::Mamba2 => {
                    let h = self.nheads();
                    let conv = di.saturating_add(two_n);
                    let proj = two_di.saturating_add(two_n).saturating_add(h);
                    let shapes: [&[usize]; 8] = [&[h], &[conv, 1, k], &[conv], &[proj, m], &[h], &[h], &[di], &[m, di]];
                    MAMBA2_PARAMS.iter().zip(shapes).for_each(|(s, sh)| push(&mut v, &mixer, s, sh));
                }
            }
            if self.k_neighbors > 0 {
                let knn = layer.pp("knn");
                let (vector, matrix): (&[usize], &[usize]) = (&[m], &[m, m]);
                let shapes = [vector, vector, matrix, vector, matrix, vector, matrix, vector, matrix, vector];
                KNN_PARAMS.iter().zip(shapes).for_each(|(s, sh)| push(&mut v, &knn, s, sh));
            }
        }
        norm(&mut v, &root.pp("final_norm"));
        linear(&mut v, &root.pp("head"), self.n_horizons().saturating_mul(d), m);
        v
    }

    /// Total number of scalar parameters: [`ModelConfig::param_count`], saturating at
    /// `usize::MAX` for a configuration [`ModelConfig::validate`] refuses.
    pub fn n_params(&self) -> usize {
        self.param_count().unwrap_or(usize::MAX)
    }

    /// A builder starting from [`ModelConfig::boldcast_demo`]: set the sizes that differ, then
    /// [`ModelConfigBuilder::build`] validates. For tests, benches and examples, instead of a
    /// struct literal that must spell every field:
    ///
    /// ```
    /// use boldcast_core::{ModelConfig, Temporal};
    /// let c = ModelConfig::builder().temporal(Temporal::Mamba2).d_model(8).n_layers(1).headdim(4).build().unwrap();
    /// assert_eq!((c.d_model, c.nheads(), c.d_state), (8, 4, 16));
    /// assert!(ModelConfig::builder().horizons(&[]).build().is_err());
    /// ```
    pub fn builder() -> ModelConfigBuilder {
        ModelConfigBuilder { cfg: Self::boldcast_demo() }
    }

    /// The smallest valid Mamba-1 configuration (no layers, `d_model` 2, one state, no
    /// attention) forecasting `horizons`: for tests of files that need a configuration's
    /// tensor names but no model to speak of.
    ///
    /// ```
    /// let c = boldcast_core::ModelConfig::smallest(&[1, 5]).unwrap();
    /// assert_eq!((c.n_layers, c.d_model, c.horizons.len()), (0, 2, 2));
    /// ```
    pub fn smallest(horizons: &[usize]) -> Result<Self> {
        let b = Self::builder().temporal(Temporal::Mamba).d_in(1).d_model(2).n_layers(0).d_state(1);
        b.expand(1).d_conv(1).headdim(1).chunk_size(1).k_neighbors(0).horizons(horizons).build()
    }

    /// A builder starting from this configuration (to derive a variant of it).
    pub fn into_builder(self) -> ModelConfigBuilder {
        ModelConfigBuilder { cfg: self }
    }

    /// The public BOLDcast demo's shape (732,930 parameters).
    pub fn boldcast_demo() -> Self {
        ModelConfig {
            temporal: Temporal::Mamba,
            d_in: 1,
            d_model: 128,
            n_layers: 4,
            d_state: 16,
            expand: 2,
            d_conv: 4,
            headdim: 64,
            chunk_size: 64,
            k_neighbors: 8,
            horizons: vec![1, 5],
            linear_path: LinearPath::Off,
        }
    }
}

/// Builds a [`ModelConfig`] field by field ([`ModelConfig::builder`] starts from the demo's
/// sizes, [`ModelConfig::into_builder`] from any configuration); [`ModelConfigBuilder::build`]
/// runs [`ModelConfig::validate`].
#[derive(Clone, Debug, PartialEq)]
#[must_use = "a builder does nothing until `build`"]
pub struct ModelConfigBuilder {
    cfg: ModelConfig,
}

macro_rules! setters {
    ($($(#[$doc:meta])* $field:ident: $ty:ty),* $(,)?) => {
        $(
            $(#[$doc])*
            pub fn $field(mut self, $field: $ty) -> Self {
                self.cfg.$field = $field;
                self
            }
        )*
    };
}

impl ModelConfigBuilder {
    setters! {
        /// The temporal mixer.
        temporal: Temporal,
        /// D: TRs per token.
        d_in: usize,
        /// M: model width.
        d_model: usize,
        /// Number of (temporal, spatial) layer pairs.
        n_layers: usize,
        /// N: SSM state size.
        d_state: usize,
        /// Di / M.
        expand: usize,
        /// K: causal conv width.
        d_conv: usize,
        /// Mamba-2 head width.
        headdim: usize,
        /// Mamba-2 SSD chunk length.
        chunk_size: usize,
        /// k: neighbours per parcel, self included; 0 for no spatial attention.
        k_neighbors: usize,
        /// The linear path added to the forecasts.
        linear_path: LinearPath,
    }

    /// Forecast horizons in tokens.
    pub fn horizons(mut self, horizons: &[usize]) -> Self {
        self.cfg.horizons = horizons.to_vec();
        self
    }

    /// The configuration, validated ([`ModelConfig::validate`]: the error names the field).
    pub fn build(self) -> Result<ModelConfig> {
        self.cfg.validate()?;
        Ok(self.cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_demo_has_732930_parameters() {
        assert_eq!(ModelConfig::boldcast_demo().n_params(), 732_930);
    }

    #[test]
    fn invalid_sizes_name_the_field() {
        let mut c = ModelConfig::boldcast_demo();
        c.horizons = vec![1, 0];
        let e = c.validate().unwrap_err();
        assert!(alloc::format!("{e}").contains("model.horizons"), "{e}");
        let mut c = ModelConfig::boldcast_demo();
        c.d_model = 0;
        assert!(alloc::format!("{}", c.validate().unwrap_err()).contains("model.d_model"));
    }

    /// A configuration with `n_layers = 9223372036854775807` must fail validation: otherwise
    /// `param_specs` pushes specs until memory runs out, and sizes whose product overflows
    /// panic in `d_inner` (debug) or wrap (release).
    #[test]
    fn more_layers_than_the_bound_are_refused_naming_the_field() {
        let msg = |c: &ModelConfig| alloc::format!("{}", c.validate().unwrap_err());
        let mut c = ModelConfig::boldcast_demo();
        c.n_layers = 1 << 40;
        let m = msg(&c);
        assert!(m.starts_with("invalid model.n_layers = 1099511627776: must be at most 1024 ("), "{m}");
        assert!(m.ends_with("would need 4.9 EiB of memory)"), "{m}");
        c.n_layers = MAX_LAYERS + 1;
        assert!(msg(&c).starts_with("invalid model.n_layers = 1025: must be at most 1024"));
        c.n_layers = MAX_LAYERS;
        assert!(c.validate().is_ok());
    }

    #[test]
    fn sizes_whose_products_overflow_are_refused_naming_the_field() {
        let huge = 1usize << 62;
        let demo = ModelConfig::boldcast_demo;
        for (field, c) in [
            ("model.d_model", ModelConfig { d_model: huge, ..demo() }),
            ("model.expand", ModelConfig { expand: huge, ..demo() }),
            ("model.d_conv", ModelConfig { d_conv: huge, ..demo() }),
            ("model.d_state", ModelConfig { d_state: huge, ..demo() }),
            ("model.n_layers", ModelConfig { n_layers: huge, ..demo() }),
            ("model.d_in", ModelConfig { d_in: huge, ..demo() }),
            ("model.d_model", ModelConfig { temporal: Temporal::Mamba2, d_model: huge / 2, ..demo() }),
            ("model.d_model", ModelConfig { temporal: Temporal::Mamba2, d_model: huge, ..demo() }),
        ] {
            let e = alloc::format!("{}", c.validate().unwrap_err());
            assert!(e.starts_with(&alloc::format!("invalid {field} = ")), "{e}");
            assert!(e.contains("would need more than 16.0 EiB of memory"), "{e}");
            assert_eq!(c.n_params(), usize::MAX, "saturates");
            // Shapes saturate instead of panicking.
            let one_layer = c.clone().into_builder().n_layers(1).cfg;
            assert!(field == "model.n_layers" || one_layer.param_specs().iter().any(|s| s.numel() > 1 << 40));
        }
        // Large but countable: valid (the memory it needs is checked by the crates that know the
        // machine).
        let c = ModelConfig { d_state: 100_000_000_000, ..demo() };
        assert!(c.validate().is_ok());
        assert_eq!(c.n_params(), c.param_specs().iter().map(ParamSpec::numel).sum::<usize>());
    }

    #[test]
    fn duplicate_horizons_are_refused_and_zero_layers_are_not() {
        for hs in [&[1, 1][..], &[1, 5, 3, 5]] {
            let e = ModelConfig::builder().horizons(hs).build().unwrap_err();
            let m = alloc::format!("{e}");
            assert!(m.contains("model.horizons") && m.contains("5") == (hs.len() == 4), "{m}");
            assert!(m.contains("duplicate"), "{m}");
        }
        let e = ModelConfig::builder().horizons(&[2, 7, 2]).build().unwrap_err();
        assert!(alloc::format!("{e}").contains("model.horizons = 2"), "{e}");
        assert!(ModelConfig::builder().horizons(&[5, 1]).build().is_ok());
        assert!(ModelConfig::builder().n_layers(0).build().is_ok());
    }

    #[test]
    fn tokens_without_parcels_are_refused_in_a_sentence() {
        let c = ModelConfig::builder().k_neighbors(0).build().unwrap();
        let shape = crate::shape::TokenShape { batch: 4, time: 32, parcels: 0, d_in: c.d_in };
        let e = alloc::format!("{}", c.check_tokens(&shape).unwrap_err());
        assert!(e.contains("0 parcels") && e.contains("at least 1"), "{e}");
        assert!(!e.contains('{') && !e.contains("TokenShape"), "a sentence, not a Debug struct: {e}");
    }

    #[test]
    fn the_builder_sets_each_field_and_validates() {
        let c = ModelConfig::builder()
            .temporal(Temporal::Mamba2)
            .d_in(2)
            .d_model(8)
            .n_layers(1)
            .d_state(3)
            .expand(3)
            .d_conv(2)
            .headdim(6)
            .chunk_size(5)
            .k_neighbors(0)
            .horizons(&[1, 4])
            .build()
            .unwrap();
        let want = ModelConfig {
            temporal: Temporal::Mamba2,
            d_in: 2,
            d_model: 8,
            n_layers: 1,
            d_state: 3,
            expand: 3,
            d_conv: 2,
            headdim: 6,
            chunk_size: 5,
            k_neighbors: 0,
            horizons: vec![1, 4],
            linear_path: LinearPath::Off,
        };
        assert_eq!(c, want);
        assert_eq!(ModelConfig::builder().build().unwrap(), ModelConfig::boldcast_demo());
        assert_eq!(want.clone().into_builder().build().unwrap(), want);
        let e = ModelConfig::builder().temporal(Temporal::Mamba2).headdim(5).build().unwrap_err();
        assert!(alloc::format!("{e}").contains("model.headdim"), "{e}");
    }

    #[test]
    fn decay_groups_follow_the_rule() {
        let c = ModelConfig::boldcast_demo();
        for s in c.param_specs() {
            let expect = s.shape.len() >= 2 && !s.name.ends_with("A_log");
            assert_eq!(s.decays(), expect, "{}", s.name);
        }
        assert!(c.param_specs().iter().any(|s| s.name.ends_with("A_log") && s.shape.len() == 2 && !s.decays()));
    }
}
