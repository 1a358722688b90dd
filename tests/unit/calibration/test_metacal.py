"""lib.calibration.metacal: Meta-Cal's two constraints hold on fresh data from the same law, the
accepted examples are temperature-scaled and the rejected ones uniform, and bad input is named."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import softmax
from scipy.stats import entropy

from lib.calibration.metacal import MetaCal, UnreachableLevel, fit_metacal


def _calibrated(n: int, seed: int, k: int = 10, scale: float = 3.0) -> tuple[np.ndarray, np.ndarray]:
    """Logits whose softmax is the true class law (labels drawn from it): calibrated by construction."""
    rng = np.random.default_rng(seed)
    z = scale * rng.standard_normal((n, k))
    p = softmax(z, axis=1)
    y = (p.cumsum(1) > rng.random((n, 1))).argmax(1)
    return z, y


def test_predict_tempers_the_accepted_examples_and_gives_the_rest_one_over_k() -> None:
    z = np.array([[4.0, 0.0, 0.0], [0.1, 0.0, 0.0]])  # one confident, one nearly uniform
    cal = MetaCal(threshold=0.5, temperature=2.0, constraint="miscoverage", level=0.05)
    h = entropy(softmax(z, axis=1), axis=1)
    assert h[0] < 0.5 <= h[1]
    p = cal.predict(z)
    np.testing.assert_allclose(p[0], softmax(z[0] / 2.0))
    np.testing.assert_allclose(p[1], [1 / 3] * 3)
    np.testing.assert_allclose(p.sum(1), 1.0)
    assert cal.accepted(z).tolist() == [True, False]


def test_miscoverage_rejects_about_alpha_of_the_correct_examples_on_fresh_data() -> None:
    z, y = _calibrated(20000, seed=0)
    cal = fit_metacal(z, y, "miscoverage", 0.1, seed=1)
    zt, yt = _calibrated(20000, seed=2)
    right = zt.argmax(1) == yt
    rejected = 1 - cal.accepted(zt)[right].mean()
    assert rejected == pytest.approx(0.1, abs=0.03)  # 500 ranked examples: the quantile's own noise
    assert cal.threshold in set(entropy(softmax(z, axis=1), axis=1)[z.argmax(1) == y])  # an observed entropy


def test_coverage_accuracy_keeps_examples_right_at_least_that_often_on_fresh_data() -> None:
    """The threshold is read at a bin's mean entropy, inside the bin whose running accuracy is the
    level, so the accepted examples are right at least about that often (conservative)."""
    z, y = _calibrated(20000, seed=3)
    cal = fit_metacal(z, y, "accuracy", 0.85, seed=4)
    zt, yt = _calibrated(20000, seed=5)
    keep = cal.accepted(zt)
    right = zt.argmax(1) == yt
    assert right.mean() < 0.7 and 0.2 < keep.mean() < 0.6  # a real cut, not everything or nothing
    assert right[keep].mean() > 0.85 - 0.02 and right[keep].mean() > right[~keep].mean() + 0.3


def test_calibrated_logits_keep_a_temperature_near_one() -> None:
    z, y = _calibrated(20000, seed=6)
    assert fit_metacal(z, y, "miscoverage", 0.05).temperature == pytest.approx(1.0, abs=0.1)
    hot = fit_metacal(2 * z, y, "miscoverage", 0.05).temperature  # overconfident by 2x
    assert hot == pytest.approx(2.0, rel=0.1)


def test_an_unreachable_coverage_accuracy_is_raised_step_by_step_until_reached() -> None:
    z, y = _calibrated(5000, seed=7)
    cal = fit_metacal(z, y, "accuracy", 0.2, seed=0, step=0.05)  # below every bin's running accuracy
    assert cal.level > 0.2 and round((cal.level - 0.2) / 0.05, 6).is_integer()
    weak = _calibrated(5000, seed=7, scale=0.5)  # about 0.19 accurate: no entropy bin is right 95% of the time
    with pytest.raises(UnreachableLevel, match="level: the coverage accuracy is out of reach"):
        fit_metacal(*weak, "accuracy", 0.95)  # above the curve: raising it never helps


def test_bad_input_is_named() -> None:
    z, y = _calibrated(1000, seed=8)
    with pytest.raises(ValueError, match="constraint"):
        fit_metacal(z, y, "coverage", 0.05)
    with pytest.raises(ValueError, match="level"):
        fit_metacal(z, y, "miscoverage", 1.5)
    with pytest.raises(ValueError, match="too few to rank"):
        fit_metacal(z[:50], y[:50], "accuracy", 0.9)
    with pytest.raises(ValueError, match="labels"):
        fit_metacal(z, y[:10], "miscoverage", 0.05)


def test_accuracy_threshold_by_hand() -> None:
    """Entropies k/40 (k = 1..40), right for k <= 20, 20 equal-mass bins (a, b]: bin 0 holds k = 2 only
    (the minimum falls in no bin, as in the released Meta-Cal code), bins 1-19 the pairs (3, 4) ...
    (39, 40). Running accuracy: 1 over bins 0-9 (mean entropies 2, 3.5, ..., 19.5 over 40, pooled by
    the isotonic fit to 10.55/40), then 10/11, 10/12, ... at entropies 21.5/40, 23.5/40, ... Read off
    linearly: level 0.9 lies 0.12 of the way from 10/11 to 10/12, so 0.5375 + 0.12 x 0.05 = 0.5435;
    level 0.75 lies 0.35 of the way from 10/13 to 10/14, so 0.6375 + 0.35 x 0.05 = 0.655."""
    from lib.calibration.metacal import _accuracy_threshold

    h, correct = np.arange(1, 41) / 40, np.arange(1, 41) <= 20
    assert _accuracy_threshold(h, correct, 0.9) == pytest.approx(0.5435, abs=1e-9)
    assert _accuracy_threshold(h, correct, 0.75) == pytest.approx(0.655, abs=1e-9)
