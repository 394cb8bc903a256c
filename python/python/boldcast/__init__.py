"""boldcast: state-space (Mamba) forecasters of fMRI BOLD time series, from Python.

The names here wrap the Rust library (``boldcast._native``): numpy arrays go in and out,
long calls release the GIL, and every library error is a :class:`BoldcastError` carrying the
library's message.

Shapes (``P`` parcels, ``T`` TRs, ``H`` horizons, ``D`` = ``model.d_in`` TRs per token,
``M`` = ``model.d_model``):

- a run is a 2-D float array ``(T, P)``;
- :meth:`Model.forecast` gives ``(T // D, H, D, P)``: ``[i, h, j, p]`` forecasts TR
  ``i*D + D - 1 + (horizons[h] - 1)*D + j + 1`` of parcel ``p``, having seen TRs up to
  ``i*D + D - 1``;
- :meth:`Model.embed` gives ``(T // D, P, M)``.

Example::

    import boldcast
    ds = boldcast.Dataset.from_arrays(runs, subjects=["01", "01", "02", "03"], tr=0.72)
    run = boldcast.train("quick", ds, out="runs/py", heldout=["03"])
    report = boldcast.evaluate(run.model(), ds)
    print(report.to_frame())
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from . import _native

__all__ = [
    "BoldcastError",
    "Dataset",
    "Model",
    "Report",
    "Run",
    "__version__",
    "evaluate",
    "fingerprint",
    "floor",
    "load",
    "resolve_config",
    "train",
]

#: The package's version (the Rust crates' version).
__version__: str = _native.__version__

PathLike = Union[str, "os.PathLike[str]"]


class BoldcastError(RuntimeError, ValueError):
    """An error of the boldcast library: bad data, a bad configuration or option, weights
    that do not fit. The message is the library's (it names the file, field or value at
    fault). A subclass of both ``RuntimeError`` and ``ValueError``."""


def _json(value: Any) -> str:
    """``value`` as JSON, paths as strings."""
    return json.dumps(value, default=os.fspath)


class Report(dict):
    """A report as a dict: exactly the JSON that the command line's ``--json`` prints
    (``bc-cli eval --json``, ``fingerprint --json``, ``floor --json``), parsed.

    :meth:`to_frame` gives a pandas DataFrame view when pandas is installed.
    """

    kind: str = ""

    def to_frame(self) -> Any:
        """The report's main table as a ``pandas.DataFrame``.

        - ``evaluate``: one row per model or baseline (``rows``) and floor (``floors``), one
          column per horizon (``h1``, ``h5``, ...: horizons in tokens; MSE on standardized
          data), ``mean``, ``r2`` (pooled R^2; none for floors) and ``kind``
          (``forecaster`` or ``floor``);
        - ``fingerprint``: one row per method (``embedding``, ``fc``): ``top1``, ``top5``
          (identification accuracy) with ``_lo``/``_hi`` (95 % Clopper-Pearson) and
          ``_chance``, ``idiff``, ``margin_mean``, ``n_queries``, ``n_subjects``;
        - ``floor``: one row per horizon (``horizon``, ``floor``, ``seconds`` when the TR is
          known).

        Raises ``ImportError`` when pandas is not installed.
        """
        import pandas as pd

        if self.kind == "evaluate":
            return _eval_frame(self, pd)
        if self.kind == "fingerprint":
            return _fingerprint_frame(self, pd)
        if self.kind == "floor":
            frame = pd.DataFrame({"horizon": self["horizons"], "floor": self["per_horizon"]})
            if self.get("horizon_seconds"):
                frame["seconds"] = [s if not isinstance(s, list) else s[-1] for s in self["horizon_seconds"]]
            return frame
        raise ValueError(f"no table view for a {self.kind or 'plain'} report")


def _eval_frame(report: Mapping[str, Any], pd: Any) -> Any:
    """The eval table: the model, the baselines and the floors by horizon, with R^2."""
    r2 = {e["name"]: e.get("pooled") for e in report.get("r_squared") or [] if isinstance(e, dict)}
    records = []
    for kind, rows in (("forecaster", report["rows"]), ("floor", report.get("floors") or [])):
        for row in rows:
            rec: Dict[str, Any] = {"name": row["name"]}
            for h, v in zip(report["horizons"], row["per_horizon"]):
                rec[f"h{h}"] = v
            rec["mean"] = row.get("mean", float(np.mean(row["per_horizon"])))
            rec["r2"] = r2.get(row["name"])
            rec["kind"] = kind
            records.append(rec)
    return pd.DataFrame.from_records(records).set_index("name")


def _fingerprint_frame(report: Mapping[str, Any], pd: Any) -> Any:
    """One row per method: top-1 and top-5 accuracy with their Clopper-Pearson intervals and
    chance levels, and the separation of same- and other-subject similarities."""
    records = []
    for m in report.get("methods") or []:
        rec: Dict[str, Any] = {"name": m["name"], "n_queries": m["n_queries"], "n_subjects": m["n_subjects"]}
        for k in ("top1", "top5"):
            acc = m[k]
            rec[k] = acc["value"]
            rec[f"{k}_lo"], rec[f"{k}_hi"] = acc["clopper_pearson"]["lo"], acc["clopper_pearson"]["hi"]
            rec[f"{k}_chance"] = acc["chance"]
        sep = m.get("separation") or {}
        rec["idiff"], rec["margin_mean"] = sep.get("idiff"), sep.get("margin_mean")
        records.append(rec)
    return pd.DataFrame.from_records(records).set_index("name")


def _report(text: str, kind: str) -> Report:
    r = Report(json.loads(text))
    r.kind = kind
    return r


class Dataset:
    """A set of BOLD runs with the same parcels: from numpy arrays (:meth:`from_arrays`) or
    from a directory the loader reads (:meth:`from_dir`).

    Attributes: ``len(ds)`` (runs), :attr:`subjects`, :attr:`run_subjects`,
    :attr:`run_ids`, :attr:`parcel_names`, :attr:`tr` (seconds or ``None``), :attr:`runs`
    (the standardized runs, each ``(T, P)``), :attr:`notes` (what the loader noted).
    """

    def __init__(self, native: Any) -> None:
        """Wraps a native dataset; use :meth:`from_arrays` or :meth:`from_dir`."""
        self._native = native

    @classmethod
    def from_arrays(
        cls,
        runs: Sequence[Any],
        subjects: Sequence[str],
        tr: Optional[float] = None,
        parcel_names: Optional[Sequence[str]] = None,
        **options: Any,
    ) -> "Dataset":
        """A dataset of ``runs``: 2-D float arrays ``(T, P)`` (TRs by parcels, e.g.
        ``NiftiLabelsMasker.fit_transform``'s output), one subject label per run
        (``"01"`` or ``"sub-01"``: ASCII letters and digits; a subject's runs are numbered
        in the order given). ``tr`` is the repetition time in seconds (horizons are then
        also given in seconds); ``parcel_names`` names the columns (default
        ``parcel-000``, ...). ``options`` are loader options as in :meth:`from_dir`.

        The runs are written to a temporary directory in the loader's format (kept while
        the dataset lives) so that they go through the same loader as files do.
        """
        arrays = []
        for i, r in enumerate(runs):
            a = np.ascontiguousarray(np.asarray(r, dtype=np.float64))
            if a.ndim != 2:
                raise BoldcastError(f"runs[{i}]: a run is a 2-D array (TRs x parcels), got shape {a.shape}")
            arrays.append(a)
        data = dict(options)
        if tr is not None:
            data["tr"] = float(tr)
        names = None if parcel_names is None else [str(n) for n in parcel_names]
        return cls(_native.NativeDataset.from_arrays(arrays, [str(s) for s in subjects], names, _json(data)))

    @classmethod
    def from_dir(cls, path: PathLike, **options: Any) -> "Dataset":
        """The runs of the directory ``path`` (flat, or a BIDS derivatives tree): ``.npy``,
        ``.tsv``/``.csv`` (XCP-D), CIFTI, ... as ``bc-cli train --data`` reads them.

        ``options`` are the ``[data]`` keys of a run configuration, i.e. the loader's flags
        with underscores: ``task="rest"``, ``space=...``, ``seg=...``, ``atlas=...``,
        ``format="tsv"``, ``tr=0.72``, ``allow_mixed_tr=True``, ``cache="..."``,
        ``fd_max=0.5``, ... (every key of ``[data]``, including those added after this
        package was written). An unknown keyword is a :class:`BoldcastError` naming it.
        """
        data = dict(options)
        data["dir"] = os.fspath(path)
        return cls(_native.NativeDataset.open(_json(data)))

    def __len__(self) -> int:
        """The number of runs."""
        return len(self._native.run_ids)

    def __repr__(self) -> str:
        return (
            f"<boldcast.Dataset {len(self)} runs, {len(self.subjects)} subjects, "
            f"{len(self.parcel_names)} parcels, TR {self.tr}>"
        )

    @property
    def subjects(self) -> List[str]:
        """The distinct subject labels (without ``sub-``), sorted."""
        return sorted(set(self._native.run_subjects))

    @property
    def run_subjects(self) -> List[str]:
        """Each run's subject label, in run order."""
        return list(self._native.run_subjects)

    @property
    def run_ids(self) -> List[str]:
        """Each run's identity (``sub-01_run-1``...), in run order."""
        return list(self._native.run_ids)

    @property
    def parcel_names(self) -> List[str]:
        """The parcel names, in column order."""
        return list(self._native.parcel_names)

    @property
    def tr(self) -> Optional[float]:
        """The TR in seconds, or ``None`` when unknown."""
        return self._native.tr

    @property
    def notes(self) -> List[str]:
        """The loader's notes: ignored files, tables beside the runs, warnings."""
        return list(self._native.notes)

    @property
    def runs(self) -> List[np.ndarray]:
        """The runs as the model reads them: float64 ``(T, P)`` each, standardized per
        parcel (mean 0, standard deviation 1). :meth:`arrays` gives them in their units."""
        return self.arrays(standardized=True)

    def arrays(self, standardized: bool = False) -> List[np.ndarray]:
        """The runs as float64 ``(T, P)`` arrays, in their own units unless
        ``standardized``."""
        return list(self._native.arrays(standardized))

    @property
    def options(self) -> Dict[str, Any]:
        """The ``[data]`` keys this dataset sets (``dir`` and the loader options)."""
        return json.loads(self._native.data_json())


class Model:
    """A trained model, opened from its weights (see :func:`load`); runs on the CPU.

    The model uses the default context of ``bc-cli forecast``: each output sees the last
    training window of tokens (``window.window / d_in``).
    """

    def __init__(self, native: Any) -> None:
        """Wraps native weights; use :func:`load` or :meth:`Run.model`."""
        self._native = native

    def __repr__(self) -> str:
        return f"<boldcast.Model {self.weights}>"

    @property
    def weights(self) -> str:
        """The weights file (``.safetensors``)."""
        return self._native.weights

    @property
    def config(self) -> Dict[str, Any]:
        """The stored run configuration (``[data]``, ``[window]``, ``[model]``, ``[train]``)."""
        return json.loads(self._native.config_json())

    @property
    def horizons(self) -> List[int]:
        """The forecast horizons, in tokens."""
        return list(self.config["model"]["horizons"])

    @property
    def d_in(self) -> int:
        """TRs per token."""
        return int(self.config["model"]["d_in"])

    def forecast(self, run: Any, standardized: bool = False, mask_past_end: bool = True) -> np.ndarray:
        """Forecasts of every token of ``run`` (a 2-D array ``(T, P)``, the model's parcels):
        float32 ``(T // D, H, D, P)``. ``[i, h, j, p]`` is the forecast of TR
        ``i*D + D - 1 + (horizons[h] - 1)*D + j + 1`` of parcel ``p`` from TRs up to
        ``i*D + D - 1``. In ``run``'s units, or standardized per parcel when
        ``standardized``. Where that TR is past the run's end the value is NaN, as in the
        files of ``bc-cli forecast``; ``mask_past_end=False`` keeps those forecasts of TRs
        not yet seen (forecasting beyond the data)."""
        a = np.ascontiguousarray(np.asarray(run, dtype=np.float64))
        return self._native.forecast(a, standardized, mask_past_end)

    def embed(self, run: Any) -> np.ndarray:
        """The final-norm embeddings of every token of ``run`` (2-D ``(T, P)``): float32
        ``(T // D, P, M)``, ``M`` = ``d_model``."""
        a = np.ascontiguousarray(np.asarray(run, dtype=np.float64))
        return self._native.embed(a)


class Run:
    """A finished (or stopped) training run: its directory and summary.

    Attributes: :attr:`out` (the run directory), :attr:`summary` (``summary.json`` as a
    dict, empty when the run stopped before its end); :meth:`model` / :meth:`load` open
    its best weights.
    """

    def __init__(self, out: str) -> None:
        """The run in directory ``out``."""
        self.out = out

    def __repr__(self) -> str:
        return f"<boldcast.Run {self.out}>"

    @property
    def summary(self) -> Dict[str, Any]:
        """``summary.json``: the stop reason, steps, validation losses, floor, verdict."""
        path = os.path.join(self.out, "summary.json")
        if not os.path.exists(path):
            return {}
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    @property
    def log(self) -> List[Dict[str, Any]]:
        """``loss_log.jsonl``: one dict per record (steps, validations, events)."""
        with open(os.path.join(self.out, "loss_log.jsonl"), encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def model(self) -> Model:
        """The run's model (its best weights, else its newest checkpoint)."""
        return load(self.out)

    def load(self) -> Model:
        """Same as :meth:`model`."""
        return self.model()


ProgressCallback = Callable[[Dict[str, Any]], Any]


def resolve_config(preset_or_config: Union[str, PathLike, Mapping[str, Any]]) -> Dict[str, Any]:
    """The full run configuration of a preset name (``quick``, ``laptop``, ``cpu-demo``,
    ``boldcast-demo``, ``fmri``), a TOML file's path, or a dict of the same keys as that
    file (any subset, over its ``preset`` key, else ``laptop``), as a dict."""
    kind, source = _config_source(preset_or_config)
    return json.loads(_native.resolve_config(kind, source))


def _config_source(c: Union[str, PathLike, Mapping[str, Any]]) -> "tuple[str, str]":
    """``(kind, source)`` of a configuration: a dict, a path (a ``PathLike``, or text with a
    path separator or ending in ``.toml``) or a preset's name."""
    if isinstance(c, Mapping):
        return "json", _json(dict(c))
    if not isinstance(c, str):
        return "path", os.fspath(c)
    if c.endswith(".toml") or os.path.sep in c:
        return "path", c
    return "preset", c


def train(
    preset_or_config: Union[str, PathLike, Mapping[str, Any]],
    dataset: Dataset,
    out: PathLike,
    max_steps: Optional[int] = None,
    heldout: Optional[Sequence[str]] = None,
    callback: Optional[ProgressCallback] = None,
    backend: Optional[str] = None,
) -> Run:
    """Trains a model on ``dataset`` into the new (or empty) directory ``out``, as
    ``bc-cli train`` does, and returns the :class:`Run`.

    ``preset_or_config``: a preset name, a TOML configuration file's path, or a dict of the
    same keys (see :func:`resolve_config`); ``dataset``'s loader options go into its
    ``[data]`` table. ``max_steps`` replaces ``train.max_steps``; ``heldout`` lists the
    subjects held out for validation (default: as the configuration says, e.g. the last
    ``val_subjects``); ``backend`` replaces ``train.backend`` (``cpu``, ``dfdx-cpu``,
    ``cuda``...; this package is built with the CPU backends).

    ``callback(progress)`` is called after every step with ``{"kind": "train", "step": k,
    "total": max_steps, "loss", "lr", "grad_norm"}`` (``k`` steps done, 1 to ``total``) and
    after every validation with ``{"kind": "validation", "step", "total", "val_loss",
    "val_per_horizon", "floor", "train_loss"}``. Training runs with the GIL released; the
    callback runs with it held, so it may update a ``tqdm`` bar. Ctrl-C (or an exception
    raised by the callback) stops the run cleanly after the current step, with a
    checkpoint written, and is raised here.
    """
    kind, source = _config_source(preset_or_config)
    steps = None if max_steps is None else int(max_steps)
    held = None if heldout is None else [str(h) for h in heldout]
    path = _native.train(kind, source, dataset._native, os.fspath(out), steps, held, callback, backend)
    return Run(path)


def load(run_dir_or_checkpoint: PathLike) -> Model:
    """Opens a trained model: a run directory (its ``best.safetensors``, else its newest
    checkpoint), a checkpoint directory, or a ``.safetensors`` file written by a run."""
    return Model(_native.NativeModel.open(os.fspath(run_dir_or_checkpoint)))


def evaluate(model: Union[Model, Run, PathLike], dataset: Dataset, allow_other_data: bool = False) -> Report:
    """Evaluates ``model`` beside the linear baselines on ``dataset``'s held-out subjects (the
    run's split), exactly as ``bc-cli eval --json``: the :class:`Report` has ``horizons``,
    ``rows`` (``name``, ``per_horizon`` MSE on standardized data), ``floors``,
    ``r_squared``, ``bootstrap``, ``improvement``, ``heldout_subjects``, ``warnings``, ...
    ``report.to_frame()`` is the eval table as a DataFrame (pandas).

    ``allow_other_data`` evaluates on data other than the training data with a warning
    instead of an error."""
    m = _model(model)
    return _report(_native.evaluate(m._native, dataset._native, allow_other_data), "evaluate")


def fingerprint(
    model: Union[Model, Run, PathLike],
    dataset: Dataset,
    pool: str = "corr",
    segment: Optional[int] = None,
    allow_other_data: bool = False,
) -> Report:
    """Identifies the subjects of ``dataset`` from ``model``'s embeddings and from functional
    connectivity, as ``bc-cli fingerprint --json``: the :class:`Report` has ``methods`` (each
    with its identification accuracy and statistics), the similarity matrices and the
    paired test. ``pool`` is ``corr`` or ``mean``; ``segment`` compares each run's first
    ``segment`` TRs (default: whole runs when a subject has two, else half runs)."""
    m = _model(model)
    text = _native.fingerprint(m._native, dataset._native, pool, segment, allow_other_data)
    return _report(text, "fingerprint")


def floor(dataset: Dataset, horizons: Sequence[int] = (1, 5), d_in: int = 1) -> Report:
    """The empirical single-lag floor of ``dataset`` (``1 - acf(L)^2`` per parcel, averaged),
    as ``bc-cli floor --data DIR --json``: ``overall``, ``per_horizon``, ``per_parcel``,
    ``horizons`` (tokens of ``d_in`` TRs), ``horizon_seconds`` when the TR is known, the
    ``input_spectrum`` check."""
    text = _native.floor(dataset._native, [int(h) for h in horizons], int(d_in))
    return _report(text, "floor")


def _model(m: Union[Model, Run, PathLike]) -> Model:
    if isinstance(m, Model):
        return m
    if isinstance(m, Run):
        return m.model()
    return load(m)
