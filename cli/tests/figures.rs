//! The figures have text (issue 19): a title, axis labels, tick values and a legend, in the
//! PNG (drawn with the embedded font, so on any machine) and in its SVG twin.

mod common;

use std::path::Path;

/// The text elements of an SVG written by plotters, trimmed.
fn svg_texts(path: &Path) -> Vec<String> {
    let svg = std::fs::read_to_string(path).unwrap();
    svg.split("<text")
        .skip(1)
        .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim().to_string()))
        .collect()
}

/// The decoded PNG: width, height and RGB(A) samples.
fn png_pixels(path: &Path) -> (usize, usize, usize, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap();
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    (info.width as usize, info.height as usize, info.color_type.samples(), buf)
}

/// Dark (text or axis) pixels in the rectangle `[x0, x1) x [y0, y1)`.
fn dark_pixels(png: &(usize, usize, usize, Vec<u8>), (x0, x1): (usize, usize), (y0, y1): (usize, usize)) -> usize {
    let (w, _, px, buf) = png;
    let mut n = 0;
    for y in y0..y1 {
        for x in x0..x1 {
            let p = &buf[(y * w + x) * px..][..3];
            n += usize::from(p.iter().all(|&c| c < 100));
        }
    }
    n
}

/// The title band, the x label band, the y label band and the legend box hold drawn text.
fn assert_text_drawn(path: &Path) {
    let png = png_pixels(path);
    assert_eq!((png.0, png.1), (1000, 600), "{}", path.display());
    for (area, xs, ys) in [
        ("title", (250, 750), (0, 30)),
        ("x axis label", (420, 620), (560, 595)),
        ("y axis label", (5, 40), (150, 450)),
        ("x tick values", (100, 980), (528, 548)),
        ("legend (wherever it hides the fewest points)", (650, 990), (40, 380)),
    ] {
        let n = dark_pixels(&png, xs, ys);
        assert!(n > 50, "{}: only {n} dark pixels in the {area} area", path.display());
    }
}

#[test]
fn the_training_figure_has_a_title_axis_labels_ticks_and_a_legend() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let o = common::run(&["train", "--preset", "quick", "--val-every", "5", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "the quick verdict fails: {:?}", common::text(&o));
    assert_text_drawn(&out.join("figures/loss_curves.png"));
    let texts = svg_texts(&out.join("figures/loss_curves.svg"));
    for want in [
        "Training: loss per step, held-out validation loss, learning rate",
        "optimizer step",
        "loss (MSE of standardized BOLD, variance units)",
        "training loss (per step)",
        "validation loss (held-out subjects)",
        "loss floor = 0.4207",
        "learning rate",
        "3.0e-4",
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
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["figure_svg"], "figures/loss_curves.svg");
}

#[test]
fn the_overfit_figure_shows_the_rule_and_the_floor() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("run");
    let o = common::run(&["overfit", "--preset", "quick", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{:?}", common::text(&o));
    assert_text_drawn(&out.join("figures/overfit_curve.png"));
    let texts = svg_texts(&out.join("figures/overfit_curve.svg"));
    for want in ["Overfit check: the loss on one batch must fall", "optimizer step", "loss floor = 0.4207"] {
        assert!(texts.iter().any(|t| t == want), "`{want}` not among {texts:?}");
    }
    for start in ["mean of the first 50 steps = ", "mean of the last 50 steps = "] {
        assert!(texts.iter().any(|t| t.starts_with(start)), "no `{start}...` among {texts:?}");
    }
}
