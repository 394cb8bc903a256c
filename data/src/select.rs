//! Which runs of a tree are loaded, and their TR: [`Selection`] (the picks `task`, `space`,
//! `seg`/`atlas` and `format`, the parcellation of dense series, the TR settings), the pick
//! itself (`pick`) and the TR of a run from its JSON sidecar (`sidecar_tr`).
//!
//! A tree may hold the same runs in several versions: several parcellations (`seg-` or
//! `atlas-`), spaces, tasks, or formats (XCP-D writes a CIFTI run both as `.tsv` and as
//! `.ptseries.nii`). When the runs found differ in one of those and nothing picks one, the
//! load is an error that lists what is there (each value with its number of runs) and the flag
//! that picks; a pick that matches nothing lists the same.
//!
//! The TR of a run is, in order: the CIFTI series step, the `RepetitionTime` of its JSON
//! sidecar (BIDS inheritance: the nearest `.json` in the run's directory or one above, up to
//! the root, whose entities are all the run's and whose suffix is the run's or `bold`; the
//! most specific wins), or [`Selection::tr`]. A TR read from the files that differs from
//! [`Selection::tr`] is an error, and so are runs with different TRs unless
//! [`Selection::allow_mixed_tr`].

use crate::discover::RunFile;
use crate::error::DataError;
use crate::names::{BidsName, RUN_EXTENSIONS};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Sidecars larger than this are refused (a BIDS sidecar is a few KB).
const MAX_SIDECAR_BYTES: u64 = 1 << 20;

/// How the runs of a directory or tree are picked (a BIDS derivatives tree may hold several
/// tasks, spaces, parcellations or formats) and their TR: the `[data]` settings of the same
/// names, and `bc-cli`'s flags (feature `clap`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Selection {
    /// Load the runs of this task (`task-<label>`) when the tree holds several.
    #[cfg_attr(feature = "clap", arg(long, value_name = "LABEL"))]
    pub task: Option<String>,
    /// Load the runs in this space (`space-<label>`, e.g. fsLR).
    #[cfg_attr(feature = "clap", arg(long, value_name = "LABEL"))]
    pub space: Option<String>,
    /// Load the runs of this parcellation (`seg-<label>`, or XCP-D's older `atlas-<label>`).
    #[cfg_attr(feature = "clap", arg(long, visible_alias = "atlas", value_name = "LABEL"))]
    pub seg: Option<String>,
    /// Load this format when a run comes in several (npy, tsv, csv, ptseries.nii, dtseries.nii);
    /// an error when no run file has it.
    #[cfg_attr(feature = "clap", arg(long, value_name = "EXT"))]
    pub format: Option<String>,
    /// The `.dlabel.nii` whose labels average dense series (`.dtseries.nii`) into parcels.
    #[cfg_attr(feature = "clap", arg(long, value_name = "FILE"))]
    pub parcellation: Option<PathBuf>,
    /// The TR in seconds of runs whose files and sidecars record none (1 ms to 1 h; outside
    /// 0.1-10 s with a warning).
    #[cfg_attr(feature = "clap", arg(long, value_name = "SECONDS"))]
    pub tr: Option<f64>,
    /// Allow runs with different TRs in one dataset.
    #[cfg_attr(feature = "clap", arg(long))]
    pub allow_mixed_tr: bool,
    /// Convert runs that cannot stay on disk as they are (.tsv, .csv, CIFTI) once into .npy
    /// files in this directory and read them from there, so that a dataset larger than memory
    /// trains in any format (the same numbers; reused while the sources are unchanged).
    #[cfg_attr(feature = "clap", arg(long, value_name = "DIR"))]
    pub cache: Option<PathBuf>,
    /// What a missing cell (`n/a`, empty, NaN: XCP-D's low-coverage parcels) does: `error`
    /// (the default; the message names the file, line, column and parcel) or `drop-parcel`
    /// (a parcel missing in any run is dropped from every run, and the dropped ones are
    /// named). drop-parcel reads every run into memory (no --cache, no .npy left on disk).
    #[cfg_attr(feature = "clap", arg(long, value_enum, value_name = "POLICY"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<crate::missing::Missing>,
    /// Regress confounds out of every run, with linear detrending, as nilearn's
    /// `signal.clean(detrend=True, standardize=False)` does, from the confounds table beside
    /// each run (fMRIPrep's *_desc-confounds_timeseries.tsv, else XCP-D's *_motion.tsv):
    /// motion6, motion24, wm_csf, global_signal, acompcor (or acompcor:N) or columns:A,B,...; join several
    /// with + (e.g. motion24+wm_csf). Reads every run into memory.
    #[cfg_attr(feature = "clap", arg(long, value_name = "STRATEGY"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confounds: Option<crate::confounds::ConfoundStrategy>,
    /// A labelled 3-D NIfTI atlas on the grid of the 4-D NIfTI runs (*_bold.nii, *_bold.nii.gz):
    /// each run is averaged into its labels (0 is background; labels in ascending order), as
    /// nilearn's NiftiLabelsMasker(strategy="mean") does. Not resampled: another grid is an
    /// error. (`--atlas` picks a parcellation by name; this is an image.)
    #[cfg_attr(feature = "clap", arg(long, value_name = "FILE.nii[.gz]"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atlas_image: Option<PathBuf>,
    /// The parcel names of --atlas-image: a TSV with `index` and `name` columns (BIDS
    /// dseg.tsv); without it, parcels are named label-N (N the label value).
    #[cfg_attr(feature = "clap", arg(long, value_name = "FILE.tsv", requires = "atlas_image"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atlas_labels: Option<PathBuf>,
}

impl Selection {
    /// Whether any pick is made.
    pub fn any(&self) -> bool {
        *self != Selection::default()
    }

    /// The missing-value policy ([`crate::missing::Missing::Error`] unless set).
    pub fn missing(&self) -> crate::missing::Missing {
        self.missing.unwrap_or_default()
    }

    /// Whether every run is read into memory (a policy that changes the values or the parcels
    /// after reading): the conversion cache and `.npy` runs on disk are not used then.
    pub(crate) fn in_memory(&self) -> bool {
        self.missing() != crate::missing::Missing::Error || self.confounds.is_some() || self.atlas_image.is_some()
    }
}

/// One axis a pick can be made on.
struct Axis {
    what: &'static str,
    flag: &'static str,
    value: fn(&RunFile) -> Option<String>,
    pick: Option<String>,
}

/// The runs of `runs` that `sel` picks; an error lists what is there when the runs differ on
/// an axis without a pick, or a pick matches nothing.
pub(crate) fn pick(runs: Vec<RunFile>, sel: &Selection, root: &Path) -> Result<Vec<RunFile>, DataError> {
    if let Some(f) = sel.format.as_deref().filter(|f| !RUN_EXTENSIONS.contains(f)) {
        return Err(DataError::Select {
            reason: format!("--format {f} is not a format read here: {}", RUN_EXTENSIONS.join(", ")),
        });
    }
    let axes = [
        Axis {
            what: "tasks",
            flag: "--task",
            value: |r| r.name.get("task").map(str::to_string),
            pick: sel.task.clone(),
        },
        Axis {
            what: "spaces",
            flag: "--space",
            value: |r| r.name.get("space").map(str::to_string),
            pick: sel.space.clone(),
        },
        Axis {
            what: "parcellations (seg- or atlas-)",
            flag: "--seg",
            value: |r| r.name.seg().map(str::to_string),
            pick: sel.seg.clone(),
        },
    ];
    let mut runs = runs;
    for a in &axes {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for r in &runs {
            *counts.entry((a.value)(r).unwrap_or_else(|| "(none)".into())).or_default() += 1;
        }
        let listed = || counts.iter().map(|(v, n)| format!("{v} ({})", runs_word(*n))).collect::<Vec<_>>().join(", ");
        match &a.pick {
            Some(p) => {
                let kept: Vec<RunFile> = runs.iter().filter(|r| (a.value)(r).as_deref() == Some(p)).cloned().collect();
                if kept.is_empty() {
                    return Err(DataError::Select {
                        reason: format!(
                            "{} {p} matches no run under {}; it holds {}",
                            a.flag,
                            root.display(),
                            listed()
                        ),
                    });
                }
                runs = kept;
            }
            None if counts.len() > 1 => {
                return Err(DataError::Select {
                    reason: format!(
                        "{} holds runs of several {}: {}; pick one with {}",
                        root.display(),
                        a.what,
                        listed(),
                        a.flag
                    ),
                });
            }
            None => {}
        }
    }
    if let Some(f) = sel.format.as_deref().filter(|f| !runs.iter().any(|r| r.ext == *f)) {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for r in &runs {
            *counts.entry(r.ext).or_default() += 1;
        }
        let listed: Vec<String> = counts.iter().map(|(e, n)| format!("{e} ({})", runs_word(*n))).collect();
        return Err(DataError::Select {
            reason: format!("--format {f} matches no run under {}; it holds {}", root.display(), listed.join(", ")),
        });
    }
    one_format(runs, sel.format.as_deref())
}

fn runs_word(n: usize) -> String {
    if n == 1 {
        "1 run".into()
    } else {
        format!("{n} runs")
    }
}

/// Of a run found in several formats (XCP-D writes a CIFTI run as `.tsv` and `.ptseries.nii`),
/// the file in `format`; without it, an error naming the run's files. Runs found once are
/// kept whatever their format, and two files of one format stay for the duplicate check.
fn one_format(runs: Vec<RunFile>, format: Option<&str>) -> Result<Vec<RunFile>, DataError> {
    let mut by_id: BTreeMap<crate::names::RunId, Vec<RunFile>> = BTreeMap::new();
    for r in runs {
        by_id.entry(r.id.clone()).or_default().push(r);
    }
    let mut out = Vec::new();
    for (id, files) in by_id {
        let mut exts: Vec<&str> = files.iter().map(|f| f.ext).collect();
        exts.sort();
        exts.dedup();
        if exts.len() == 1 {
            out.extend(files);
            continue;
        }
        let Some(f) = format else {
            let names: Vec<String> = files.iter().map(|f| f.path.display().to_string()).collect();
            return Err(DataError::Select {
                reason: format!(
                    "run {id} comes in several formats ({}): {}; pick one with --format",
                    exts.join(", "),
                    names.join(", ")
                ),
            });
        };
        let kept: Vec<RunFile> = files.into_iter().filter(|r| r.ext == f).collect();
        if kept.is_empty() {
            return Err(DataError::Select {
                reason: format!("--format {f}: run {id} comes only as {}", exts.join(", ")),
            });
        }
        out.extend(kept);
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The sidecar of `run` among `sidecars` (see the module documentation), if any.
fn sidecar_of<'a>(run: &RunFile, sidecars: &'a [(PathBuf, BidsName)], root: &Path) -> Option<&'a Path> {
    let dir = run.path.parent()?;
    let mut best: Option<(usize, usize, &Path)> = None;
    for (path, name) in sidecars {
        let Some(sdir) = path.parent() else { continue };
        if !dir.starts_with(sdir) || !sdir.starts_with(root) {
            continue;
        }
        let (entities, suffix) = (&name.entities, name.suffix.as_deref());
        let suffix_ok = suffix.is_some_and(|s| Some(s) == run.name.suffix.as_deref() || s == "bold");
        let subset = entities.iter().all(|(k, v)| run.name.get(k) == Some(v.as_str()));
        if suffix_ok && subset {
            let rank = (sdir.components().count(), entities.len(), path.as_path());
            if best.is_none_or(|b| (rank.0, rank.1) > (b.0, b.1)) {
                best = Some(rank);
            }
        }
    }
    best.map(|b| b.2)
}

/// The `RepetitionTime` (seconds) of `run`'s sidecar: `Ok(None)` without a sidecar or without
/// the field; an error for a sidecar that is not JSON or whose TR is not a positive number.
pub(crate) fn sidecar_tr(
    run: &RunFile,
    sidecars: &[(PathBuf, BidsName)],
    root: &Path,
) -> Result<Option<(f64, PathBuf)>, DataError> {
    let Some(path) = sidecar_of(run, sidecars, root) else { return Ok(None) };
    let bad = |reason: String| DataError::Sidecar { path: path.to_path_buf(), reason };
    let len = std::fs::metadata(path).map_err(crate::error::io_err(path))?.len();
    if len > MAX_SIDECAR_BYTES {
        return Err(bad(format!("{len} bytes: a sidecar is at most {MAX_SIDECAR_BYTES}")));
    }
    let text = std::fs::read_to_string(path).map_err(crate::error::io_err(path))?;
    // Editors on Windows start UTF-8 files with a byte-order mark; JSON readers skip it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
    if !v.is_object() {
        return Err(bad("not a JSON object: a sidecar is {\"RepetitionTime\": <seconds>, ...}".into()));
    }
    match v.get("RepetitionTime") {
        None => Ok(None),
        Some(t) => match t.as_f64() {
            Some(tr) if tr.is_finite() && tr > 0.0 => match tr_problem(tr) {
                None => Ok(Some((tr, path.to_path_buf()))),
                Some(why) => Err(bad(format!("RepetitionTime {}: {why}", crate::window::seconds_text(tr)))),
            },
            _ => Err(bad(format!("RepetitionTime {t} is not a positive number of seconds"))),
        },
    }
}

/// The TRs read at all, in seconds: no BOLD acquisition samples faster than a millisecond or
/// slower than an hour, and a value outside is a typo or a wrong unit (milliseconds).
pub const TR_LIMITS: [f64; 2] = [1e-3, 3600.0];

/// The TRs of BOLD acquisitions, in seconds; one outside is read with a warning
/// ([`unusual_tr`]).
pub const TR_USUAL: [f64; 2] = [0.1, 10.0];

/// Why a TR of `t` seconds is not one, or `None`.
pub(crate) fn tr_problem(t: f64) -> Option<String> {
    let [lo, hi] = TR_LIMITS;
    if !(t.is_finite() && t > 0.0) {
        Some("must be a positive number of seconds".into())
    } else if !(lo..=hi).contains(&t) {
        Some(format!("must lie within {lo}-{hi} s (no BOLD acquisition samples faster or slower)"))
    } else {
        None
    }
}

/// The warning for a TR outside [`TR_USUAL`] (`source` says where it was read), or `None`.
pub fn unusual_tr(t: f64, source: &str) -> Option<String> {
    let [lo, hi] = TR_USUAL;
    (!(lo..=hi).contains(&t)).then(|| {
        format!(
            "a TR of {} s ({source}) is unusual for BOLD ({lo}-{hi} s): check its unit (seconds)",
            crate::window::seconds_text(t)
        )
    })
}

/// Checks a TR given in the settings ([`tr_problem`]).
pub(crate) fn check_tr(tr: Option<f64>) -> Result<(), DataError> {
    match tr.and_then(|t| tr_problem(t).map(|why| (t, why))) {
        Some((t, why)) => Err(DataError::config("data.tr", crate::window::seconds_text(t), why)),
        None => Ok(()),
    }
}
