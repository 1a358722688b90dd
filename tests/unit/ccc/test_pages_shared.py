"""lib.ccc.pages: the ECE noise bar and the released-runs note; lib.report.every, the "for every" verdict."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lib.calibration.metrics import binary_ece
from lib.ccc.pages import ece_se, released_runs_note
from lib.report import every
from lib.report import VERDICTS

HELD, FAILED, UNSURE = VERDICTS[:3]


def test_ece_se_is_half_over_root_n_and_bounds_the_spread_of_a_calibrated_models_ece():
    assert ece_se(10_000) == pytest.approx(0.005)
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.3, 1.0, 2000)  # calibrated: right with probability conf
    draws = [binary_ece(conf, rng.random(2000) < conf, 15, binning="mass") for _ in range(200)]
    assert np.std(draws) < ece_se(2000)
    for bad in (0, -3, 1.5, True):
        with pytest.raises(ValueError, match="n"):
            ece_se(bad)


def test_ece_se_at_an_accuracy_is_the_binomial_bound_and_still_bounds_the_spread():
    """At accuracy a the bar is sqrt(a (1 - a) / n): 0.95 on 5,000 gives 0.0031 (0.0071 at 0.5); a
    calibrated model of mean confidence 0.95 spreads its ECE less than that over 200 draws."""
    assert ece_se(5000, 0.95) == pytest.approx(math.sqrt(0.95 * 0.05 / 5000))
    assert ece_se(5000, 0.5) == ece_se(5000)
    rng = np.random.default_rng(1)
    conf = rng.uniform(0.9, 1.0, 5000)  # calibrated, accuracy ~0.95
    draws = [binary_ece(conf, rng.random(5000) < conf, 15, binning="mass") for _ in range(200)]
    assert np.std(draws) < ece_se(5000, float(conf.mean()))
    with pytest.raises(ValueError, match="accuracy"):
        ece_se(5000, 1.5)


def test_every_is_symmetric():
    assert every([HELD, HELD]) == HELD
    assert every([HELD, FAILED]) == FAILED and every([UNSURE, FAILED]) == FAILED
    assert every([HELD, UNSURE]) == UNSURE
    with pytest.raises(ValueError, match="verdicts"):
        every([])


def test_released_runs_note_names_the_xe_outlier_and_the_fl53_assumption():
    note = released_runs_note(["ce", "focal"], real=False)
    assert "outlier" in note and "FL-53" in note and "synthetic" in note
    assert "FL-53" not in released_runs_note(["ce", "dual_focal"], real=False)
    assert released_runs_note(["dual_focal"], real=False) == ""


def test_floored_verdict_takes_the_larger_of_the_splits_and_the_test_sets_noise():
    from lib.ccc.pages import floored_verdict

    # twenty splits agreeing to 0.001 would decide 0.01; the test set's own 0.01 (x 1.96) does not shrink
    assert floored_verdict(0.01, 0.001, 20, 0.0) == HELD
    assert floored_verdict(0.01, 0.001, 20, 0.01) == UNSURE
    assert floored_verdict(-0.03, 0.001, 20, 0.01) == FAILED
    # two splits: t(1) = 12.7 on the splits' SE dominates a small test-set SE
    assert floored_verdict(0.05, 0.005, 2, 0.001) == UNSURE and floored_verdict(0.07, 0.005, 2, 0.001) == HELD
    # one split: the test set's SE alone, at the normal's 1.96
    assert floored_verdict(0.03, None, 1, 0.01) == HELD and floored_verdict(0.019, None, 1, 0.01) == UNSURE
    with pytest.raises(ValueError, match="test_se"):
        floored_verdict(0.1, 0.01, 5, float("nan"))
