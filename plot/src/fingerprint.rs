//! The figure of `bc-cli fingerprint` ([`draw_fingerprint`]): for each method the similarity
//! matrix of every pair of runs as a heatmap (rows the queries, columns the gallery, runs
//! grouped by subject with each subject's block outlined, the subjects held out in training
//! marked `*`, a labelled colour bar beside it; every matrix on one colour scale, [`joint_scale`]),
//! and a panel of each method's top-1 and top-5 accuracy (0 to 1) as bars with their
//! Clopper-Pearson and bootstrap intervals and the chance level. A PNG and its SVG twin, with
//! the embedded font of [`crate`].

use crate::ticks::Ticks;
use crate::{draw_twin, Figure, PlotError};
use boldcast_analysis::fingerprint::{Accuracy, FingerprintReport, MethodReport};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};

/// The width of one heatmap with its colour bar, in pixels.
pub const HEATMAP_WIDTH: u32 = 470;
/// The width of the accuracy panel.
pub const ACCURACY_WIDTH: u32 = 520;
/// The figure's height.
pub const HEIGHT: u32 = 620;
/// About how many tick values a colour bar has.
pub const COLOUR_BAR_TICKS: usize = 8;
/// The title of every fingerprint figure.
pub const TITLE: &str = "Subject fingerprinting: leave-one-run-out identification";

const RED: RGBColor = RGBColor(214, 39, 40);
const ORANGE: RGBColor = RGBColor(255, 127, 14);
const METHOD_COLORS: [RGBColor; 3] = [RGBColor(31, 119, 180), RGBColor(44, 160, 44), RGBColor(148, 103, 189)];

/// The figure's size: one heatmap per method beside the accuracy panel.
pub fn size(methods: usize) -> (u32, u32) {
    (HEATMAP_WIDTH * methods.max(1) as u32 + ACCURACY_WIDTH, HEIGHT)
}

/// The fingerprint figure of a report with the subjects held out in training, for
/// [`draw_twin`].
struct FingerprintFigure<'a>(&'a FingerprintReport, &'a [String]);

impl Figure for FingerprintFigure<'_> {
    fn size(&self) -> (u32, u32) {
        size(self.0.methods.len())
    }

    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), String> {
        draw_on(root, self.0, self.1)
    }
}

/// Draws `report` into the PNG and the SVG of `path`, replacing regular files there only when
/// `overwrite` (`draw_twin`); the subjects `heldout` (held out in training, `04` or `sub-04`)
/// are marked. Returns the twin's path.
pub fn draw_fingerprint(
    report: &FingerprintReport,
    heldout: &[String],
    path: &Path,
    overwrite: bool,
) -> Result<PathBuf, PlotError> {
    draw_twin(path, &FingerprintFigure(report, heldout), overwrite)
}

/// Whether subject `s` is one of `heldout`, with or without the `sub-` prefix.
pub fn is_heldout(s: &str, heldout: &[String]) -> bool {
    let bare = |x: &str| x.strip_prefix("sub-").unwrap_or(x).to_string();
    heldout.iter().any(|h| bare(h) == bare(s))
}

/// The mark of a held-out subject's label.
pub const HELDOUT_MARK: &str = "*";

/// The line under the title: what a sample is, the paired test and the held-out mark.
pub fn subtitle(report: &FingerprintReport, heldout: &[String]) -> String {
    let marked = report.methods.first().is_some_and(|m| m.subjects.iter().any(|s| is_heldout(s, heldout)));
    let mark = if marked { format!("; {HELDOUT_MARK} held out in training") } else { String::new() };
    format!("{}{mark}", test_line(report))
}

/// What a sample is, and the paired test.
fn test_line(report: &FingerprintReport) -> String {
    let what = &report.samples;
    let m = report.methods.first();
    let counts = m.map_or(String::new(), |m| format!("{} subjects, {} queries, {what}", m.n_subjects, m.n_queries));
    match &report.mcnemar {
        Some(t) => format!(
            "{counts}; McNemar (top-1, {} vs {}): {} vs {} discordant, p = {:.3}",
            t.methods[0], t.methods[1], t.only_first, t.only_second, t.p_value
        ),
        None => counts,
    }
}

fn draw_on<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    report: &FingerprintReport,
    heldout: &[String],
) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let body = crate::titled(&root, TITLE, Some(&subtitle(report, heldout)))?;
    let n = report.methods.len() as u32;
    let (maps, acc) = body.split_horizontally(HEATMAP_WIDTH * n);
    let scale = joint_scale(&report.methods);
    for (area, m) in maps.split_evenly((1, n.max(1) as usize)).iter().zip(&report.methods) {
        heatmap(&root, area, m, (scale, heldout))?;
    }
    accuracy_panel(&root, &acc, report)
}

/// One colour scale for every method's matrix: the widest of their [`scale`]s.
pub fn joint_scale(methods: &[MethodReport]) -> (f64, f64) {
    let scales: Vec<(f64, f64)> = methods.iter().map(|m| scale(&m.matrix)).collect();
    let lo = scales.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
    let hi = scales.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
    if lo.is_finite() && hi > lo {
        (lo, hi)
    } else {
        (0.0, 1.0)
    }
}

/// Viridis, by linear interpolation between five of its colours; `t` in [0, 1].
pub fn viridis(t: f64) -> RGBColor {
    const STOPS: [(f64, f64, f64); 5] =
        [(68.0, 1.0, 84.0), (59.0, 82.0, 139.0), (33.0, 145.0, 140.0), (94.0, 201.0, 98.0), (253.0, 231.0, 37.0)];
    let x = if t.is_finite() { t.clamp(0.0, 1.0) * 4.0 } else { 0.0 };
    let i = (x.floor() as usize).min(3);
    let f = x - i as f64;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let mix = |u: f64, v: f64| (u + f * (v - u)).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// The colour scale: the smallest and largest similarity off the diagonal (the diagonal, each
/// run with itself, is drawn grey and would only squeeze the scale).
pub fn scale(matrix: &[Vec<f64>]) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for (i, row) in matrix.iter().enumerate() {
        for (_, v) in row.iter().enumerate().filter(|(j, v)| *j != i && v.is_finite()) {
            (lo, hi) = (lo.min(*v), hi.max(*v));
        }
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi > lo {
        (lo, hi)
    } else {
        (lo - 0.5, lo + 0.5)
    }
}

/// The subjects' blocks of consecutive runs: `(first, end, subject)`.
pub fn groups(subjects: &[String]) -> Vec<(usize, usize, String)> {
    let mut out: Vec<(usize, usize, String)> = Vec::new();
    for (i, s) in subjects.iter().enumerate() {
        match out.last_mut() {
            Some(g) if g.2 == *s => g.1 = i + 1,
            _ => out.push((i, i + 1, s.clone())),
        }
    }
    out
}

/// One method's similarity matrix, its subject labels along both axes, and its colour bar.
fn heatmap<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    area: &DrawingArea<DB, Shift>,
    m: &MethodReport,
    ((lo, hi), heldout): ((f64, f64), &[String]),
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let n = m.labels.len().max(1) as f64;
    let (cells, bar) = area.split_horizontally(area.dim_in_pixel().0.saturating_sub(110));
    let pooling = m.pooling.map(|p| format!(" ({} pooling)", p.name())).unwrap_or_default();
    let caption = format!("{}{pooling}: {} similarity", m.name, m.similarity.name());
    let mut chart = ChartBuilder::on(&cells)
        .caption(caption, ("sans-serif", 18))
        .margin(8)
        .x_label_area_size(50)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..n, 0.0..n)
        .map_err(e)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(0)
        .y_labels(0)
        .x_desc("gallery run (grouped by subject)")
        .y_desc("query run (grouped by subject)")
        .axis_desc_style(("sans-serif", 15))
        .draw()
        .map_err(e)?;
    let size = m.matrix.len();
    let color =
        |i: usize, j: usize, v: f64| if i == j { RGBColor(200, 200, 200) } else { viridis((v - lo) / (hi - lo)) };
    chart
        .draw_series((0..size).flat_map(|i| {
            (0..size).map(move |j| {
                let y = (size - 1 - i) as f64;
                Rectangle::new([(j as f64, y), (j as f64 + 1.0, y + 1.0)], color(i, j, m.matrix[i][j]).filled())
            })
        }))
        .map_err(e)?;
    let gs = groups(&m.subjects);
    chart
        .draw_series(gs.iter().map(|(a, b, _)| {
            let (a, b) = (*a as f64, *b as f64);
            Rectangle::new([(a, n - b), (b, n - a)], BLACK.stroke_width(1))
        }))
        .map_err(e)?;
    subject_labels(root, &chart, (&gs, heldout), n)?;
    colour_bar(bar, (lo, hi), &format!("{} similarity", m.similarity.name()))
}

/// The subject labels at the centre of each block, under the x axis and left of the y axis
/// (a held-out subject's with [`HELDOUT_MARK`], in red); a label is left out when it would
/// come within its own width (x) or 14 pixels (y) of the previous one drawn.
fn subject_labels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart2<'_, DB>,
    (gs, heldout): (&[(usize, usize, String)], &[String]),
    n: f64,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let (mut last_x, mut last_y): (Option<i32>, Option<i32>) = (None, None);
    for (a, b, s) in gs {
        let held = is_heldout(s, heldout);
        let text = if held { format!("{s}{HELDOUT_MARK}") } else { s.clone() };
        let font = ("sans-serif", 12).into_font().color(if held { &RED } else { &BLACK });
        let c = (*a + *b) as f64 / 2.0;
        let (x, y0) = chart.backend_coord(&(c, 0.0));
        let (x0, y) = chart.backend_coord(&(0.0, n - c));
        let wide = 7 * text.chars().count() as i32 + 4;
        if last_x.is_none_or(|l| x - l >= wide) {
            let below = font.clone().pos(Pos::new(HPos::Center, VPos::Top));
            root.draw(&Text::new(text.clone(), (x, y0 + 4), below)).map_err(e)?;
            last_x = Some(x);
        }
        if last_y.is_none_or(|l| y - l >= 14) {
            let left = font.pos(Pos::new(HPos::Right, VPos::Center));
            root.draw(&Text::new(text, (x0 - 4, y), left)).map_err(e)?;
            last_y = Some(y);
        }
    }
    Ok(())
}

/// A vertical colour bar of the scale `(lo, hi)`, its tick values and `label` on its right.
fn colour_bar<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    (lo, hi): (f64, f64),
    label: &str,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let yt = Ticks::linear(lo, hi, COLOUR_BAR_TICKS);
    let mut chart = ChartBuilder::on(&area)
        .margin_top(36)
        .margin_bottom(58)
        .margin_left(8)
        .margin_right(34)
        .right_y_label_area_size(44)
        .build_cartesian_2d(0.0..1.0, yt.on(plotters::coord::types::RangedCoordf64::from(lo..hi)))
        .map_err(e)?;
    let steps = 64;
    let step = (hi - lo) / steps as f64;
    chart
        .draw_series((0..steps).map(|k| {
            let y = lo + k as f64 * step;
            Rectangle::new([(0.0, y), (1.0, y + step)], viridis(k as f64 / (steps - 1) as f64).filled())
        }))
        .map_err(e)?;
    let yf = |v: &f64| yt.label(*v);
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(0)
        .y_label_formatter(&yf)
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(e)?;
    // The label along the bar's right edge, beyond its tick values.
    let (w, h) = area.dim_in_pixel();
    let font = ("sans-serif", 13).into_font().transform(FontTransform::Rotate90);
    let style = TextStyle::from(font).pos(Pos::new(HPos::Center, VPos::Center));
    area.draw(&Text::new(label.to_string(), (w as i32 - 26, h as i32 / 2), style)).map_err(e)?;
    Ok(())
}

/// The x position of the bar of method `mi`, rank `ki` (0: top-1, 1: top-5): a gap of half a
/// bar between methods.
fn bar_x(mi: usize, ki: usize) -> f64 {
    mi as f64 * 2.5 + ki as f64
}

/// The height of the accuracy panel's legend strip, under its chart.
const ACC_LEGEND: u32 = 70;

/// The accuracy panel: bars on an axis from 0 to 1, intervals, chance, labels, and the legend
/// in a strip under it (so it hides no interval).
fn accuracy_panel<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    area: &DrawingArea<DB, Shift>,
    report: &FingerprintReport,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let (area, strip) = area.split_vertically(area.dim_in_pixel().1.saturating_sub(ACC_LEGEND));
    let x1 = bar_x(report.methods.len().max(1), 0) - 0.5;
    let pct = (report.level * 100.0).round();
    let yt = Ticks::linear(0.0, 1.0, 5);
    let mut chart = ChartBuilder::on(&area)
        .caption(format!("accuracy, {pct} % intervals"), ("sans-serif", 18))
        .margin(8)
        .margin_top(14)
        .margin_right(20)
        .x_label_area_size(58)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x1, yt.on(plotters::coord::types::RangedCoordf64::from(0.0..1.0)))
        .map_err(e)?;
    let yf = |v: &f64| yt.label(*v);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_label_formatter(&yf)
        .y_desc("identification accuracy (fraction of queries)")
        .x_desc("method and rank")
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 15))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()
        .map_err(e)?;
    for (mi, m) in report.methods.iter().enumerate() {
        let c = METHOD_COLORS[mi % METHOD_COLORS.len()];
        for (ki, a) in [&m.top1, &m.top5].into_iter().enumerate() {
            bar(&mut chart, bar_x(mi, ki), a, c).map_err(e)?;
        }
    }
    bar_labels(root, &chart, report)?;
    accuracy_legend(&strip, pct)
}

/// The accuracy panel's legend: the two intervals and chance, one line each.
fn accuracy_legend<DB: DrawingBackend>(strip: &DrawingArea<DB, Shift>, pct: f64) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let entries = [
        (format!("Clopper-Pearson {pct} %"), BLACK),
        (format!("bootstrap over subjects {pct} %"), ORANGE),
        ("chance".into(), RED),
    ];
    let font = ("sans-serif", 13).into_font();
    for (i, (label, col)) in entries.into_iter().enumerate() {
        let y = 6 + 20 * i as i32;
        strip.draw(&PathElement::new(vec![(70, y + 7), (95, y + 7)], col.stroke_width(3))).map_err(e)?;
        strip.draw(&Text::new(label, (102, y), font.clone())).map_err(e)?;
    }
    Ok(())
}

/// The accuracy panel's chart (its y axis with the ticks of [`Ticks`]).
type AccChart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, crate::ticks::Keyed<plotters::coord::types::RangedCoordf64>>,
>;

type Chart2<'a, DB> =
    ChartContext<'a, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>>;

/// One bar at `x` (width 0.7) with its Clopper-Pearson (black) and bootstrap (orange)
/// intervals and the chance level (red); the legend under the panel names them.
fn bar<DB: DrawingBackend>(
    chart: &mut AccChart<'_, DB>,
    x: f64,
    a: &Accuracy,
    c: RGBColor,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    chart.draw_series([Rectangle::new([(x + 0.15, 0.0), (x + 0.85, a.value)], c.mix(0.65).filled())])?;
    let whisker = |xc: f64, lo: f64, hi: f64, col: RGBColor| {
        let cap = |y: f64| EmptyElement::at((xc, y)) + PathElement::new(vec![(-6, 0), (6, 0)], col.stroke_width(2));
        (PathElement::new(vec![(xc, lo), (xc, hi)], col.stroke_width(2)), cap(lo), cap(hi))
    };
    for (xc, i, col) in [(x + 0.42, a.clopper_pearson, BLACK), (x + 0.58, a.bootstrap, ORANGE)] {
        let (line, lo, hi) = whisker(xc, i.lo, i.hi, col);
        chart.draw_series([line])?;
        chart.draw_series([lo, hi])?;
    }
    chart.draw_series([PathElement::new(vec![(x + 0.05, a.chance), (x + 0.95, a.chance)], RED.stroke_width(2))])?;
    Ok(())
}

/// Under each bar its rank and value (`top-1`, `0.75`), under each pair the method's name.
fn bar_labels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &AccChart<'_, DB>,
    report: &FingerprintReport,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let style = TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    for (mi, m) in report.methods.iter().enumerate() {
        for (ki, a) in [&m.top1, &m.top5].into_iter().enumerate() {
            let (x, y) = chart.backend_coord(&(bar_x(mi, ki) + 0.5, 0.0));
            root.draw(&Text::new(format!("top-{}", a.k), (x, y + 3), style.clone())).map_err(e)?;
            root.draw(&Text::new(format!("{:.2}", a.value), (x, y + 18), style.clone())).map_err(e)?;
        }
        let (x, y) = chart.backend_coord(&(bar_x(mi, 1), 0.0));
        root.draw(&Text::new(m.name.clone(), (x, y + 34), style.clone())).map_err(e)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_leaves_out_the_diagonal() {
        let m = vec![vec![1.0, 0.2, -0.1], vec![0.2, 1.0, 0.5], vec![-0.1, 0.5, 1.0]];
        assert_eq!(scale(&m), (-0.1, 0.5));
        assert_eq!(scale(&[vec![1.0, 0.3], vec![0.3, 1.0]]), (-0.2, 0.8), "one value: a unit span around it");
    }

    #[test]
    fn every_matrix_shares_one_scale_and_held_out_subjects_match_with_or_without_sub() {
        assert!(is_heldout("04", &["sub-04".to_string()]) && is_heldout("sub-04", &["04".to_string()]));
        assert!(!is_heldout("05", &["sub-04".to_string()]));
    }

    #[test]
    fn groups_are_runs_of_one_subject() {
        let s: Vec<String> = ["01", "01", "02", "03", "03"].iter().map(|s| s.to_string()).collect();
        let g = groups(&s);
        assert_eq!(g, [(0, 2, "01".into()), (2, 3, "02".into()), (3, 5, "03".into())]);
    }

    #[test]
    fn viridis_runs_from_purple_to_yellow() {
        assert_eq!(viridis(0.0), RGBColor(68, 1, 84));
        assert_eq!(viridis(1.0), RGBColor(253, 231, 37));
        assert_eq!(viridis(0.5), RGBColor(33, 145, 140));
        assert_eq!(viridis(f64::NAN), viridis(0.0));
    }
}
