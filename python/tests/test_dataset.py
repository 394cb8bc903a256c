"""Datasets from arrays and from directories, and the floor of their data."""

import os

import numpy as np
import pytest

import boldcast
from conftest import RHO, ar1_runs


def test_from_arrays_keeps_runs_subjects_and_tr():
    runs = ar1_runs(3, n_tr=120, parcels=5)
    ds = boldcast.Dataset.from_arrays(runs, subjects=["sub-01", "01", "02"], tr=0.72, parcel_names=list("abcde"))
    assert len(ds) == 3
    assert ds.subjects == ["01", "02"]
    assert ds.run_subjects == ["01", "01", "02"]
    assert ds.run_ids == ["sub-01_run-1", "sub-01_run-2", "sub-02_run-1"]
    assert ds.parcel_names == ["a", "b", "c", "d", "e"]
    assert ds.tr == pytest.approx(0.72)
    back = ds.arrays()
    assert [a.shape for a in back] == [(120, 5)] * 3
    np.testing.assert_allclose(back[2], runs[2], rtol=1e-12)
    z = ds.runs[0]
    np.testing.assert_allclose(z.mean(axis=0), 0.0, atol=1e-9)
    np.testing.assert_allclose(z.std(axis=0), 1.0, rtol=1e-9)


def test_from_arrays_default_parcel_names_and_no_tr():
    ds = boldcast.Dataset.from_arrays(ar1_runs(2, n_tr=50, parcels=3), subjects=["a1", "b2"])
    assert ds.parcel_names == ["parcel-000", "parcel-001", "parcel-002"]
    assert ds.tr is None


def test_from_dir_reads_tsv_with_loader_options(tmp_path):
    runs = ar1_runs(2, n_tr=80, parcels=3)
    for i, r in enumerate(runs):
        header = "\t".join(["L1", "L2", "L3"])
        np.savetxt(tmp_path / f"sub-0{i + 1}_task-rest_bold.tsv", r, delimiter="\t", header=header, comments="")
    ds = boldcast.Dataset.from_dir(tmp_path, tr=1.5, task="rest")
    assert (len(ds), ds.parcel_names, ds.tr) == (2, ["L1", "L2", "L3"], 1.5)
    assert ds.options == {"dir": os.fspath(tmp_path), "tr": 1.5, "task": "rest"}
    np.testing.assert_allclose(ds.arrays()[1], runs[1], rtol=1e-12)


def test_unknown_keyword_is_an_error_naming_it(tmp_path):
    np.save(tmp_path / "sub-01_bold.npy", ar1_runs(1, n_tr=40)[0])
    with pytest.raises(boldcast.BoldcastError, match="bogus_option"):
        boldcast.Dataset.from_dir(tmp_path, bogus_option=1)


def test_bad_input_raises_the_library_message(tmp_path):
    with pytest.raises(boldcast.BoldcastError, match="2-D"):
        boldcast.Dataset.from_arrays([np.zeros(10)], subjects=["01"])
    with pytest.raises(boldcast.BoldcastError, match="subject label"):
        boldcast.Dataset.from_arrays(ar1_runs(1, n_tr=40), subjects=["0_1"])
    with pytest.raises(boldcast.BoldcastError, match="one label per run"):
        boldcast.Dataset.from_arrays(ar1_runs(2, n_tr=40), subjects=["01"])
    bad = ar1_runs(1, n_tr=40)[0]
    bad[7, 2] = np.nan
    with pytest.raises(boldcast.BoldcastError) as e:
        boldcast.Dataset.from_arrays([bad], subjects=["01"])
    assert isinstance(e.value, ValueError) and isinstance(e.value, RuntimeError)
    with pytest.raises(boldcast.BoldcastError, match="missing"):
        boldcast.Dataset.from_dir(tmp_path / "missing")


def test_floor_of_ar1_is_near_its_exact_value():
    ds = boldcast.Dataset.from_arrays(ar1_runs(8, n_tr=400), subjects=[f"{i:02d}" for i in range(8)], tr=2.0)
    r = boldcast.floor(ds, horizons=[1, 5], d_in=1)
    exact = [1 - RHO**2, 1 - RHO**10]
    assert r["kind"] == "empirical" and r["horizons"] == [1, 5] and r["runs"] == 8
    assert r["per_horizon"] == pytest.approx(exact, abs=0.04)
    assert r["overall"] == pytest.approx(np.mean(r["per_horizon"]), rel=1e-12)
    assert [p["name"] for p in r["per_parcel"]] == ds.parcel_names
    frame = r.to_frame()
    assert list(frame["horizon"]) == [1, 5]
    assert list(frame["floor"]) == r["per_horizon"]
