"""Shared data of the Python tests: AR(1) runs made with numpy, and one short training run
reused by the tests of loading, inference and the reports."""

import numpy as np
import pytest

import boldcast

RHO = 0.9


def ar1_runs(n_runs, n_tr=200, parcels=4, rho=RHO, seed=0):
    """`n_runs` runs of independent unit-variance AR(1) parcels, `(n_tr, parcels)` each."""
    rng = np.random.default_rng(seed)
    runs = []
    for _ in range(n_runs):
        x = np.empty((n_tr, parcels))
        x[0] = rng.standard_normal(parcels)
        noise = rng.standard_normal((n_tr, parcels)) * np.sqrt(1 - rho**2)
        for t in range(1, n_tr):
            x[t] = rho * x[t - 1] + noise[t]
        runs.append(x * 3.0 + 100.0)
    return runs


# A tiny run of the `quick` preset: validations and checkpoints every 5 steps.
QUICK = {"preset": "quick", "train": {"val_every": 5, "ckpt_every": 5, "warmup_steps": 2}}


@pytest.fixture(scope="session")
def dataset():
    """Four subjects with two runs each, 200 TRs of 4 parcels, TR 2 s."""
    subjects = ["01", "01", "02", "02", "03", "03", "04", "04"]
    return boldcast.Dataset.from_arrays(ar1_runs(8), subjects=subjects, tr=2.0)


@pytest.fixture(scope="session")
def trained(dataset, tmp_path_factory):
    """The dataset trained for 10 steps with subject 04 held out, and the steps the
    callback saw."""
    out = tmp_path_factory.mktemp("runs") / "quick"
    seen = []
    run = boldcast.train(QUICK, dataset, out=out, max_steps=10, heldout=["04"], callback=seen.append)
    return run, seen
