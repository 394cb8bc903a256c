//! The outcome of a run ([`TrainReport`], [`StopReason`]) and its `summary.json`.

use crate::config::RunConfig;
use crate::data::{FloorInfo, TrainData};
use crate::flags::RedFlag;
use boldcast_core::accept::Verdict;
use serde_json::{json, Value};
use std::path::PathBuf;

/// Why a run ended without an error.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// `train.max_steps` reached.
    MaxSteps,
    /// Early stopping (`patience` validations without improvement).
    EarlyStopping,
    /// The caller's step limit for this invocation (`--stop-after`): the run can be resumed.
    StopAfter,
}

impl StopReason {
    /// The word in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::MaxSteps => "max_steps",
            StopReason::EarlyStopping => "early_stopping",
            StopReason::StopAfter => "stop_after",
        }
    }

    /// The reason of a final checkpoint's `finished` word.
    pub fn from_finished(word: &str) -> Option<StopReason> {
        match word {
            "max_steps" => Some(StopReason::MaxSteps),
            "early_stopping" => Some(StopReason::EarlyStopping),
            _ => None,
        }
    }
}

/// The outcome of a run.
#[derive(Clone, Debug)]
pub struct TrainReport {
    /// Steps done (in total, across resumes).
    pub steps: u64,
    /// Steps done when this invocation started.
    pub start_step: u64,
    /// `train.max_steps`.
    pub max_steps: u64,
    /// Why it ended.
    pub reason: StopReason,
    /// `(step, val_loss)` of every validation.
    pub val_history: Vec<(u64, f64)>,
    /// The best validation `(step, loss)`.
    pub best: Option<(u64, f64)>,
    /// The held-out verdict (when the run finished): `passed` when the validation loss fell
    /// by the rule and beats predicting zero ([`crate::judge`]).
    pub verdict: Option<Verdict>,
    /// Whether `verdict.passed` is the baseline rule: a run with the linear path starts at the
    /// linear fit, so it is judged by its last validation loss against the best baseline's
    /// (`judgement.best_mse`), not by how far it fell from its start.
    pub against_baseline: bool,
    /// The last validation loss against predicting zero and the best baseline (when the run
    /// finished).
    pub judgement: Option<crate::judge::Judgement>,
    /// The last validation `(loss, per horizon)`.
    pub last_val: Option<(f64, Vec<f64>)>,
    /// The floor.
    pub floor: FloorInfo,
    /// The red flags (of the whole run when it finished; of this invocation otherwise).
    pub red_flags: Vec<RedFlag>,
    /// The output directory.
    pub out: PathBuf,
    /// How long this invocation's steps took and waited for their data.
    pub data_timing: crate::run::DataTiming,
}

fn decaying_tensors(cfg: &RunConfig) -> Vec<String> {
    let specs = cfg.model_config().param_specs();
    specs.iter().filter(|s| boldcast_core::optim::decays(&s.name, &s.shape)).map(|s| s.name.clone()).collect()
}

/// The verdict's rule for a run with the linear path.
pub const BASELINE_RULE: &str = "final val_loss <= the best baseline's MSE, and < predicting zero's";

/// The `summary.json` of a finished run; `extra` adds (or replaces) top-level keys.
pub fn summary_json(
    r: &TrainReport,
    cfg: &RunConfig,
    data: &TrainData,
    extra: &serde_json::Map<String, Value>,
) -> Value {
    let v = r.verdict;
    let last = r.last_val.clone();
    let mut summary = json!({
        "command": "train",
        "preset": cfg.preset,
        "data": data.source,
        "split": {
            "how": data.split.how,
            "train_subjects": data.split.train_subjects,
            "heldout_subjects": data.split.heldout_subjects,
            "train_windows": data.train_windows.len(),
            "val_windows": data.val_windows.len(),
        },
        "parameters": cfg.model_config().n_params(),
        "decaying_tensors": decaying_tensors(cfg),
        "steps": r.steps,
        "max_steps": cfg.train.max_steps,
        "stop_reason": r.reason.as_str(),
        "final_val_loss": last.as_ref().map(|l| l.0),
        "final_val_per_horizon": last.as_ref().map(|l| l.1.clone()),
        "horizons": cfg.model.horizons,
        "tr_seconds": data.ds.tr,
        "horizon_seconds": data.ds.tr.map(|tr| cfg.model.horizons.iter().map(|&h| boldcast_data::horizon_seconds(h, cfg.model.d_in, tr)).collect::<Vec<_>>()),
        "floor": {"value": r.floor.overall, "per_horizon": r.floor.per_horizon, "kind": r.floor.kind},
        "final_over_floor": last.as_ref().map(|l| l.0 / r.floor.overall),
        "best": r.best.map(|(s, l)| json!({"step": s, "val_loss": l, "file": "best.safetensors"})),
        "validations": r.val_history.iter().map(|(s, l)| json!({"step": s, "val_loss": l})).collect::<Vec<_>>(),
        "rule": if r.against_baseline { BASELINE_RULE } else { "mean(val[-3:]) <= 0.7 * mean(val[:3])" },
        "mean_first_3": v.map(|v| v.first),
        "mean_last_3": v.map(|v| v.last),
        "threshold": if r.against_baseline {
            r.judgement.as_ref().and_then(|j| j.best_mse)
        } else {
            v.map(|v| v.ratio * v.first)
        },
        "passed": v.map(|v| v.passed),
        "heldout": r.judgement,
        "red_flags": r.red_flags,
        "provenance": data.identity.provenance,
        "input_spectrum": data.spectrum,
        "loss_log": "loss_log.jsonl",
        "checkpoints": crate::checkpoint::CKPT_DIR,
    });
    for (k, x) in extra {
        summary[k] = x.clone();
    }
    summary
}
