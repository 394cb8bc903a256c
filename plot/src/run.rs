//! The figure of a run directory, drawn from its `loss_log.jsonl`: by [`run_figure`], or at
//! the end of a run by the observer [`RunFigure`].

use crate::{loss_curves, HorizonCurve, PlotError, RunCurves};
use boldcast_train::{Observer, RunStart, StopReason, TrainReport};
use std::path::{Path, PathBuf};

/// The run's figure, relative to its directory.
pub const RUN_FIGURE: &str = "figures/loss_curves.png";
/// Its SVG twin.
pub const RUN_FIGURE_SVG: &str = "figures/loss_curves.svg";

/// Draws [`RUN_FIGURE`] (and its twin) of the run directory `out` from its log, with the
/// floor as a line when given and each horizon's validation loss ([`horizon_curves`]);
/// replaces an earlier drawing (the run owns its figures). Returns the twin's path.
pub fn run_figure(out: &Path, floor: Option<f64>) -> Result<PathBuf, PlotError> {
    let log = boldcast_train::run::log_path(out);
    let (train, val) = boldcast_train::log::read_curves(&log)?;
    let lr = boldcast_train::log::read_step_field(&log, "lr")?;
    let per_horizon = horizon_curves(out)?;
    let curves = RunCurves { train: &train, val: &val, lr: &lr, floor, per_horizon: &per_horizon };
    loss_curves(&out.join(RUN_FIGURE), &curves)
}

/// Each horizon's validation losses and floor from the validation records of the run
/// directory `out`'s log (their `val_per_horizon` and `floor_per_horizon` lists), named by the
/// horizons of its `config.resolved.toml` (`h = 5 (5 TRs ahead, 10 s)`; by position when it
/// cannot be read). Empty when the log has no per-horizon losses.
pub fn horizon_curves(out: &Path) -> Result<Vec<HorizonCurve>, PlotError> {
    let log = boldcast_train::run::log_path(out);
    let text = std::fs::read_to_string(&log).map_err(boldcast_storage::io_err(&log))?;
    let mut curves: Vec<HorizonCurve> = Vec::new();
    // Lines that are not JSON are left to `read_curves`, which names them.
    for v in text.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()) {
        let (Some(step), Some(losses)) = (v["step"].as_u64(), v["val_per_horizon"].as_array()) else { continue };
        for (i, l) in losses.iter().enumerate() {
            if curves.len() <= i {
                curves.push(HorizonCurve { label: format!("horizon {}", i + 1), val: Vec::new(), floor: None });
            }
            curves[i].val.extend(l.as_f64().map(|l| (step, l)));
            curves[i].floor = v["floor_per_horizon"][i].as_f64().or(curves[i].floor);
        }
    }
    if let Ok(cfg) = boldcast_train::run_dir::read_resolved(out) {
        let d = cfg.model.d_in;
        // The data's TR, as `summary.json` records it (a run the synthetic fixture trained has none).
        let tr = std::fs::read_to_string(out.join("summary.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["tr_seconds"].as_f64());
        for (c, &h) in curves.iter_mut().zip(&cfg.model.horizons) {
            c.label = horizon_label(h, d, tr);
        }
    }
    Ok(curves)
}

/// `h = 5 (5 TRs ahead, 10 s)`: the horizon in tokens, the TRs it targets and, when the TR is
/// known, their lags in seconds.
pub fn horizon_label(h: usize, d_in: usize, tr: Option<f64>) -> String {
    let (a, b) = (h.saturating_sub(1) * d_in + 1, h * d_in);
    let trs = match (a == b, a) {
        (true, 1) => "1 TR".to_string(),
        (true, _) => format!("{a} TRs"),
        (false, _) => format!("{a}-{b} TRs"),
    };
    match tr {
        Some(tr) => format!("h = {h} ({trs} ahead, {})", boldcast_data::horizon_seconds_text(h, d_in, tr)),
        None => format!("h = {h} ({trs} ahead)"),
    }
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

#[cfg(test)]
mod tests {
    use super::horizon_label;

    #[test]
    fn horizon_labels_name_the_trs_and_seconds() {
        assert_eq!(horizon_label(1, 1, None), "h = 1 (1 TR ahead)");
        assert_eq!(horizon_label(5, 1, Some(2.0)), "h = 5 (5 TRs ahead, 10 s)");
        assert_eq!(horizon_label(5, 2, Some(0.72)), "h = 5 (9-10 TRs ahead, 6.48-7.2 s)");
    }
}
