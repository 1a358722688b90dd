"""lib.ccc.same_size_routing on a hand-built pair whose routing is perfect."""

from __future__ import annotations

import numpy as np
import pytest

from lib.ccc.confidence import ModelOutputs
from lib.ccc.same_size_routing import same_size_route


def outputs(conf_cal, correct_cal, conf_test=None, correct_test=None) -> ModelOutputs:
    conf_test = conf_cal if conf_test is None else conf_test
    correct_test = correct_cal if correct_test is None else correct_test
    return ModelOutputs(
        np.asarray(conf_cal, float),
        np.asarray(correct_cal, bool),
        np.asarray(conf_test, float),
        np.asarray(correct_test, bool),
    )


def test_same_size_routing_picks_the_better_model_per_bin():
    """Model 1 right on its confident half, model 2 right on the other half: routing is perfect."""
    n = 200
    conf1 = (np.arange(n) + 0.5) / n
    high = conf1 > 0.5
    first = outputs(np.where(high, 0.9 + 0.05 * conf1, 0.3 * conf1), high)
    second = outputs(np.where(high, 0.2, 0.9), ~high)
    res = same_size_route(first, second, n_bins=4)
    assert res.accuracy == pytest.approx(1.0)
    assert res.acc_first == pytest.approx(0.5) and res.acc_second == pytest.approx(0.5)
    assert res.frac_second == pytest.approx(0.5)
    assert res.gain == pytest.approx(0.5)
