//! The overfit loss curve as a PNG, drawn with plotters' bitmap backend.
//!
//! The figure has **no text**: plotters needs a font to draw any, and this build carries no
//! font and relies on none being installed, so it works on a fresh machine. The legend is
//! therefore fixed and documented here (and repeated in `summary.json`):
//!
//! - blue: the loss at every step (x: step 0 .. n-1, y: from 0 to the largest loss);
//! - orange: the mean of the first 50 losses, drawn over those steps;
//! - green: the mean of the last 50 losses, drawn over those steps;
//! - red: the loss floor, across the whole width, when one is known;
//! - grey: horizontal grid lines every 0.1 of loss (every 1.0 when the largest loss exceeds 3),
//!   and the axes.

use crate::error::CliError;
use plotters::prelude::*;
use std::path::Path;

/// The legend of the figure, for `summary.json`.
pub const LEGEND: &str = "no text in the figure; blue: loss per step; orange: mean of the first 50 steps; \
                          green: mean of the last 50 steps; red: loss floor; grey: grid every 0.1 of loss \
                          (1.0 above a loss of 3), y from 0";

/// Draws `losses` with the windowed means and the floor into the PNG `path` (written to a
/// temporary file next to it and renamed).
pub fn overfit_curve(path: &Path, losses: &[f64], first: f64, last: f64, floor: Option<f64>) -> Result<(), CliError> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(CliError::io(dir))?;
    let tmp = dir.join(format!(".overfit_curve.tmp-{}.png", std::process::id()));
    let res =
        draw(&tmp, losses, first, last, floor).and_then(|_| std::fs::rename(&tmp, path).map_err(CliError::io(path)));
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

fn draw(path: &Path, losses: &[f64], first: f64, last: f64, floor: Option<f64>) -> Result<(), CliError> {
    let err = |e: String| CliError::Msg(format!("{}: cannot draw the figure: {e}", path.display()));
    let n = losses.len().max(2) as f64;
    let finite = losses.iter().copied().filter(|v| v.is_finite());
    let ymax = finite.chain(floor).fold(0.0f64, f64::max).max(1e-12) * 1.05;
    let root = BitMapBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .margin(30)
        .build_cartesian_2d(0.0..n - 1.0, 0.0..ymax)
        .map_err(|e| err(e.to_string()))?;
    let grey = RGBColor(200, 200, 200);
    let step = if ymax > 3.0 { 1.0 } else { 0.1 };
    let mut y = step;
    while y < ymax {
        chart
            .draw_series(LineSeries::new([(0.0, y), (n - 1.0, y)], grey.stroke_width(1)))
            .map_err(|e| err(e.to_string()))?;
        y += step;
    }
    let axes = [(0.0, ymax), (0.0, 0.0), (n - 1.0, 0.0)];
    chart.draw_series(LineSeries::new(axes, BLACK.stroke_width(2))).map_err(|e| err(e.to_string()))?;
    let pts = losses.iter().enumerate().filter(|(_, v)| v.is_finite()).map(|(i, &v)| (i as f64, v));
    chart.draw_series(LineSeries::new(pts, BLUE.stroke_width(1))).map_err(|e| err(e.to_string()))?;
    let w = 50.0f64.min(n - 1.0);
    let orange = RGBColor(255, 140, 0);
    chart
        .draw_series(LineSeries::new([(0.0, first), (w, first)], orange.stroke_width(3)))
        .map_err(|e| err(e.to_string()))?;
    let green = RGBColor(0, 160, 0);
    chart
        .draw_series(LineSeries::new([(n - 1.0 - w, last), (n - 1.0, last)], green.stroke_width(3)))
        .map_err(|e| err(e.to_string()))?;
    if let Some(f) = floor {
        chart
            .draw_series(LineSeries::new([(0.0, f), (n - 1.0, f)], RED.stroke_width(2)))
            .map_err(|e| err(e.to_string()))?;
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

/// The legend of `figures/loss_curves.png`, for `summary.json`.
pub const CURVES_LEGEND: &str = "no text in the figure; x: optimizer step; blue: training loss per step; \
                                 orange (thick, with dots): validation loss on the held-out subjects; red: loss floor; \
                                 grey: grid every 0.1 of loss (1.0 above a loss of 3), y from 0";

/// Draws the training loss per step and the validation loss against step, with the floor,
/// into the PNG `path` (temporary file and rename; no text, see [`CURVES_LEGEND`]).
pub fn loss_curves(path: &Path, train: &[(u64, f64)], val: &[(u64, f64)], floor: Option<f64>) -> Result<(), CliError> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(CliError::io(dir))?;
    let tmp = dir.join(format!(".loss_curves.tmp-{}.png", std::process::id()));
    let res =
        draw_curves(&tmp, train, val, floor).and_then(|_| std::fs::rename(&tmp, path).map_err(CliError::io(path)));
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

fn draw_curves(path: &Path, train: &[(u64, f64)], val: &[(u64, f64)], floor: Option<f64>) -> Result<(), CliError> {
    let err = |e: String| CliError::Msg(format!("{}: cannot draw the figure: {e}", path.display()));
    let xmax = train.iter().chain(val).map(|(s, _)| *s as f64).fold(1.0f64, f64::max);
    let finite = train.iter().chain(val).map(|(_, v)| *v).filter(|v| v.is_finite());
    let ymax = finite.chain(floor).fold(0.0f64, f64::max).max(1e-12) * 1.05;
    let root = BitMapBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart =
        ChartBuilder::on(&root).margin(30).build_cartesian_2d(0.0..xmax, 0.0..ymax).map_err(|e| err(e.to_string()))?;
    let grey = RGBColor(200, 200, 200);
    let step = if ymax > 3.0 { 1.0 } else { 0.1 };
    let mut y = step;
    while y < ymax {
        chart
            .draw_series(LineSeries::new([(0.0, y), (xmax, y)], grey.stroke_width(1)))
            .map_err(|e| err(e.to_string()))?;
        y += step;
    }
    let axes = [(0.0, ymax), (0.0, 0.0), (xmax, 0.0)];
    chart.draw_series(LineSeries::new(axes, BLACK.stroke_width(2))).map_err(|e| err(e.to_string()))?;
    let pts = train.iter().filter(|(_, v)| v.is_finite()).map(|&(s, v)| (s as f64, v));
    chart.draw_series(LineSeries::new(pts, BLUE.stroke_width(1))).map_err(|e| err(e.to_string()))?;
    let orange = RGBColor(255, 140, 0);
    let vpts: Vec<(f64, f64)> = val.iter().filter(|(_, v)| v.is_finite()).map(|&(s, v)| (s as f64, v)).collect();
    chart.draw_series(LineSeries::new(vpts.clone(), orange.stroke_width(3))).map_err(|e| err(e.to_string()))?;
    chart.draw_series(vpts.iter().map(|&p| Circle::new(p, 4, orange.filled()))).map_err(|e| err(e.to_string()))?;
    if let Some(f) = floor {
        chart
            .draw_series(LineSeries::new([(0.0, f), (xmax, f)], RED.stroke_width(2)))
            .map_err(|e| err(e.to_string()))?;
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}
