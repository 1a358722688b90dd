"""Shared builders of the unit tests: small hand-made runs whose verdicts are known by construction."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest


def _moe_frame(values: dict[str, dict[str, list[float]]]) -> pd.DataFrame:
    """values[method][metric] = per-seed values on the hard subset (the all subset gets the same)."""
    rows = []
    for method, metrics in values.items():
        n = len(next(iter(metrics.values())))
        for s in range(n):
            for subset in ("all", "hard"):
                rows.append({"method": method, "seed": s, "subset": subset, **{k: v[s] for k, v in metrics.items()}})
    return pd.DataFrame(rows)


@pytest.fixture()
def moe_frame() -> Callable[[dict[str, dict[str, list[float]]]], pd.DataFrame]:
    """Paper-1 result rows (lib.moe.tables.results_frame's shape) from per-seed values."""
    return _moe_frame


ROBUST_WINS: dict[str, dict[str, list[float]]] = {
    "single": {"accuracy": [0.90, 0.91], "ece": [0.20, 0.21], "ece_ts": [0.15, 0.16]},
    "vanilla": {"accuracy": [0.90, 0.91], "ece": [0.20, 0.21], "ece_ts": [0.15, 0.16]},
    "mocae": {"accuracy": [0.90, 0.91], "ece": [0.19, 0.20], "ece_ts": [0.15, 0.15]},
    "fgr": {"accuracy": [0.90, 0.90], "ece": [0.22, 0.22], "ece_ts": [0.16, 0.16]},
    "robust": {"accuracy": [0.85, 0.86], "ece": [0.05, 0.06], "ece_ts": [0.05, 0.06]},
    "robust_filtered": {"accuracy": [0.89, 0.90], "ece": [0.07, 0.07], "ece_ts": [0.07, 0.07]},
    "fgr_robust": {"accuracy": [0.88, 0.88], "ece": [0.06, 0.07], "ece_ts": [0.06, 0.06]},
}
"""Two seeds of paper-1 runs in which the robust methods clearly win on ECE (the paper's claims hold)."""


@pytest.fixture()
def robust_wins_frame() -> pd.DataFrame:
    """The per-seed rows of :data:`ROBUST_WINS` (lib.moe.tables.results_frame's shape)."""
    return _moe_frame(ROBUST_WINS)


@pytest.fixture()
def robust_wins_summary() -> pd.DataFrame:
    """:data:`ROBUST_WINS` summarised (lib.moe.tables.summarize)."""
    from lib.moe import tables as moe_tables

    return moe_tables.summarize(_moe_frame(ROBUST_WINS))


def _l2d_fake_runs(softmax_slope: float, ova_slope: float, acc_gap: float) -> pd.DataFrame:
    rows = []
    rng = np.random.default_rng(0)
    for seed in range(4):
        for j in (1, 4, 8):
            for s, slope in (("softmax", softmax_slope), ("ova", ova_slope)):
                rows.append(
                    {
                        "experiment": "experts",
                        "value": j,
                        "surrogate": s,
                        "seed": seed,
                        "ece": 0.05 + slope * j + 0.001 * rng.standard_normal(),
                        "system_accuracy": 0.9 + (acc_gap if s == "ova" else 0.0),
                        "ece_random_expert": 0.05,
                    }
                )
        for p in (0.2, 0.95):
            for s, rise in (("softmax", softmax_slope * 20), ("ova", ova_slope * 20)):
                rows.append(
                    {
                        "experiment": "dependence",
                        "value": p,
                        "surrogate": s,
                        "seed": seed,
                        "ece": 0.05,
                        "system_accuracy": 0.9 + (acc_gap if s == "ova" else 0.0),
                        "ece_random_expert": 0.05 + rise * p + 0.001 * rng.standard_normal(),
                    }
                )
    return pd.DataFrame(rows)


@pytest.fixture()
def l2d_fake_runs() -> Callable[[float, float, float], pd.DataFrame]:
    """Runs of the two L2D sweeps (lib.l2d.results' shape): expert ECE rising with the
    number of experts at ``softmax_slope`` / ``ova_slope``, OvA ``acc_gap`` more accurate."""
    return _l2d_fake_runs


@pytest.fixture(scope="session")
def tiny_image_cfg() -> Mapping[str, Any]:
    """Settings of a seconds-long end-to-end image run (tiny CNN, synthetic 8 px images); read-only
    (shared by the session: copy it with ``dict(...)`` to change a setting)."""
    return MappingProxyType(
        {
            "data": "synthetic",
            "n_train": 64,
            "n_val": 32,
            "n_test": 32,
            "image_size": 8,
            "mode": "end_to_end",
            "arch": "tiny_cnn",
            "width": 4,
            "epochs": 1,
            "lr": 0.05,
            "weight_decay": 5e-4,
            "batch_size": 32,
            "milestones": [60],
            "warmup": 0,
            "head_hidden": 0,
            "head_epochs": 0,
            "head_lr": 0.0,
            "backbone_epochs": 0,
            "n_backbone": 0,
            "coverage": 0.8,
            "nu": 0.1,
            "n_bins": 15,
            "threads": 1,
        }
    )


def _natural_images(b: int = 4, h: int = 32, w: int = 32, seed: int = 0) -> Any:
    """Natural-ish test images in [0, 255], float64 (B, 3, H, W): smooth gradients plus pixel noise."""
    import torch

    g = torch.Generator().manual_seed(seed)
    yy = torch.linspace(0, 1, h)[:, None]
    xx = torch.linspace(0, 1, w)[None, :]
    base = 128 + 80 * torch.sin(5 * xx + 3 * yy)
    img = base.expand(b, 3, h, w) + 40 * torch.randn(b, 3, h, w, generator=g)
    return img.clamp(0, 255).double()


@pytest.fixture()
def natural_images() -> Callable[..., Any]:
    """Builder of test images for the JPEG filter and FGR: natural_images(b, h, w, seed)."""
    return _natural_images


def _executed_notebook(path: Path, values: Mapping[str, Any]) -> None:
    """Write at ``path`` a notebook whose outputs carry ``values`` as myst_nb glue does (scrapbook
    metadata), as an executed page's published values are read back."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("glue")
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data", data={"text/plain": repr(v)}, metadata={"scrapbook": {"name": k, "mime_prefix": ""}}
        )
        for k, v in values.items()
    ]
    nb.cells.append(cell)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))


@pytest.fixture()
def executed_notebook() -> Callable[[Path, Mapping[str, Any]], None]:
    """Writes an executed page that published the given values (:func:`_executed_notebook`)."""
    return _executed_notebook
