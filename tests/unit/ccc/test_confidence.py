"""lib.ccc.confidence: calibrated top-1 confidences that recover known temperatures and Platt curves."""

from __future__ import annotations

import numpy as np
import pytest

from lib.ccc import confidence as C


def test_temperature_calibrator_recovers_known_temperature():
    """Logits kappa * (m x) with x ~ m 1[y] + N(0, 1) are calibrated at T = kappa."""
    rng = np.random.default_rng(1)
    n, m, kappa = 20000, 1.5, 2.5
    y = rng.integers(0, 4, n)
    z = kappa * m * (m * np.eye(4)[y] + rng.standard_normal((n, 4)))
    conf_fn = C.fit_confidence("temperature", z, y)
    zz = z[:3]
    e = np.exp(zz / kappa - (zz / kappa).max(1, keepdims=True))
    np.testing.assert_allclose(conf_fn(zz), (e / e.sum(1, keepdims=True)).max(1), rtol=0.03)
    # Every calibrator keeps confidences in [0, 1]; none needs labels at prediction time.
    for name in C.CALIBRATORS:
        c = C.fit_confidence(name, z, y)(z)
        assert c.shape == (n,) and c.min() >= 0 and c.max() <= 1


def test_input_validation_names_arguments():
    with pytest.raises(ValueError, match="name"):
        C.fit_confidence("isotonic", np.zeros((4, 2)), np.array([0, 1, 0, 1]))
    conf = C.fit_confidence("temperature", np.eye(2)[[0, 1, 0, 1]] * 2.0, np.array([0, 1, 0, 1]))
    for bad in (np.zeros((3, 3)), np.zeros(3), np.array([[np.nan, 0.0]])):  # classes, shape, NaN
        with pytest.raises(ValueError, match="^logits"):
            conf(bad)


# --- Platt scaling on the renormalised answer's log-odds (paper 3, section 2.1) ---------------


def test_platt_fits_the_renormalised_answer_log_odds():
    """Correctness drawn as Bernoulli(sigmoid(a s + b)) with s the log-odds of the top-1 probability
    over the options: the "platt" calibrator recovers that curve, and a question's offset (the same
    constant added to all of its option logits, which the renormalisation removes) changes nothing."""
    rng = np.random.default_rng(5)
    n, a, b = 40000, 0.8, 0.5
    z = rng.normal(0.0, 2.0, (n, 4)) + rng.uniform(2.0, 12.0, (n, 1))  # raw logits with an offset
    p = np.exp(z - z.max(1, keepdims=True))
    top = p.max(1) / p.sum(1)
    s = np.log(top) - np.log1p(-top)
    correct = rng.random(n) < 1 / (1 + np.exp(-(a * s + b)))
    y = np.where(correct, z.argmax(1), (z.argmax(1) + rng.integers(1, 4, n)) % 4)
    conf = C.fit_confidence("platt", z, y)
    probe = np.array([[5.0, 0, 0, 0], [8.0, 7.9, 0, 0], [11.0, 3, 2, 1]])
    pt = np.exp(probe).max(1) / np.exp(probe).sum(1)
    np.testing.assert_allclose(conf(probe), 1 / (1 + np.exp(-(a * np.log(pt / (1 - pt)) + b))), atol=0.02)
    np.testing.assert_allclose(conf(probe + np.array([[3.0], [-7.0], [20.0]])), conf(probe))


def test_platt_logodds_and_histogram_by_hand():
    """platt on the predicted class's log-odds s = u (logits [u, 0]): at u = 1 right 2 times
    in 4, at u = 2 right 3 in 4, so the fit is exactly sigma(ln 3 s - ln 3) and gives 0.9 at s = 3.
    histogram with 2 equal-count bins on confidences sigma(0.5, 1, 2, 3): the lower bin is right 1 in
    2, the upper 2 in 2, so a confidence of 0.5 maps to 0.5 and one of sigma(5) to 1."""
    u = np.repeat([1.0, 2.0], 4)
    f = C.fit_confidence("platt", np.stack([u, 0 * u], 1), np.array([0, 0, 1, 1, 0, 0, 0, 1]))
    assert f(np.array([[3.0, 0.0]])) == pytest.approx([0.9], rel=1e-4)
    u = np.array([0.5, 1.0, 2.0, 3.0])
    f = C.fit_confidence("histogram", np.stack([u, 0 * u], 1), np.array([1, 0, 0, 0]), n_bins=2)
    assert f(np.array([[0.0, 0.0], [5.0, 0.0]])) == pytest.approx([0.5, 1.0])
