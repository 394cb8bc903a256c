//! The figure of `bc-cli fingerprint` ([`draw_fingerprint`]): for each method the similarity
//! matrix of every pair of runs as a heatmap (rows the queries, columns the gallery, runs
//! grouped by subject with each subject's block outlined, a colour bar beside it), and a panel
//! of each method's top-1 and top-5 accuracy as bars with their Clopper-Pearson and bootstrap
//! intervals and the chance level. A PNG and its SVG twin, with the embedded font of
//! [`crate`].

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
/// The title of every fingerprint figure.
pub const TITLE: &str = "Subject fingerprinting: leave-one-run-out identification";

const RED: RGBColor = RGBColor(214, 39, 40);
const ORANGE: RGBColor = RGBColor(255, 127, 14);
const METHOD_COLORS: [RGBColor; 3] = [RGBColor(31, 119, 180), RGBColor(44, 160, 44), RGBColor(148, 103, 189)];

/// The figure's size: one heatmap per method beside the accuracy panel.
pub fn size(methods: usize) -> (u32, u32) {
    (HEATMAP_WIDTH * methods.max(1) as u32 + ACCURACY_WIDTH, HEIGHT)
}

/// The fingerprint figure of a report, for [`draw_twin`].
struct FingerprintFigure<'a>(&'a FingerprintReport);

impl Figure for FingerprintFigure<'_> {
    fn size(&self) -> (u32, u32) {
        size(self.0.methods.len())
    }

    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), String> {
        draw_on(root, self.0)
    }
}

/// Draws `report` into the PNG and the SVG of `path`, replacing regular files there only when
/// `overwrite` (`draw_twin`). Returns the twin's path.
pub fn draw_fingerprint(report: &FingerprintReport, path: &Path, overwrite: bool) -> Result<PathBuf, PlotError> {
    draw_twin(path, &FingerprintFigure(report), overwrite)
}

/// The line under the title: what a sample is, and the paired test.
pub fn subtitle(report: &FingerprintReport) -> String {
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

fn draw_on<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, report: &FingerprintReport) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let body = root.titled(TITLE, ("sans-serif", 24)).map_err(e)?;
    let (sub, body) = body.split_vertically(26);
    let w = sub.dim_in_pixel().0 as i32;
    let style = TextStyle::from(("sans-serif", 15).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    sub.draw(&Text::new(subtitle(report), (w / 2, 2), style)).map_err(e)?;
    let n = report.methods.len() as u32;
    let (maps, acc) = body.split_horizontally(HEATMAP_WIDTH * n);
    for (area, m) in maps.split_evenly((1, n.max(1) as usize)).iter().zip(&report.methods) {
        heatmap(&root, area, m)?;
    }
    accuracy_panel(&root, &acc, report)
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
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let n = m.labels.len().max(1) as f64;
    let (lo, hi) = scale(&m.matrix);
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
    subject_labels(root, &chart, &gs, n)?;
    colour_bar(bar, (lo, hi))
}

/// The subject labels at the centre of each block, under the x axis and left of the y axis;
/// a label is skipped when it would come within 16 pixels of the previous one.
fn subject_labels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &ChartContext<
        '_,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    gs: &[(usize, usize, String)],
    n: f64,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let font = ("sans-serif", 12).into_font();
    let below = TextStyle::from(font.clone()).pos(Pos::new(HPos::Center, VPos::Top));
    let left = TextStyle::from(font).pos(Pos::new(HPos::Right, VPos::Center));
    let mut last: Option<i32> = None;
    for (a, b, s) in gs {
        let c = (*a + *b) as f64 / 2.0;
        let (x, y0) = chart.backend_coord(&(c, 0.0));
        if last.is_some_and(|l| x - l < 16) {
            continue;
        }
        last = Some(x);
        let (x0, y) = chart.backend_coord(&(0.0, n - c));
        root.draw(&Text::new(s.clone(), (x, y0 + 4), below.clone())).map_err(e)?;
        root.draw(&Text::new(s.clone(), (x0 - 4, y), left.clone())).map_err(e)?;
    }
    Ok(())
}

/// A vertical colour bar of the scale `(lo, hi)` with its tick values.
fn colour_bar<DB: DrawingBackend>(area: DrawingArea<DB, Shift>, (lo, hi): (f64, f64)) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    // Enough decimals that five ticks over the range read as five values (cosine similarities
    // of embeddings often lie within 0.001 of each other).
    let digits = if hi > lo { ((-(hi - lo).log10()).ceil() as i64 + 2).clamp(2, 6) as usize } else { 2 };
    let mut chart = ChartBuilder::on(&area)
        .margin_top(36)
        .margin_bottom(58)
        .margin_right(22)
        .y_label_area_size(62)
        .build_cartesian_2d(0.0..1.0, lo..hi)
        .map_err(e)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(0)
        .y_labels(5)
        .y_label_formatter(&|v| format!("{v:.digits$}"))
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(e)?;
    let steps = 64;
    let step = (hi - lo) / steps as f64;
    chart
        .draw_series((0..steps).map(|k| {
            let y = lo + k as f64 * step;
            Rectangle::new([(0.0, y), (1.0, y + step)], viridis(k as f64 / (steps - 1) as f64).filled())
        }))
        .map_err(e)?;
    Ok(())
}

/// The x position of the bar of method `mi`, rank `ki` (0: top-1, 1: top-5): a gap of half a
/// bar between methods.
fn bar_x(mi: usize, ki: usize) -> f64 {
    mi as f64 * 2.5 + ki as f64
}

/// The accuracy panel: bars, intervals, chance, labels and legend.
fn accuracy_panel<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    area: &DrawingArea<DB, Shift>,
    report: &FingerprintReport,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let x1 = bar_x(report.methods.len().max(1), 0) - 0.5;
    let pct = (report.level * 100.0).round();
    let mut chart = ChartBuilder::on(area)
        .caption(format!("accuracy, {pct} % intervals"), ("sans-serif", 18))
        .margin(8)
        .margin_right(20)
        .x_label_area_size(50)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x1, 0.0..1.42)
        .map_err(e)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_labels(8)
        .y_label_formatter(&|v| if *v <= 1.0 + 1e-9 { format!("{v:.1}") } else { String::new() })
        .y_desc("identification accuracy")
        .x_desc("method and rank")
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 15))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()
        .map_err(e)?;
    for (mi, m) in report.methods.iter().enumerate() {
        let c = METHOD_COLORS[mi % METHOD_COLORS.len()];
        for (ki, a) in [&m.top1, &m.top5].into_iter().enumerate() {
            bar(&mut chart, bar_x(mi, ki), a, c, pct).map_err(e)?;
        }
    }
    bar_labels(root, &chart, report)?;
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 13))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(e)
}

type Chart2<'a, DB> =
    ChartContext<'a, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>>;

/// One bar at `x` (width 0.7) with its Clopper-Pearson (black) and bootstrap (orange)
/// intervals, the chance level (red) and its value above. Only the first bar's elements
/// carry legend entries (the legend names them once).
fn bar<DB: DrawingBackend>(
    chart: &mut Chart2<'_, DB>,
    x: f64,
    a: &Accuracy,
    c: RGBColor,
    pct: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let first = x == 0.0;
    chart.draw_series([Rectangle::new([(x + 0.15, 0.0), (x + 0.85, a.value)], c.mix(0.65).filled())])?;
    let whisker = |xc: f64, lo: f64, hi: f64, col: RGBColor| {
        let cap = |y: f64| EmptyElement::at((xc, y)) + PathElement::new(vec![(-6, 0), (6, 0)], col.stroke_width(2));
        (PathElement::new(vec![(xc, lo), (xc, hi)], col.stroke_width(2)), cap(lo), cap(hi))
    };
    let intervals = [
        (x + 0.42, a.clopper_pearson, BLACK, format!("Clopper-Pearson {pct} %")),
        (x + 0.58, a.bootstrap, ORANGE, format!("bootstrap over subjects {pct} %")),
    ];
    for (xc, i, col, label) in intervals {
        let (line, lo, hi) = whisker(xc, i.lo, i.hi, col);
        let s = chart.draw_series([line])?;
        if first {
            s.label(label).legend(move |(lx, ly)| PathElement::new(vec![(lx, ly), (lx + 20, ly)], col.stroke_width(2)));
        }
        chart.draw_series([lo])?;
        chart.draw_series([hi])?;
    }
    let s =
        chart.draw_series([PathElement::new(vec![(x + 0.05, a.chance), (x + 0.95, a.chance)], RED.stroke_width(2))])?;
    if first {
        s.label("chance").legend(|(lx, ly)| PathElement::new(vec![(lx, ly), (lx + 20, ly)], RED.stroke_width(2)));
    }
    let style = TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
    let text = EmptyElement::at((x + 0.5, a.value.max(a.clopper_pearson.hi)))
        + Text::new(format!("{:.2}", a.value), (0, -5), style);
    chart.draw_series([text])?;
    Ok(())
}

/// Under each bar its rank (`top-1`, `top-5`), under each pair the method's name.
fn bar_labels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart2<'_, DB>,
    report: &FingerprintReport,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let style = TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    for (mi, m) in report.methods.iter().enumerate() {
        for (ki, k) in [m.top1.k, m.top5.k].into_iter().enumerate() {
            let (x, y) = chart.backend_coord(&(bar_x(mi, ki) + 0.5, 0.0));
            root.draw(&Text::new(format!("top-{k}"), (x, y + 3), style.clone())).map_err(e)?;
        }
        let (x, y) = chart.backend_coord(&(bar_x(mi, 1), 0.0));
        root.draw(&Text::new(m.name.clone(), (x, y + 18), style.clone())).map_err(e)?;
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
