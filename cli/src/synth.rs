//! `bc-cli synth`: a synthetic dataset written as real datasets are, with its exact floor.

use crate::args::{Format, SynthArgs};
use crate::error::CliError;
use boldcast::data::fsutil::StagedDir;
use boldcast::data::{run_file_name, write_parcels, write_run, RunFormat};
use boldcast::fixtures::{circle_centroids, parcel_names, Ar1Spec, Floor, Layout, Var1Spec};
use serde_json::json;
use std::path::PathBuf;

/// The horizons and `d_in` whose floor `synth.json` records.
pub const FLOOR_HORIZONS: [usize; 2] = [1, 5];
/// The token width of the recorded floor.
pub const FLOOR_D_IN: usize = 1;
/// Radius (mm) of the circle the parcels' centroids lie on.
pub const CIRCLE_RADIUS: f64 = 50.0;

/// What `synth` wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthOutput {
    /// The output directory.
    pub dir: PathBuf,
    /// The run files, in order.
    pub files: Vec<String>,
    /// The exact floor for [`FLOOR_HORIZONS`], d_in 1.
    pub floor: Floor,
}

/// The run file format of a `--format`.
fn run_format(format: Format) -> RunFormat {
    match format {
        Format::Npy => RunFormat::Npy,
        Format::Tsv => RunFormat::Tsv,
    }
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

/// Generates and writes the dataset of `args` (see [`crate::args::Command::Synth`]).
pub fn run(args: &SynthArgs) -> Result<SynthOutput, CliError> {
    let layout =
        Layout { subjects: args.subjects, runs: args.runs, trs: args.trs, parcels: args.parcels, seed: args.seed };
    let common = json!({
        "subjects": args.subjects, "runs": args.runs, "trs": args.trs, "parcels": args.parcels,
        "seed": args.seed, "rng": "rand_chacha::ChaCha8Rng",
        "format": match args.format { Format::Npy => "npy (float64, shape (trs, parcels))", Format::Tsv => "tsv" },
        "parcels_file": "parcels.tsv: name x y z, parcels on a circle of radius 50 in the z = 0 plane",
    });
    let (runs, floor, params) = if args.var1 {
        let spec = Var1Spec { layout, self_coef: args.self_coef, neighbor_coef: args.neighbor_coef, k: args.k };
        let st = spec.stationary()?;
        let floor = spec.floor(&FLOOR_HORIZONS, FLOOR_D_IN)?;
        let params = json!({
            "generator": "var1",
            "self_coef": args.self_coef,
            "neighbor_coef": args.neighbor_coef,
            "k": args.k,
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
    } else {
        let spec = Ar1Spec { layout, rho: args.rho.clone(), innovation_mix: args.mix, mix_k: args.k };
        let rhos = spec.validate()?;
        let floor = spec.floor(&FLOOR_HORIZONS, FLOOR_D_IN)?;
        let params = json!({
            "generator": "ar1",
            "rho_spec": args.rho.to_string(),
            "rho": rhos,
            "innovation_mix": args.mix,
            "mix_k": args.k,
            "model": "x_p[n+1] = rho_p x_p[n] + e_p[n], unit stationary variance, x_p[0] ~ N(0, 1); \
                      e_p = sqrt(1 - rho_p^2) (w_p + mix * sum of the k-1 ring neighbours' w_q) / sqrt(1 + mix^2 (k-1))",
            "floor_note": "floor = mean over parcels p, horizons h, token elements j < D of 1 - rho_p^(2L), \
                           L = (h-1) D + j + 1 (MODEL.md, The loss floor); correlated innovations leave it unchanged",
        });
        (spec.generate()?, floor, params)
    };
    let names = parcel_names(args.parcels);
    let staged = StagedDir::new(&args.out)?;
    let mut files = Vec::new();
    let format = run_format(args.format);
    for run in &runs {
        let name = run_file_name(run, format);
        write_run(&staged.path().join(&name), run, &names, format)?;
        files.push(name);
    }
    let centroids: Vec<[f64; 3]> =
        circle_centroids(args.parcels).iter().map(|c| c.map(|v| v * CIRCLE_RADIUS)).collect();
    write_parcels(&staged.path().join("parcels.tsv"), &names, &centroids)?;
    let mut meta = common;
    for (k, v) in params.as_object().expect("an object") {
        meta[k] = v.clone();
    }
    meta["floor"] = floor_json(&floor);
    meta["files"] = json!(files);
    let p = staged.path().join("synth.json");
    let text = serde_json::to_string_pretty(&meta).expect("JSON serializes");
    std::fs::write(&p, text + "\n").map_err(CliError::io(&p))?;
    let dir = staged.commit()?;
    Ok(SynthOutput { dir, files, floor })
}
