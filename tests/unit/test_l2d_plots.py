"""Tests of lib.l2d_plots (paper 2's figures): the charts hold the data they are given and reject bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lib import gaussian_mixture as gm
from lib import l2d_plots
from lib.experiments import l2d_results


def _fake_runs(softmax_slope: float, ova_slope: float, acc_gap: float) -> pd.DataFrame:
    """Runs of the two L2D studies shaped like lib.experiments.l2d_results expects."""
    rows = []
    rng = np.random.default_rng(0)
    for seed in range(4):
        for j in (1, 4, 8):
            for s, slope in (("softmax", softmax_slope), ("ova", ova_slope)):
                rows.append({"experiment": "experts", "value": j, "surrogate": s, "seed": seed,
                             "ece": 0.05 + slope * j + 0.001 * rng.standard_normal(),
                             "system_accuracy": 0.9 + (acc_gap if s == "ova" else 0.0),
                             "ece_random_expert": 0.05})
        for p in (0.2, 0.95):
            for s, rise in (("softmax", softmax_slope * 20), ("ova", ova_slope * 20)):
                rows.append({"experiment": "dependence", "value": p, "surrogate": s, "seed": seed,
                             "ece": 0.05, "system_accuracy": 0.9 + (acc_gap if s == "ova" else 0.0),
                             "ece_random_expert": 0.05 + rise * p + 0.001 * rng.standard_normal()})
    return pd.DataFrame(rows)


def test_paper2_plot_helpers():
    x, _, cluster = gm.gaussian_mixture(50, seed=0)
    chart = l2d_plots.gaussian_scatter(x, cluster, gm.GAUSSIAN_MEANS)
    assert len(chart.layer[0].data) == 50 and len(chart.layer[1].data) == 4
    with pytest.raises(ValueError, match="x"):
        l2d_plots.gaussian_scatter(np.zeros((5, 3)), np.zeros(5))
    s = l2d_results.summarize(_fake_runs(0.01, 0.0, 0.0), metrics=["ece", "system_accuracy"])
    assert len(l2d_plots.l2d_panels(s, [("experts", "ece", "J", "ECE")]).hconcat) == 1
    with pytest.raises(ValueError, match="summary"):
        l2d_plots.l2d_panels(s, [("specialized", "ece", "J", "ECE")])
