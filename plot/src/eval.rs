//! The figure of `bc-cli eval --figure PATH.png` (and its SVG twin): above, the per-horizon
//! MSE of the model beside every baseline and the floors as grouped bars (one group per
//! horizon, one bar per row of the table, in its order); below, a forecast example, one
//! parcel's true series in the first held-out window and the model's forecasts of it at each
//! horizon. Each panel has a caption, axis labels with units, tick values and a legend (in a
//! strip to its right, so it hides no bar or line). Everything drawn comes from the
//! [`EvalReport`]: the library computes, this file only draws.

use crate::{draw_twin, Figure, PlotError};
use boldcast_analysis::eval::{EvalReport, ForecastExample, Row};
use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// The size of the eval figure, in pixels.
pub const EVAL_SIZE: (u32, u32) = (1200, 1000);
/// The height share of the bars, in percent.
const BARS_PERCENT: i32 = 58;
/// The width share of each panel's chart (the rest is its legend), in percent.
const CHART_PERCENT: i32 = 80;
/// The MSE axis' label.
pub const MSE_AXIS: &str = "MSE (standardized BOLD, variance units)";
/// The horizon axis' label.
pub const HORIZON_AXIS: &str = "forecast horizon (tokens ahead)";
/// The example's axes' labels.
pub const TR_AXIS: &str = "TR within the held-out window (TRs)";
/// The example's value axis.
pub const BOLD_AXIS: &str = "standardized BOLD (SD units)";
/// The figure's title.
pub const TITLE: &str = "Evaluation on held-out subjects: the model beside the baselines and the floor";

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
        "floor_empirical" => RGBColor(247, 182, 210),
        "floor_exact" => RGBColor(214, 39, 40),
        _ => HORIZON_COLORS[i % HORIZON_COLORS.len()],
    }
}

/// The colours of the example's horizons.
const HORIZON_COLORS: [RGBColor; 4] =
    [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44), RGBColor(148, 103, 189)];

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
        let body = root.titled(TITLE, ("sans-serif", 24)).map_err(|e| e.to_string())?;
        let (top, bottom) = body.split_vertically(BARS_PERCENT.percent_height());
        let rows: Vec<&Row> = self.r.rows.iter().chain(&self.r.floors).collect();
        bars(&top, &rows, &self.r.horizons)?;
        if let Some(ex) = &self.r.forecast_example {
            example(&bottom, ex)?;
        }
        root.present().map_err(|e| e.to_string())
    }
}

/// A legend in the strip `area`: a swatch and a label per entry, top to bottom.
fn legend<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, entries: &[(String, RGBColor)]) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let font = ("sans-serif", 15).into_font().color(&BLACK);
    for (i, (label, color)) in entries.iter().enumerate() {
        let y = 40 + 24 * i as i32;
        area.draw(&Rectangle::new([(8, y), (30, y + 14)], color.filled())).map_err(e)?;
        area.draw(&Text::new(label.clone(), (38, y - 1), font.clone())).map_err(e)?;
    }
    Ok(())
}

/// The grouped bars: group `g` is centred on `g` on the x axis (so that the ticks, one per
/// unit, fall on the groups), its bars over `[g - 0.4, g + 0.4]`.
fn bars<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, rows: &[&Row], horizons: &[usize]) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let (chart_area, legend_area) = area.split_horizontally(CHART_PERCENT.percent_width());
    let top = rows.iter().flat_map(|r| r.per_horizon.iter()).copied().filter(|v| v.is_finite()).fold(0.0, f64::max);
    let nh = horizons.len();
    let x = -0.5..nh.max(1) as f64 - 0.5;
    let mut chart = ChartBuilder::on(&chart_area)
        .caption("Per-horizon MSE on the held-out windows (lower is better)", ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(55)
        .y_label_area_size(80)
        .build_cartesian_2d(x, 0.0..top.max(1e-12) * 1.08)
        .map_err(e)?;
    let labels = |v: &f64| match horizons.get(v.round().max(0.0) as usize) {
        Some(h) if (v - v.round()).abs() < 1e-6 => format!("h = {h}"),
        _ => String::new(),
    };
    grid_style(&mut chart.configure_mesh())
        .disable_x_mesh()
        .x_labels(nh.max(1))
        .x_label_formatter(&labels)
        .x_desc(HORIZON_AXIS)
        .y_desc(MSE_AXIS)
        .draw()
        .map_err(e)?;
    let width = 0.8 / rows.len().max(1) as f64;
    for (k, row) in rows.iter().enumerate() {
        let color = row_color(&row.name, k);
        let rects = row.per_horizon.iter().enumerate().filter(|(_, v)| v.is_finite()).map(|(g, &v)| {
            let x0 = g as f64 - 0.4 + k as f64 * width;
            Rectangle::new([(x0, 0.0), (x0 + width * 0.9, v)], color.filled())
        });
        chart.draw_series(rects).map_err(e)?;
    }
    let entries: Vec<(String, RGBColor)> =
        rows.iter().enumerate().map(|(k, r)| (r.name.clone(), row_color(&r.name, k))).collect();
    legend(&legend_area, &entries)
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
        .bold_line_style(RGBColor(215, 215, 215))
        .light_line_style(RGBColor(240, 240, 240))
}

/// The forecast example: the true series (black, dots) and a line per horizon.
fn example<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, ex: &ForecastExample) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let (chart_area, legend_area) = area.split_horizontally(CHART_PERCENT.percent_width());
    let values = ex.truth.iter().chain(ex.forecasts.iter().flat_map(|f| f.value.iter()));
    let (lo, hi) = values.filter(|v| v.is_finite()).fold((0.0f64, 0.0f64), |(a, b), &v| (a.min(v), b.max(v)));
    let pad = (hi - lo).max(1e-6) * 0.08;
    let n = ex.truth.len().max(2) as f64 - 1.0;
    let caption = format!(
        "Forecast example: parcel {}, {}, TRs {}..{} of the run",
        ex.parcel,
        ex.run,
        ex.start,
        ex.start + ex.truth.len()
    );
    let mut chart = ChartBuilder::on(&chart_area)
        .caption(caption, ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(55)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..n, lo - pad..hi + pad)
        .map_err(e)?;
    grid_style(&mut chart.configure_mesh())
        .x_desc(TR_AXIS)
        .y_desc(BOLD_AXIS)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(e)?;
    let truth: Vec<(f64, f64)> = ex.truth.iter().enumerate().map(|(u, &v)| (u as f64, v)).collect();
    chart.draw_series(LineSeries::new(truth.clone(), BLACK.stroke_width(2))).map_err(e)?;
    chart.draw_series(truth.iter().map(|&p| Circle::new(p, 3, BLACK.filled()))).map_err(e)?;
    let mut entries = vec![("true series".to_string(), BLACK)];
    for (i, f) in ex.forecasts.iter().enumerate() {
        let color = HORIZON_COLORS[i % HORIZON_COLORS.len()];
        let pts: Vec<(f64, f64)> = f.tr.iter().zip(&f.value).map(|(&u, &v)| (u as f64, v)).collect();
        chart.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2))).map_err(e)?;
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(e)?;
        entries.push((format!("model, h = {}", f.horizon), color));
    }
    legend(&legend_area, &entries)
}
