//! A synthetic dataset written as real datasets are ([`write_synthetic`]): the runs of a
//! fixture generator (AR(1) or VAR(1), `boldcast-fixtures`) as run files, `parcels.tsv` with
//! the parcels on a circle, and `synth.json` recording the generator, its parameters and the
//! exact loss floor, so that a test or a benchmark can compare a trained model with it. The
//! directory is built whole under a temporary name and appears only when complete.
//!
//! Runs are generated and written one at a time (`for_each_run` of the fixture generators):
//! memory holds one run, so a dataset of any size on disk can be written. Values are float32
//! by default ([`Dtype`]): rounded once, then written as `<f4` `.npy` or, in text, as a
//! decimal that reads back to that float32, so both formats load to the same numbers.

use crate::error::DataError;
use crate::write::{run_file_name, write_parcels, write_run, RunFormat};
use boldcast_core::memory::{overflow_reason, Overflow, Size};
use boldcast_fixtures::{circle_centroids, parcel_names, Ar1Spec, Floor, Layout, Var1Spec};
use boldcast_storage::fsutil::StagedDir;
use boldcast_storage::memory::{main_cause, MemoryNeed};
use serde_json::json;
use std::path::{Path, PathBuf};

/// The horizons whose floor `synth.json` records.
pub const FLOOR_HORIZONS: [usize; 2] = [1, 5];
/// The token width of the recorded floor.
pub const FLOOR_D_IN: usize = 1;
/// Radius (mm) of the circle the parcels' centroids lie on.
pub const CIRCLE_RADIUS: f64 = 50.0;

/// The precision of the values written.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Dtype {
    /// Each value rounded to float32 (relative change below 6e-8); `.npy` runs are `<f4`.
    F32,
    /// The generator's float64 values; `.npy` runs are `<f8`.
    F64,
}

impl Dtype {
    fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "float32",
            Dtype::F64 => "float64",
        }
    }
}

/// The generator of a synthetic dataset.
#[derive(Clone, Debug)]
pub enum Generator {
    /// Per-parcel AR(1), optionally with innovations mixed over ring neighbours.
    Ar1(Ar1Spec),
    /// VAR(1) over the ring adjacency.
    Var1(Var1Spec),
}

impl Generator {
    fn layout(&self) -> &Layout {
        match self {
            Generator::Ar1(s) => &s.layout,
            Generator::Var1(s) => &s.layout,
        }
    }

    /// Hands the runs to `f` one at a time (the generators' `for_each_run`).
    fn for_each_run(
        &self,
        f: impl FnMut(boldcast_fixtures::SynthRun) -> Result<(), DataError>,
    ) -> Result<(), DataError> {
        match self {
            Generator::Ar1(s) => s.for_each_run(f),
            Generator::Var1(s) => s.for_each_run(f),
        }
    }
}

/// What [`write_synthetic`] wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthOutput {
    /// The output directory.
    pub dir: PathBuf,
    /// The run files, in order.
    pub files: Vec<String>,
    /// The exact floor for [`FLOOR_HORIZONS`] at `d_in` [`FLOOR_D_IN`].
    pub floor: Floor,
}

fn floor_json(f: &Floor) -> serde_json::Value {
    json!({
        "horizons": FLOOR_HORIZONS,
        "d_in": FLOOR_D_IN,
        "overall": f.overall,
        "per_horizon": f.per_horizon,
        "per_parcel": f.per_parcel,
    })
}

/// The exact floor and the generator's entries of `synth.json` (checking the spec).
fn describe(g: &Generator) -> Result<(Floor, serde_json::Value), DataError> {
    Ok(match g {
        Generator::Var1(spec) => {
            let st = spec.stationary()?;
            let floor = spec.floor(&FLOOR_HORIZONS, FLOOR_D_IN)?;
            let params = json!({
                "generator": "var1",
                "self_coef": spec.self_coef,
                "neighbor_coef": spec.neighbor_coef,
                "k": spec.k,
                "a_norm_inf": st.a.norm_inf(),
                "spectral_radius_bound": st.spectral_radius_bound,
                "model": "x[n+1] = A x[n] + e[n], e ~ N(0, I); A = self_coef I + neighbor_coef/(k-1) on the k-1 ring \
                          neighbours (Adjacency::ring); each parcel divided by its stationary standard deviation",
                "floor_note": "floor = mean over parcels p, horizons h, token elements j < D of E_L[p,p] / S[p,p], \
                               L = (h-1) D + j + 1, with S = A S A^T + I (discrete Lyapunov equation, doubling \
                               iteration) and E_L = S - A^L S A^LT the L-step prediction error covariance; the floor \
                               of a predictor that sees every parcel's past",
            });
            (floor, params)
        }
        Generator::Ar1(spec) => {
            let rhos = spec.validate()?;
            let floor = spec.floor(&FLOOR_HORIZONS, FLOOR_D_IN)?;
            let params = json!({
                "generator": "ar1",
                "rho_spec": spec.rho.to_string(),
                "rho": rhos,
                "innovation_mix": spec.innovation_mix,
                "mix_k": spec.mix_k,
                "model": "x_p[n+1] = rho_p x_p[n] + e_p[n], unit stationary variance, x_p[0] ~ N(0, 1); \
                          e_p = sqrt(1 - rho_p^2) (w_p + mix * sum of the k-1 ring neighbours' w_q) / sqrt(1 + mix^2 (k-1))",
                "floor_note": "floor = mean over parcels p, horizons h, token elements j < D of 1 - rho_p^(2L), \
                               L = (h-1) D + j + 1 (MODEL.md, The loss floor); correlated innovations leave it unchanged",
            });
            (floor, params)
        }
    })
}

/// The parts of [`synth_memory`] for `layout`, checked.
fn synth_parts(g: &Generator, l: &Layout, format: RunFormat) -> Result<Vec<(&'static str, Size)>, Overflow> {
    let (subjects, runs, trs, parcels) = (
        Size::of("subjects", l.subjects),
        Size::of("runs", l.runs),
        Size::of("trs", l.trs),
        Size::of("parcels", l.parcels),
    );
    // The whole dataset's count is checked (it sizes the files), though one run is held.
    subjects.checked_mul(runs)?.checked_mul(trs)?.checked_mul(parcels)?.times(8)?;
    let mut parts = vec![("one run", trs.checked_mul(parcels)?.times(8)?)];
    if !matches!(format, RunFormat::Npy | RunFormat::NpyF32) {
        parts.push(("text of one run", trs.checked_mul(parcels)?.times(25)?));
    }
    parts.push(("parcels", parcels.times(200)?));
    match g {
        Generator::Var1(_) => parts.push(("VAR(1) matrices", parcels.checked_mul(parcels)?.times(64)?)),
        Generator::Ar1(s) if s.innovation_mix > 0.0 => {
            parts.push(("neighbours", parcels.checked_mul(Size::of("k", s.mix_k))?.times(8)?))
        }
        Generator::Ar1(_) => {}
    }
    Ok(parts)
}

/// A rough estimate of the memory [`write_synthetic`] needs for `g` in `format`, before it
/// generates anything; every product checked (an overflow is an error naming `subjects`,
/// `runs`, `trs` or `parcels`, the largest factor):
///
/// ```text
/// one run          trs parcels 8                 a run is generated (f64), written, and dropped
/// text of one run  trs parcels 25                .tsv / .csv: a run's text, up to 24 characters a value
/// parcels          parcels 200                   names, centroids and the text of parcels.tsv
/// VAR(1) matrices  parcels^2 64                  the P x P matrices of A, S and the doubling iteration
/// neighbours       parcels k 8                   AR(1) with --mix: the ring of the mixing
/// ```
///
/// [`MemoryNeed::cause`] names the count whose reduction to 1 would shrink it most.
pub fn synth_memory(g: &Generator, format: RunFormat) -> Result<MemoryNeed, DataError> {
    let l = g.layout();
    let total_of = |l: &Layout| -> Result<Size, Overflow> {
        synth_parts(g, l, format)?.into_iter().try_fold(Size::lit(0), |a, (_, b)| a.checked_add(b))
    };
    let overflow = |o: Overflow| DataError::config(o.field, o.value, overflow_reason("the dataset"));
    let total = total_of(l).map_err(overflow)?.value();
    let parts = synth_parts(g, l, format).map_err(overflow)?.into_iter().map(|(n, s)| (n, s.value())).collect();
    let at_one = |f: fn(&mut Layout)| {
        let mut l = l.clone();
        f(&mut l);
        total_of(&l).ok().map(Size::value)
    };
    let cause = main_cause(
        total,
        &[
            ("subjects", l.subjects, at_one(|l| l.subjects = 1)),
            ("runs", l.runs, at_one(|l| l.runs = 1)),
            ("trs", l.trs, at_one(|l| l.trs = 1)),
            ("parcels", l.parcels, at_one(|l| l.parcels = 1)),
        ],
    );
    Ok(MemoryNeed { what: "the dataset".into(), parts, cause })
}

/// The file format of a synthetic dataset's runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum SynthFormat {
    /// NumPy `.npy`, shape (trs, parcels), of the dtype asked for.
    Npy,
    /// Tab-separated text with a header row of parcel names.
    Tsv,
}

/// A synthetic dataset as `bc-cli synth` asks for it (its flags, with the feature `clap`).
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SynthRequest {
    /// Output directory (must not exist, or be empty).
    #[cfg_attr(feature = "clap", arg(long))]
    pub out: std::path::PathBuf,
    /// Subjects.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 4))]
    pub subjects: usize,
    /// Runs per subject.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub runs: usize,
    /// TRs per run.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 400))]
    pub trs: usize,
    /// Parcels.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 8))]
    pub parcels: usize,
    /// AR(1) coefficient per parcel: one value (0.9), a range spread evenly over the parcels
    /// (0.5:0.95) or one value per parcel (0.9,0.8,0.7).
    #[cfg_attr(feature = "clap", arg(long, default_value = "0.9", allow_hyphen_values = true))]
    pub rho: boldcast_fixtures::RhoSpec,
    /// Correlate each AR(1) innovation with its ring neighbours' white noise with this weight
    /// (0: independent parcels). The floor is unchanged.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.0))]
    pub mix: f64,
    /// Neighbours per parcel (self included) of the ring used by --mix and --var1.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 3))]
    pub k: usize,
    /// Generate a VAR(1) `x' = A x + e` coupled through the ring instead of AR(1) parcels.
    #[cfg_attr(feature = "clap", arg(long))]
    pub var1: bool,
    /// VAR(1): diagonal of A.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.6, allow_hyphen_values = true))]
    pub self_coef: f64,
    /// VAR(1): total weight of the neighbours in each row of A (|self| + |neighbour| < 1).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.3, allow_hyphen_values = true))]
    pub neighbor_coef: f64,
    /// Seed of the generator.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0))]
    pub seed: u64,
    /// File format of the runs.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = SynthFormat::Npy))]
    pub format: SynthFormat,
    /// Precision of the values: f32 rounds each generated value to float32 (`<f4` `.npy`,
    /// half the disk; in .tsv a decimal that reads back to the float32), f64 keeps the
    /// generator's float64.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = Dtype::F32))]
    pub dtype: Dtype,
}

impl SynthRequest {
    /// The generator asked for.
    pub fn generator(&self) -> Generator {
        let layout =
            Layout { subjects: self.subjects, runs: self.runs, trs: self.trs, parcels: self.parcels, seed: self.seed };
        if self.var1 {
            Generator::Var1(Var1Spec {
                layout,
                self_coef: self.self_coef,
                neighbor_coef: self.neighbor_coef,
                k: self.k,
            })
        } else {
            Generator::Ar1(Ar1Spec { layout, rho: self.rho.clone(), innovation_mix: self.mix, mix_k: self.k })
        }
    }

    /// Writes the dataset ([`write_synthetic`]); `progress(done, total)` after each run.
    pub fn write(&self, progress: impl FnMut(usize, usize)) -> Result<SynthOutput, DataError> {
        let format = match self.format {
            SynthFormat::Npy => RunFormat::Npy,
            SynthFormat::Tsv => RunFormat::Tsv,
        };
        write_synthetic(&self.generator(), format, self.dtype, &self.out, progress)
    }
}

/// Generates the dataset of `g` and writes it into `out` (new, or an empty directory) in
/// `format` with values of `dtype`: one file per run, `parcels.tsv` and `synth.json`. First,
/// before anything is generated or created, [`synth_memory`] is checked against the
/// machine's memory ([`boldcast_storage::memory::check`]): a dataset that does not fit is
/// [`DataError::Memory`]. `progress(done, total)` is called after each run is written.
pub fn write_synthetic(
    g: &Generator,
    format: RunFormat,
    dtype: Dtype,
    out: &Path,
    mut progress: impl FnMut(usize, usize),
) -> Result<SynthOutput, DataError> {
    let format = match (format, dtype) {
        (RunFormat::Npy | RunFormat::NpyF32, Dtype::F32) => RunFormat::NpyF32,
        (RunFormat::Npy | RunFormat::NpyF32, Dtype::F64) => RunFormat::Npy,
        (text, _) => text,
    };
    boldcast_storage::memory::check(synth_memory(g, format)?, boldcast_storage::memory::machine_memory())?;
    let l = g.layout();
    let (floor, params) = describe(g)?;
    let names = parcel_names(l.parcels);
    let staged = StagedDir::new(out)?;
    let (mut files, total) = (Vec::new(), l.subjects * l.runs);
    g.for_each_run(|mut run| {
        if dtype == Dtype::F32 {
            run.data.iter_mut().for_each(|x| *x = f64::from(*x as f32));
        }
        let name = run_file_name(&run, format);
        write_run(&staged.path().join(&name), &run, &names, format)?;
        files.push(name);
        progress(files.len(), total);
        Ok(())
    })?;
    let centroids: Vec<[f64; 3]> = circle_centroids(l.parcels).iter().map(|c| c.map(|v| v * CIRCLE_RADIUS)).collect();
    write_parcels(&staged.path().join("parcels.tsv"), &names, &centroids)?;
    let mut meta = metadata(l, format, dtype);
    for (k, v) in params.as_object().expect("an object") {
        meta[k] = v.clone();
    }
    meta["floor"] = floor_json(&floor);
    meta["files"] = json!(files);
    let p = staged.path().join("synth.json");
    let text = serde_json::to_string_pretty(&boldcast_storage::made_by::stamp(&meta)).expect("JSON serializes") + "\n";
    std::fs::write(&p, text).map_err(|source| DataError::Write { path: p.clone(), source })?;
    let dir = staged.commit()?;
    Ok(SynthOutput { dir, files, floor })
}

/// The layout and file entries of `synth.json`.
fn metadata(l: &Layout, format: RunFormat, dtype: Dtype) -> serde_json::Value {
    let format = match format {
        RunFormat::Npy => "npy (float64, shape (trs, parcels))".to_string(),
        RunFormat::NpyF32 => "npy (float32, shape (trs, parcels))".to_string(),
        RunFormat::Tsv | RunFormat::Csv => {
            format!("{} (each value as the shortest decimal that reads back to it)", format.extension())
        }
    };
    let dtype_note = match dtype {
        Dtype::F32 => {
            "each generated float64 value rounded to float32 (relative change below 6e-8); the floor is \
                       the generator's, unchanged by the rounding at the precision it is reported"
        }
        Dtype::F64 => "the generator's float64 values",
    };
    json!({
        "subjects": l.subjects, "runs": l.runs, "trs": l.trs, "parcels": l.parcels,
        "seed": l.seed, "rng": "rand_chacha::ChaCha8Rng",
        "format": format, "dtype": dtype.name(), "dtype_note": dtype_note,
        "parcels_file": "parcels.tsv: name x y z, parcels on a circle of radius 50 in the z = 0 plane",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use boldcast_fixtures::RhoSpec;
    use boldcast_storage::memory::check;

    fn ar1(subjects: usize, runs: usize, trs: usize, parcels: usize) -> Generator {
        Generator::Ar1(Ar1Spec::new(Layout { subjects, runs, trs, parcels, seed: 0 }, 0.9))
    }

    #[test]
    fn the_estimate_adds_up_what_is_held() {
        let need = synth_memory(&ar1(4, 1, 100_000, 100_000), RunFormat::Npy).unwrap();
        assert_eq!(need.parts, vec![("one run", 100_000 * 100_000 * 8), ("parcels", 100_000 * 200)]);
        assert_eq!(need.cause, Some(("parcels".into(), "100000".into())), "parcels also weigh in the parcels part");
        let e = check(need, Some(23 << 30)).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "the dataset would need about 74.5 GiB of memory (one run 74.5 GiB, parcels 19.1 MiB); this \
                           machine has 23.0 GiB: most of it comes from parcels = 100000"
            ),
            "{e}"
        );
        // One run is held whatever the count of runs: a thousand subjects need no more.
        let many = synth_memory(&ar1(1000, 4, 1200, 1024), RunFormat::NpyF32).unwrap();
        assert_eq!(many.parts[0], ("one run", 1200 * 1024 * 8));
        assert_eq!(many.parts, synth_memory(&ar1(1, 1, 1200, 1024), RunFormat::NpyF32).unwrap().parts);
        let need = synth_memory(&ar1(1000, 2, 100, 8), RunFormat::Tsv).unwrap();
        assert_eq!(need.parts[1], ("text of one run", 100 * 8 * 25));
        assert_eq!(need.cause, Some(("trs".into(), "100".into())), "a run, not the count of runs");
        let var1 = Generator::Var1(Var1Spec {
            layout: Layout { subjects: 1, runs: 1, trs: 10, parcels: 50_000, seed: 0 },
            self_coef: 0.5,
            neighbor_coef: 0.3,
            k: 3,
        });
        let need = synth_memory(&var1, RunFormat::Npy).unwrap();
        assert_eq!(need.parts[2], ("VAR(1) matrices", 50_000 * 50_000 * 64));
        let mixed = Generator::Ar1(Ar1Spec {
            layout: Layout { subjects: 1, runs: 1, trs: 10, parcels: 5, seed: 0 },
            rho: RhoSpec::One(0.5),
            innovation_mix: 0.5,
            mix_k: 3,
        });
        assert_eq!(synth_memory(&mixed, RunFormat::Npy).unwrap().parts[2], ("neighbours", 5 * 3 * 8));
    }

    #[test]
    fn a_dataset_larger_than_the_machine_is_refused_before_anything_is_written() {
        let Some(machine) = boldcast_storage::memory::machine_memory() else { return };
        // One run of twice the machine's memory at 1000 parcels.
        let trs = (machine / (1000 * 8) * 2) as usize;
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("ds");
        let e = write_synthetic(&ar1(4, 1, trs, 1000), RunFormat::Npy, Dtype::F32, &out, |_, _| {}).unwrap_err();
        assert!(matches!(e, DataError::Memory(_)), "{e:?}");
        let e = e.to_string();
        assert!(e.starts_with("the dataset would need about ") && e.contains("this machine has"), "{e}");
        assert!(e.ends_with(&format!("most of it comes from trs = {trs}")), "{e}");
        assert!(!out.exists());
        assert!(std::fs::read_dir(d.path()).unwrap().next().is_none(), "no staging directory left");
    }

    #[test]
    fn a_dataset_whose_size_overflows_names_the_count() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("ds");
        for (field, g) in [
            ("trs", ar1(4, 1, 1 << 62, 8)),
            ("subjects", ar1(1 << 62, 1, 400, 8)),
            ("runs", ar1(4, 1 << 62, 400, 8)),
            ("parcels", ar1(4, 1, 400, 1 << 62)),
        ] {
            let e = write_synthetic(&g, RunFormat::Npy, Dtype::F32, &out, |_, _| {}).unwrap_err().to_string();
            assert_eq!(
                e,
                format!(
                    "invalid {field} = 4611686018427387904: the dataset would need more than 16.0 EiB of memory (its \
                     size overflows a 64-bit count)"
                )
            );
            assert!(!out.exists());
        }
    }

    /// The runs written one at a time are the generator's, rounded once to float32 by
    /// default: the `.npy` and `.tsv` datasets load to the same bits, and `--dtype f64` keeps
    /// the generator's values.
    #[test]
    fn streamed_runs_are_the_generators_in_either_precision_and_format() {
        use crate::Dataset;
        let g = ar1(3, 2, 50, 4);
        let Generator::Ar1(spec) = &g else { unreachable!() };
        let want = spec.generate().unwrap();
        let d = tempfile::tempdir().unwrap();
        let mut seen = Vec::new();
        let (n32, t32, n64) = (d.path().join("n32"), d.path().join("t32"), d.path().join("n64"));
        write_synthetic(&g, RunFormat::Npy, Dtype::F32, &n32, |done, total| seen.push((done, total))).unwrap();
        assert_eq!(seen, (1..=6).map(|i| (i, 6)).collect::<Vec<_>>(), "progress after every run");
        write_synthetic(&g, RunFormat::Tsv, Dtype::F32, &t32, |_, _| {}).unwrap();
        write_synthetic(&g, RunFormat::Npy, Dtype::F64, &n64, |_, _| {}).unwrap();
        let raw = |path: &Path| {
            let bytes = std::fs::read(path).unwrap();
            let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
            match npy.dtype() {
                npyz::DType::Plain(t) if t.size_field() == 4 => {
                    npy.into_vec::<f32>().unwrap().into_iter().map(f64::from).collect::<Vec<_>>()
                }
                _ => npy.into_vec::<f64>().unwrap(),
            }
        };
        for (i, run) in want.iter().enumerate() {
            let name = run_file_name(run, RunFormat::Npy);
            assert_eq!(raw(&n64.join(&name)), run.data, "run {i} in float64");
            let rounded: Vec<f64> = run.data.iter().map(|&x| f64::from(x as f32)).collect();
            assert_eq!(raw(&n32.join(&name)), rounded, "run {i} in float32");
            assert_ne!(rounded, run.data);
        }
        assert_eq!(std::fs::metadata(n32.join("sub-01_run-1_bold.npy")).unwrap().len(), 128 + 50 * 4 * 4);
        let (a, b) = (Dataset::load(&n32).unwrap(), Dataset::load(&t32).unwrap());
        for (x, y) in a.runs.iter().zip(&b.runs) {
            assert_eq!(x.to_vec().unwrap(), y.to_vec().unwrap(), "{}", x.id);
        }
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(n32.join("synth.json")).unwrap()).unwrap();
        assert_eq!(
            (meta["dtype"].as_str(), meta["format"].as_str()),
            (Some("float32"), Some("npy (float32, shape (trs, parcels))"))
        );
    }
}
