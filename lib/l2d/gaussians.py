"""Paper 2's mixture-of-Gaussians study (Sec. 5.1-5.3, Figure 1, top row): draws of the mixture
(:mod:`lib.l2d.gaussian_mixture`) and one cached run per (experiment, value, surrogate, seed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from lib.engine.cache import cached_run
from lib.l2d.experiment import SURROGATES, annotate, committee, point_config, train_and_score
from lib.l2d.gaussian_mixture import gaussian_mixture
from lib.validation import check_choice

GAUSSIAN_KEYS = ("n_train", "n_val", "n_test", "hidden", "epochs", "lr", "batch_size", "patience", "weight_decay")


def run_gaussian(experiment: str, value: float, surrogate: str, seed: int, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """One cached run: the 4-layer MLP trained with ``surrogate`` on the committee of
    (``experiment``, ``value``), and its test metrics."""
    from lib.nets.backbones import mlp

    check_choice(surrogate, SURROGATES, "surrogate")
    config = point_config(experiment, value, surrogate, seed, cfg, GAUSSIAN_KEYS)

    def compute(run: Any) -> dict[str, Any]:
        experts = committee(experiment, value, "gaussians", seed)
        # one draw of the mixture per seed, cut in order into train, validation and test
        x, y, _ = gaussian_mixture(cfg["n_train"] + cfg["n_val"] + cfg["n_test"], seed=seed)
        ends = np.cumsum([0, cfg["n_train"], cfg["n_val"], cfg["n_test"]])
        offsets = (0, 10**6, 2 * 10**6)
        splits = [annotate(x[a:b], y[a:b], experts, o) for a, b, o in zip(ends[:-1], ends[1:], offsets)]
        torch.manual_seed(seed)
        model = mlp(2, tuple(cfg["hidden"]), num_classes=4 + len(experts))
        return train_and_score(model, splits, surrogate, cfg, seed)

    return cached_run("l2d_gaussians", config, compute)
