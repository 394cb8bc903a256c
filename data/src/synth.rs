//! A synthetic dataset written as real datasets are ([`write_synthetic`]): the runs of a
//! fixture generator (AR(1) or VAR(1), `boldcast-fixtures`) as run files, `parcels.tsv` with
//! the parcels on a circle, and `synth.json` recording the generator, its parameters and the
//! exact loss floor, so that a test or a benchmark can compare a trained model with it. The
//! directory is built whole under a temporary name and appears only when complete.

use crate::error::DataError;
use crate::fsutil::StagedDir;
use crate::write::{run_file_name, write_parcels, write_run, RunFormat};
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

/// Generates the dataset of `g` and writes it into `out` (new, or an empty directory) in
/// `format`: one file per run, `parcels.tsv` and `synth.json`.
pub fn write_synthetic(g: &Generator, format: RunFormat, out: &Path) -> Result<SynthOutput, DataError> {
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
