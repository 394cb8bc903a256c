//! The configuration types of the `[data]` and `[window]` sections of a run's TOML file
//! ([`DataConfig`], [`SyntheticConfig`], [`WindowConfig`]): where the runs come from, how the
//! subjects are split, the windows. Their validation is the run configuration's job; the
//! serialized field names and order are part of the checkpoints' configuration hash.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[data]`: where the runs come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataConfig {
    /// Directory of runs (see [`crate::Dataset`]); absent: the synthetic AR(1) fixture below.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// Subjects held out for validation by `train` (the last ones in sorted order), used when
    /// neither `subjects_train`/`subjects_heldout` nor `heldout_fraction` is set.
    pub val_subjects: usize,
    /// Subject labels to train on (`"01"` or `"sub-01"`); empty: every subject not held out.
    #[serde(default)]
    pub subjects_train: Vec<String>,
    /// Subject labels held out for validation; empty: decided by `subjects_train`,
    /// `heldout_fraction` or `val_subjects`, in that order. A subject in both lists is an error.
    #[serde(default)]
    pub subjects_heldout: Vec<String>,
    /// Without explicit lists: hold out this fraction of the subjects (rounded, at least one,
    /// at least one left for training), drawn with `train.seed`; 0 falls back to `val_subjects`.
    #[serde(default)]
    pub heldout_fraction: f64,
    /// A column of the data directory's `participants.tsv` (e.g. `family_id`): subjects with
    /// the same value never straddle training and held out ([`crate::groups`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_column: Option<String>,
    /// Leave out every window with a TR whose framewise displacement (mm) exceeds this, where
    /// the run has a motion table beside it ([`crate::motion`]); unset: every window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fd_max: Option<f64>,
    /// The synthetic dataset used without `dir`.
    pub synthetic: SyntheticConfig,
    /// `task-` label to load from a tree with several (`--task`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// `space-` label to load (`--space`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space: Option<String>,
    /// `seg-` or `atlas-` label, the parcellation to load (`--seg`, `--atlas`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seg: Option<String>,
    /// The format to load when a run comes in several (`--format`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// The `.dlabel.nii` that averages dense series into parcels (`--parcellation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parcellation: Option<PathBuf>,
    /// TR in seconds of runs whose files record none (`--tr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tr: Option<f64>,
    /// Allow runs with different TRs (`--allow-mixed-tr`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_mixed_tr: bool,
    /// The conversion cache directory: runs in formats that cannot stay on disk as they are
    /// (text, CIFTI) are converted once into `.npy` files there and read from them, so that a
    /// dataset larger than memory trains in any format; reused while the sources are
    /// unchanged. Unset: such runs are held in memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<PathBuf>,
    /// What a missing cell (`n/a`, empty, NaN) in a run does (`--missing`): `"error"` (the
    /// default) or `"drop-parcel"` ([`crate::missing`]).
    #[serde(default, skip_serializing_if = "crate::missing::Missing::is_error")]
    pub missing: crate::missing::Missing,
    /// Confounds regressed out of every run, with detrending (`--confounds`, e.g.
    /// `"motion24+wm_csf"`; [`crate::confounds`]); unset: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confounds: Option<crate::confounds::ConfoundStrategy>,
    /// The labelled 3-D NIfTI atlas that averages 4-D NIfTI runs into parcels
    /// (`--atlas-image`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atlas_image: Option<PathBuf>,
    /// The label table (`index`, `name`) naming the parcels of `atlas_image`
    /// (`--atlas-labels`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atlas_labels: Option<PathBuf>,
}

impl DataConfig {
    /// The synthetic dataset `synthetic`, one subject held out, no picks.
    pub fn new(synthetic: SyntheticConfig) -> DataConfig {
        DataConfig {
            dir: None,
            val_subjects: 1,
            subjects_train: Vec::new(),
            subjects_heldout: Vec::new(),
            heldout_fraction: 0.0,
            group_column: None,
            fd_max: None,
            synthetic,
            task: None,
            space: None,
            seg: None,
            format: None,
            parcellation: None,
            tr: None,
            allow_mixed_tr: false,
            cache: None,
            missing: crate::missing::Missing::Error,
            confounds: None,
            atlas_image: None,
            atlas_labels: None,
        }
    }

    /// Sets the picks `sel` gives (its `Some` values, and `allow_mixed_tr` when set) over
    /// these settings: `eval --data` with other picks than a stored configuration's.
    pub fn pick(&mut self, sel: &crate::Selection) {
        for (dst, v) in [
            (&mut self.task, &sel.task),
            (&mut self.space, &sel.space),
            (&mut self.seg, &sel.seg),
            (&mut self.format, &sel.format),
        ] {
            if v.is_some() {
                dst.clone_from(v);
            }
        }
        if sel.parcellation.is_some() {
            self.parcellation.clone_from(&sel.parcellation);
        }
        if sel.tr.is_some() {
            self.tr = sel.tr;
        }
        self.allow_mixed_tr |= sel.allow_mixed_tr;
        if sel.cache.is_some() {
            self.cache.clone_from(&sel.cache);
        }
        if let Some(m) = sel.missing {
            self.missing = m;
        }
        if sel.confounds.is_some() {
            self.confounds.clone_from(&sel.confounds);
        }
        if sel.atlas_image.is_some() {
            self.atlas_image.clone_from(&sel.atlas_image);
        }
        if sel.atlas_labels.is_some() {
            self.atlas_labels.clone_from(&sel.atlas_labels);
        }
    }

    /// How the runs of `dir` are picked ([`crate::Selection`]).
    pub fn selection(&self) -> crate::Selection {
        crate::Selection {
            task: self.task.clone(),
            space: self.space.clone(),
            seg: self.seg.clone(),
            format: self.format.clone(),
            parcellation: self.parcellation.clone(),
            tr: self.tr,
            allow_mixed_tr: self.allow_mixed_tr,
            cache: self.cache.clone(),
            missing: (!self.missing.is_error()).then_some(self.missing),
            confounds: self.confounds.clone(),
            atlas_image: self.atlas_image.clone(),
            atlas_labels: self.atlas_labels.clone(),
        }
    }
}

/// `[data.synthetic]`: the AR(1) fixture used when `data.dir` is absent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyntheticConfig {
    /// Subjects.
    pub subjects: usize,
    /// Runs per subject.
    pub runs: usize,
    /// TRs per run.
    pub trs: usize,
    /// Parcels.
    pub parcels: usize,
    /// AR(1) coefficient of every parcel.
    pub rho: f64,
    /// Seed of the generator.
    pub seed: u64,
}

/// `[window]`: windows of the runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowConfig {
    /// TRs per window (a multiple of `model.d_in`).
    pub window: usize,
    /// TRs between window starts.
    pub stride: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_given_replace_the_settings_and_the_rest_stay() {
        let synthetic = SyntheticConfig { subjects: 2, runs: 1, trs: 10, parcels: 2, rho: 0.5, seed: 0 };
        let mut d = DataConfig {
            seg: Some("A".into()),
            space: Some("fsLR".into()),
            tr: Some(2.0),
            ..DataConfig::new(synthetic)
        };
        d.pick(&crate::Selection {
            seg: Some("B".into()),
            parcellation: Some("x.dlabel.nii".into()),
            ..Default::default()
        });
        let s = d.selection();
        assert_eq!((s.seg.as_deref(), s.space.as_deref(), s.tr), (Some("B"), Some("fsLR"), Some(2.0)));
        assert_eq!((s.parcellation, s.allow_mixed_tr), (Some(PathBuf::from("x.dlabel.nii")), false));
        d.pick(&crate::Selection { allow_mixed_tr: true, tr: Some(0.72), ..Default::default() });
        assert_eq!((d.tr, d.allow_mixed_tr, d.seg.as_deref()), (Some(0.72), true, Some("B")));
    }
}
