"""Experiment tracking read back by TensorBoard's own reader: the event files of a run
trained with `train.tensorboard` hold the log's losses at the log's steps."""

import os

import pytest
from tensorboard.backend.event_processing import event_accumulator

import boldcast
from conftest import QUICK


def test_tensorboard_event_files_equal_the_log(dataset, tmp_path):
    config = {**QUICK, "train": {**QUICK["train"], "tensorboard": True}}
    run = boldcast.train(config, dataset, out=tmp_path / "tb", max_steps=10, heldout=["04"])
    acc = event_accumulator.EventAccumulator(os.path.join(run.out, "tensorboard"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    want = {"train/loss", "train/lr", "train/grad_norm", "train/step_seconds", "validation/loss", "validation/floor"}
    assert want | {"validation/loss_h1", "validation/loss_h5"} <= tags

    def scalars(tag):
        return [(e.step, e.value) for e in acc.Scalars(tag)]

    train = [r for r in run.log if r["kind"] == "train"]
    val = [r for r in run.log if r["kind"] == "validation"]
    # Event files hold 32-bit floats.
    assert [s for s, _ in scalars("train/loss")] == [r["step"] for r in train] == list(range(1, 11))
    assert [v for _, v in scalars("train/loss")] == pytest.approx([r["loss"] for r in train], rel=1e-6)
    assert [v for _, v in scalars("train/lr")] == pytest.approx([r["lr"] for r in train], rel=1e-6)
    assert [s for s, _ in scalars("validation/loss")] == [0, 5, 10]
    assert [v for _, v in scalars("validation/loss")] == pytest.approx([r["val_loss"] for r in val], rel=1e-6)
    h5 = [r["val_per_horizon"][1] for r in val]
    assert [v for _, v in scalars("validation/loss_h5")] == pytest.approx(h5, rel=1e-6)
