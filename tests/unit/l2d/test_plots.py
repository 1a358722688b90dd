"""Tests of lib.l2d.plots (paper 2's figures): the charts hold the data they are given and reject bad input."""

from __future__ import annotations

import numpy as np
import pytest

from lib.l2d import gaussian_mixture as gm
from lib.l2d import plots as l2d_plots
from lib.l2d import results as l2d_results


def test_paper2_plot_helpers(l2d_fake_runs):
    x, _, cluster = gm.gaussian_mixture(50, seed=0)
    chart = l2d_plots.gaussian_scatter(x, cluster, gm.GAUSSIAN_MEANS)
    assert len(chart.layer[0].data) == 50 and len(chart.layer[1].data) == 4
    with pytest.raises(ValueError, match="x"):
        l2d_plots.gaussian_scatter(np.zeros((5, 3)), np.zeros(5), gm.GAUSSIAN_MEANS)
    s = l2d_results.summarize(l2d_fake_runs(0.01, 0.0, 0.0), metrics=["ece", "system_accuracy"])
    assert len(l2d_plots.l2d_panels(s, [("experts", "ece", "J", "ECE")]).hconcat) == 1
    with pytest.raises(ValueError, match="summary"):
        l2d_plots.l2d_panels(s, [("specialized", "ece", "J", "ECE")])
