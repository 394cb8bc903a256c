//! `boldcast-plot`: the figures of a run, an evaluation and a fingerprint, drawn with
//! plotters. Each figure is a PNG and its SVG twin ([`twin_paths`]), written atomically, with a
//! title, labelled axes with tick values and a legend. The library computes every number;
//! this crate only draws: [`loss_curves`] and [`overfit_curve`] (runs), [`eval::eval_figure`]
//! ([`boldcast_analysis::eval::EvalReport`]) and [`fingerprint::draw_fingerprint`]
//! ([`boldcast_analysis::fingerprint::FingerprintReport`]).
//!
//! ```no_run
//! use boldcast_plot::{loss_curves, RunCurves};
//! let train = [(1, 1.2), (2, 0.9), (3, 0.7)];
//! let val = [(3, 0.8)];
//! let lr = [(1, 1e-3), (3, 5e-4)];
//! let curves = RunCurves { train: &train, val: &val, lr: &lr, floor: Some(0.5), per_horizon: &[] };
//! let svg = loss_curves("figures/loss_curves.png".as_ref(), &curves)?;
//! // The same figure of a run directory, from its loss_log.jsonl:
//! boldcast_plot::run_figure("runs/r1".as_ref(), Some(0.5))?;
//! # Ok::<(), boldcast_plot::PlotError>(())
//! ```
//!
//! The text is drawn with DejaVu Sans, embedded in the crate (`plot/assets/DejaVuSans.ttf`,
//! its licence beside it), so a fresh machine without system fonts draws the same picture.
//! A loss axis is logarithmic when the losses span more than a factor of [`LOG_SPAN`] (an
//! overfit loss falling to near zero), linear from 0 otherwise; the training figure's is
//! zoomed to the trained steps ([`zoom`]). Every tick value comes from [`ticks`].

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

pub mod eval;
pub mod fingerprint;
pub mod inspect;
mod run;
pub mod ticks;

pub use run::{complete_run_figure, horizon_curves, run_figure, RunFigure, RUN_FIGURE, RUN_FIGURE_SVG};

/// What drawing a figure can fail with.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// An output could not be written: the path is not a regular file, exists without
    /// `overwrite`, or a directory or file could not be made or renamed.
    #[error(transparent)]
    Storage(#[from] boldcast_storage::StorageError),
    /// A run's log could not be read.
    #[error(transparent)]
    Log(#[from] boldcast_train::TrainError),
    /// A run's `summary.json` lacks what its figure needs.
    #[error("{}: {reason}", path.display())]
    Summary {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The drawing backend failed.
    #[error("{}: cannot draw the figure: {message}", path.display())]
    Draw {
        /// The figure's file.
        path: PathBuf,
        /// plotters' message.
        message: String,
    },
}

/// The font the figures' text is drawn with (registered once as plotters' `sans-serif`).
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
/// The losses' max / min ratio above which the loss axis is logarithmic.
pub const LOG_SPAN: f64 = 20.0;
/// The size of every figure, in pixels.
pub const SIZE: (u32, u32) = (1000, 600);

/// Registers the embedded font as plotters' `sans-serif` (once per process).
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

/// `points` with at least `n` points spread along each segment (so a two-point level line
/// counts along its whole length).
fn interpolate(points: &[(f64, f64)], n: usize) -> Vec<(f64, f64)> {
    let finite: Vec<(f64, f64)> = points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite()).collect();
    let per = (n / finite.len().max(1)).max(1);
    let mut out = Vec::with_capacity(finite.len() * per + 1);
    for w in finite.windows(2) {
        let ((xa, ya), (xb, yb)) = (w[0], w[1]);
        out.extend((0..per).map(|k| {
            let t = k as f64 / per as f64;
            (xa + t * (xb - xa), ya + t * (yb - ya))
        }));
    }
    out.extend(finite.last());
    out
}

/// One panel of a figure: lines sharing a y axis.
pub struct Panel {
    /// The y axis label, with units.
    pub y_label: String,
    /// The lines, drawn in order.
    pub series: Vec<Series>,
    /// Whether a wide span of positive values gets a logarithmic axis.
    pub log_allowed: bool,
    /// A linear y range set by the caller (a zoom: points outside are drawn at its edge);
    /// `None`: the range of the points, from 0.
    pub y_range: Option<(f64, f64)>,
}

impl Panel {
    /// A panel of `series` under `y_label`, with plotters' tick labels.
    pub fn new(y_label: &str, series: Vec<Series>) -> Self {
        Self { y_label: y_label.into(), series, log_allowed: true, y_range: None }
    }

    /// Where the legend hides the fewest points: the upper, middle or lower third of the
    /// right or the left 45 % of the panel (the fractions measured on the axis as drawn, `y`
    /// its span); the right before the left, the higher before the lower on a tie.
    fn legend_position(&self, (x0, x1): (f64, f64), (y0, y1, log): (f64, f64, bool)) -> SeriesLabelPosition {
        let frac = |y: f64| if log { (y.ln() - y0.ln()) / (y1.ln() - y0.ln()) } else { (y - y0) / (y1 - y0) };
        // counts[side][third]: side 0 the right, 1 the left.
        let mut counts = [[0usize; 3]; 2];
        for s in &self.series {
            // Dense lines through the region count as many points as it spans.
            for (x, y) in interpolate(&s.points, 200) {
                let side = if x >= x0 + 0.55 * (x1 - x0) {
                    0
                } else if x <= x0 + 0.45 * (x1 - x0) {
                    1
                } else {
                    continue;
                };
                let f = frac(y);
                if (0.0..=1.0).contains(&f) {
                    counts[side][(((1.0 - f) * 3.0) as usize).min(2)] += 1;
                }
            }
        }
        let best = (0..6).min_by_key(|&i| (counts[i / 3][i % 3], i)).unwrap_or(0);
        use SeriesLabelPosition::*;
        [UpperRight, MiddleRight, LowerRight, UpperLeft, MiddleLeft, LowerLeft][best].clone()
    }

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
        if let Some((a, b)) = self.y_range.filter(|(a, b)| b > a) {
            return (x, (a, b, false));
        }
        if self.log_allowed && y0 > 0.0 && y1 / y0 > LOG_SPAN {
            return (x, (y0 / 1.25, y1 * 1.25, true));
        }
        (x, (0.0_f64.min(y0), y1.max(1e-12) * 1.08, false))
    }
}

/// A figure of panels stacked over one step axis: the first takes [`FIRST_PANEL_PERCENT`] of
/// the height when there are two.
pub struct LineFigure {
    /// The title.
    pub title: String,
    /// A line of explanation under the title.
    pub subtitle: Option<String>,
    /// The size in pixels ([`SIZE`] for most).
    pub size: (u32, u32),
    /// The x axis label, with units (under the last panel).
    pub x_label: String,
    /// The panels, top to bottom: one, two ([`FIRST_PANEL_PERCENT`]) or three
    /// ([`THREE_PANEL_PERCENT`]).
    pub panels: Vec<Panel>,
}

/// The height shares of three panels, in percent.
pub const THREE_PANEL_PERCENT: [i32; 3] = [46, 34, 20];

/// The height share of the first of two panels, in percent.
pub const FIRST_PANEL_PERCENT: i32 = 70;

impl LineFigure {
    /// The x range of every panel's points together.
    fn x_range(&self) -> (f64, f64) {
        let xs = self.panels.iter().map(|p| p.ranges().0);
        let (x0, x1) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), (c, d)| (a.min(c), b.max(d)));
        if x0.is_finite() {
            (x0, x1)
        } else {
            (0.0, 1.0)
        }
    }
}

/// A figure that draws itself on either backend (the PNG's and the SVG's).
pub(crate) trait Figure {
    /// Its size in pixels.
    fn size(&self) -> (u32, u32) {
        SIZE
    }
    /// Draws it on `root`.
    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), String>;
}

impl Figure for LineFigure {
    fn size(&self) -> (u32, u32) {
        self.size
    }
    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), String> {
        draw_on(root, self)
    }
}

/// Draws `fig` into the PNG `path` and its SVG twin (`draw_twin`), replacing the files of
/// an earlier drawing: for the figures of a run directory, which the run owns. Returns the
/// twin's path.
pub fn draw_figure(path: &Path, fig: &LineFigure) -> Result<PathBuf, PlotError> {
    draw_twin(path, fig, true)
}

/// The PNG and the SVG of a figure path: `x.svg` is the SVG and `x.png` the PNG; any other
/// path is the PNG, and its twin the same path with `.svg`.
pub fn twin_paths(path: &Path) -> (PathBuf, PathBuf) {
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("svg")) {
        (path.with_extension("png"), path.to_path_buf())
    } else {
        (path.to_path_buf(), path.with_extension("svg"))
    }
}

/// Whether a figure may be drawn at `path`: each of its two files ([`twin_paths`]) is absent,
/// or a regular file and `overwrite` is given
/// ([`boldcast_storage::fsutil::check_replaceable`]). A command checks this before its work.
pub fn check_figure_path(path: &Path, overwrite: bool) -> Result<(), PlotError> {
    let (png, svg) = twin_paths(path);
    for p in [png, svg] {
        boldcast_storage::fsutil::check_replaceable(&p, overwrite)?;
    }
    Ok(())
}

/// Draws `fig` into the PNG and the SVG of `path` ([`twin_paths`]), each into a temporary
/// file beside it that is renamed over it ([`boldcast_storage::fsutil::replace_by`]), after
/// [`check_figure_path`]. Returns the path of the twin (the one of the two that is not `path`).
fn draw_twin<F: Figure>(path: &Path, fig: &F, overwrite: bool) -> Result<PathBuf, PlotError> {
    register_font();
    check_figure_path(path, overwrite)?;
    let (png, svg) = twin_paths(path);
    let dir = png.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(boldcast_storage::io_err(dir))?;
    for (dest, is_svg) in [(&png, false), (&svg, true)] {
        let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let ext = if is_svg { "svg" } else { "png" };
        let tmp = dir.join(format!(".{name}.tmp-{}.{ext}", std::process::id()));
        let err = |message: String| PlotError::Draw { path: dest.clone(), message };
        let drawn = if is_svg {
            fig.draw(SVGBackend::new(&tmp, fig.size()).into_drawing_area())
        } else {
            fig.draw(BitMapBackend::new(&tmp, fig.size()).into_drawing_area())
        };
        if let Err(e) = drawn {
            let _ = std::fs::remove_file(&tmp);
            return Err(err(e));
        }
        boldcast_storage::fsutil::replace_by(&tmp, dest).map_err(boldcast_storage::io_err(dest))?;
    }
    Ok(if svg == path { png } else { svg })
}

/// `root` under the title and, when given, a line of explanation; returns the area below.
pub(crate) fn titled<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    subtitle: Option<&str>,
) -> Result<DrawingArea<DB, Shift>, String> {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let body = root.titled(title, ("sans-serif", 24)).map_err(|e| e.to_string())?;
    let Some(text) = subtitle else { return Ok(body) };
    let (sub, body) = body.split_vertically(24);
    let w = sub.dim_in_pixel().0 as i32;
    let style = TextStyle::from(("sans-serif", 15).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    sub.draw(&Text::new(text.to_string(), (w / 2, 2), style)).map_err(|e| e.to_string())?;
    Ok(body)
}

/// The panels' areas of `body`, top to bottom.
fn panel_areas<DB: DrawingBackend>(body: DrawingArea<DB, Shift>, n: usize) -> Vec<DrawingArea<DB, Shift>> {
    match n {
        2 => {
            let (a, b) = body.split_vertically(FIRST_PANEL_PERCENT.percent_height());
            vec![a, b]
        }
        3 => {
            let h = body.dim_in_pixel().1 as i32;
            let [a, b, _] = THREE_PANEL_PERCENT;
            body.split_by_breakpoints([] as [i32; 0], [h * a / 100, h * (a + b) / 100])
        }
        _ => vec![body],
    }
}

fn draw_on<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, fig: &LineFigure) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let body = titled(&root, &fig.title, fig.subtitle.as_deref())?;
    let areas = panel_areas(body, fig.panels.len());
    let (x0, x1) = fig.x_range();
    for (i, (area, panel)) in areas.iter().zip(&fig.panels).enumerate() {
        let x_label = (i + 1 == areas.len()).then_some(fig.x_label.as_str());
        let (_, (y0, y1, log)) = panel.ranges();
        let n = (area.dim_in_pixel().1 as usize / 40).clamp(3, 10);
        let xt = ticks::Ticks::linear(x0, x1, 10);
        let x = xt.on(RangedCoordf64::from(x0..x1));
        if log {
            let yt = ticks::Ticks::log(y0, y1, n);
            let y = yt.on(plotters::coord::combinators::LogCoord::<f64>::from((y0..y1).log_scale()));
            lines(area, panel, x_label, (x, &xt), (y, &yt))?;
        } else {
            let yt = ticks::Ticks::linear(y0, y1, n);
            let y = yt.on(RangedCoordf64::from(y0..y1));
            lines(area, panel, x_label, (x, &xt), (y, &yt))?;
        }
    }
    root.present().map_err(|e| e.to_string())
}

/// One panel's chart, over a linear or logarithmic y axis `y` with its ticks; the x axis
/// label only under the last panel.
fn lines<DB, X, Y>(
    root: &DrawingArea<DB, Shift>,
    fig: &Panel,
    x_label: Option<&str>,
    (x, xt): (X, &ticks::Ticks),
    (y, yt): (Y, &ticks::Ticks),
) -> Result<(), String>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let ((xmin, xmax), y_span) = fig.ranges();
    let (xmin, xmax) = (xmin.min(xt.values[0]), xmax.max(*xt.values.last().unwrap_or(&xmax)));
    let mut chart = ChartBuilder::on(root)
        .margin(15)
        .x_label_area_size(if x_label.is_some() { 55 } else { 30 })
        .y_label_area_size(80)
        .build_cartesian_2d(x, y)
        .map_err(e)?;
    let (xf, yf) = (|v: &f64| xt.label(*v), |v: &f64| yt.label(*v));
    chart
        .configure_mesh()
        .x_label_formatter(&xf)
        .y_label_formatter(&yf)
        .x_desc(x_label.unwrap_or(""))
        .y_desc(fig.y_label.as_str())
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(225, 225, 225))
        .draw()
        .map_err(e)?;
    // A zoomed axis draws the points outside it at its edge (the subtitle says so).
    let clamp = |v: f64| if fig.y_range.is_some() { v.clamp(y_span.0, y_span.1) } else { v };
    for s in &fig.series {
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|(a, b)| a.is_finite() && b.is_finite() && *a >= xmin && *a <= xmax)
            .map(|(a, b)| (a, clamp(b)))
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
        .position(fig.legend_position((xmin, xmax), y_span))
        .margin(8)
        .draw()
        .map_err(e)?;
    Ok(())
}

const BLUE_LINE: RGBColor = RGBColor(31, 119, 180);
const ORANGE: RGBColor = RGBColor(255, 127, 14);
const GREEN: RGBColor = RGBColor(44, 160, 44);
const RED_LINE: RGBColor = RGBColor(214, 39, 40);
const PURPLE: RGBColor = RGBColor(148, 103, 189);
const GREY_LINE: RGBColor = RGBColor(90, 90, 90);

/// A horizontal line across `[x0, x1]`.
fn level(label: String, color: RGBColor, width: u32, (x0, x1): (f64, f64), y: f64) -> Series {
    Series { label, color, width, points: vec![(x0, y), (x1, y)], dots: false }
}

/// The panel of the learning rate at every step, `(step, lr)`.
fn lr_panel(points: impl Iterator<Item = (f64, f64)>) -> Panel {
    let lr =
        Series { label: "learning rate".into(), color: GREY_LINE, width: 2, points: points.collect(), dots: false };
    Panel { log_allowed: false, ..Panel::new("learning rate", vec![lr]) }
}

/// The loss axis' label.
pub const LOSS_AXIS: &str = "loss (MSE, variance units)";
/// The overfit figure's subtitle: why its loss may end under the floor.
pub const OVERFIT_NOTE: &str = "Memorising one batch can take its loss below the loss floor: \
     the floor bounds forecasts of unseen data, not the fit to one batch";

/// The overfit check's figure: the loss at every step, the means of its first and last
/// `window` steps (the acceptance rule compares them) and the floor; the learning rate of
/// every step (`lrs`) in a second panel.
pub fn overfit_curve(
    path: &Path,
    (losses, lrs): (&[f64], &[f64]),
    (first, last, window): (f64, f64, usize),
    floor: Option<f64>,
) -> Result<PathBuf, PlotError> {
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
        series.push(level(format!("loss floor = {f:.4} (the process, on unseen data)"), RED_LINE, 2, (0.0, n), f));
    }
    let title = "Overfit check: the loss on one batch must fall".to_string();
    let panels = vec![Panel::new(LOSS_AXIS, series), lr_panel(lrs.iter().enumerate().map(|(i, &v)| (i as f64, v)))];
    let subtitle = floor.is_some().then(|| OVERFIT_NOTE.to_string());
    draw_figure(path, &LineFigure { title, subtitle, size: SIZE, x_label: "optimizer step".into(), panels })
}

/// One horizon's validation losses, for the training figure's per-horizon panel.
#[derive(Clone, Debug, PartialEq)]
pub struct HorizonCurve {
    /// The legend's name of the horizon (`h = 5 (9-10 TRs ahead, 18-20 s)`).
    pub label: String,
    /// `(step, validation loss at this horizon)`.
    pub val: Vec<(u64, f64)>,
    /// The horizon's loss floor, when known.
    pub floor: Option<f64>,
}

/// What a training run's figure shows, from its log.
pub struct RunCurves<'a> {
    /// `(step, loss)` of every step.
    pub train: &'a [(u64, f64)],
    /// `(step, val_loss)` of every validation.
    pub val: &'a [(u64, f64)],
    /// `(step, lr)` of every step.
    pub lr: &'a [(u64, f64)],
    /// The loss floor, when known.
    pub floor: Option<f64>,
    /// The validation loss of each horizon (empty: no per-horizon panel).
    pub per_horizon: &'a [HorizonCurve],
}

/// The size of the training figure with its per-horizon panel.
pub const RUN_SIZE: (u32, u32) = (1000, 800);
/// An `(x, y)` point of a figure.
pub type Point = (f64, f64);

/// The room a zoomed axis leaves above its curves for a legend, as a share of their span,
/// per legend entry.
pub const LEGEND_ROOM: f64 = 0.1;
/// The share of the steps whose training losses the zoomed loss axis leaves out.
pub const ZOOM_SKIP: f64 = 0.25;

/// A loss axis zoomed to what a run is judged on: the training losses after the first
/// [`ZOOM_SKIP`] of the steps (up to their 98th percentile), the validations after that
/// (the first when none is) and the `levels` (floor, means), padded by 8 % with `room` times their span above (for
/// the legend, [`LEGEND_ROOM`] per entry); with a note
/// naming the highest loss left above it, if any. `None` without points.
pub fn zoom((train, val): (&[Point], &[Point]), levels: &[f64], room: f64) -> Option<((f64, f64), Option<String>)> {
    let x_end = train.iter().chain(val).map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    let x_start = train.iter().chain(val).map(|p| p.0).fold(f64::INFINITY, f64::min);
    let cut = x_start + ZOOM_SKIP * (x_end - x_start);
    let mut later: Vec<f64> = train.iter().filter(|p| p.0 >= cut).map(|p| p.1).filter(|v| v.is_finite()).collect();
    later.sort_by(f64::total_cmp);
    let q98 = later.get(((later.len() as f64 - 1.0) * 0.98).round() as usize).copied();
    // The validations after the cut; after the first when none is.
    let after: Vec<&(f64, f64)> = val.iter().filter(|p| p.0 >= cut).collect();
    let after = if after.is_empty() { val.iter().skip(usize::from(val.len() > 1)).collect() } else { after };
    let vals: Vec<f64> = after.iter().map(|p| p.1).filter(|v| v.is_finite()).collect();
    let levels: Vec<f64> = levels.iter().copied().filter(|v| v.is_finite()).collect();
    let lo = later.iter().chain(&vals).chain(&levels).copied().fold(f64::INFINITY, f64::min);
    let hi = q98.iter().chain(&vals).chain(&levels).copied().fold(f64::NEG_INFINITY, f64::max);
    if !(lo.is_finite() && hi.is_finite()) {
        return None;
    }
    let pad = (hi - lo).max(1e-3 * hi.abs().max(1e-12)) * 0.08;
    // Room above the curves for the legend.
    let range = ((lo - pad).max(0.0), hi + pad + room * (hi - lo));
    let above = train.iter().chain(val).filter(|p| p.1 > range.1).max_by(|a, b| a.1.total_cmp(&b.1));
    let note = above.map(|&(s, v)| {
        let v = ticks::tick_text(v, 3);
        format!("Loss axis zoomed to the trained steps: the untrained start (up to {v} at step {s}) is drawn at its top edge")
    });
    Some((range, note))
}

/// The per-horizon panel: each horizon's validation loss and its floor, in one colour.
fn horizon_panel(curves: &[HorizonCurve], xmax: f64) -> Panel {
    let colors = [BLUE_LINE, ORANGE, GREEN, PURPLE, RED_LINE, GREY_LINE];
    let mut series = Vec::new();
    for (i, c) in curves.iter().enumerate() {
        let color = colors[i % colors.len()];
        let points = c.val.iter().map(|&(s, l)| (s as f64, l)).collect();
        series.push(Series { label: format!("validation, {}", c.label), color, width: 2, points, dots: true });
        if let Some(f) = c.floor {
            series.push(level(format!("floor, {} = {}", c.label, ticks::tick_text(f, 3)), color, 1, (0.0, xmax), f));
        }
    }
    let pts: Vec<(f64, f64)> = series.iter().filter(|s| s.dots).flat_map(|s| s.points.clone()).collect();
    let levels: Vec<f64> = curves.iter().filter_map(|c| c.floor).collect();
    let room = LEGEND_ROOM * series.len() as f64 * 2.0;
    let y_range = zoom((&[], &pts), &levels, room).map(|z| z.0);
    Panel { y_range, ..Panel::new("validation loss per horizon (MSE)", series) }
}

/// The held-out rule's windows: the means of the first and the last validations, as levels.
fn rule_levels(val: &[(u64, f64)]) -> Vec<Series> {
    let w = boldcast_core::accept::HELDOUT_WINDOW;
    if val.len() < 2 * w {
        return Vec::new();
    }
    let vals: Vec<f64> = val.iter().map(|(_, v)| *v).collect();
    let verdict = boldcast_core::accept::heldout_verdict(&vals).expect("validations exist");
    let span = |v: &[(u64, f64)]| (v[0].0 as f64, v[v.len() - 1].0 as f64);
    let (first, last) = (span(&val[..w]), span(&val[val.len() - w..]));
    vec![
        level(format!("mean of the first {w} validations = {:.4}", verdict.first), GREEN, 4, first, verdict.first),
        level(format!("mean of the last {w} validations = {:.4}", verdict.last), PURPLE, 4, last, verdict.last),
    ]
}

/// A training run's figure: the training loss per step, the validation loss on the held-out
/// subjects at each validation, the means of the first and last validations that the
/// held-out rule compares, and the floor, on a loss axis zoomed to the trained steps
/// ([`zoom`]); each horizon's validation loss and floor in a second panel (when the log has
/// them); the learning rate in the last.
pub fn loss_curves(path: &Path, c: &RunCurves<'_>) -> Result<PathBuf, PlotError> {
    let pts = |v: &[(u64, f64)]| v.iter().map(|&(s, l)| (s as f64, l)).collect::<Vec<_>>();
    let xmax = c.train.iter().chain(c.val).map(|(s, _)| *s as f64).fold(1.0f64, f64::max);
    let train = Series {
        label: "training loss (per step)".into(),
        color: BLUE_LINE,
        width: 1,
        points: pts(c.train),
        dots: false,
    };
    let val = Series {
        label: "validation loss (held-out subjects)".into(),
        color: ORANGE,
        width: 3,
        points: pts(c.val),
        dots: true,
    };
    let mut series = vec![train, val];
    series.extend(rule_levels(c.val));
    if let Some(f) = c.floor {
        series.push(level(format!("loss floor = {f:.4}"), RED_LINE, 2, (0.0, xmax), f));
    }
    // The floor and the last validations' mean; the first validations' mean belongs to the
    // untrained start (drawn at the top edge when above).
    let first_mean = |s: &&Series| s.label.starts_with("mean of the first");
    let levels: Vec<f64> = series[2..].iter().filter(|s| !first_mean(s)).map(|s| s.points[0].1).collect();
    let room = LEGEND_ROOM * series.len() as f64;
    let zoomed = zoom((&series[0].points, &series[1].points), &levels, room);
    let mut panels = vec![Panel { y_range: zoomed.as_ref().map(|z| z.0), ..Panel::new(LOSS_AXIS, series) }];
    if !c.per_horizon.is_empty() {
        panels.push(horizon_panel(c.per_horizon, xmax));
    }
    panels.push(lr_panel(pts(c.lr).into_iter()));
    let size = if panels.len() == 3 { RUN_SIZE } else { SIZE };
    let title = "Training: loss per step, held-out validation loss, learning rate".to_string();
    let subtitle = zoomed.and_then(|z| z.1);
    draw_figure(path, &LineFigure { title, subtitle, size, x_label: "optimizer step".into(), panels })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(points: Vec<(f64, f64)>) -> Panel {
        Panel::new("y", vec![Series { label: "s".into(), color: BLUE_LINE, width: 1, points, dots: false }])
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

    #[test]
    fn the_zoom_leaves_the_untrained_start_above_and_says_so() {
        // A loss from 2.5 falling to about 0.9, validations near 0.95, the floor at 0.85.
        let train: Vec<(f64, f64)> = (0..100).map(|i| (i as f64, 0.9 + 1.6 * (-(i as f64) / 3.0).exp())).collect();
        let val = [(0.0, 2.4), (50.0, 0.96), (99.0, 0.95)];
        let ((lo, hi), note) = zoom((&train, &val), &[0.85], 0.5).unwrap();
        assert!(lo > 0.8 && lo < 0.85, "{lo}");
        // The span 0.85-0.96 padded, with the legend's room: far under the start's 2.5.
        assert!(hi > 0.96 && hi < 1.1, "{hi}");
        let note = note.unwrap();
        assert!(note.contains("up to 2.5 at step 0"), "{note}");
        // Nothing left above: no note.
        let flat: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 1.0)).collect();
        assert_eq!(zoom((&flat, &[]), &[0.5], 0.5).unwrap().1, None);
    }

    #[test]
    fn a_panel_that_forbids_it_stays_linear() {
        let mut p = fig(vec![(0.0, 3e-4), (10.0, 1e-7)]);
        assert!(p.ranges().1 .2, "a span of 3000 is logarithmic by default");
        p.log_allowed = false;
        assert!(!p.ranges().1 .2);
    }

    #[test]
    fn the_legend_goes_where_it_hides_the_fewest_points() {
        let pos = |points: Vec<(f64, f64)>| {
            let p = fig(points);
            let (x, y) = p.ranges();
            format!("{:?}", p.legend_position(x, y))
        };
        // A line along the top of the right part: not the top (of two free places, the higher).
        assert_eq!(pos(vec![(0.0, 0.0), (5.0, 10.0), (10.0, 10.0)]), "MiddleRight");
        // Lines through the top and the middle: the bottom.
        assert_eq!(pos(vec![(0.0, 0.0), (5.0, 10.0), (7.5, 5.0), (10.0, 10.0)]), "LowerRight");
        // A line along the bottom: the top.
        assert_eq!(pos(vec![(0.0, 10.0), (5.0, 0.5), (10.0, 0.5)]), "UpperRight");
        // Lines at the top and the bottom: the middle.
        let mut p = fig(vec![(0.0, 10.0), (10.0, 10.0)]);
        p.series.push(Series {
            label: "b".into(),
            color: RED_LINE,
            width: 1,
            points: vec![(0.0, 0.2), (10.0, 0.2)],
            dots: false,
        });
        let (x, y) = p.ranges();
        assert_eq!(format!("{:?}", p.legend_position(x, y)), "MiddleRight");
    }
}
