"""Routing between two models of the same size by their calibrated confidences (paper 3, section 3.3).

Paper: "When Models Know When They Do Not Know: Calibration, Cascading, and Cleaning"
(paper 3). Each test example goes to the model with the higher
mean calibrated confidence in its bin; the bins and the per-bin advantages are the cascade's
(:mod:`lib.ccc.cascade`), fitted on the calibration half only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lib.ccc.cascade import advantage_table, assign_bins, equal_count_bins
from lib.ccc.confidence import ModelOutputs
from lib.validation import check_bins, check_choice


@dataclass
class RouteResult:
    """Same-size routing: accuracy of the routed pair and of each model alone (test half)."""

    accuracy: float
    acc_first: float
    acc_second: float
    frac_second: float
    table: pd.DataFrame

    @property
    def gain(self) -> float:
        """Accuracy beyond the better of the two models."""
        return self.accuracy - max(self.acc_first, self.acc_second)


def same_size_route(first: ModelOutputs, second: ModelOutputs, n_bins: int = 15, binning: str = "first") -> RouteResult:
    """Route each test example to the model with the higher calibrated confidence in its bin.

    ``binning="first"``: B equal-count bins on the first model's calibrated confidence (the
    cascade's bins), route to the second model where its advantage a_b > 0. ``"joint"``: B x B
    cells (equal-count bins on each model's confidence), route per cell by the sign of the mean
    confidence difference. Advantages come from the calibration half only (paper 3, section 3.3).
    """
    n_bins = check_bins(n_bins)
    check_choice(binning, ("first", "joint"), "binning")
    e1 = equal_count_bins(first.conf_cal, n_bins)
    c_cal, c_test = assign_bins(first.conf_cal, e1), assign_bins(first.conf_test, e1)
    n_cells = n_bins
    if binning == "joint":
        e2 = equal_count_bins(second.conf_cal, n_bins)
        c_cal = c_cal * n_bins + assign_bins(second.conf_cal, e2)
        c_test = c_test * n_bins + assign_bins(second.conf_test, e2)
        n_cells = n_bins * n_bins
    table = advantage_table(c_cal, n_cells, first.conf_cal, second.conf_cal, first.correct_cal, second.correct_cal)
    adv = np.nan_to_num(table["advantage"].to_numpy(), nan=0.0)
    to_second = adv[c_test] > 0
    correct = np.where(to_second, second.correct_test, first.correct_test)
    table["test_count"] = np.bincount(c_test, minlength=n_cells)
    return RouteResult(float(correct.mean()), first.acc_test, second.acc_test, float(to_second.mean()), table)
