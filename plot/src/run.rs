//! The figure of a run directory, drawn from its `loss_log.jsonl`: by [`run_figure`], or at
//! the end of a run by the observer [`RunFigure`].

use crate::{loss_curves, PlotError, RunCurves};
use boldcast_train::{Observer, RunStart, StopReason, TrainReport};
use std::path::{Path, PathBuf};

/// The run's figure, relative to its directory.
pub const RUN_FIGURE: &str = "figures/loss_curves.png";
/// Its SVG twin.
pub const RUN_FIGURE_SVG: &str = "figures/loss_curves.svg";

/// Draws [`RUN_FIGURE`] (and its twin) of the run directory `out` from its log, with the
/// floor as a line when given; replaces an earlier drawing (the run owns its figures).
/// Returns the twin's path.
pub fn run_figure(out: &Path, floor: Option<f64>) -> Result<PathBuf, PlotError> {
    let log = boldcast_train::run::log_path(out);
    let (train, val) = boldcast_train::log::read_curves(&log)?;
    let lr = boldcast_train::log::read_step_field(&log, "lr")?;
    let curves = RunCurves { train: &train, val: &val, lr: &lr, floor };
    loss_curves(&out.join(RUN_FIGURE), &curves)
}

/// Draws a finished run's figure when a kill at its very end left it out (either file
/// missing), with the floor of its `summary.json`; one line saying what was drawn, `None` when
/// nothing was missing. The caller holds the run directory's lock.
pub fn complete_run_figure(out: &Path) -> Result<Option<String>, PlotError> {
    let (png, svg) = (out.join(RUN_FIGURE), out.join(RUN_FIGURE_SVG));
    if png.is_file() && svg.is_file() {
        return Ok(None);
    }
    let path = out.join("summary.json");
    let text = std::fs::read_to_string(&path).map_err(boldcast_storage::io_err(&path))?;
    let floor = serde_json::from_str::<serde_json::Value>(&text).ok().and_then(|v| v["floor"]["value"].as_f64());
    let floor =
        floor.ok_or_else(|| PlotError::Summary { path: path.clone(), reason: "no number at floor.value".into() })?;
    run_figure(out, Some(floor))?;
    Ok(Some(format!("drew {} and {}", png.display(), svg.display())))
}

/// An observer that draws [`RUN_FIGURE`] when a run ends, except after `--stop-after` (the
/// run goes on later). An error is kept for [`RunFigure::result`], so a figure that cannot be
/// drawn never stops the run.
#[derive(Default)]
pub struct RunFigure {
    error: Option<PlotError>,
}

impl RunFigure {
    /// The error of the drawing, if any.
    pub fn result(&mut self) -> Result<(), PlotError> {
        self.error.take().map_or(Ok(()), Err)
    }
}

impl Observer for RunFigure {
    fn on_start(&mut self, s: &RunStart) {
        let dir = s.out.join("figures");
        if let Err(source) = std::fs::create_dir_all(&dir) {
            self.error = Some(boldcast_storage::io_err(&dir)(source).into());
        }
    }
    fn on_end(&mut self, r: &TrainReport) {
        if r.reason != StopReason::StopAfter && self.error.is_none() {
            self.error = run_figure(&r.out, Some(r.floor.overall)).err();
        }
    }
}
