"""The CIFAR-10 page of paper 2 (``notebooks/l2d_cifar10.py``): Figure 1, bottom row; Figure 2: one
:func:`lib.l2d.cifar10.run_cifar` per point of three sweeps (WRN-28-4, three seeds at paper scale),
the claims gated against :data:`CIFAR_REFERENCE_ACCURACY` (:func:`lib.l2d.results.gated_claims`). The
notebook calls the plain functions below on the runs' table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from lib.config import paper_numbers
from lib.engine.plan import Item
from lib.l2d.cifar10 import CIFAR_KEYS, run_cifar
from lib.l2d.experiment import EXPERIMENTS, SURROGATES, SWEEPS, point_config
from lib.l2d.pages import L2DPage
from lib.l2d.results import pick
from lib.nets import image_training

CIFAR_REFERENCE_ACCURACY: float = 0.90
"""The floor's reference accuracy, **our choice** (the paper states none for its WRN-28-4), below wide
ResNets' 95-96% on CIFAR-10 (Zagoruyko and Komodakis 2016)."""

SWEEP_METRICS: dict[str, str] = {"experts": "ece", "dependence": "ece_random_expert", "specialized": "ece"}
"""The ECE each CIFAR-10 sweep reports -- the experts' mean, or the random expert's under dependence."""

PAPER_CIFAR: tuple[tuple[str, str, str, str, str], ...] = tuple(
    map(tuple, paper_numbers("l2d")["l2d_cifar10"]["cifar"])
)
"""What the paper's CIFAR-10 plots show (quoted; ``lib/l2d/paper.toml``) -- (quantity, paper, experiment,
metric, surrogate). For Fig. 1f the authors' repository (rajevv/Multi_L2D,
``CIFAR-10/results/paper_results.py``, function ``increase_confidence_calibration_random``) hard-codes the
random expert's softmax ECE at 0.013-0.024 over p = 0.2-0.95, far below the text's "above 40%"."""


def scale_line(cfg: Mapping[str, Any]) -> str:
    """The page's scale line: what the plan at the settings ``cfg`` runs, on what."""
    heads = "L2D heads (K+J outputs) on the features of {} training images, early stopping (patience "
    network = f"SGD lr {cfg['lr']} Nesterov, cosine, {cfg['epochs']} epochs, best validation surrogate loss"
    seeds = f"{cfg['seeds']} seed{'s' if int(cfg['seeds']) != 1 else ''}"
    return image_training.scale_line(cfg, heads + f"{cfg['patience']})", network, seeds)


def sweep_ends(summary: pd.DataFrame, cfg: Mapping[str, Any]) -> dict[str, float]:
    """The page's published means (:func:`lib.l2d.results.summarize`'s ``summary``): per surrogate and
    sweep, the sweep's ECE (:data:`SWEEP_METRICS`) at its lowest and highest value and the system
    accuracy at its highest."""
    ends = {}
    for s in SURROGATES:
        for exp, values in ((e, cfg[key]) for e, key in SWEEPS.items()):
            metric = SWEEP_METRICS[exp]
            ends[f"cifar_{exp}_{metric}_{s}_lo"] = pick(summary, exp, min(values), s, metric)
            ends[f"cifar_{exp}_{metric}_{s}_hi"] = pick(summary, exp, max(values), s, metric)
            ends[f"cifar_{exp}_acc_{s}_hi"] = pick(summary, exp, max(values), s, "system_accuracy")
    return ends


def paper_table(ends: Mapping[str, float], cfg: Mapping[str, Any]) -> pd.DataFrame:
    """:data:`PAPER_CIFAR` (the quantity over the paper's sweep) beside our sweep ends
    (:func:`sweep_ends`) over the sweep of the settings ``cfg``, named in ``ours``."""
    rows = []
    for q, paper, e, m, s in PAPER_CIFAR:
        lo, hi = min(cfg[SWEEPS[e]]), max(cfg[SWEEPS[e]])
        ours = f"{ends[f'cifar_{e}_{m}_{s}_lo']:.3f} -> {ends[f'cifar_{e}_{m}_{s}_hi']:.3f} ({lo:g} -> {hi:g})"
        rows.append({"quantity (paper's sweep)": q, "paper": paper, "ours (our sweep)": ours})
    return pd.DataFrame(rows)


class L2DCifar10Page(L2DPage):
    name = "l2d_cifar10"
    paper = "l2d"
    title = "CIFAR-10 with synthetic experts: Figure 1, bottom row; Figure 2"
    rank = 4
    experiments = EXPERIMENTS

    def config(self, point: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, Any]:
        return point_config(**point, cfg=cfg, keys=CIFAR_KEYS)

    data = image_training.page_data

    def run_one(self, item: Item, cfg: Mapping[str, Any], data: Any) -> dict[str, Any]:
        p = item.extra["point"]
        return run_cifar(p["experiment"], p["value"], p["surrogate"], int(p["seed"]), cfg, data)


PAGE = L2DCifar10Page()
