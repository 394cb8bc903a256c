//! The figures have text (issue 19): a title, axis labels, tick values and a legend, in the
//! PNG (drawn with the embedded font, so on any machine) and in its SVG twin.

use crate::common;

use common::{dark_pixels, png_pixels, svg_texts};

use std::path::Path;

/// The title band, the x label band, the y label band and the legend box hold drawn text,
/// in a figure `height` pixels high.
fn assert_text_drawn(path: &Path, height: usize) {
    let png = png_pixels(path);
    assert_eq!((png.0, png.1), (1000, height), "{}", path.display());
    let h = height;
    for (area, xs, ys) in [
        ("title", (250, 750), (0, 30)),
        ("x axis label", (420, 620), (h - 40, h - 5)),
        ("y axis label", (5, 40), (150, 450)),
        ("x tick values", (100, 980), (h - 72, h - 52)),
        ("legend (wherever it hides the fewest points)", (80, 990), (40, 380)),
    ] {
        let n = dark_pixels(&png, xs, ys);
        assert!(n > 50, "{}: only {n} dark pixels in the {area} area", path.display());
    }
}

/// The tick values among `texts` (those that read as numbers): no float noise
/// (`0.30000000000000004`), never `0.0e0`, at most 6 significant characters.
fn assert_ticks_tidy(texts: &[String]) {
    let numbers: Vec<&String> = texts.iter().filter(|t| t.parse::<f64>().is_ok()).collect();
    assert!(numbers.len() >= 6, "{texts:?}");
    for t in numbers {
        assert!(t.len() <= 6 && !t.contains("0000") && !t.contains("9999") && t != "0.0e0", "tick `{t}` in {texts:?}");
    }
}

#[test]
fn the_training_figure_has_a_title_axis_labels_ticks_and_a_legend() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let o = common::run(&["train", "--preset", "quick", "--val-every", "5", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "the quick verdict fails: {:?}", common::text(&o));
    assert_text_drawn(&out.join("figures/loss_curves.png"), 800);
    let texts = svg_texts(&out.join("figures/loss_curves.svg"));
    assert_ticks_tidy(&texts);
    // The per-horizon panel: the quick preset's horizons 1 and 5 (D = 1) and their floors.
    let floors = &common::log_lines(&out.join("loss_log.jsonl"))[0]["floor_per_horizon"];
    let h5_floor = boldcast_plot::ticks::tick_text(floors[1].as_f64().unwrap(), 3);
    let h5_floor = format!("floor, h = 5 (5 TRs ahead) = {h5_floor}");
    for want in [
        "Training: loss per step, held-out validation loss, learning rate",
        "optimizer step",
        boldcast_plot::LOSS_AXIS,
        "training loss (per step)",
        "validation loss (held-out subjects)",
        "loss floor = 0.4207",
        "validation loss per horizon (MSE)",
        "validation, h = 1 (1 TR ahead)",
        "validation, h = 5 (5 TRs ahead)",
        &h5_floor,
        "learning rate",
        "2e-4",
        "60",
    ] {
        assert!(texts.iter().any(|t| t == want), "`{want}` not among the SVG's texts {texts:?}");
    }
    // The held-out rule's windows: the means of the first and the last 3 validations.
    let vals: Vec<f64> = common::log_lines(&out.join("loss_log.jsonl"))
        .iter()
        .filter_map(|l| l.get("val_loss").and_then(|v| v.as_f64()))
        .collect();
    let first = (vals[0] + vals[1] + vals[2]) / 3.0;
    let want = format!("mean of the first 3 validations = {first:.4}");
    assert!(texts.contains(&want), "`{want}` not among {texts:?}");
    assert!(texts.iter().any(|t| t.starts_with("mean of the last 3 validations = ")), "{texts:?}");
    let summary = common::json(&out.join("summary.json"));
    assert_eq!(summary["figure_svg"], "figures/loss_curves.svg");
}

#[test]
fn the_overfit_figure_shows_the_rule_and_the_floor() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let o = common::run(&["overfit", "--preset", "quick", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{:?}", common::text(&o));
    assert_text_drawn(&out.join("figures/overfit_curve.png"), 600);
    let texts = svg_texts(&out.join("figures/overfit_curve.svg"));
    assert_ticks_tidy(&texts);
    for want in [
        "Overfit check: the loss on one batch must fall",
        boldcast_plot::OVERFIT_NOTE,
        "optimizer step",
        "loss floor = 0.4207 (the process, on unseen data)",
        "learning rate",
    ] {
        assert!(texts.iter().any(|t| t == want), "`{want}` not among {texts:?}");
    }
    for start in ["mean of the first 50 steps = ", "mean of the last 50 steps = "] {
        assert!(texts.iter().any(|t| t.starts_with(start)), "no `{start}...` among {texts:?}");
    }
    // The learning-rate panel's ticks (the quick overfit's 1e-3), in one form, 0 as `0`.
    for want in ["0", "5e-4", "1e-3"] {
        assert!(texts.iter().any(|t| t == want), "no learning-rate tick `{want}` among {texts:?}");
    }
}

/// The `(height, width)` of the SVG's rectangles filled with `color`, over the first `y_max`
/// pixels of the figure.
fn svg_rects(path: &Path, color: (u8, u8, u8), y_max: f64) -> Vec<(f64, f64)> {
    let fill = format!("fill=\"#{:02X}{:02X}{:02X}\"", color.0, color.1, color.2);
    let svg = std::fs::read_to_string(path).unwrap();
    let attr = |r: &str, name: &str| -> f64 {
        let v = r.split(&format!(" {name}=\"")).nth(1).unwrap().split('"').next().unwrap();
        v.parse().unwrap()
    };
    svg.split("<rect")
        .skip(1)
        .map(|r| r.split('>').next().unwrap())
        .filter(|r| r.contains(&fill) && attr(r, "y") < y_max)
        .map(|r| (attr(r, "height"), attr(r, "width")))
        .collect()
}

#[test]
fn the_eval_figure_has_a_bar_per_row_and_horizon_and_a_forecast_example() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    common::quick_run(&out, &["--max-steps", "20"]);
    let png = d.path().join("figs/eval.png");
    let o = common::run(&["eval", "--checkpoint", out.to_str().unwrap(), "--json", "--figure", png.to_str().unwrap()]);
    let (stdout, stderr) = common::text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stderr.contains("figure: ") && stderr.contains("eval.svg"), "{stderr}");
    let e: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let rows: Vec<serde_json::Value> =
        e["rows"].as_array().unwrap().iter().chain(e["floors"].as_array().unwrap()).cloned().collect();
    assert_eq!(rows.len(), 11, "model, 8 baselines, 2 floors");
    let svg = png.with_extension("svg");
    let texts = svg_texts(&svg);
    assert_ticks_tidy(&texts);
    use boldcast_plot::eval as ev;
    let caption = "Forecast example: parcel-000 of sub-04_run-1, TRs 0-31 of the run";
    let best = e["improvement"]["best_baseline"][0].as_str().unwrap();
    let best_words = format!("{}, h = 1 (best baseline)", boldcast_analysis::eval::names::row_words(best));
    let mut want = vec![
        ev::TITLE,
        ev::BARS_CAPTION,
        "h = 1 token",
        "h = 5 tokens",
        ev::HORIZON_AXIS,
        caption,
        "TR within the held-out window (TRs)",
        "standardized BOLD (SD units)",
        "true series",
        "model, h = 1",
        "model, h = 5",
        &best_words,
        "1 = the best baseline",
        "AR(1), iterated",
        "ridge VAR(p)",
        "exact floor of the AR(1) process",
        "30",
    ];
    let labels: Vec<String> = rows[..9]
        .iter()
        .flat_map(|r| (0..2).map(|i| boldcast_plot::ticks::value_text(r["per_horizon"][i].as_f64().unwrap(), 3)))
        .collect();
    want.extend(labels.iter().map(|s| s.as_str()));
    for w in want {
        assert!(texts.iter().any(|t| t == w), "`{w}` not among the SVG's texts {texts:?}");
    }
    assert!(texts.iter().any(|t| t == ev::RATIO_AXIS || t == ev::RATIO_AXIS_LOG), "{texts:?}");
    assert!(!texts.iter().any(|t| t == "ar1_iterated" || t == "var_p" || t.contains("tokens ahead)")), "{texts:?}");
    assert!(texts.iter().any(|t| t.ends_with("no interval: one held-out subject")), "{texts:?}");
    // The model and each baseline: a bar per horizon and a swatch in the legend; the floors:
    // reference lines, no bar.
    for (k, r) in rows.iter().enumerate() {
        let c = ev::row_color(r["name"].as_str().unwrap(), k);
        let rects = svg_rects(&svg, (c.0, c.1, c.2), 560.0);
        let want = if k < 9 { 3 } else { 0 };
        assert_eq!(rects.len(), want, "{}: {rects:?}", r["name"]);
    }
    // The PNG: its size, the title and the legends drawn, the true series in the lower panel.
    let px = png_pixels(&png);
    assert_eq!((px.0, px.1), (1200, 1000));
    for (area, xs, ys) in [
        ("title", (300, 900), (0, 30)),
        ("bar legend", (920, 1195), (60, 330)),
        ("example legend", (920, 1195), (600, 700)),
        ("true series", (100, 950), (620, 950)),
    ] {
        let n = dark_pixels(&px, xs, ys);
        assert!(n > 100, "only {n} dark pixels in the {area} area");
    }
}

#[test]
fn the_eval_figure_draws_the_bootstrap_interval_and_horizons_in_seconds() {
    let d = tempfile::tempdir().unwrap();
    let (data, out) = (d.path().join("data"), d.path().join("run"));
    common::synth_ok(&data, "--subjects 6 --runs 1 --trs 200 --parcels 4");
    let heldout = ["--data", data.to_str().unwrap(), "--tr", "2", "--subjects-heldout", "04,05,06"];
    common::quick_run(&out, &[&heldout[..], &["--max-steps", "10"]].concat());
    let png = d.path().join("eval.png");
    let o = common::run(&["eval", "--checkpoint", out.to_str().unwrap(), "--json", "--figure", png.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{:?}", common::text(&o));
    let e: serde_json::Value = serde_json::from_str(&common::text(&o).0).unwrap();
    let texts = svg_texts(&png.with_extension("svg"));
    let sub = "error bar: the 95 % paired-bootstrap interval of the model over 3 held-out subjects";
    assert!(texts.iter().any(|t| t.ends_with(sub)), "{texts:?}");
    // The quick preset: D = 1, horizons 1 and 5, here at a TR of 2 s.
    for want in ["model: paired-bootstrap interval", "h = 1 (TR 1, 2 s)", "h = 5 (TR 5, 10 s)"] {
        assert!(texts.iter().any(|t| t == want), "`{want}` not among {texts:?}");
    }
    assert!(e["bootstrap"]["per_horizon"][0]["interval"].is_object(), "{}", e["bootstrap"]);
}

/// `command --checkpoint R --figure PATH extra...`: exit status and standard error.
fn figure_run(command: &str, ckpt: &Path, path: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let args = [command, "--checkpoint", ckpt.to_str().unwrap(), "--figure", path.to_str().unwrap()];
    let o = common::run(&[&args[..], extra].concat());
    (o.status.code(), common::stderr(&o))
}

const PNG_MAGIC: &[u8] = b"\x89PNG";

#[test]
fn a_figure_replaces_only_regular_files_and_only_with_overwrite_and_its_twin_follows_the_suffix() {
    use std::os::unix::fs::FileTypeExt;
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    common::quick_run(&out, &["--max-steps", "20"]);
    for command in ["eval", "fingerprint"] {
        let dir = d.path().join(command);
        std::fs::create_dir(&dir).unwrap();
        // A FIFO is not a regular file: refused, with or without --overwrite, and left a FIFO.
        let fifo = dir.join("fifo.png");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        for extra in [&[][..], &["--overwrite"][..]] {
            let (code, se) = figure_run(command, &out, &fifo, extra);
            assert_eq!(code, Some(2), "{command}: {se}");
            assert!(se.contains(fifo.to_str().unwrap()) && se.contains("not a regular file"), "{command}: {se}");
            assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "{command}");
        }
        assert!(!fifo.with_extension("svg").exists(), "{command}: the twin was drawn beside a refused path");
        // An existing regular file: refused without --overwrite, replaced with it.
        let png = dir.join("fig.png");
        std::fs::write(&png, b"keep me").unwrap();
        let (code, se) = figure_run(command, &out, &png, &[]);
        assert_eq!(code, Some(2), "{command}: {se}");
        assert!(se.contains(png.to_str().unwrap()) && se.contains("--overwrite"), "{command}: {se}");
        assert_eq!(std::fs::read(&png).unwrap(), b"keep me", "{command}");
        let (code, se) = figure_run(command, &out, &png, &["--overwrite"]);
        assert_eq!(code, Some(0), "{command}: {se}");
        assert!(std::fs::read(&png).unwrap().starts_with(PNG_MAGIC), "{command}");
        // `x.svg`: the SVG there and the PNG at `x.png`.
        let svg = dir.join("other.svg");
        let (code, se) = figure_run(command, &out, &svg, &[]);
        assert_eq!(code, Some(0), "{command}: {se}");
        assert!(se.contains("other.png"), "{command}: {se}");
        assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"), "{command}");
        assert!(std::fs::read(dir.join("other.png")).unwrap().starts_with(PNG_MAGIC), "{command}");
    }
}
