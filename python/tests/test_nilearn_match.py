"""The NIfTI + atlas loader and confound regression against nilearn on the same files:
`NiftiLabelsMasker(strategy="mean")` for the parcel means, `signal.clean(detrend=True,
standardize=False)` for the confounds (the files made here with nibabel, as fMRIPrep names
them)."""

import nibabel as nib
import numpy as np
import pandas as pd
import pytest
from nilearn import signal
from nilearn.maskers import NiftiLabelsMasker

import boldcast

SHAPE = (6, 5, 4)
TRS = 80
MOTION6 = ["trans_x", "trans_y", "trans_z", "rot_x", "rot_y", "rot_z"]


def write_tree(root, rng):
    """Three subjects' 4-D BOLD runs on one grid, a labelled atlas (labels 1, 3, 4, 9) and
    each run's fMRIPrep confounds table; returns the atlas path."""
    affine = np.diag([3.0, 3.0, 3.5, 1.0])
    affine[:3, 3] = [-9.0, -7.5, 2.0]
    labels = np.zeros(SHAPE, np.int16)
    labels[:3, :, :] = 1
    labels[3:, :2, :] = 3
    labels[3:, 2:, :2] = 4
    labels[3:, 2:, 2:] = 9
    atlas = root / "atlas.nii.gz"
    nib.save(nib.Nifti1Image(labels, affine), atlas)
    t = np.arange(TRS)
    for sub in ["01", "02", "03"]:
        motion = rng.normal(size=(TRS, 6)).cumsum(axis=0) * 0.05
        drift = 0.3 * t / TRS
        voxels = 500 + 20 * rng.normal(size=SHAPE)[..., None] + rng.normal(size=SHAPE + (TRS,))
        voxels += (motion @ rng.normal(size=6))[None, None, None, :] + drift
        name = f"sub-{sub}_task-rest_bold.nii.gz"
        nib.save(nib.Nifti1Image(voxels.astype(np.float32), affine), root / name)
        table = pd.DataFrame(motion, columns=MOTION6)
        table["framewise_displacement"] = np.r_[np.nan, np.abs(np.diff(motion, axis=0)).sum(axis=1)]
        table.to_csv(root / f"sub-{sub}_task-rest_desc-confounds_timeseries.tsv", sep="\t", index=False, na_rep="n/a")
    return atlas


def test_nifti_parcels_and_confound_regression_equal_nilearn(tmp_path):
    atlas = write_tree(tmp_path, np.random.default_rng(7))
    masker = NiftiLabelsMasker(labels_img=str(atlas), strategy="mean")
    plain = boldcast.Dataset.from_dir(tmp_path, atlas_image=str(atlas))
    cleaned = boldcast.Dataset.from_dir(tmp_path, atlas_image=str(atlas), confounds="motion6")
    assert plain.parcel_names == cleaned.parcel_names == ["label-1", "label-3", "label-4", "label-9"]
    assert len(plain) == 3
    for i, sub in enumerate(["01", "02", "03"]):
        bold = tmp_path / f"sub-{sub}_task-rest_bold.nii.gz"
        means = masker.fit_transform(str(bold))
        # nilearn averages float32 images in float32: agreement to float32 precision.
        np.testing.assert_allclose(plain.arrays()[i], means, rtol=2e-6)
        table = pd.read_csv(tmp_path / f"sub-{sub}_task-rest_desc-confounds_timeseries.tsv", sep="\t")
        want = signal.clean(means.astype(np.float64), confounds=table[MOTION6].to_numpy(), detrend=True,
                            standardize=False)
        got = cleaned.arrays()[i]
        # The regression removed the motion and the drift: what is left is far from the means.
        assert np.abs(got - means).max() > 1.0
        np.testing.assert_allclose(got, want, atol=1e-4 * np.abs(means).max())


def test_a_missing_confounds_strategy_column_is_named(tmp_path):
    atlas = write_tree(tmp_path, np.random.default_rng(8))
    with pytest.raises(boldcast.BoldcastError, match="white_matter"):
        boldcast.Dataset.from_dir(tmp_path, atlas_image=str(atlas), confounds="wm_csf")
