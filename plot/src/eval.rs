//! The figure of `bc-cli eval --figure PATH.png` (and its SVG twin): above, the per-horizon
//! MSE of the model and every baseline as grouped bars (one group per horizon), on a scale
//! relative to the best baseline of each horizon so that a difference of a few percent shows,
//! each bar labelled with its MSE, the model's bar with its paired-bootstrap interval, the
//! exact floor and the single-lag AR reference as reference lines (not bars); below, a forecast
//! example, one parcel's true series in the first held-out window with the model's forecasts
//! of it at each horizon and the best baseline's beside them. The rows are named in words
//! ([`boldcast_analysis::eval::names`]) and the horizons in TRs and seconds where the TR is
//! known. Everything drawn comes from the [`EvalReport`]: the library computes, this file
//! only draws.

use crate::ticks::Ticks;
use crate::{draw_twin, Figure, PlotError};
use boldcast_analysis::eval::names::row_words;
use boldcast_analysis::eval::{EvalReport, ForecastExample, Row};
use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};

/// The size of the eval figure, in pixels.
pub const EVAL_SIZE: (u32, u32) = (1200, 1000);
/// The height share of the bars, in percent.
const BARS_PERCENT: i32 = 58;
/// The width share of each panel's chart (the rest is its legend), in percent.
const CHART_PERCENT: i32 = 76;
/// The bars' axis label.
pub const RATIO_AXIS: &str = "MSE / MSE of the best baseline at that horizon";
/// The bars' axis label when logarithmic.
pub const RATIO_AXIS_LOG: &str = "MSE / MSE of the best baseline at that horizon (log scale)";
/// The horizon axis' label.
pub const HORIZON_AXIS: &str =
    "forecast horizon h (tokens ahead; the TRs it targets, in seconds where the TR is known)";
/// The example's axes' labels.
pub const TR_AXIS: &str = "TR within the held-out window (TRs)";
/// The example's value axis.
pub const BOLD_AXIS: &str = "standardized BOLD (SD units)";
/// The figure's title.
pub const TITLE: &str = "Evaluation on held-out subjects: the model beside the baselines and the floor";
/// The bars' caption.
pub const BARS_CAPTION: &str =
    "Per-horizon MSE on the held-out windows, relative to the best baseline (lower is better)";

/// The colour of a row of the table, by name (the order of the table otherwise).
pub fn row_color(name: &str, i: usize) -> RGBColor {
    match name {
        "model" => RGBColor(31, 119, 180),
        "zero" => RGBColor(127, 127, 127),
        "last_token" => RGBColor(188, 189, 34),
        "window_mean" => RGBColor(23, 190, 207),
        "ar1_iterated" => RGBColor(140, 86, 75),
        "ar_p" => RGBColor(255, 127, 14),
        "var1" => RGBColor(44, 160, 44),
        "var_p" => RGBColor(148, 103, 189),
        "var_pca" => RGBColor(0, 0, 128),
        "floor_empirical" => RGBColor(120, 120, 120),
        "floor_exact" => RGBColor(214, 39, 40),
        _ => HORIZON_COLORS[i % HORIZON_COLORS.len()],
    }
}

/// The colours of the example's horizons.
const HORIZON_COLORS: [RGBColor; 4] =
    [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44), RGBColor(148, 103, 189)];

/// A horizon's tick label: `h = 5 (TRs 9-10, 7.2-8 s)` where the TR is known, else
/// `h = 5 tokens`.
pub fn horizon_label(r: &EvalReport, g: usize) -> String {
    let h = r.horizons[g];
    match (r.tr_seconds, r.horizon_seconds.as_ref().and_then(|s| s.get(g))) {
        (Some(tr), Some(&span)) if tr > 0.0 => {
            let (a, b) = ((span[0] / tr).round() as usize, (span[1] / tr).round() as usize);
            let trs = if a == b { format!("TR {a}") } else { format!("TRs {a}-{b}") };
            format!("h = {h} ({trs}, {})", boldcast_data::seconds_span_text(span))
        }
        _ => format!("h = {h} token{}", if h == 1 { "" } else { "s" }),
    }
}

/// The best baseline's MSE at each horizon (the model's own where there is no baseline).
fn best_mse(r: &EvalReport) -> Vec<f64> {
    (0..r.horizons.len())
        .map(|g| {
            let base = r.rows.iter().filter(|x| x.name != "model").map(|x| x.per_horizon[g]);
            let best = base.filter(|v| v.is_finite() && *v > 0.0).fold(f64::INFINITY, f64::min);
            if best.is_finite() {
                best
            } else {
                r.row("model").map_or(1.0, |m| m.per_horizon[g])
            }
        })
        .collect()
}

/// The model's paired-bootstrap interval at each horizon, as MSE ratios `1 + [lo, hi]`.
fn model_intervals(r: &EvalReport) -> Vec<Option<(f64, f64)>> {
    let per = &r.bootstrap.per_horizon;
    r.horizons
        .iter()
        .map(|h| per.iter().find(|c| c.horizon == *h)?.interval.map(|i| (1.0 + i.lo, 1.0 + i.hi)))
        .collect()
}

/// The bars' y axis: linear, or logarithmic when its range spans more than a factor of
/// [`RATIO_LOG_SPAN`] (an untrained model many times worse than the baselines); drawn in the
/// coordinates [`RatioScale::y`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RatioScale {
    /// The range of ratios shown.
    pub lo: f64,
    /// Its top.
    pub hi: f64,
    /// Whether logarithmic.
    pub log: bool,
}

/// The span of ratios above which the bars' axis is logarithmic.
pub const RATIO_LOG_SPAN: f64 = 3.0;

impl RatioScale {
    /// The scale of the range `(lo, hi)`.
    pub fn new((lo, hi): (f64, f64)) -> RatioScale {
        // Padded by a tenth of the range: of its logarithm on a logarithmic axis.
        if lo > 0.0 && hi / lo > RATIO_LOG_SPAN {
            let pad = (hi / lo).powf(0.1);
            return RatioScale { lo: lo / pad, hi: hi * pad, log: true };
        }
        let pad = (hi - lo) * 0.1;
        RatioScale { lo: (lo - pad).max(0.0), hi: hi + pad, log: false }
    }
    /// A ratio in the chart's coordinates (its log10 on a logarithmic axis).
    pub fn y(&self, v: f64) -> f64 {
        if self.log {
            v.log10()
        } else {
            v
        }
    }
    /// The ticks, at their chart coordinates.
    pub fn ticks(&self) -> Ticks {
        if self.log {
            let t = Ticks::log(self.lo, self.hi, 8);
            Ticks { values: t.values.iter().map(|v| v.log10()).collect(), labels: t.labels }
        } else {
            Ticks::linear(self.lo, self.hi, 8)
        }
    }
}

/// The bars' y range: every reference line and interval, the model's bars and the lower half
/// of the others (a bar above is cut at the top, its label saying its value); unpadded.
pub fn ratio_range(ratios: &[f64], model: &[f64], extra: &[f64]) -> (f64, f64) {
    let mut sorted: Vec<f64> = ratios.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(1.0);
    let fin = |v: &&f64| v.is_finite();
    let hi = model.iter().chain(extra).filter(fin).copied().fold(median.max(1.02), f64::max);
    let lo = sorted.iter().chain(model).chain(extra).filter(fin).copied().fold(0.98f64, f64::min);
    (lo, hi)
}

/// Draws the eval figure of `r` into the PNG and the SVG of `path`, replacing regular files
/// there only when `overwrite` (`plot::draw_twin`); returns the twin's path.
pub fn eval_figure(path: &Path, r: &EvalReport, overwrite: bool) -> Result<PathBuf, PlotError> {
    draw_twin(path, &EvalFigure { r }, overwrite)
}

struct EvalFigure<'a> {
    r: &'a EvalReport,
}

impl Figure for EvalFigure<'_> {
    fn size(&self) -> (u32, u32) {
        EVAL_SIZE
    }

    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let body = crate::titled(&root, TITLE, Some(&subtitle(self.r)))?;
        let (top, bottom) = body.split_vertically(BARS_PERCENT.percent_height());
        bars(&top, self.r)?;
        if let Some(ex) = &self.r.forecast_example {
            example(&bottom, ex)?;
        }
        root.present().map_err(|e| e.to_string())
    }
}

/// The line under the title: how to read the bars.
pub fn subtitle(r: &EvalReport) -> String {
    let b = &r.bootstrap;
    let interval = if b.subjects >= 2 {
        format!(
            "error bar: the {:.0} % paired-bootstrap interval of the model over {} held-out subjects",
            b.level * 100.0,
            b.subjects
        )
    } else {
        "no interval: one held-out subject".to_string()
    };
    format!("Bars start at 1 (the best baseline), labelled with their MSE (a white gap: cut at the top); {interval}")
}

/// A legend entry: its text, colour and swatch.
type Entry = (String, RGBColor, Swatch);

/// How a legend entry's swatch is drawn.
#[derive(Clone, Copy, PartialEq)]
enum Swatch {
    Bar,
    Line,
    Dashed,
}

/// A legend in the strip `area`: a swatch and a label per entry, top to bottom.
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[(String, RGBColor, Swatch)],
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let font = ("sans-serif", 14).into_font().color(&BLACK);
    for (i, (label, color, swatch)) in entries.iter().enumerate() {
        let y = 40 + 22 * i as i32;
        match swatch {
            Swatch::Bar => area.draw(&Rectangle::new([(8, y), (30, y + 14)], color.filled())),
            Swatch::Line => area.draw(&PathElement::new(vec![(6, y + 7), (32, y + 7)], color.stroke_width(3))),
            Swatch::Dashed => area
                .draw(&PathElement::new(vec![(6, y + 7), (14, y + 7)], color.stroke_width(3)))
                .and_then(|_| area.draw(&PathElement::new(vec![(22, y + 7), (30, y + 7)], color.stroke_width(3)))),
        }
        .map_err(e)?;
        area.draw(&Text::new(label.clone(), (38, y), font.clone())).map_err(e)?;
    }
    Ok(())
}

type Chart<'a, DB> =
    ChartContext<'a, DB, Cartesian2d<crate::ticks::Keyed<RangedCoordf64>, crate::ticks::Keyed<RangedCoordf64>>>;

/// The grouped bars of the model and the baselines ([`bars_chart`]), the reference lines, the
/// model's intervals and the legend.
fn bars<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, r: &EvalReport) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let (chart_area, legend_area) = area.split_horizontally(CHART_PERCENT.percent_width());
    let best = best_mse(r);
    let ratio = |row: &Row| row.per_horizon.iter().zip(&best).map(|(v, b)| v / b).collect::<Vec<f64>>();
    let all: Vec<f64> = r.rows.iter().flat_map(ratio).collect();
    let intervals = model_intervals(r);
    let refs: Vec<&Row> = r.floors.iter().collect();
    let mut extra: Vec<f64> = refs.iter().flat_map(|x| ratio(x)).collect();
    extra.extend(intervals.iter().flatten().flat_map(|(a, b)| [*a, *b]));
    let model = r.row("model").map(ratio).unwrap_or_default();
    let sc = RatioScale::new(ratio_range(&all, &model, &extra));
    let (lo, hi) = (sc.lo, sc.hi);
    let mut chart = bars_chart(&chart_area, r, sc)?;
    let width = 0.8 / r.rows.len().max(1) as f64;
    for (k, row) in r.rows.iter().enumerate() {
        let c = row_color(&row.name, k);
        for (g, (&v, &q)) in row.per_horizon.iter().zip(&ratio(row)).enumerate().filter(|(_, (v, _))| v.is_finite()) {
            let x0 = g as f64 - 0.4 + k as f64 * width;
            let top = q.clamp(lo, hi);
            let rect = Rectangle::new([(x0, sc.y(1.0)), (x0 + width * 0.9, sc.y(top))], c.filled());
            chart.draw_series([rect]).map_err(e)?;
            // The model's label goes beyond its interval's end.
            let end = match intervals.get(g).copied().flatten().filter(|_| row.name == "model") {
                Some((_, b)) if q > 1.0 => q.max(b),
                Some((a, _)) => q.min(a),
                None => q,
            };
            let at = (x0 + width * 0.45, sc.y(end.clamp(lo, hi)), q > 1.0, end > hi);
            value_label(&mut chart, at, v, width).map_err(e)?;
        }
    }
    let mut entries: Vec<(String, RGBColor, Swatch)> = r
        .rows
        .iter()
        .enumerate()
        .map(|(k, x)| (row_words(&x.name).to_string(), row_color(&x.name, k), Swatch::Bar))
        .collect();
    entries.extend(reference_lines(&mut chart, &refs, (&best, sc)).map_err(e)?);
    entries.extend(interval_bars(&mut chart, &intervals, (width, sc)).map_err(e)?);
    entries.push(("1 = the best baseline".into(), BLACK, Swatch::Line));
    legend(&legend_area, &entries)
}

/// The bars' chart: its axes, ticks and labels, and the line at 1.
fn bars_chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    r: &EvalReport,
    sc: RatioScale,
) -> Result<Chart<'a, DB>, String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let nh = r.horizons.len().max(1);
    let xt = Ticks {
        values: (0..nh).map(|g| g as f64).collect(),
        labels: (0..r.horizons.len()).map(|g| horizon_label(r, g)).collect(),
    };
    let yt = sc.ticks();
    let x = xt.on(RangedCoordf64::from(-0.5..nh as f64 - 0.5));
    let mut chart = ChartBuilder::on(area)
        .caption(BARS_CAPTION, ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(55)
        .y_label_area_size(80)
        .build_cartesian_2d(x, yt.on(RangedCoordf64::from(sc.y(sc.lo)..sc.y(sc.hi))))
        .map_err(e)?;
    let (xf, yf) = (|v: &f64| xt.label(*v), |v: &f64| yt.label(*v));
    grid_style(&mut chart.configure_mesh())
        .disable_x_mesh()
        .x_label_formatter(&xf)
        .y_label_formatter(&yf)
        .x_desc(HORIZON_AXIS)
        .y_desc(if sc.log { RATIO_AXIS_LOG } else { RATIO_AXIS })
        .draw()
        .map_err(e)?;
    chart
        .draw_series([PathElement::new(vec![(-0.5, sc.y(1.0)), (nh as f64 - 0.5, sc.y(1.0))], BLACK.stroke_width(2))])
        .map_err(e)?;
    Ok(chart)
}

/// The MSE `v` of a bar centred on `x` whose end is at `y` (above it when `up`), upright when
/// the bar is wide enough, else turned; a bar cut at the top (`cut`) gets a white gap and its
/// label inside, in white.
fn value_label<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    (x, y, up, cut): (f64, f64, bool, bool),
    v: f64,
    width: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let px = chart.backend_coord(&(width, y)).0 - chart.backend_coord(&(0.0, y)).0;
    let text = crate::ticks::value_text(v, 3);
    let font = ("sans-serif", 12).into_font();
    let font = if px as usize >= 7 * text.len() { font } else { font.transform(FontTransform::Rotate270) };
    // Below the end of a bar that goes down or is cut at the top, above it otherwise.
    let (v_pos, dy) = if !up || cut { (VPos::Top, 4) } else { (VPos::Bottom, -4) };
    let style = TextStyle::from(font).pos(Pos::new(HPos::Center, v_pos));
    if cut {
        // A white gap across a bar cut at the top, and its value in white above the gap.
        let half = (px as f64 * 0.45).round() as i32 + 1;
        chart.draw_series([EmptyElement::at((x, y)) + Rectangle::new([(-half, 20), (half, 25)], WHITE.filled())])?;
        let style = style.color(&WHITE);
        chart.draw_series([EmptyElement::at((x, y)) + Text::new(text, (0, dy), style)])?;
        return Ok(());
    }
    chart.draw_series([EmptyElement::at((x, y)) + Text::new(text, (0, dy), style)])?;
    Ok(())
}

/// The floors as reference lines across each group: the exact floor (red) and the single-lag
/// AR reference (grey, dashed); their legend entries.
fn reference_lines<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    refs: &[&Row],
    (best, sc): (&[f64], RatioScale),
) -> Result<Vec<Entry>, DrawingAreaErrorKind<DB::ErrorType>> {
    let mut entries = Vec::new();
    for (k, row) in refs.iter().enumerate() {
        let c = row_color(&row.name, k);
        let dashed = row.name != "floor_exact";
        for (g, v) in row.per_horizon.iter().enumerate().filter(|(_, v)| v.is_finite()) {
            let (y, x0) = (sc.y(v / best[g]), g as f64 - 0.45);
            let pts = vec![(x0, y), (x0 + 0.9, y)];
            if dashed {
                chart.draw_series(DashedLineSeries::new(pts, 8, 5, c.stroke_width(2)))?;
            } else {
                chart.draw_series([PathElement::new(pts, c.stroke_width(3))])?;
            }
        }
        entries.push((row_words(&row.name).to_string(), c, if dashed { Swatch::Dashed } else { Swatch::Line }));
    }
    Ok(entries)
}

/// The model's interval (the first bar of each group, bars of `width`) as an error bar.
fn interval_bars<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    intervals: &[Option<(f64, f64)>],
    (width, sc): (f64, RatioScale),
) -> Result<Vec<Entry>, DrawingAreaErrorKind<DB::ErrorType>> {
    let mut any = false;
    for (g, (lo, hi)) in intervals.iter().enumerate().filter_map(|(g, i)| Some((g, (*i)?))) {
        let (lo, hi) = (sc.y(lo.max(sc.lo)), sc.y(hi.min(sc.hi)));
        let x = g as f64 - 0.4 + width * 0.45;
        let cap = |y: f64| EmptyElement::at((x, y)) + PathElement::new(vec![(-7, 0), (7, 0)], BLACK.stroke_width(2));
        chart.draw_series([PathElement::new(vec![(x, lo), (x, hi)], BLACK.stroke_width(2))])?;
        chart.draw_series([cap(lo), cap(hi)])?;
        any = true;
    }
    Ok(if any { vec![("model: paired-bootstrap interval".into(), BLACK, Swatch::Line)] } else { Vec::new() })
}

/// The labels and grid lines of both panels.
fn grid_style<'a, 'b, 'm, X, Y, DB>(m: &'m mut MeshStyle<'a, 'b, X, Y, DB>) -> &'m mut MeshStyle<'a, 'b, X, Y, DB>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    DB: DrawingBackend,
{
    m.label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .bold_line_style(RGBColor(225, 225, 225))
        .light_line_style(TRANSPARENT)
}

/// The example's caption: the parcel by its name (`parcel-000`, `AAL2_004`), the run and TRs.
pub fn example_caption(ex: &ForecastExample) -> String {
    format!(
        "Forecast example: {} of {}, TRs {}-{} of the run",
        ex.parcel,
        ex.run,
        ex.start,
        ex.start + ex.truth.len() - 1
    )
}

/// The forecast example: the true series (black, dots), the model's forecast at each horizon
/// (a line with dots) and the best baseline's of the same TRs (dashed, the same colour).
fn example<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, ex: &ForecastExample) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let (chart_area, legend_area) = area.split_horizontally(CHART_PERCENT.percent_width());
    let baselines = ex.best_baselines.iter().map(|b| &b.forecast);
    let values = ex.truth.iter().chain(ex.forecasts.iter().chain(baselines).flat_map(|f| f.value.iter()));
    let (lo, hi) = values.filter(|v| v.is_finite()).fold((0.0f64, 0.0f64), |(a, b), &v| (a.min(v), b.max(v)));
    let pad = (hi - lo).max(1e-6) * 0.08;
    let n = ex.truth.len().max(2) as f64 - 1.0;
    let (xt, yt) = (Ticks::linear(0.0, n, 10), Ticks::linear(lo - pad, hi + pad, 7));
    let mut chart = ChartBuilder::on(&chart_area)
        .caption(example_caption(ex), ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(55)
        .y_label_area_size(80)
        .build_cartesian_2d(xt.on(RangedCoordf64::from(0.0..n)), yt.on(RangedCoordf64::from(lo - pad..hi + pad)))
        .map_err(e)?;
    let (xf, yf) = (|v: &f64| xt.label(*v), |v: &f64| yt.label(*v));
    grid_style(&mut chart.configure_mesh())
        .x_desc(TR_AXIS)
        .y_desc(BOLD_AXIS)
        .x_label_formatter(&xf)
        .y_label_formatter(&yf)
        .draw()
        .map_err(e)?;
    let truth: Vec<(f64, f64)> = ex.truth.iter().enumerate().map(|(u, &v)| (u as f64, v)).collect();
    chart.draw_series(LineSeries::new(truth.clone(), BLACK.stroke_width(2))).map_err(e)?;
    chart.draw_series(truth.iter().map(|&p| Circle::new(p, 3, BLACK.filled()))).map_err(e)?;
    let mut entries = vec![("true series".to_string(), BLACK, Swatch::Line)];
    for (i, f) in ex.forecasts.iter().enumerate() {
        let color = HORIZON_COLORS[i % HORIZON_COLORS.len()];
        let pts: Vec<(f64, f64)> = f.tr.iter().zip(&f.value).map(|(&u, &v)| (u as f64, v)).collect();
        chart.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2))).map_err(e)?;
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(e)?;
        entries.push((format!("model, h = {}", f.horizon), color, Swatch::Line));
        if let Some(b) = ex.best_baselines.iter().find(|b| b.forecast.horizon == f.horizon) {
            let pts: Vec<(f64, f64)> =
                b.forecast.tr.iter().zip(&b.forecast.value).map(|(&u, &v)| (u as f64, v)).collect();
            chart.draw_series(DashedLineSeries::new(pts, 7, 4, color.stroke_width(2))).map_err(e)?;
            entries.push((format!("{}, h = {} (best baseline)", row_words(&b.name), f.horizon), color, Swatch::Dashed));
        }
    }
    legend(&legend_area, &entries)
}
