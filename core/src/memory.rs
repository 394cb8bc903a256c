//! Sizes in checked arithmetic and the memory a model needs: [`Size`] (a count that remembers
//! the configuration field it grew from, so an overflow names that field),
//! [`ModelConfig::param_count`] (the parameter count in closed form, every tensor's element
//! count checked), [`ModelConfig::param_memory`] and [`ModelConfig::activation_memory`] (the
//! bytes of the parameters with their optimizer state, and of one training step's
//! activations), and [`format_bytes`]. Arithmetic only: comparing with a machine's memory is the
//! job of the crates that can ask the machine (`boldcast-train`, `boldcast-data`).

use crate::config::{ModelConfig, Temporal};
use crate::error::{Error, Result};
use alloc::format;
use alloc::string::String;

/// A count on its way to a byte count, with the configuration field most responsible for it:
/// the factor of the largest value among those it was made of. When a product or sum
/// overflows `usize`, [`Overflow`] names that field and its value.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Size {
    value: usize,
    field: &'static str,
    weight: usize,
}

/// A count that does not fit in `usize`, blamed on the field of the largest factor.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Overflow {
    /// The field, e.g. `"model.d_model"`.
    pub field: &'static str,
    /// Its value.
    pub value: usize,
}

impl Overflow {
    /// The configuration error: `invalid FIELD = VALUE: WHAT would need more than 16.0 EiB of
    /// memory (its size overflows a 64-bit count)`.
    pub fn error(self, what: &str) -> Error {
        Error::config(self.field, self.value, overflow_reason(what))
    }
}

/// `WHAT would need more than 16.0 EiB of memory (its size overflows a 64-bit count)`: the text
/// of every size overflow, here and in the crates above.
pub fn overflow_reason(what: &str) -> String {
    format!(
        "{what} would need more than {} of memory (its size overflows a {}-bit count)",
        format_bytes(usize::MAX as f64),
        usize::BITS
    )
}

impl Size {
    /// The value of a configuration field.
    pub fn of(field: &'static str, value: usize) -> Self {
        Self { value, field, weight: value }
    }

    /// A constant of the formula (never blamed while a field takes part).
    pub fn lit(value: usize) -> Self {
        Self { value, field: "", weight: 0 }
    }

    /// The count.
    pub fn value(self) -> usize {
        self.value
    }

    /// The field it is blamed on (empty for a constant).
    pub fn field(self) -> &'static str {
        self.field
    }

    fn blame(self, o: Size) -> (&'static str, usize) {
        if o.weight > self.weight {
            (o.field, o.weight)
        } else {
            (self.field, self.weight)
        }
    }

    fn combine(self, o: Size, v: Option<usize>) -> Result<Size, Overflow> {
        let (field, weight) = self.blame(o);
        v.map(|value| Size { value, field, weight }).ok_or(Overflow { field, value: weight })
    }

    /// `self * o`.
    pub fn checked_mul(self, o: Size) -> Result<Size, Overflow> {
        self.combine(o, self.value.checked_mul(o.value))
    }

    /// `self + o`.
    pub fn checked_add(self, o: Size) -> Result<Size, Overflow> {
        self.combine(o, self.value.checked_add(o.value))
    }

    /// `self * k` for a constant `k`.
    pub fn times(self, k: usize) -> Result<Size, Overflow> {
        self.checked_mul(Size::lit(k))
    }

    /// `self + k` for a constant `k`.
    pub fn plus(self, k: usize) -> Result<Size, Overflow> {
        self.checked_add(Size::lit(k))
    }

    /// `self / d` (0 when `d` is 0), blamed as `self`.
    pub fn quotient(self, d: usize) -> Size {
        Size { value: self.value.checked_div(d).unwrap_or(0), ..self }
    }

    /// `ceil(self / d)` (0 when `d` is 0), blamed as `self`.
    pub fn div_ceil(self, d: usize) -> Size {
        Size { value: if d == 0 { 0 } else { self.value.div_ceil(d) }, ..self }
    }

    /// A count derived from this one without arithmetic that could overflow (a difference, a
    /// quotient), blamed as this one.
    pub fn derived(self, value: usize) -> Size {
        Size { value, ..self }
    }

    /// The smaller of `self` and `o`, with its blame.
    pub fn min(self, o: Size) -> Size {
        if o.value < self.value {
            o
        } else {
            self
        }
    }

    /// The larger of `self` and `o`, with its blame.
    pub fn max(self, o: Size) -> Size {
        if o.value > self.value {
            o
        } else {
            self
        }
    }
}

/// `1536` -> `"1.5 KiB"`, `512 * 2^30` -> `"512.0 GiB"`: binary units, one decimal.
pub fn format_bytes(bytes: f64) -> String {
    const UNITS: [&str; 7] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let (mut v, mut u) = (bytes, 0);
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Bytes per parameter that a training run holds: the `f32` weights, their gradients and
/// Adam's two moments (16), plus what writing a checkpoint copies them into (the weights and
/// moments as tensors and as the file's bytes, 12 more).
pub const BYTES_PER_PARAM: usize = 28;

/// Bytes of one value of a training step (`f32`).
const ELEM: usize = 4;

/// Bytes of Mamba-1 scan checkpoints the CPU backend's training forward may keep for the
/// backward, all layers together: they spare the backward one pass over the scan states per
/// layer. The budget holds `cpu-demo`'s 128 MiB; `boldcast-demo` (16 GiB of them) keeps none
/// and its backward makes its own. The backend and [`ModelConfig::activation_memory`] both
/// read it here.
pub const SCAN_CHECKPOINT_BUDGET: usize = 256 << 20;

/// Bytes of Mamba-1 in_proj and x_proj outputs the CPU backend's training forward may keep,
/// all layers together, when the scan checkpoints are kept too: they spare the backward its
/// two largest recomputed products per layer. The budget holds `cpu-demo`'s 146 MiB;
/// `boldcast-demo` (8.6 GiB of them) keeps none.
pub const PROJECTION_BUDGET: usize = 256 << 20;

/// Bytes of attention activations (LayerNorm output, q/k/v, weights, weighted values) the CPU
/// backend's training forward may keep, all layers together: the backward then does not
/// recompute the attention's forward. The budget holds `cpu-demo`'s 164 MiB; `boldcast-demo`
/// (10.1 GiB of them) keeps none.
pub const ATTENTION_BUDGET: usize = 256 << 20;

/// Gradient partials of one mixer's backward, at most one per block of sequences (the CPU
/// backend's `MAX_BLOCKS`).
const PARTIALS: usize = 32;

/// The named model sizes, as [`Size`]s.
struct Dims {
    d: Size,
    m: Size,
    l: Size,
    n: Size,
    k: Size,
    di: Size,
    r: Size,
    kn: Size,
    h: Size,
    chunk: Size,
}

impl ModelConfig {
    fn dims(&self) -> Result<Dims, Overflow> {
        let m = Size::of("model.d_model", self.d_model);
        let di = Size::of("model.expand", self.expand).checked_mul(m)?;
        Ok(Dims {
            d: Size::of("model.d_in", self.d_in),
            m,
            l: Size::of("model.n_layers", self.n_layers),
            n: Size::of("model.d_state", self.d_state),
            k: Size::of("model.d_conv", self.d_conv),
            di,
            r: m.div_ceil(16),
            kn: Size::of("model.k_neighbors", self.k_neighbors),
            h: Size::of("model.horizons", self.horizons.len()),
            chunk: Size::of("model.chunk_size", self.chunk_size),
        })
    }

    /// Parameters of one layer's temporal mixer (`layers.{i}.mamba.mamba.*`).
    fn mixer_params(&self, z: &Dims) -> Result<Size, Overflow> {
        let (m, di, n, k) = (z.m, z.di, z.n, z.k);
        match self.temporal {
            Temporal::Mamba => {
                let w = z.r.checked_add(n.times(2)?)?;
                let t = [
                    di.checked_mul(k)?,
                    di,
                    di.times(2)?.checked_mul(m)?,
                    w.checked_mul(di)?,
                    di.checked_mul(z.r)?,
                    di,
                    di.checked_mul(n)?,
                    di,
                    m.checked_mul(di)?,
                ];
                t.into_iter().try_fold(Size::lit(0), Size::checked_add)
            }
            Temporal::Mamba2 => {
                let h = di.quotient(self.headdim.max(1));
                let conv = di.checked_add(n.times(2)?)?;
                let proj = di.times(2)?.checked_add(n.times(2)?)?.checked_add(h)?;
                let t = [h, conv.checked_mul(k)?, conv, proj.checked_mul(m)?, h, h, di, m.checked_mul(di)?];
                t.into_iter().try_fold(Size::lit(0), Size::checked_add)
            }
        }
    }

    /// Parameters of one layer's spatial attention (`layers.{i}.knn.*`; none when
    /// `k_neighbors = 0`).
    fn attention_params(&self, z: &Dims) -> Result<Size, Overflow> {
        if self.k_neighbors == 0 {
            return Ok(Size::lit(0));
        }
        z.m.checked_mul(z.m)?.checked_add(z.m)?.times(4)?.checked_add(z.m.times(2)?)
    }

    fn param_size(&self) -> Result<Size, Overflow> {
        let z = self.dims()?;
        let layer = z.m.times(2)?.checked_add(self.mixer_params(&z)?)?.checked_add(self.attention_params(&z)?)?;
        let hd = z.h.checked_mul(z.d)?;
        let outer = [z.m.checked_mul(z.d)?, z.m, z.m.times(2)?, hd.checked_mul(z.m)?, hd];
        outer.into_iter().try_fold(z.l.checked_mul(layer)?, Size::checked_add)
    }

    /// The number of scalar parameters, in closed form (the sum of the element counts of
    /// [`ModelConfig::param_specs`], without building them), every product checked: an
    /// overflow is an error naming the field of the largest factor and saying that the
    /// parameters would need more memory than a 64-bit count holds. [`ModelConfig::validate`]
    /// calls it, so a valid configuration's counts all fit.
    pub fn param_count(&self) -> Result<usize> {
        self.param_size().map(Size::value).map_err(|o| o.error("the model's parameters"))
    }

    /// Bytes of the parameters during training: [`BYTES_PER_PARAM`] per parameter (weights,
    /// gradients, Adam's moments and the copies a checkpoint is written from), checked like
    /// [`ModelConfig::param_count`].
    pub fn param_memory(&self) -> Result<usize> {
        self.param_bytes().map(Size::value).map_err(|o| o.error("the model's parameters and optimizer state"))
    }

    /// [`ModelConfig::param_memory`] as a [`Size`] (for sums that name the field at fault).
    pub fn param_bytes(&self) -> Result<Size, Overflow> {
        self.param_size()?.times(BYTES_PER_PARAM)
    }

    /// A rough estimate of the bytes the CPU backend allocates beyond the parameters to train
    /// on `batch` windows of `window` TRs (`T = window / d_in` tokens) over `parcels` parcels on
    /// `threads` threads and to validate between steps, all in `f32` (4 bytes):
    ///
    /// ```text
    /// rows = B T P                                 tokens of a step
    /// a    = 1 with the spatial attention (k_neighbors > 0), else 0
    /// step     rows (M (L (1 + a) + 9) + D (3 H + 1))
    ///          the (B,T,P,M) activations: each layer's input (and, with attention, its middle)
    ///          kept by the forward; the trunk output, the LayerNorm and mixer outputs, the
    ///          final embedding and the activation gradients (5), which the model keeps for
    ///          the next step; a validation forward's own 4 beside them; the predictions, their
    ///          gradient and the validation targets (3 H D per token) and the tokens (D)
    /// scans    Mamba-1: the scan checkpoints a training forward keeps, L B P ceil(T / Q) N Di,
    ///          when they fit the backend's 256 MiB budget (else none are kept), and with them
    ///          the in_proj and x_proj outputs, L rows (2 Di + R + 2 N), within 256 MiB more
    /// knn      with attention, the activations a training forward keeps for the backward,
    ///          L rows (5 M + k), when they fit the backend's 256 MiB budget
    /// threads  per thread, one sequence's workspace of the mixer:
    ///          Mamba-1  T (2 M + 22 Di + 3 (R + 2 N)) + Di N (ceil(T / Q) + 4), with Q the
    ///                   backward's chunk (the largest power of two up to 32 whose 4 Q Di N
    ///                   values fit 128 KiB)
    ///          Mamba-2  T (2 M + 2 (2 Di + 2 N + nh) + 4 (Di + 2 N) + 3 Di + 2 nh)
    ///                   + ceil(T / Qc) Di N + 2 Qc^2 + 2 Qc N, with Qc = min(chunk_size, T)
    ///          and with attention a sub-batch of max(P, 1024) rows: max(P, 1024) (10 M + k)
    /// partials one layer's backward sums its parameter gradients in at most 32 blocks, each a
    ///          copy of the mixer's parameters in f64 (8 bytes) and of the attention's (4 bytes)
    /// ```
    ///
    /// It leaves out what is small beside these terms (the backend's per-call tables of `Di N`
    /// values, the allocator's slack, the program itself). Measured against `bc-cli train
    /// --preset cpu-demo --max-steps 3 --val-every 3` (2 threads, 2026-12-03, since the backend
    /// keeps projections and attention activations): its activations alone are 671 MiB where
    /// the process peaks at 677 MiB with Mamba-1, and about 414 MiB for 401 MiB with Mamba-2.
    /// Every product is checked; an overflow names the field of the largest factor (`batch`,
    /// `window` and `parcels` carry the fields the caller gives them).
    pub fn activation_memory(&self, batch: Size, window: Size, parcels: Size, threads: usize) -> Result<usize> {
        self.activation_bytes(batch, window, parcels, threads)
            .map(Size::value)
            .map_err(|o| o.error("one training step's activations"))
    }

    /// [`ModelConfig::activation_memory`] as a [`Size`] (for sums that name the field at fault).
    pub fn activation_bytes(&self, batch: Size, window: Size, parcels: Size, threads: usize) -> Result<Size, Overflow> {
        let z = self.dims()?;
        let (m, d, l, n, di) = (z.m, z.d, z.l, z.n, z.di);
        let threads = Size::lit(threads.max(1));
        let attn = self.k_neighbors > 0;
        let time = window.quotient(self.d_in);
        let rows = batch.checked_mul(time)?.checked_mul(parcels)?;
        // The (B, T, P, M) tensors and the per-token outputs.
        let kept = l.times(1 + usize::from(attn))?.plus(9)?;
        let per_row = m.checked_mul(kept)?.checked_add(d.checked_mul(z.h.times(3)?.plus(1)?)?)?;
        let step = rows.checked_mul(per_row)?;
        // One sequence's workspace per thread.
        let seq = match self.temporal {
            Temporal::Mamba => {
                let state = di.checked_mul(n)?;
                let q = scan_chunk(state.value(), time.value());
                let w = z.r.checked_add(n.times(2)?)?;
                let per_step = m.times(2)?.checked_add(di.times(22)?)?.checked_add(w.times(3)?)?;
                time.checked_mul(per_step)?.checked_add(state.checked_mul(time.div_ceil(q).plus(4)?)?)?
            }
            Temporal::Mamba2 => {
                let nh = di.quotient(self.headdim.max(1));
                let conv = di.checked_add(n.times(2)?)?;
                let proj = di.times(2)?.checked_add(n.times(2)?)?.checked_add(nh)?;
                let per_step = m
                    .times(2)?
                    .checked_add(proj.times(2)?)?
                    .checked_add(conv.times(4)?)?
                    .checked_add(di.times(3)?)?
                    .checked_add(nh.times(2)?)?;
                let qc = z.chunk.min(time).max(Size::lit(1));
                let ssd = time
                    .div_ceil(qc.value())
                    .checked_mul(di)?
                    .checked_mul(n)?
                    .checked_add(qc.checked_mul(qc)?.times(2)?)?
                    .checked_add(qc.checked_mul(n)?.times(2)?)?;
                time.checked_mul(per_step)?.checked_add(ssd)?
            }
        };
        // The Mamba-1 scan checkpoints and projections, the attention's activations, each
        // when it fits its budget.
        let within = |v: Size, budget: usize| if v.value().saturating_mul(ELEM) <= budget { v } else { Size::lit(0) };
        let scans = match self.temporal {
            Temporal::Mamba => {
                let q = scan_chunk(di.value().saturating_mul(n.value()), time.value());
                let all = l.checked_mul(batch)?.checked_mul(parcels)?.checked_mul(time.div_ceil(q))?;
                let states = within(all.checked_mul(n)?.checked_mul(di)?, SCAN_CHECKPOINT_BUDGET);
                let proj =
                    l.checked_mul(rows)?.checked_mul(di.times(2)?.checked_add(z.r)?.checked_add(n.times(2)?)?)?;
                let proj = if states.value() > 0 { within(proj, PROJECTION_BUDGET) } else { Size::lit(0) };
                states.checked_add(proj)?
            }
            Temporal::Mamba2 => Size::lit(0),
        };
        let knn_kept = match attn {
            true => within(l.checked_mul(rows)?.checked_mul(m.times(5)?.checked_add(z.kn)?)?, ATTENTION_BUDGET),
            false => Size::lit(0),
        };
        let scans = scans.checked_add(knn_kept)?;
        let attn_scratch = if attn {
            parcels.max(Size::lit(1024)).checked_mul(m.times(10)?.checked_add(z.kn)?)?
        } else {
            Size::lit(0)
        };
        let per_thread = threads.checked_mul(seq.checked_add(attn_scratch)?)?;
        // The gradient partials of one layer's backward.
        let blocks = Size::lit(PARTIALS).min(batch.checked_mul(parcels)?);
        let mixer = blocks.checked_mul(self.mixer_params(&z)?)?.times(8)?;
        let attention = if attn {
            let extra = m.checked_mul(m)?.times(3)?.checked_add(m.times(3)?)?;
            Size::lit(PARTIALS)
                .min(batch.checked_mul(time)?)
                .checked_mul(self.attention_params(&z)?.checked_add(extra)?)?
                .times(ELEM)?
        } else {
            Size::lit(0)
        };
        step.checked_add(scans)?.checked_add(per_thread)?.times(ELEM)?.checked_add(mixer)?.checked_add(attention)
    }
}

/// The Mamba-1 backward's chunk length for `state = Di N` values per step (the CPU backend's
/// `scan_chunk` for `f32`): the largest power of two up to 32 whose states and decays,
/// `2 Q state` values of 4 bytes, fit 128 KiB; at least 1, at most `time`.
fn scan_chunk(state: usize, time: usize) -> usize {
    let per_step = state.saturating_mul(2 * ELEM).max(1);
    let mut q = 1usize;
    while q < 32 && (2 * q).saturating_mul(per_step) <= 128 << 10 {
        q *= 2;
    }
    q.min(time.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ParamSpec;
    use alloc::string::ToString;

    fn specs_sum(c: &ModelConfig) -> usize {
        c.param_specs().iter().map(ParamSpec::numel).sum()
    }

    #[test]
    fn the_closed_form_count_is_the_sum_of_the_specs() {
        for temporal in [Temporal::Mamba, Temporal::Mamba2] {
            for (m, layers, n, expand, k, kn, hs) in [
                (128, 4, 16, 2, 4, 8, &[1, 5][..]),
                (8, 1, 3, 3, 2, 0, &[1, 4]),
                (64, 0, 16, 2, 4, 8, &[1]),
                (24, 3, 7, 1, 3, 2, &[2, 3, 9]),
            ] {
                let c = ModelConfig::builder()
                    .temporal(temporal)
                    .d_in(2)
                    .d_model(m)
                    .n_layers(layers)
                    .d_state(n)
                    .expand(expand)
                    .d_conv(k)
                    .headdim(4)
                    .k_neighbors(kn)
                    .horizons(hs)
                    .build()
                    .unwrap();
                assert_eq!(c.param_count().unwrap(), specs_sum(&c), "{c:?}");
                assert_eq!(c.n_params(), specs_sum(&c));
                assert_eq!(c.param_memory().unwrap(), 28 * specs_sum(&c));
            }
        }
        assert_eq!(ModelConfig::boldcast_demo().param_count().unwrap(), 732_930);
    }

    #[test]
    fn an_overflowing_size_names_the_largest_factor() {
        let huge = 1usize << 62;
        let c = ModelConfig { d_model: huge, ..ModelConfig::boldcast_demo() };
        let e = c.param_count().unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid model.d_model = 4611686018427387904: the model's parameters would need more than 16.0 EiB of \
             memory (its size overflows a 64-bit count)"
        );
        for (field, c) in [
            ("model.expand", ModelConfig { expand: huge, ..ModelConfig::boldcast_demo() }),
            ("model.d_conv", ModelConfig { d_conv: huge, ..ModelConfig::boldcast_demo() }),
            ("model.d_state", ModelConfig { d_state: huge, ..ModelConfig::boldcast_demo() }),
            ("model.n_layers", ModelConfig { n_layers: huge, ..ModelConfig::boldcast_demo() }),
            ("model.d_in", ModelConfig { d_in: huge, ..ModelConfig::boldcast_demo() }),
        ] {
            let e = c.param_count().unwrap_err().to_string();
            assert!(e.starts_with(&alloc::format!("invalid {field} = {huge}: ")), "{e}");
        }
        // Fits as a count, not as bytes.
        let c = ModelConfig { n_layers: 1 << 44, ..ModelConfig::boldcast_demo() };
        assert!(c.param_count().is_ok());
        let e = c.param_memory().unwrap_err().to_string();
        assert!(e.starts_with("invalid model.n_layers = 17592186044416: the model's parameters and optimizer"), "{e}");
    }

    #[test]
    fn sizes_blame_the_largest_factor_and_constants_never() {
        let a = Size::of("a", 1 << 40);
        let b = Size::of("b", 1 << 30);
        assert_eq!(a.checked_mul(b).unwrap_err(), Overflow { field: "a", value: 1 << 40 });
        assert_eq!(b.checked_mul(a).unwrap_err(), Overflow { field: "a", value: 1 << 40 });
        assert_eq!(Size::lit(1 << 40).checked_mul(b).unwrap_err(), Overflow { field: "b", value: 1 << 30 });
        let ab = Size::of("a", 3).checked_mul(Size::of("b", 5)).unwrap();
        assert_eq!((ab.value(), ab.field()), (15, "b"));
        assert_eq!(Size::of("a", 7).quotient(0).value(), 0);
        assert_eq!(Size::of("a", 7).div_ceil(2).value(), 4);
    }

    #[test]
    fn activations_follow_the_documented_formula() {
        // cpu-demo's model (M 64, Di 128, N 16, R 4, L 2, k 8, H 2, D 1), B 4, T 256, P 64, 2 threads.
        let c = ModelConfig::builder().d_model(64).n_layers(2).headdim(32).build().unwrap();
        let got = c.activation_memory(Size::of("b", 4), Size::of("w", 256), Size::of("p", 64), 2).unwrap();
        let rows = 4 * 256 * 64;
        let step = rows * (64 * (2 * 2 + 9) + (3 * 2 + 1));
        // 2 layers x 4 x 64 sequences x 32 checkpoints of 16 x 128 values: 128 MiB, kept; with
        // them the projections, 2 layers x rows x (2 x 128 + 4 + 2 x 16): 146 MiB; and the
        // attention's activations, 2 layers x rows x (5 x 64 + 8): 164 MiB.
        let scans = 2 * 4 * 64 * 32 * 16 * 128 + 2 * rows * (2 * 128 + 4 + 32) + 2 * rows * (5 * 64 + 8);
        // Q = 8: 2 Q (2 Di N 4 bytes) = 16 x 16 KiB = 256 KiB > 128 KiB at Q = 16.
        assert_eq!(scan_chunk(128 * 16, 256), 8);
        let seq = 256 * (2 * 64 + 22 * 128 + 3 * (4 + 32)) + 128 * 16 * (256 / 8 + 4);
        let attn = 1024 * (10 * 64 + 8);
        let mixer = 128 * 4 + 128 + 2 * 128 * 64 + 36 * 128 + 128 * 4 + 128 + 128 * 16 + 128 + 64 * 128;
        let knn = 4 * (64 * 64 + 64) + 2 * 64;
        let partials = 32 * mixer * 8 + 32 * (knn + 3 * 64 * 64 + 3 * 64) * 4;
        assert_eq!(got, (step + scans + 2 * (seq + attn)) * 4 + partials);
        // About 670 MiB: 13 (B,T,P,M) tensors of 16 MiB each and 438 MiB kept for the backward.
        assert!((640 << 20..700 << 20).contains(&got), "{}", format_bytes(got as f64));
        // With 8 times the batch nothing kept fits its budget.
        let big = c.activation_memory(Size::of("b", 32), Size::of("w", 256), Size::of("p", 64), 2).unwrap();
        let step8 = 8 * rows * (64 * 13 + 7);
        assert_eq!(big, (step8 + 2 * (seq + attn)) * 4 + partials);
        // Mamba-2 and no attention: the same arithmetic, a different sum.
        let c2 = c.clone().into_builder().temporal(Temporal::Mamba2).k_neighbors(0).build().unwrap();
        let got2 = c2.activation_memory(Size::of("b", 4), Size::of("w", 256), Size::of("p", 64), 2).unwrap();
        assert!(got2 > rows * (64 * 10 + 7) * 4 && got2 < rows * (64 * 10 + 7) * 4 + (32 << 20), "{got2}");
    }

    #[test]
    fn overflowing_activations_name_the_callers_field() {
        let c = ModelConfig::boldcast_demo();
        let e = c
            .activation_memory(
                Size::of("train.batch_size", 1 << 62),
                Size::of("window.window", 256),
                Size::of("p", 64),
                1,
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid train.batch_size = 4611686018427387904: one training step's activations"),
            "{e}"
        );
        let e = c
            .activation_memory(Size::of("b", 4), Size::of("window.window", 1 << 60), Size::of("p", 64), 1)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("invalid window.window = 1152921504606846976"), "{e}");
    }

    #[test]
    fn bytes_read_in_binary_units() {
        assert_eq!(format_bytes(512.0), "512 bytes");
        assert_eq!(format_bytes(1536.0), "1.5 KiB");
        assert_eq!(format_bytes(512.0 * (1u64 << 30) as f64), "512.0 GiB");
        assert_eq!(format_bytes(usize::MAX as f64), "16.0 EiB");
    }
}
