"""Type stubs of ``boldcast._native``, the Rust half of ``boldcast`` (use the public names
of ``boldcast`` instead; these take JSON text where the public ones take keywords)."""

from typing import Any, Callable, Dict, List, Optional

import numpy as np
import numpy.typing as npt

__version__: str

class NativeDataset:
    """A loaded dataset: its ``[data]`` keys and what loading said."""

    @staticmethod
    def open(data_json: str) -> "NativeDataset":
        """Loads ``data["dir"]`` with the other ``[data]`` keys of ``data_json``."""
    @staticmethod
    def from_arrays(
        runs: List[npt.NDArray[np.float64]],
        subjects: List[str],
        parcel_names: Optional[List[str]],
        data_json: str,
    ) -> "NativeDataset":
        """Writes the ``(T, P)`` runs to a temporary directory and loads it."""
    @property
    def run_ids(self) -> List[str]:
        """Run identities."""
    @property
    def run_subjects(self) -> List[str]:
        """Each run's subject label."""
    @property
    def parcel_names(self) -> List[str]:
        """Parcel names."""
    @property
    def tr(self) -> Optional[float]:
        """The TR in seconds."""
    @property
    def notes(self) -> List[str]:
        """The loader's notes."""
    @property
    def label(self) -> str:
        """Where the data came from."""
    def data_json(self) -> str:
        """The ``[data]`` keys as JSON."""
    def arrays(self, standardized: bool) -> List[npt.NDArray[np.float64]]:
        """The runs, ``(T, P)`` each."""

class NativeModel:
    """Opened weights and their stored configuration."""

    @staticmethod
    def open(path: str) -> "NativeModel":
        """Opens a run directory, checkpoint directory or ``.safetensors`` file."""
    @property
    def weights(self) -> str:
        """The weights file."""
    def config_json(self) -> str:
        """The stored configuration as JSON."""
    def forecast(
        self, array: npt.NDArray[np.float64], standardized: bool, mask_past_end: bool
    ) -> npt.NDArray[np.float32]:
        """``(T // D, H, D, P)`` forecasts, NaN past the array's end when ``mask_past_end``."""
    def embed(self, array: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
        """``(T // D, P, M)`` embeddings."""

def train(
    kind: str,
    source: str,
    dataset: NativeDataset,
    out: str,
    max_steps: Optional[int] = None,
    heldout: Optional[List[str]] = None,
    callback: Optional[Callable[[Dict[str, Any]], Any]] = None,
    backend: Optional[str] = None,
) -> str:
    """Trains; returns the run directory."""

def resolve_config(kind: str, source: str) -> str:
    """The resolved configuration as JSON."""

def evaluate(model: NativeModel, dataset: NativeDataset, allow_other_data: bool = False) -> str:
    """``bc-cli eval --json``."""

def fingerprint(
    model: NativeModel,
    dataset: NativeDataset,
    pool: str = "corr",
    segment: Optional[int] = None,
    allow_other_data: bool = False,
) -> str:
    """``bc-cli fingerprint --json``."""

def floor(dataset: NativeDataset, horizons: List[int], d_in: int) -> str:
    """``bc-cli floor --data --json``."""
