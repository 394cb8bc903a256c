//! The fingerprint figure: the similarity heatmaps with subject labels and colour bars, and
//! the accuracy panel with its intervals, chance and legend, in the PNG and its SVG twin.

use bc_cli::plot_fingerprint::{draw_fingerprint, size, HEATMAP_WIDTH, HEIGHT, TITLE};
use boldcast::data::Dataset;
use boldcast::fixtures::{IdentitySpec, Layout};
use boldcast::train::fingerprint::{self, FcEdges, FingerprintReport, Method, Segment, Similarity};
use std::path::Path;

/// The text elements of an SVG written by plotters, trimmed.
fn svg_texts(path: &Path) -> Vec<String> {
    let svg = std::fs::read_to_string(path).unwrap();
    svg.split("<text")
        .skip(1)
        .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim().to_string()))
        .collect()
}

/// Dark pixels (every channel below 100) of the PNG in `[x0, x1) x [y0, y1)`, and its size.
fn dark_pixels(path: &Path, (x0, x1): (usize, usize), (y0, y1): (usize, usize)) -> (usize, (usize, usize)) {
    let bytes = std::fs::read(path).unwrap();
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let (w, px) = (info.width as usize, info.color_type.samples());
    let n = (y0..y1)
        .flat_map(|y| (x0..x1).map(move |x| (y * w + x) * px))
        .filter(|&i| buf[i..i + 3].iter().all(|&c| c < 100))
        .count();
    (n, (w, info.height as usize))
}

/// FC of whole runs against FC of their first 30 TRs, on 6 planted subjects of 2 runs.
fn report() -> FingerprintReport {
    let layout = Layout { subjects: 6, runs: 2, trs: 200, parcels: 10, seed: 1 };
    let ds = Dataset::from_synth(&IdentitySpec::planted(layout).generate().unwrap(), None).unwrap();
    let runs: Vec<usize> = (0..ds.runs.len()).collect();
    let (segs, halves) = fingerprint::segments(&ds, &runs).unwrap();
    let short: Vec<Segment> =
        segs.iter().map(|s| Segment { n_tr: 30, data: s.data[..30 * s.parcels].to_vec(), ..s.clone() }).collect();
    let (a, b) = (fingerprint::fc_samples(&segs, FcEdges::FisherZ), fingerprint::fc_samples(&short, FcEdges::FisherZ));
    let methods = [Method::new("fc", &a, Similarity::Pearson), Method::new("fc-30", &b, Similarity::Pearson)];
    fingerprint::fingerprint(&methods, halves).unwrap()
}

#[test]
fn the_fingerprint_figure_has_heatmaps_intervals_chance_and_labels() {
    let d = tempfile::tempdir().unwrap();
    let png = d.path().join("figures/fingerprint.png");
    let r = report();
    let svg = draw_fingerprint(&r, &png).unwrap();
    if let Ok(keep) = std::env::var("FINGERPRINT_FIGURE_KEEP") {
        std::fs::copy(&png, keep).unwrap();
    }
    assert_eq!(svg, d.path().join("figures/fingerprint.svg"));
    let texts = svg_texts(&svg);
    let p = r.mcnemar.as_ref().unwrap().p_value;
    let sub = "6 subjects, 12 queries, whole runs; McNemar (top-1, fc vs fc-30): ";
    for want in [
        TITLE,
        "fc: pearson similarity",
        "fc-30: pearson similarity",
        "gallery run (grouped by subject)",
        "query run (grouped by subject)",
        "identification accuracy",
        "method and rank",
        "accuracy, 95 % intervals",
        "Clopper-Pearson 95 %",
        "bootstrap over subjects 95 %",
        "chance",
        "top-1",
        "top-5",
        "fc-30",
        "01",
        "06",
        &format!("{:.2}", r.methods[0].top1.value),
    ] {
        assert!(texts.iter().any(|t| t == want), "`{want}` not among the SVG's texts {texts:?}");
    }
    assert!(texts.iter().any(|t| t.starts_with(sub) && t.ends_with(&format!("p = {p:.3}"))), "{texts:?}");
    let (w, h) = size(2);
    let hm = HEATMAP_WIDTH as usize;
    for (area, xs, ys) in [
        ("title", (w as usize / 2 - 200, w as usize / 2 + 200), (0, 30)),
        ("first heatmap's subject labels under it", (60, hm - 100), (HEIGHT as usize - 95, HEIGHT as usize - 70)),
        ("first heatmap's y axis label", (0, 30), (150, 450)),
        ("second colour bar's ticks", (2 * hm - 105, 2 * hm - 45), (100, 500)),
        ("accuracy axis label", (2 * hm, 2 * hm + 30), (150, 450)),
        ("legend", (w as usize - 260, w as usize - 20), (90, 170)),
    ] {
        let (n, dims) = dark_pixels(&png, xs, ys);
        assert_eq!(dims, (w as usize, h as usize));
        assert!(n > 30, "only {n} dark pixels in the {area} area");
    }
}
