//! A synthetic dataset written as real datasets are ([`write_synthetic`]): the runs of a
//! fixture generator (AR(1) or VAR(1), `boldcast-fixtures`) as run files, `parcels.tsv` with
//! the parcels on a circle, and `synth.json` recording the generator, its parameters and the
//! exact loss floor, so that a test or a benchmark can compare a trained model with it. The
//! directory is built whole under a temporary name and appears only when complete.

use crate::error::DataError;
use crate::fsutil::StagedDir;
use crate::memory::{main_cause, MemoryNeed};
use crate::write::{run_file_name, write_parcels, write_run, RunFormat};
use boldcast_core::memory::{overflow_reason, Overflow, Size};
use boldcast_fixtures::{circle_centroids, parcel_names, Ar1Spec, Floor, Layout, Var1Spec};
use serde_json::json;
use std::path::{Path, PathBuf};

/// The horizons whose floor `synth.json` records.
pub const FLOOR_HORIZONS: [usize; 2] = [1, 5];
/// The token width of the recorded floor.
pub const FLOOR_D_IN: usize = 1;
/// Radius (mm) of the circle the parcels' centroids lie on.
pub const CIRCLE_RADIUS: f64 = 50.0;

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

/// The runs, the exact floor and the generator's entries of `synth.json`.
fn generate(g: &Generator) -> Result<(Vec<boldcast_fixtures::SynthRun>, Floor, serde_json::Value), DataError> {
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
            (spec.generate()?, floor, params)
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
            (spec.generate()?, floor, params)
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
    let values = subjects.checked_mul(runs)?.checked_mul(trs)?.checked_mul(parcels)?.times(8)?;
    let mut parts = vec![("runs", values)];
    if format != RunFormat::Npy {
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
/// runs             subjects runs trs parcels 8   every run is generated (f64) before the first is written
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

/// Generates the dataset of `g` and writes it into `out` (new, or an empty directory) in
/// `format`: one file per run, `parcels.tsv` and `synth.json`. First, before anything is
/// generated or created, [`synth_memory`] is checked against the machine's memory
/// ([`crate::memory::check`]): a dataset that does not fit is [`DataError::Memory`].
pub fn write_synthetic(g: &Generator, format: RunFormat, out: &Path) -> Result<SynthOutput, DataError> {
    crate::memory::check(synth_memory(g, format)?, crate::memory::machine_memory())?;
    let l = g.layout();
    let mut meta = json!({
        "subjects": l.subjects, "runs": l.runs, "trs": l.trs, "parcels": l.parcels,
        "seed": l.seed, "rng": "rand_chacha::ChaCha8Rng",
        "format": match format { RunFormat::Npy => "npy (float64, shape (trs, parcels))", RunFormat::Tsv => "tsv", RunFormat::Csv => "csv" },
        "parcels_file": "parcels.tsv: name x y z, parcels on a circle of radius 50 in the z = 0 plane",
    });
    let (runs, floor, params) = generate(g)?;
    let names = parcel_names(l.parcels);
    let staged = StagedDir::new(out)?;
    let mut files = Vec::new();
    for run in &runs {
        let name = run_file_name(run, format);
        write_run(&staged.path().join(&name), run, &names, format)?;
        files.push(name);
    }
    let centroids: Vec<[f64; 3]> = circle_centroids(l.parcels).iter().map(|c| c.map(|v| v * CIRCLE_RADIUS)).collect();
    write_parcels(&staged.path().join("parcels.tsv"), &names, &centroids)?;
    for (k, v) in params.as_object().expect("an object") {
        meta[k] = v.clone();
    }
    meta["floor"] = floor_json(&floor);
    meta["files"] = json!(files);
    let p = staged.path().join("synth.json");
    let text = serde_json::to_string_pretty(&meta).expect("JSON serializes") + "\n";
    std::fs::write(&p, text).map_err(|source| DataError::Write { path: p.clone(), source })?;
    let dir = staged.commit()?;
    Ok(SynthOutput { dir, files, floor })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::check;
    use boldcast_fixtures::RhoSpec;

    fn ar1(subjects: usize, runs: usize, trs: usize, parcels: usize) -> Generator {
        Generator::Ar1(Ar1Spec::new(Layout { subjects, runs, trs, parcels, seed: 0 }, 0.9))
    }

    #[test]
    fn the_estimate_adds_up_what_is_held() {
        let need = synth_memory(&ar1(4, 1, 100_000, 100_000), RunFormat::Npy).unwrap();
        assert_eq!(need.parts, vec![("runs", 4 * 100_000 * 100_000 * 8), ("parcels", 100_000 * 200)]);
        assert_eq!(need.cause, Some(("parcels".into(), "100000".into())), "parcels also weigh in the parcels part");
        let e = check(need, Some(23 << 30)).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "the dataset would need about 298.0 GiB of memory (runs 298.0 GiB, parcels 19.1 MiB); this \
                           machine has 23.0 GiB: most of it comes from parcels = 100000"
            ),
            "{e}"
        );
        let need = synth_memory(&ar1(1000, 2, 100, 8), RunFormat::Tsv).unwrap();
        assert_eq!(need.parts[1], ("text of one run", 100 * 8 * 25));
        assert_eq!(need.cause, Some(("subjects".into(), "1000".into())));
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
        let Some(machine) = crate::memory::machine_memory() else { return };
        // Twice the machine's memory in runs of 4 subjects x 1 run x 1000 parcels.
        let trs = (machine / (4 * 1000 * 8) * 2) as usize;
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("ds");
        let e = write_synthetic(&ar1(4, 1, trs, 1000), RunFormat::Npy, &out).unwrap_err();
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
            let e = write_synthetic(&g, RunFormat::Npy, &out).unwrap_err().to_string();
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
}
