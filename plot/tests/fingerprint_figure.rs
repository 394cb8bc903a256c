//! The fingerprint figure: the similarity heatmaps with subject labels and colour bars, and
//! the accuracy panel with its intervals, chance and legend, in the PNG and its SVG twin.

use boldcast_analysis::fingerprint::{self, FcEdges, FingerprintReport, Method, Segment, Similarity};
use boldcast_data::Dataset;
use boldcast_fixtures::{IdentitySpec, Layout};
use boldcast_plot::fingerprint::{draw_fingerprint, size, HEATMAP_WIDTH, HEIGHT, TITLE};
use boldcast_plot::inspect::{dark_pixels, png_pixels, svg_texts};

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
    let svg = draw_fingerprint(&r, &["sub-02".to_string()], &png, false).unwrap();
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
        "identification accuracy (fraction of queries)",
        "pearson similarity",
        "02*",
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
    let held = "; * held out in training";
    assert!(texts.iter().any(|t| t.starts_with(sub) && t.ends_with(&format!("p = {p:.3}{held}"))), "{texts:?}");
    // The accuracy axis runs from 0 to 1; both colour bars carry the same ticks (one scale).
    assert!(texts.iter().any(|t| t == "1") && !texts.iter().any(|t| t == "1.2" || t == "1.4"), "{texts:?}");
    let (lo, hi) = boldcast_plot::fingerprint::joint_scale(&r.methods);
    let bar_ticks = boldcast_plot::ticks::Ticks::linear(lo, hi, boldcast_plot::fingerprint::COLOUR_BAR_TICKS).labels;
    assert!(bar_ticks.len() >= 4, "{bar_ticks:?}");
    let bars = texts.windows(bar_ticks.len() + 1).filter(|w| w[..bar_ticks.len()] == bar_ticks[..]).count();
    assert_eq!(bars, 2, "the ticks {bar_ticks:?} on both colour bars: {texts:?}");
    assert_eq!(texts.iter().filter(|t| *t == "pearson similarity").count(), 2, "both colour bars labelled");
    assert!(!texts.iter().any(|t| t.contains("0000000") || t.contains("9999999")), "float noise in {texts:?}");
    let (w, h) = size(2);
    let hm = HEATMAP_WIDTH as usize;
    let px = png_pixels(&png);
    for (area, xs, ys) in [
        ("title", (w as usize / 2 - 200, w as usize / 2 + 200), (0, 30)),
        ("first heatmap's subject labels under it", (60, hm - 100), (HEIGHT as usize - 95, HEIGHT as usize - 70)),
        ("first heatmap's y axis label", (0, 30), (150, 450)),
        ("second colour bar's ticks", (2 * hm - 105, 2 * hm - 45), (100, 500)),
        ("accuracy axis label", (2 * hm, 2 * hm + 30), (150, 450)),
        ("legend under the accuracy panel", (2 * hm + 60, 2 * hm + 320), (HEIGHT as usize - 70, HEIGHT as usize)),
    ] {
        let n = dark_pixels(&px, xs, ys);
        assert_eq!((px.0, px.1), (w as usize, h as usize));
        assert!(n > 30, "only {n} dark pixels in the {area} area");
    }
}
