"""README.md's "Use from Python" example, run as it is written there, on small 4-D NIfTI runs
and a label atlas made here with nibabel (so the README stays true)."""

import os
import re

import numpy as np
import pytest

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def readme_example():
    """The first ```python block of the README's "Use from Python" section."""
    text = open(README, encoding="utf-8").read()
    section = text.split("## Use from Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def write_nifti(dir, subjects=("01", "02", "03", "04"), n_tr=200, rho=0.9, seed=1):
    """`atlas.nii.gz` (4 labelled quadrants of a 6x6x4 grid) and one run per subject: each
    region's voxels are one AR(1) series plus voxel noise."""
    nib = pytest.importorskip("nibabel")
    rng = np.random.default_rng(seed)
    atlas = np.zeros((6, 6, 4), dtype=np.int16)
    atlas[:3, :3], atlas[3:, :3], atlas[:3, 3:], atlas[3:, 3:] = 1, 2, 3, 4
    affine = np.diag([3.0, 3.0, 3.0, 1.0])
    nib.save(nib.Nifti1Image(atlas, affine), os.path.join(dir, "atlas.nii.gz"))
    for s in subjects:
        x = np.zeros((n_tr, 4))
        for t in range(1, n_tr):
            x[t] = rho * x[t - 1] + rng.standard_normal(4) * np.sqrt(1 - rho**2)
        bold = 1000.0 + rng.standard_normal((6, 6, 4, n_tr))
        for label in range(1, 5):
            bold[atlas == label] += 20.0 * x[:, label - 1]
        img = nib.Nifti1Image(bold.astype(np.float32), affine)
        img.header.set_zooms((3.0, 3.0, 3.0, 2.0))
        nib.save(img, os.path.join(dir, f"sub-{s}_task-rest_bold.nii.gz"))


def test_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    pytest.importorskip("nilearn")
    pytest.importorskip("pandas")
    write_nifti(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(readme_example(), "README.md (Use from Python)", "exec"), scope)
    ds, report = scope["ds"], scope["report"]
    assert (len(ds), len(ds.parcel_names), ds.tr) == (4, 4, 2.0)
    assert report["heldout_subjects"] == ["04"]
    frame = report.to_frame()
    assert list(frame.columns[:2]) == ["h1", "h5"] and np.isfinite(frame[["h1", "h5"]].to_numpy()).all()
    assert os.path.isfile(tmp_path / "runs" / "nifti" / "summary.json")
    assert "h1" in capsys.readouterr().out
