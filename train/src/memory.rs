//! What a training run would need in memory, estimated from its configuration before anything
//! is allocated ([`RunConfig::memory_need`]), and the check against the machine's memory
//! ([`RunConfig::check_memory`], [`RunConfig::check_memory_of`], which
//! [`crate::data::load_data`] and [`crate::data::TrainData::new`] call before they generate,
//! load or window anything, so before `bc-cli train` creates its output directory). The
//! arithmetic is checked throughout: [`RunConfig::validate`] refuses a configuration whose
//! estimate overflows (naming the field of the largest factor), and a configuration whose
//! estimate exceeds the machine's memory is [`ConfigError::Memory`], which says how much memory
//! it would need, part by part, how much the machine has and which field weighs the most.
//!
//! The estimate, in bytes (rough, and meant to be: it is there to refuse what cannot run):
//!
//! ```text
//! data                    the runs, f64: subjects runs trs parcels 8 (synthetic), or
//!                         sum of n_tr parcels 8 (data.dir, as loaded) plus the copy of the
//!                         held-out runs the empirical floor reads; 200 per run; 24 per window
//!                         (the window and its place in the epoch order)
//! adjacency               with model.k_neighbors > 0: the P x P scores, 8 P^2 from centroids
//!                         (the synthetic circle, parcels.tsv), 16 P^2 from correlations; 40 P
//! parameters and optimizer  boldcast_core::memory::BYTES_PER_PARAM (28) per parameter
//! activations             ModelConfig::activation_memory: one training step of batch_size
//!                         windows of window TRs over the parcels, on the step's threads
//! ```

use crate::config::{ConfigError, RunConfig};
use boldcast_core::memory::{overflow_reason, Overflow, Size};
use boldcast_data::Dataset;
use boldcast_storage::memory::{check, machine_memory, main_cause, step_threads, MemoryNeed};

/// The data an estimate is for.
#[derive(Clone, Copy, Debug)]
pub enum DataSize<'a> {
    /// `[data.synthetic]`, not generated yet.
    Synthetic,
    /// A loaded dataset (runs on disk count only where they are copied); the runs `heldout`
    /// are copied once more for the empirical floor (`None`: synthetic data, whose floor is
    /// exact).
    Loaded(&'a Dataset, Option<&'a [usize]>),
    /// `data.dir` before it is read: the data and adjacency are left out and the activations
    /// are those of one parcel (a lower bound, to refuse a model too large for any data).
    Unread,
}

/// Bytes per run beside its values (the run's entities, path and vector).
const PER_RUN: usize = 200;
/// Bytes per window: the window (run, start) and its index in the epoch order.
const PER_WINDOW: usize = 24;

fn of(field: &'static str, v: usize) -> Size {
    Size::of(field, v)
}

impl RunConfig {
    /// Windows of `trs` TRs at this configuration's window and stride (0 when one does not fit).
    fn windows_per_run(&self, trs: Size) -> Result<Size, Overflow> {
        let (w, s) = (self.window.window, self.window.stride.max(1));
        if trs.value() < w {
            return Ok(Size::lit(0));
        }
        trs.derived((trs.value() - w) / s).plus(1)
    }

    /// The estimate's parts, checked.
    fn parts(&self, data: DataSize<'_>, threads: usize) -> Result<Vec<(&'static str, Size)>, Overflow> {
        let s = &self.data.synthetic;
        let mut parts = Vec::new();
        let (parcels, from_centroids) = match data {
            DataSize::Synthetic => {
                let runs = of("data.synthetic.subjects", s.subjects).checked_mul(of("data.synthetic.runs", s.runs))?;
                let trs = of("data.synthetic.trs", s.trs);
                let parcels = of("data.synthetic.parcels", s.parcels);
                let values = runs.checked_mul(trs)?.checked_mul(parcels)?.times(8)?;
                let windows = runs.checked_mul(self.windows_per_run(trs)?)?.times(PER_WINDOW)?;
                parts.push(("data", values.checked_add(runs.times(PER_RUN)?)?.checked_add(windows)?));
                (parcels, true)
            }
            DataSize::Loaded(ds, heldout) => {
                let parcels = Size::lit(ds.parcels);
                let mut bytes = Size::lit(0);
                for (i, r) in ds.runs.iter().enumerate() {
                    let trs = Size::lit(r.n_tr);
                    // A run kept on disk holds nothing until read (boldcast_data's `store`).
                    let copies = usize::from(!r.on_disk()) + usize::from(heldout.is_some_and(|h| h.contains(&i)));
                    let values = trs.checked_mul(parcels)?.times(8 * copies)?;
                    let windows = self.windows_per_run(trs)?.times(PER_WINDOW)?;
                    bytes = bytes.checked_add(values)?.plus(PER_RUN)?.checked_add(windows)?;
                }
                parts.push(("data", bytes));
                (parcels, ds.centroids.is_some())
            }
            DataSize::Unread => (Size::lit(1), true),
        };
        if self.model.k_neighbors > 0 && !matches!(data, DataSize::Unread) {
            let square = parcels.checked_mul(parcels)?.times(if from_centroids { 8 } else { 16 })?;
            parts.push(("adjacency", square.checked_add(parcels.times(40)?)?));
        }
        parts.push(("parameters and optimizer", self.model.param_bytes()?));
        let (batch, window) = (of("train.batch_size", self.train.batch_size), of("window.window", self.window.window));
        let name = if matches!(data, DataSize::Unread) { "activations of one parcel" } else { "activations" };
        parts.push((name, self.model.activation_bytes(batch, window, parcels, threads)?));
        Ok(parts)
    }

    fn total(&self, data: DataSize<'_>, threads: usize) -> Result<Size, Overflow> {
        self.parts(data, threads)?.into_iter().try_fold(Size::lit(0), |a, (_, b)| a.checked_add(b))
    }

    /// What a run of this configuration would need in memory on `threads` threads, part by
    /// part (see the module documentation), with the field whose reduction to 1 would shrink
    /// it most. An overflow anywhere is [`ConfigError::Invalid`] naming the field of the largest
    /// factor.
    pub fn memory_need(&self, data: DataSize<'_>, threads: usize) -> Result<MemoryNeed, ConfigError> {
        let overflow = |o: Overflow| ConfigError::Invalid {
            field: o.field.into(),
            value: o.value.to_string(),
            reason: overflow_reason("the configuration"),
        };
        let total = self.total(data, threads).map_err(overflow)?.value();
        let parts = self.parts(data, threads).map_err(overflow)?.into_iter().map(|(n, s)| (n, s.value())).collect();
        let at = |f: &dyn Fn(&mut RunConfig)| {
            let mut c = self.clone();
            f(&mut c);
            c.total(data, threads).ok().map(Size::value)
        };
        let (m, s, t) = (&self.model, &self.data.synthetic, &self.train);
        let mut candidates = vec![
            ("model.d_model", m.d_model, at(&|c| c.model.d_model = 1)),
            ("model.n_layers", m.n_layers, at(&|c| c.model.n_layers = 1)),
            ("model.d_state", m.d_state, at(&|c| c.model.d_state = 1)),
            ("model.expand", m.expand, at(&|c| c.model.expand = 1)),
            ("model.d_conv", m.d_conv, at(&|c| c.model.d_conv = 1)),
            ("model.k_neighbors", m.k_neighbors, at(&|c| c.model.k_neighbors = 0)),
            ("model.chunk_size", m.chunk_size, at(&|c| c.model.chunk_size = 1)),
            ("train.batch_size", t.batch_size, at(&|c| c.train.batch_size = 1)),
            ("window.window", self.window.window, at(&|c| c.window.window = c.model.d_in)),
        ];
        if matches!(data, DataSize::Synthetic) {
            candidates.extend([
                ("data.synthetic.subjects", s.subjects, at(&|c| c.data.synthetic.subjects = 1)),
                ("data.synthetic.runs", s.runs, at(&|c| c.data.synthetic.runs = 1)),
                ("data.synthetic.trs", s.trs, at(&|c| c.data.synthetic.trs = 1)),
                ("data.synthetic.parcels", s.parcels, at(&|c| c.data.synthetic.parcels = 1)),
            ]);
        }
        let cause = main_cause(total, &candidates);
        Ok(MemoryNeed { what: "the configuration".into(), parts, cause })
    }

    /// The overflow checks of [`RunConfig::validate`]: the estimate on one thread, for the
    /// synthetic data, or for `data.dir` before it is read.
    pub(crate) fn validate_sizes(&self) -> Result<(), ConfigError> {
        let data = if self.data.dir.is_none() { DataSize::Synthetic } else { DataSize::Unread };
        self.memory_need(data, 1).map(|_| ())
    }

    /// [`RunConfig::memory_need`] before any data is generated or read (the synthetic data in
    /// full; for `data.dir`, the model alone) against the machine's memory: `Ok` with the
    /// estimate when it fits or the machine's memory is unknown, else [`ConfigError::Memory`].
    pub fn check_memory(&self) -> Result<MemoryNeed, ConfigError> {
        let data = if self.data.dir.is_none() { DataSize::Synthetic } else { DataSize::Unread };
        Ok(check(self.memory_need(data, step_threads())?, machine_memory())?)
    }

    /// [`RunConfig::memory_need`] of a loaded dataset (with the held-out runs the empirical
    /// floor copies, `None` for synthetic data) against the machine's memory.
    pub fn check_memory_of(&self, ds: &Dataset, heldout: Option<&[usize]>) -> Result<MemoryNeed, ConfigError> {
        Ok(check(self.memory_need(DataSize::Loaded(ds, heldout), step_threads())?, machine_memory())?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn laptop() -> RunConfig {
        crate::presets::preset("laptop").unwrap()
    }

    #[test]
    fn the_parts_follow_the_documented_formulas() {
        let c = laptop();
        let need = c.memory_need(DataSize::Synthetic, 2).unwrap();
        let names: Vec<&str> = need.parts.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["data", "adjacency", "parameters and optimizer", "activations"]);
        // 8 subjects x 2 runs x 600 TRs x 16 parcels; 8 windows of 128 TRs at stride 64 per run (bc-cli train prints 112 for 14 runs).
        assert_eq!(need.parts[0].1, 16 * 600 * 16 * 8 + 16 * 200 + 16 * 8 * 24);
        assert_eq!(need.parts[1].1, 16 * 16 * 8 + 16 * 40);
        assert_eq!(need.parts[2].1, 28 * c.model.n_params());
        let w = |f, v| Size::of(f, v);
        let act = c.model.activation_memory(w("b", 4), w("w", 128), w("p", 16), 2).unwrap();
        assert_eq!(need.parts[3].1, act);
        // The laptop preset fits in a few MiB.
        assert!(need.total() < 64 << 20, "{}", need.total());
        // The activations weigh the most there, and d_model = 1 would shrink them most.
        assert!(need.parts[3].1 > need.total() / 2);
        assert_eq!(need.cause, Some(("model.d_model".into(), "32".into())));
    }

    #[test]
    fn the_cause_is_the_field_that_weighs_the_most() {
        for (field, set) in [
            (
                "data.synthetic.trs",
                &(|c: &mut RunConfig| c.data.synthetic.trs = 1_000_000_000) as &dyn Fn(&mut RunConfig),
            ),
            ("model.d_state", &|c: &mut RunConfig| c.model.d_state = 100_000_000_000),
            ("model.d_model", &|c: &mut RunConfig| c.model.d_model = 1_000_000),
            ("train.batch_size", &|c: &mut RunConfig| c.train.batch_size = 1_000_000),
            ("data.synthetic.parcels", &|c: &mut RunConfig| c.data.synthetic.parcels = 10_000_000),
        ] {
            let mut c = laptop();
            set(&mut c);
            c.validate().unwrap();
            let need = c.memory_need(DataSize::Synthetic, 2).unwrap();
            assert_eq!(need.cause.as_ref().map(|(f, _)| f.as_str()), Some(field), "{need:?}");
            assert!(need.total() > 1 << 40, "{field}: {need:?}");
            let e = check(need, Some(16 << 30)).unwrap_err().to_string();
            assert!(e.starts_with("the configuration would need about "), "{e}");
            assert!(e.contains("; this machine has 16.0 GiB: most of it comes from "), "{e}");
        }
    }

    #[test]
    fn validate_refuses_an_estimate_that_overflows_naming_the_field() {
        let huge = 1usize << 62;
        for (field, set) in [
            ("data.synthetic.trs", &(|c: &mut RunConfig| c.data.synthetic.trs = 1 << 62) as &dyn Fn(&mut RunConfig)),
            ("data.synthetic.subjects", &|c: &mut RunConfig| c.data.synthetic.subjects = 1 << 62),
            ("data.synthetic.runs", &|c: &mut RunConfig| c.data.synthetic.runs = 1 << 62),
            ("train.batch_size", &|c: &mut RunConfig| c.train.batch_size = 1 << 62),
            ("window.window", &|c: &mut RunConfig| c.window.window = 1 << 62),
            ("model.d_model", &|c: &mut RunConfig| c.model.d_model = 1 << 62),
        ] {
            let mut c = laptop();
            set(&mut c);
            let e = c.validate().unwrap_err().to_string();
            assert!(e.starts_with(&format!("invalid {field} = {huge}: ")), "{e}");
            assert!(e.contains("would need more than 16.0 EiB of memory"), "{e}");
        }
        // 2^32 parcels: 8 P^2 bytes of adjacency overflow.
        let mut c = laptop();
        c.data.synthetic.parcels = 1 << 32;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.starts_with("invalid data.synthetic.parcels = 4294967296: the configuration would need more"), "{e}");
        // data.dir: the model and the activations per parcel only; the synthetic sizes are unused.
        let mut c = laptop();
        c.data.dir = Some("somewhere".into());
        c.data.synthetic.trs = 1 << 62;
        c.validate().unwrap();
        let need = c.memory_need(DataSize::Unread, 1).unwrap();
        let names: Vec<&str> = need.parts.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["parameters and optimizer", "activations of one parcel"]);
        c.train.batch_size = 1 << 62;
        assert!(c.validate().unwrap_err().to_string().starts_with("invalid train.batch_size = "));
    }

    #[test]
    fn a_loaded_dataset_counts_its_runs_and_the_floors_copy() {
        let c = laptop();
        let runs = boldcast_fixtures::Ar1Spec::new(
            boldcast_fixtures::Layout { subjects: 2, runs: 1, trs: 300, parcels: 16, seed: 0 },
            0.9,
        )
        .generate()
        .unwrap();
        let ds = Dataset::from_synth(&runs, None).unwrap();
        let need = c.memory_need(DataSize::Loaded(&ds, Some(&[1])), 1).unwrap();
        // Run 0 once, run 1 twice; 3 windows of 128 at stride 64 each; correlation adjacency.
        assert_eq!(need.parts[0], ("data", 300 * 16 * 8 * 3 + 2 * 200 + 2 * 3 * 24));
        assert_eq!(need.parts[1], ("adjacency", 16 * 16 * 16 + 16 * 40));
        assert!(c.check_memory_of(&ds, Some(&[1])).is_ok());
    }
}
