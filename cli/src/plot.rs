//! The figures of `overfit` and `train`, drawn with plotters: each a PNG and its SVG twin,
//! with a title, labelled axes with tick values, a legend, and the floor as a labelled line.
//!
//! The text is drawn with DejaVu Sans, embedded in the binary (`cli/assets/DejaVuSans.ttf`,
//! its licence beside it), so a fresh machine without system fonts draws the same picture.
//! The loss axis is logarithmic when the losses span more than a factor of [`LOG_SPAN`] (an
//! overfit loss falling to near zero), linear from 0 otherwise.

use crate::error::CliError;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// The font the figures' text is drawn with (registered once as plotters' `sans-serif`).
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
/// The losses' max / min ratio above which the loss axis is logarithmic.
pub const LOG_SPAN: f64 = 20.0;
/// The size of every figure, in pixels.
pub const SIZE: (u32, u32) = (1000, 600);

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TrueType font (a test draws with them); a failure would only
        // leave the text out.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// One line of a figure, with its legend entry.
pub struct Series {
    /// The legend's text.
    pub label: String,
    /// Colour.
    pub color: RGBColor,
    /// Line width in pixels.
    pub width: u32,
    /// `(x, y)` points; non-finite ones are left out.
    pub points: Vec<(f64, f64)>,
    /// A dot at every point (few points: validations).
    pub dots: bool,
}

/// A figure of lines against a step axis.
pub struct LineFigure {
    /// The title.
    pub title: String,
    /// The x axis label, with units.
    pub x_label: String,
    /// The y axis label, with units.
    pub y_label: String,
    /// The lines, drawn in order.
    pub series: Vec<Series>,
}

impl LineFigure {
    fn finite(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.series.iter().flat_map(|s| s.points.iter().copied()).filter(|(x, y)| x.is_finite() && y.is_finite())
    }

    /// The x range, and the y range with whether it is logarithmic.
    fn ranges(&self) -> ((f64, f64), (f64, f64, bool)) {
        let (mut x0, mut x1, mut y0, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
        for (x, y) in self.finite() {
            (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
        }
        if !x0.is_finite() {
            return ((0.0, 1.0), (0.0, 1.0, false));
        }
        let x = if x1 > x0 { (x0, x1) } else { (x0, x0 + 1.0) };
        if y0 > 0.0 && y1 / y0 > LOG_SPAN {
            return (x, (y0 / 1.25, y1 * 1.25, true));
        }
        (x, (0.0_f64.min(y0), y1.max(1e-12) * 1.08, false))
    }
}

/// Draws `fig` into the PNG `path` and its SVG twin (`path` with the extension `.svg`), each
/// written to a temporary file beside it and renamed. Returns the SVG's path.
pub fn draw_figure(path: &Path, fig: &LineFigure) -> Result<PathBuf, CliError> {
    register_font();
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(CliError::io(dir))?;
    let svg = path.with_extension("svg");
    for (dest, is_svg) in [(path.to_path_buf(), false), (svg.clone(), true)] {
        let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let ext = if is_svg { "svg" } else { "png" };
        let tmp = dir.join(format!(".{name}.tmp-{}.{ext}", std::process::id()));
        let err = |e: String| CliError::Msg(format!("{}: cannot draw the figure: {e}", dest.display()));
        let drawn = if is_svg {
            draw_on(SVGBackend::new(&tmp, SIZE).into_drawing_area(), fig)
        } else {
            draw_on(BitMapBackend::new(&tmp, SIZE).into_drawing_area(), fig)
        };
        let res = drawn.map_err(err).and_then(|_| std::fs::rename(&tmp, &dest).map_err(CliError::io(&dest)));
        if res.is_err() {
            let _ = std::fs::remove_file(&tmp);
            return res.map(|_| svg);
        }
    }
    Ok(svg)
}

fn draw_on<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, fig: &LineFigure) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let ((x0, x1), (y0, y1, log)) = fig.ranges();
    if log {
        lines(&root, fig, x0..x1, (y0..y1).log_scale())?;
    } else {
        lines(&root, fig, x0..x1, y0..y1)?;
    }
    root.present().map_err(|e| e.to_string())
}

/// The chart itself, over a linear or logarithmic y axis `y`.
fn lines<DB, Y>(root: &DrawingArea<DB, Shift>, fig: &LineFigure, x: std::ops::Range<f64>, y: Y) -> Result<(), String>
where
    DB: DrawingBackend,
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let (xmin, xmax) = (x.start, x.end);
    let mut chart = ChartBuilder::on(root)
        .caption(&fig.title, ("sans-serif", 24))
        .margin(20)
        .x_label_area_size(55)
        .y_label_area_size(80)
        .build_cartesian_2d(x, y)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc(fig.x_label.as_str())
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_desc(fig.y_label.as_str())
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .light_line_style(RGBColor(235, 235, 235))
        .bold_line_style(RGBColor(205, 205, 205))
        .draw()
        .map_err(e)?;
    for s in &fig.series {
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|(a, b)| a.is_finite() && b.is_finite() && *a >= xmin && *a <= xmax)
            .collect();
        let style = s.color.stroke_width(s.width);
        let color = s.color;
        chart
            .draw_series(LineSeries::new(pts.clone(), style))
            .map_err(e)?
            .label(s.label.as_str())
            .legend(move |(lx, ly)| PathElement::new(vec![(lx, ly), (lx + 24, ly)], color.stroke_width(3)));
        if s.dots {
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled()))).map_err(e)?;
        }
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(e)?;
    Ok(())
}

const BLUE_LINE: RGBColor = RGBColor(31, 119, 180);
const ORANGE: RGBColor = RGBColor(255, 127, 14);
const GREEN: RGBColor = RGBColor(44, 160, 44);
const RED_LINE: RGBColor = RGBColor(214, 39, 40);

/// A horizontal line across `[x0, x1]`.
fn level(label: String, color: RGBColor, width: u32, (x0, x1): (f64, f64), y: f64) -> Series {
    Series { label, color, width, points: vec![(x0, y), (x1, y)], dots: false }
}

/// The loss axis' label.
pub const LOSS_AXIS: &str = "loss (MSE of standardized BOLD, variance units)";

/// The overfit check's figure: the loss at every step, the means of its first and last
/// `window` steps (the acceptance rule compares them) and the floor.
pub fn overfit_curve(
    path: &Path,
    losses: &[f64],
    (first, last, window): (f64, f64, usize),
    floor: Option<f64>,
) -> Result<PathBuf, CliError> {
    let n = losses.len().max(2) as f64 - 1.0;
    let w = (window as f64).min(n);
    let mut series = vec![
        Series {
            label: "training loss (one batch, every step)".into(),
            color: BLUE_LINE,
            width: 1,
            points: losses.iter().enumerate().map(|(i, &v)| (i as f64, v)).collect(),
            dots: false,
        },
        level(format!("mean of the first {window} steps = {first:.4}"), ORANGE, 3, (0.0, w), first),
        level(format!("mean of the last {window} steps = {last:.4}"), GREEN, 3, (n - w, n), last),
    ];
    if let Some(f) = floor {
        series.push(level(format!("loss floor = {f:.4}"), RED_LINE, 2, (0.0, n), f));
    }
    let title = "Overfit check: the loss on one batch must fall".to_string();
    draw_figure(path, &LineFigure { title, x_label: "optimizer step".into(), y_label: LOSS_AXIS.into(), series })
}

/// A training run's figure: the training loss per step, the validation loss on the held-out
/// subjects at each validation, and the floor.
pub fn loss_curves(
    path: &Path,
    train: &[(u64, f64)],
    val: &[(u64, f64)],
    floor: Option<f64>,
) -> Result<PathBuf, CliError> {
    let pts = |v: &[(u64, f64)]| v.iter().map(|&(s, l)| (s as f64, l)).collect::<Vec<_>>();
    let xmax = train.iter().chain(val).map(|(s, _)| *s as f64).fold(1.0f64, f64::max);
    let mut series = vec![
        Series {
            label: "training loss (per step)".into(),
            color: BLUE_LINE,
            width: 1,
            points: pts(train),
            dots: false,
        },
        Series {
            label: "validation loss (held-out subjects)".into(),
            color: ORANGE,
            width: 3,
            points: pts(val),
            dots: true,
        },
    ];
    if let Some(f) = floor {
        series.push(level(format!("loss floor = {f:.4}"), RED_LINE, 2, (0.0, xmax), f));
    }
    let title = "Training: loss per step and held-out validation loss".to_string();
    draw_figure(path, &LineFigure { title, x_label: "optimizer step".into(), y_label: LOSS_AXIS.into(), series })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(points: Vec<(f64, f64)>) -> LineFigure {
        let series = vec![Series { label: "s".into(), color: BLUE_LINE, width: 1, points, dots: false }];
        LineFigure { title: "t".into(), x_label: "x".into(), y_label: "y".into(), series }
    }

    #[test]
    fn the_loss_axis_is_logarithmic_only_over_a_wide_positive_span() {
        let (x, (y0, y1, log)) = fig(vec![(0.0, 2.0), (10.0, 0.05)]).ranges();
        assert_eq!((x, log), ((0.0, 10.0), true));
        assert!((y0 - 0.05 / 1.25).abs() < 1e-15 && (y1 - 2.5).abs() < 1e-15);
        let (_, (y0, _, log)) = fig(vec![(0.0, 2.0), (10.0, 0.5)]).ranges();
        assert_eq!((y0, log), (0.0, false), "a span of 4 stays linear from 0");
        let (_, (_, _, log)) = fig(vec![(0.0, 2.0), (1.0, 0.0), (2.0, f64::NAN)]).ranges();
        assert!(!log, "a zero loss cannot be drawn on a log axis");
        assert_eq!(fig(vec![(0.0, f64::NAN)]).ranges(), ((0.0, 1.0), (0.0, 1.0, false)));
    }
}
