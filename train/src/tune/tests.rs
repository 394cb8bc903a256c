use super::*;

fn quick() -> RunConfig {
    let mut cfg = crate::presets::preset("quick").unwrap();
    cfg.data.subjects_heldout = vec!["04".into()];
    cfg
}

fn search(axes: &[&str], mode: Mode) -> Search {
    let axes = axes.iter().map(|s| Axis::parse(s).unwrap()).collect();
    Search { base: quick(), axes, mode, out: PathBuf::from("out") }
}

fn result(trial: usize, loss: Option<f64>) -> TrialResult {
    TrialResult {
        trial,
        dir: trial_dir_name(trial),
        values: vec![],
        status: if loss.is_some() { "finished" } else { "failed" }.into(),
        best_val_loss: loss,
        horizons: vec![1, 5],
        ..TrialResult::default()
    }
}

#[test]
fn values_are_toml_or_bare_strings_and_arrays_keep_their_commas() {
    let a = Axis::parse("model.horizons=[1, 5],[1,2,5]").unwrap();
    assert_eq!(a.key, "model.horizons");
    assert_eq!(a.values.len(), 2);
    assert_eq!(a.values[1].as_array().unwrap().len(), 3);
    let a = Axis::parse("model.linear_path=off,\"ar\",auto").unwrap();
    let words: Vec<&str> = a.values.iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(words, ["off", "ar", "auto"]);
    let a = Axis::parse("train.lr=3e-4,1e-3").unwrap();
    assert_eq!(a.values, [toml::Value::Float(3e-4), toml::Value::Float(1e-3)]);
    assert!(Axis::parse("lr=1").unwrap_err().to_string().contains("dotted"));
    assert!(Axis::parse("train.lr").unwrap_err().to_string().contains("KEY=V1,V2"));
    assert!(Axis::parse("train.lr=1,,2").unwrap_err().to_string().contains("empty value"));
}

#[test]
fn the_grid_is_every_combination_with_the_first_key_slowest() {
    let s = search(&["model.d_model=8,16", "train.lr=1e-3,3e-4,1"], Mode::Grid);
    let c = candidates(&s).unwrap();
    assert_eq!(c.len(), 6);
    let got: Vec<(usize, f64)> = c.iter().map(|c| (c.cfg.model.d_model, c.cfg.train.lr)).collect();
    assert_eq!(got, [(8, 1e-3), (8, 3e-4), (8, 1.0), (16, 1e-3), (16, 3e-4), (16, 1.0)]);
    assert_eq!(c[4].cfg.train.out.as_deref(), Some(Path::new("out/trial-004")));
    assert_eq!(c[4].values, [toml::Value::Integer(16), toml::Value::Float(3e-4)]);
    // The integer 1 stands for the number train.lr = 1.0; the rest of the base is kept.
    assert_eq!((c[5].cfg.train.max_steps, c[5].cfg.model.horizons.clone()), (60, vec![1, 5]));
}

#[test]
fn random_draws_are_distinct_reproducible_and_depend_on_the_seed() {
    let axes = ["train.lr=1e-4,3e-4,1e-3,3e-3", "model.d_model=4,8,16", "train.seed=0,1,2"];
    let draw = |seed| {
        let c = candidates(&search(&axes, Mode::Random { n: 5, seed })).unwrap();
        c.iter().map(|c| (c.cfg.train.lr, c.cfg.model.d_model, c.cfg.train.seed)).collect::<Vec<_>>()
    };
    let a = draw(7);
    assert_eq!(a.len(), 5);
    assert_eq!(a, draw(7));
    assert_ne!(a, draw(8));
    for (i, x) in a.iter().enumerate() {
        assert!(!a[..i].contains(x), "draw {i} repeats {x:?}");
    }
    // More draws than the grid has: the whole grid, in grid order.
    let all = candidates(&search(&["model.d_model=4,8"], Mode::Random { n: 9, seed: 1 })).unwrap();
    assert_eq!(all.iter().map(|c| c.cfg.model.d_model).collect::<Vec<_>>(), [4, 8]);
}

#[test]
fn a_bad_key_or_value_is_named_before_anything_runs() {
    let e = candidates(&search(&["model.d_modl=8,16"], Mode::Grid)).unwrap_err().to_string();
    assert!(e.starts_with("tune key `model.d_modl` = 8:") && e.contains("d_modl"), "{e}");
    let e = candidates(&search(&["modle.d_model=8"], Mode::Grid)).unwrap_err().to_string();
    assert_eq!(e, "tune key `modle.d_model`: the configuration has no section [modle]");
    let e = candidates(&search(&["train.lr=1e-3,-1"], Mode::Grid)).unwrap_err().to_string();
    assert!(e.starts_with("tune key `train.lr` = -1.0: invalid train.lr = -1"), "{e}");
    let e = candidates(&search(&["window.window=32,4"], Mode::Grid)).unwrap_err().to_string();
    assert!(e.contains("`window.window` = 4") && e.contains("tokens"), "{e}");
    let e = candidates(&search(&["model.linear_path=off,sideways"], Mode::Grid)).unwrap_err().to_string();
    assert!(e.starts_with("tune key `model.linear_path` = \"sideways\""), "{e}");
    let ok = candidates(&search(&["model.linear_path=off,ar"], Mode::Grid)).unwrap();
    assert!(ok[1].cfg.model.linear_path.is_on() && !ok[0].cfg.model.linear_path.is_on());
    let e = candidates(&search(&["train.lr=1", "train.lr=2"], Mode::Grid)).unwrap_err().to_string();
    assert_eq!(e, "tune key `train.lr`: given twice");
}

#[test]
fn a_configuration_without_validation_subjects_is_refused() {
    let mut s = search(&["train.lr=1e-3"], Mode::Grid);
    s.base.data.subjects_heldout.clear();
    let e = candidates(&s).unwrap_err().to_string();
    assert!(e.contains("no validation subjects") && e.contains("--subjects-heldout"), "{e}");
    let s = search(&["data.subjects_heldout=[\"04\"],[]"], Mode::Grid);
    assert!(matches!(candidates(&s), Err(TuneError::NoValidation { trial: 1 })));
}

#[test]
fn the_best_is_the_lowest_finite_loss_and_the_lower_index_on_a_tie() {
    let t = [result(0, Some(0.5)), result(1, Some(0.3)), result(2, None), result(3, Some(0.3)), result(4, Some(0.4))];
    assert_eq!(best_trial(&t), Some(1));
    let t = [result(0, None), result(1, Some(f64::NAN)), result(2, Some(0.9))];
    assert_eq!(best_trial(&t), Some(2));
    assert_eq!(best_trial(&[result(0, None)]), None);
}

#[test]
fn the_table_has_units_in_its_header_and_one_row_per_trial() {
    let mut t = result(0, Some(0.25));
    t.values = vec!["8".into()];
    t.best_val_per_horizon = Some(vec![0.125, 0.375]);
    t.best_step = Some(40);
    let mut f = result(1, None);
    f.values = vec!["16".into()];
    f.error = Some("non-finite\tloss".into());
    let report = TuneReport {
        keys: vec!["model.d_model".into()],
        mode: "grid".into(),
        validation_subjects: vec!["04".into()],
        trials: vec![t, f],
        best: Some(0),
        best_config: None,
    };
    let text = results_tsv(&report);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[0].starts_with("trial\tmodel.d_model\tstatus\tval_mse (variance units)\t"), "{}", lines[0]);
    assert!(lines[1].starts_with("0\t8\tfinished\t0.250000\th1=0.125000,h5=0.375000\t40\t"), "{}", lines[1]);
    assert!(lines[2].ends_with("trial-001\tnon-finite loss"), "{}", lines[2]);
}
