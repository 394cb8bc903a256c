"""Training, loading, inference and the reports of a trained model."""

import io
import json
import math
import os

import numpy as np
import pytest

import boldcast
from conftest import QUICK, ar1_runs


def test_train_writes_the_run_and_reports_every_step(trained):
    run, seen = trained
    steps = [p["step"] for p in seen if p["kind"] == "train"]
    assert steps == list(range(1, 11))
    assert all(p["total"] == 10 and math.isfinite(p["loss"]) for p in seen if p["kind"] == "train")
    vals = [p for p in seen if p["kind"] == "validation"]
    assert [v["step"] for v in vals] == [0, 5, 10]
    assert all(len(v["val_per_horizon"]) == 2 for v in vals)
    summary = run.summary
    assert summary["best"]["file"] == "best.safetensors" and 0 <= summary["best"]["step"] <= 10
    assert summary["final_val_loss"] == pytest.approx(vals[-1]["val_loss"], rel=1e-12)
    assert summary["horizons"] == [1, 5]
    assert os.path.isfile(os.path.join(run.out, "best.safetensors"))
    # The callback, the log and metrics.csv share one step numbering and the same losses.
    steps_logged = [rec for rec in run.log if rec["kind"] == "train"]
    assert [rec["step"] for rec in steps_logged] == steps
    assert [rec["loss"] for rec in steps_logged] == [p["loss"] for p in seen if p["kind"] == "train"]
    import pandas as pd

    m = pd.read_csv(os.path.join(run.out, "metrics.csv"))
    train_rows = m[m["kind"] == "train"]
    assert list(train_rows["step"]) == steps
    assert list(train_rows["loss"]) == [rec["loss"] for rec in steps_logged]
    assert list(m[m["kind"] == "validation"]["step"]) == [0, 5, 10]
    assert list(m.columns[-3:]) == ["val_loss_h1", "val_loss_h5", "floor"]


def test_model_forecast_and_embed_shapes(trained, dataset):
    run, _ = trained
    model = run.model()
    assert model.horizons == [1, 5] and model.d_in == 1
    x = dataset.arrays()[0]
    f = model.forecast(x)
    assert f.shape == (200, 2, 1, 4) and f.dtype == np.float32
    # Horizon 1 from token 199 and horizon 5 from tokens 195 on forecast TRs past the end.
    assert np.isfinite(f[:195]).all() and np.isfinite(f[:199, 0]).all()
    assert np.isnan(f[199, 0]).all() and np.isnan(f[195:, 1]).all()
    ahead = model.forecast(x, mask_past_end=False)
    assert np.isfinite(ahead).all()
    np.testing.assert_array_equal(ahead[:195], f[:195])
    z = model.forecast(x, standardized=True)
    # In the run's units: the standardized forecast scaled back by the run's own statistics.
    np.testing.assert_allclose(f[:199, 0, 0, :], z[:199, 0, 0, :] * x.std(axis=0) + x.mean(axis=0), rtol=1e-4)
    e = model.embed(x)
    assert e.shape == (200, 4, model.config["model"]["d_model"]) and np.isfinite(e).all()
    assert boldcast.load(model.weights).weights == model.weights


def test_evaluate_matches_the_cli_report(trained, dataset):
    run, _ = trained
    r = boldcast.evaluate(run, dataset)
    assert r["horizons"] == [1, 5] and r["heldout_subjects"] == ["04"]
    names = [row["name"] for row in r["rows"]]
    assert names[:3] == ["model", "zero", "last_token"], names
    for row in r["rows"]:
        assert len(row["per_horizon"]) == 2 and all(math.isfinite(v) and v > 0 for v in row["per_horizon"])
    assert r["tr_seconds"] == 2.0
    assert r["floors"][0]["name"] == "floor_empirical" and r["warnings"] == []
    frame = r.to_frame()
    assert list(frame.columns) == ["h1", "h5", "mean", "r2", "kind"]
    assert frame.loc["model", "h1"] == r["rows"][0]["per_horizon"][0]
    assert frame.loc["model", "r2"] == r["r_squared"][0]["pooled"]
    assert frame.loc["floor_empirical", "kind"] == "floor"


def test_fingerprint_report(trained, dataset):
    run, _ = trained
    r = boldcast.fingerprint(run.model(), dataset)
    assert [m["name"] for m in r["methods"]] == ["embedding", "fc"]
    assert r["samples"] == "whole runs"
    for m in r["methods"]:
        assert (m["n_queries"], m["n_subjects"]) == (8, 4)
        assert 0 <= m["top1"]["value"] <= m["top5"]["value"] <= 1
        assert m["top1"]["value"] == m["top1"]["correct"] / 8
    frame = r.to_frame()
    assert list(frame.index) == ["embedding", "fc"]
    assert frame.loc["fc", "top1"] == r["methods"][1]["top1"]["value"]
    assert frame.loc["fc", "top1_lo"] <= frame.loc["fc", "top1"] <= frame.loc["fc", "top1_hi"]


def test_callback_with_tqdm_and_a_stop(dataset, tmp_path):
    tqdm = pytest.importorskip("tqdm").tqdm
    bar = tqdm(total=6, file=io.StringIO())

    def update(p):
        if p["kind"] == "train":
            bar.update(p["step"] - bar.n)

    boldcast.train(QUICK, dataset, out=tmp_path / "a", max_steps=6, callback=update)
    assert bar.n == 6

    def stop(p):
        if p["kind"] == "train" and p["step"] == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        boldcast.train(QUICK, dataset, out=tmp_path / "b", max_steps=10, callback=stop)
    log = boldcast.Run(str(tmp_path / "b")).log
    assert log[-1].get("event") == "stopped" and log[-1]["reason"] == "stop_after"


def test_training_errors_are_exceptions(dataset, tmp_path):
    with pytest.raises(boldcast.BoldcastError, match="no-such-preset"):
        boldcast.train("no-such-preset", dataset, out=tmp_path / "x")
    with pytest.raises(boldcast.BoldcastError, match="lr"):
        boldcast.train({"preset": "quick", "train": {"lr": -1.0}}, dataset, out=tmp_path / "y")
    with pytest.raises(boldcast.BoldcastError, match="99"):
        boldcast.train("quick", dataset, out=tmp_path / "z", heldout=["99"])
    with pytest.raises(boldcast.BoldcastError, match="no such file"):
        boldcast.load(tmp_path / "nothing")


def test_resolve_config_and_version():
    cfg = boldcast.resolve_config({"preset": "quick", "train": {"max_steps": 7}})
    assert cfg["train"]["max_steps"] == 7 and cfg["model"]["horizons"] == [1, 5]
    assert boldcast.__version__.count(".") == 2


def test_a_toml_file_configures_the_run(dataset, tmp_path):
    toml = tmp_path / "tiny.toml"
    toml.write_text('preset = "quick"\n[train]\nmax_steps = 4\nval_every = 2\nckpt_every = 2\nwarmup_steps = 1\n')
    assert boldcast.resolve_config(toml)["train"]["max_steps"] == 4
    run = boldcast.train(str(toml), dataset, out=tmp_path / "run")
    assert run.summary["best"]["step"] <= 4
    assert [r["step"] for r in run.log if "val_loss" in r] == [0, 2, 4]


def test_ctrl_c_stops_training_cleanly(tmp_path):
    """SIGINT during training: the run stops after its step with a checkpoint, and Python sees
    KeyboardInterrupt."""
    import signal
    import subprocess
    import sys

    script = f"""
import sys, boldcast
from conftest import ar1_runs
ds = boldcast.Dataset.from_arrays(ar1_runs(4), subjects=["01", "02", "03", "04"])
cfg = {{"preset": "quick", "train": {{"val_every": 50, "ckpt_every": 50, "warmup_steps": 1}}}}
def cb(p):
    if p["kind"] == "train" and p["step"] == 2:
        print("training", flush=True)
try:
    boldcast.train(cfg, ds, out={str(tmp_path / "run")!r}, max_steps=100000, callback=cb)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""
    here = os.path.dirname(__file__)
    p = subprocess.Popen([sys.executable, "-c", script], cwd=here, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "training"
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    assert out.strip() == "interrupted" and p.returncode == 0
    log = boldcast.Run(str(tmp_path / "run")).log
    assert log[-1].get("event") == "stopped" and log[-1]["reason"] == "stop_after"
    assert os.path.isdir(tmp_path / "run" / "checkpoints")
