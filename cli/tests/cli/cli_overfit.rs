//! The overfit command. Through the library with a small stand-in model (a per-horizon scale
//! `pred[b, t, p, h, j] = w[h] * tokens[b, t, p, j]`, exact gradients), so the loop, the log,
//! the figure, the summary, the verdict and the resolved configuration are tested apart from
//! any backend; then through the binary on the real backends (the quick preset passes on the
//! CPU backend and with Mamba-2 on dfdx, and bad requests write nothing).

use bc_cli::args::{OverfitArgs, RunArgs};
use bc_cli::overfit::overfit_command;
use boldcast::core::forecast::{build_forecast_targets, forecasting_loss};
use boldcast::core::model::NamedTensor;
use boldcast::core::{
    Adjacency, Embeddings, Error, ForecastShape, Forecasts, Model, ModelConfig, Optimizer, ParamMut, Shape, Tokens,
};
use boldcast_train::overfit::overfit_data;
use boldcast_train::presets::{preset, resolve, DEFAULT_PRESET};
use std::path::{Path, PathBuf};

use crate::common;
use common::{log_lines, quick, run};

struct Scale {
    cfg: ModelConfig,
    w: Vec<f32>,
    g: Vec<f32>,
}

impl Scale {
    fn new(cfg: ModelConfig, _adj: Option<Adjacency>, _seed: u64) -> Result<Self, Error> {
        Ok(Self::starting_at(cfg, 0.0))
    }
    /// Starts from `w = w0` for every horizon: far from the optimum, the loss has room to drop.
    fn starting_at(cfg: ModelConfig, w0: f32) -> Self {
        let h = cfg.horizons.len();
        Self { cfg, w: vec![w0; h], g: vec![0.0; h] }
    }
}

impl Model<f32> for Scale {
    fn config(&self) -> &ModelConfig {
        &self.cfg
    }
    fn forward(&self, tokens: &Tokens<f32>) -> Result<Forecasts<f32>, Error> {
        let s = tokens.shape();
        let h = self.w.len();
        let shape = ForecastShape::new(s.batch, s.time, s.parcels, h, s.d_in);
        let mut out = Forecasts::<f32>::zeros(shape);
        for b in 0..s.batch {
            for t in 0..s.time {
                for p in 0..s.parcels {
                    for i in 0..h {
                        for j in 0..s.d_in {
                            let k = out.index(b, t, p, i, j);
                            out.data_mut()[k] = self.w[i] * tokens.at(b, t, p, j);
                        }
                    }
                }
            }
        }
        Ok(out)
    }
    fn embed(&self, _: &Tokens<f32>) -> Result<Embeddings<f32>, Error> {
        Err(Error::Backend("the stand-in model has no embedding".into()))
    }
    fn loss(&self, tokens: &Tokens<f32>) -> Result<f64, Error> {
        let pred = self.forward(tokens)?;
        let target: Forecasts<f32> = build_forecast_targets(tokens, &self.cfg.horizons)?;
        forecasting_loss(&pred, &target)
    }
    fn loss_and_grads(&mut self, tokens: &Tokens<f32>) -> Result<f64, Error> {
        let pred = self.forward(tokens)?;
        let target: Forecasts<f32> = build_forecast_targets(tokens, &self.cfg.horizons)?;
        let ts = target.shape();
        let n = ts.dims().iter().product::<usize>() as f64;
        let mut g = vec![0.0f64; self.w.len()];
        for b in 0..ts.batch {
            for t in 0..ts.time {
                for p in 0..ts.parcels {
                    for (i, gi) in g.iter_mut().enumerate() {
                        for j in 0..ts.d_in {
                            let e = (pred.data()[pred.index(b, t, p, i, j)]
                                - target.data()[target.index(b, t, p, i, j)])
                                as f64;
                            *gi += 2.0 * e * tokens.at(b, t, p, j) as f64 / n;
                        }
                    }
                }
            }
        }
        self.g = g.iter().map(|&v| v as f32).collect();
        forecasting_loss(&pred, &target)
    }
    fn grad_sq_norm(&self) -> f64 {
        self.g.iter().map(|&v| (v as f64) * (v as f64)).sum()
    }
    fn scale_grads(&mut self, factor: f64) {
        self.g.iter_mut().for_each(|v| *v *= factor as f32);
    }
    fn apply_optimizer(&mut self, opt: &mut dyn Optimizer<f32>, lr: f64) -> Result<(), Error> {
        opt.begin_step();
        let shape = [self.w.len(), 1];
        opt.update(ParamMut { index: 0, name: "head.weight", shape: &shape, value: &mut self.w, grad: &self.g }, lr);
        Ok(())
    }
    fn state(&self) -> Vec<NamedTensor<f32>> {
        vec![NamedTensor { name: "head.weight".into(), shape: vec![self.w.len(), 1], data: self.w.clone() }]
    }
    fn grads(&self) -> Vec<NamedTensor<f32>> {
        vec![NamedTensor { name: "head.weight".into(), shape: vec![self.g.len(), 1], data: self.g.clone() }]
    }
    fn load_state(&mut self, t: &[NamedTensor<f32>]) -> Result<(), Error> {
        self.w = t[0].data.clone();
        Ok(())
    }
}

fn args(out: &Path, extra: impl FnOnce(&mut RunArgs)) -> OverfitArgs {
    let mut run = RunArgs { preset: Some("quick".into()), out: Some(out.to_path_buf()), ..RunArgs::default() };
    extra(&mut run);
    OverfitArgs { run }
}

#[test]
fn synthetic_overfit_batch_is_four_windows_of_the_fixture() {
    let cfg = preset("quick").unwrap();
    let d = overfit_data(&cfg).unwrap();
    let s = d.batch.shape();
    assert_eq!((s.batch, s.time, s.parcels, s.d_in), (4, 32, 4, 1));
    assert_eq!(d.floor.kind, "exact AR(1) floor");
    assert_eq!(d.floor.value, boldcast::core::floor::ar1_floor(0.9, &[1, 5], 1).unwrap());
    // Parcels on a circle: the k = 2 adjacency pairs each parcel with a ring neighbour.
    let a = d.adjacency.unwrap();
    for p in 0..4 {
        let q = a.row(p)[1];
        assert!(q == (p + 1) % 4 || q == (p + 3) % 4, "{p} -> {q}");
    }
    // Each window is standardized (one run per window).
    for b in 0..4 {
        let x: Vec<f64> = (0..32).map(|t| d.batch.at(b, t, 0, 0) as f64).collect();
        let m = x.iter().sum::<f64>() / 32.0;
        assert!(m.abs() < 1e-5);
    }
}

#[test]
fn overfit_writes_log_summary_figure_and_resolved_config() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let a = args(&out, |r| {
        r.lr = Some(0.05);
        r.max_steps = Some(150);
    });
    let rep = overfit_command(&a, "cpu", |c, _, _| Ok(Scale::starting_at(c, 3.0))).unwrap();
    assert_eq!(rep.losses.len(), 150);
    assert!(rep.verdict.passed, "{:?}", rep.verdict);
    // loss_log.jsonl: one training line per step, numbered as stdout numbers it, the lr constant.
    let log = log_lines(&out.join("loss_log.jsonl"));
    assert_eq!(log.len(), 150);
    for (i, rec) in log.iter().enumerate() {
        assert_eq!((rec["kind"].as_str(), rec["step"].as_u64()), (Some("train"), Some(i as u64 + 1)));
        assert_eq!(rec["lr"].as_f64(), Some(0.05));
        assert!(rec["grad_norm"].as_f64().unwrap() >= 0.0);
        // serde_json parses floats to within an ulp (no `float_roundtrip`).
        assert!((rec["loss"].as_f64().unwrap() - rep.losses[i]).abs() <= 1e-14 * rep.losses[i].abs());
    }
    // The first loss is that of w = 3: about 3^2 - 2 * 3 * acf + 1 per horizon, well above 4.
    assert!(rep.losses[0] > 4.0, "{}", rep.losses[0]);
    // The stand-in cannot beat the best linear single-lag predictor by much: it ends near the
    // floor of the data, far below its start.
    assert!(rep.losses[149] < 1.0, "{}", rep.losses[149]);
    // summary.json carries the verdict numbers.
    let s = common::json(&out.join("summary.json"));
    let first = rep.losses[..50].iter().sum::<f64>() / 50.0;
    let last = rep.losses[100..].iter().sum::<f64>() / 50.0;
    assert!((s["mean_first_50"].as_f64().unwrap() - first).abs() < 1e-12);
    assert!((s["mean_last_50"].as_f64().unwrap() - last).abs() < 1e-12);
    assert_eq!(s["passed"], true);
    assert_eq!(s["steps"], 150);
    assert_eq!(s["preset"], "quick");
    assert_eq!(s["floor"]["kind"], "exact AR(1) floor");
    assert_figure(&out.join("figures/overfit_curve.png"));
    // The resolved configuration records the overrides and resolves again to itself.
    let resolved = out.join("config.resolved.toml");
    let text = std::fs::read_to_string(&resolved).unwrap();
    assert!(text.contains("preset = \"quick\""), "{text}");
    let again = resolve(
        &boldcast_train::presets::Overrides { config: Some(resolved), ..Default::default() },
        DEFAULT_PRESET,
        boldcast_train::presets::Purpose::Overfit,
    )
    .unwrap();
    assert_eq!((again.overfit.lr, again.overfit.max_steps), (0.05, 150));
    assert_eq!(again.train.out.as_deref(), Some(out.as_path()));
    // Nothing else in the directory (no temporary files).
    let mut names: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, [".lock", ".run-kind", "config.resolved.toml", "figures", "loss_log.jsonl", "summary.json"]);
}

#[test]
fn a_flat_loss_fails_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let rep = overfit_command(
        &args(&out, |r| {
            r.lr = Some(1e-9);
            r.max_steps = Some(60);
        }),
        "cpu",
        Scale::new,
    )
    .unwrap();
    assert!(!rep.verdict.passed);
    let s = common::json(&out.join("summary.json"));
    assert_eq!(s["passed"], false);
}

fn write_runs(dir: &Path, n: usize, trs: usize) -> PathBuf {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_bc-cli"))
        .args(["synth", "--out", dir.to_str().unwrap(), "--subjects", &n.to_string(), "--trs", &trs.to_string()])
        .args(["--parcels", "4", "--format", "tsv"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    dir.to_path_buf()
}

#[test]
fn overfit_on_a_dataset_needs_exactly_four_windows() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_runs(&dir.path().join("four"), 4, 40);
    let out = dir.path().join("run");
    let rep = overfit_command(
        &args(&out, |r| {
            r.data = Some(data.clone());
            r.max_steps = Some(5);
        }),
        "cpu",
        Scale::new,
    )
    .unwrap();
    assert_eq!(rep.losses.len(), 5);
    assert_eq!(rep.floor.unwrap().kind, "empirical single-lag floor");

    let three = write_runs(&dir.path().join("three"), 3, 40);
    let out = dir.path().join("run3");
    let e = overfit_command(&args(&out, |r| r.data = Some(three)), "cpu", Scale::new).unwrap_err().to_string();
    assert!(e.contains("overfit needs exactly 4 windows") && e.contains("gives 3"), "{e}");
    assert!(!out.exists(), "nothing written on error");

    let short = write_runs(&dir.path().join("short"), 4, 20);
    let e = overfit_command(&args(&out, |r| r.data = Some(short)), "cpu", Scale::new).unwrap_err().to_string();
    assert!(e.contains("sub-01_run-1_bold.tsv: 20 TRs, shorter than one window of 32 TRs"), "{e}");
    assert!(!out.exists());

    let e =
        overfit_command(&args(&out, |r| r.preset = Some("tiny".into())), "cpu", Scale::new).unwrap_err().to_string();
    assert!(e.contains("unknown preset `tiny`"), "{e}");
    assert!(!out.exists());
}

/// Runs `bc-cli overfit --preset quick --max-steps 150 EXTRA...` into `out`, which must pass;
/// returns its standard output and its 150 log lines.
fn passing_overfit(out: &Path, extra: &[&str]) -> (String, Vec<serde_json::Value>) {
    let o = quick("overfit", out, &[&["--max-steps", "150"][..], extra].concat());
    let (so, se) = common::text(&o);
    assert!(o.status.success(), "{so}\n{se}");
    assert!(so.contains("verdict: PASS  mean(last 50) = "), "{so}");
    let log = log_lines(&out.join("loss_log.jsonl"));
    assert_eq!(log.len(), 150);
    (so, log)
}

/// The wired command on the CPU model: the quick preset's synthetic batch drops well below
/// 70 % of its start within 150 steps.
#[test]
fn overfit_binary_on_the_cpu_model_passes_with_the_quick_preset() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (so, log) = passing_overfit(&out, &[]);
    assert!(so.contains("exact AR(1) floor 0.420661"), "{so}");
    assert!(so.contains("step     10  loss "), "a line every log_every = 10 steps: {so}");
    let keys: Vec<&String> = log[0].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["grad_norm", "kind", "loss", "lr", "step"]);
    let s = common::json(&out.join("summary.json"));
    assert_eq!(s["passed"], true);
    let losses: Vec<f64> = log.iter().map(|r| r["loss"].as_f64().unwrap()).collect();
    let v = boldcast::core::accept::overfit_verdict(&losses).unwrap();
    assert!((s["mean_last_50"].as_f64().unwrap() - v.last).abs() < 1e-12);
    assert_figure(&out.join("figures/overfit_curve.png"));
    assert!(out.join("config.resolved.toml").is_file());
}

/// Mamba-2 on the dfdx backend (tape gradients through the chunked scan: the quick preset's
/// 32 tokens in two chunks of 16, four heads of width 4) learns the same batch: 150 steps
/// take a few seconds.
#[test]
fn overfit_binary_on_the_dfdx_mamba2_model_passes_with_the_quick_preset() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (_, log) = passing_overfit(&out, &["--backend", "dfdx-cpu", "--temporal", "mamba2"]);
    let losses: Vec<f64> = log.iter().map(|r| r["loss"].as_f64().unwrap()).collect();
    let v = boldcast::core::accept::overfit_verdict(&losses).unwrap();
    assert!(v.passed, "{v:?}");
    let resolved = std::fs::read_to_string(out.join("config.resolved.toml")).unwrap();
    assert!(resolved.contains("temporal = \"mamba2\"") && resolved.contains("backend = \"dfdx-cpu\""), "{resolved}");
}

/// The figure decodes as a PNG of the plot's size and has drawn content: a background plus
/// several line colours (the loss curve, the two windowed means, the floor).
fn assert_figure(path: &std::path::Path) {
    let len = std::fs::metadata(path).unwrap().len();
    assert!(len > 2000, "{}: only {len} bytes", path.display());
    let (width, height, px, buf) = common::png_pixels(path);
    assert_eq!((width, height), (1000, 600));
    let mut colours: Vec<&[u8]> = buf.chunks(px).collect();
    colours.sort();
    colours.dedup();
    assert!(colours.len() >= 4, "{}: {} distinct colours, the plot looks empty", path.display(), colours.len());
}

#[test]
fn overfit_binary_errors_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let cfg = dir.path().join("bad.toml");
    std::fs::write(&cfg, "[overfit]\nsteps = 3\n").unwrap();
    for (args, msg) in [
        (
            vec!["--data", "/no/such/boldcast/dir"],
            "error: data directory /no/such/boldcast/dir does not exist".to_string(),
        ),
        (vec!["--config", cfg.to_str().unwrap()], format!("error: {}: unknown key `overfit.steps`", cfg.display())),
        (vec!["--lr", "-1"], "error: invalid overfit.lr = -1: must be finite and > 0".to_string()),
        (
            vec!["--backend", "tpu"],
            "error: invalid train.backend = tpu: must be one of cpu, dfdx-cpu, dfdx-cuda, cuda".to_string(),
        ),
    ] {
        let mut a = vec!["overfit", "--preset", "quick", "--out", out.to_str().unwrap()];
        a.extend(args);
        let o = run(&a);
        let se = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{se}");
        assert!(se.starts_with(&msg), "want {msg:?} in {se}");
        assert!(!se.contains("panicked"));
        assert!(!out.exists(), "nothing written for {a:?}");
    }
}

/// The files of a directory, by name, with their bytes (one level down).
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    v.sort();
    v
}

#[test]
fn overfit_refuses_a_train_run_directory_and_a_foreign_one_and_reruns_its_own() {
    let d = tempfile::tempdir().unwrap();
    let (r, o) = (d.path().join("train-run"), d.path().join("overfit-run"));
    let (rs, os) = (r.to_str().unwrap(), o.to_str().unwrap());
    let t = run(&["train", "--preset", "quick", "--max-steps", "20", "--out", rs]);
    assert!(matches!(t.status.code(), Some(0 | 1)), "{:?}", common::text(&t));
    let before = snapshot(&r);
    let x = run(&["overfit", "--preset", "quick", "--max-steps", "5", "--out", rs]);
    let se = common::stderr(&x);
    assert_eq!(x.status.code(), Some(2), "{se}");
    assert!(se.contains(rs) && se.contains("train run directory"), "{se}");
    assert_eq!(snapshot(&r), before, "the refused overfit changed the train run's files");
    // A non-empty directory of neither command.
    let f = d.path().join("notes");
    std::fs::create_dir(&f).unwrap();
    std::fs::write(f.join("notes.txt"), b"mine").unwrap();
    let x = run(&["overfit", "--preset", "quick", "--max-steps", "5", "--out", f.to_str().unwrap()]);
    let se = common::stderr(&x);
    assert_eq!(x.status.code(), Some(2), "{se}");
    assert!(se.contains("not empty"), "{se}");
    assert_eq!(std::fs::read_dir(&f).unwrap().count(), 1, "only notes.txt");
    // Its own directory: overfit starts again there, and train does not continue it.
    for steps in ["5", "7"] {
        let x = run(&["overfit", "--preset", "quick", "--max-steps", steps, "--out", os]);
        assert!(matches!(x.status.code(), Some(0 | 1)), "{:?}", common::text(&x));
    }
    assert_eq!(log_lines(&o.join("loss_log.jsonl")).len(), 7);
    let before = snapshot(&o);
    let x = run(&["train", "--resume", os]);
    let se = common::stderr(&x);
    assert_eq!(x.status.code(), Some(2), "{se}");
    assert!(se.contains(os) && se.contains("overfit run directory"), "{se}");
    assert_eq!(snapshot(&o), before, "the refused train changed the overfit run's files");
}
