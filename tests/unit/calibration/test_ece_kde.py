"""Tests of lib.calibration.ece_kde against its definition (Popordanoska et al. 2022): the leave-one-out
Dirichlet-kernel estimate by brute force with scipy's density, its behaviour on calibrated and
miscalibrated data with a known true error, and the leave-one-out bandwidth choice."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from lib.calibration import ece_kde as kde


pytestmark = pytest.mark.usefixtures("float64")  # double precision (tests/conftest.py)


def _kde_data(n, sharpen, seed):
    """f ~ Dirichlet(0.5, 0.5, 0.5); y ~ Categorical(q(f)), q = f^sharpen renormalized, so
    E[y | f] = q(f): calibrated for sharpen = 1, underconfident for sharpen > 1."""
    rng = np.random.default_rng(seed)
    f = rng.dirichlet(np.full(3, 0.5), size=n)
    q = f**sharpen
    q /= q.sum(1, keepdims=True)
    y = (rng.random(n)[:, None] > np.cumsum(q, 1)).sum(1)
    return f, y, np.abs(f - q).sum(1).mean()  # true canonical L1 calibration error


def test_ece_kde_matches_definition_by_brute_force():
    f, y, _ = _kde_data(15, 2.0, 3)
    h = 0.2
    onehot = np.eye(3)[y]
    err = 0.0
    for j in range(15):
        k = np.array([stats.dirichlet.pdf(f[j], f[i] / h + 1) for i in range(15) if i != j])
        ratio = (k[:, None] * np.delete(onehot, j, 0)).sum(0) / k.sum()
        err += np.abs(ratio - f[j]).sum()
    assert float(kde.ece_kde(f, y, h)) == pytest.approx(err / 15, rel=1e-8)


def test_ece_kde_small_when_calibrated_large_when_not():
    f, y, true0 = _kde_data(1000, 1.0, 0)
    f2, y2, true1 = _kde_data(1000, 3.0, 10)
    assert true0 < 1e-12 and true1 > 0.25
    # canonical L1 with a fixed bandwidth: the estimate shrinks with n when calibrated (a positive
    # finite-sample bias remains) and tracks the true error when not
    e0, e1 = float(kde.ece_kde(f, y, 0.05)), float(kde.ece_kde(f2, y2, 0.05))
    assert e0 < 0.15 and e1 > 2 * e0 and abs(e1 - true1) < 0.1
    assert e0 < float(kde.ece_kde(f[:200], y[:200], 0.05))
    # top-label with the leave-one-out bandwidth: near 0 when calibrated
    t0, t1 = float(kde.ece_kde(f, y, mode="top_label")), float(kde.ece_kde(f2, y2, mode="top_label"))
    assert t0 < 0.05 and t1 > 3 * t0


def test_select_bandwidth_maximizes_the_leave_one_out_likelihood():
    f, y, _ = _kde_data(60, 1.0, 2)
    h = kde.select_bandwidth(f)
    assert h in kde.BANDWIDTH_GRID

    # leave-one-out log-likelihood by brute force (scipy's Dirichlet density) over the whole grid
    def loo(bw):  # in logs: at the grid's small bandwidths the densities underflow
        total = 0.0
        for j in range(len(f)):
            at = np.clip(f[j], 1e-10, None) / np.clip(f[j], 1e-10, None).sum()
            logs = [stats.dirichlet.logpdf(at, f[i] / bw + 1) for i in range(len(f)) if i != j]
            total += logsumexp(logs) - math.log(len(logs))
        return total

    scores = [loo(bw) for bw in kde.BANDWIDTH_GRID]
    assert loo(h) >= max(scores) - 1e-6  # the global best of the grid, not only of its neighbours


def test_bad_input_raises_naming_argument():
    with pytest.raises(ValueError, match="probs"):
        kde.ece_kde(np.ones((4, 3)), np.zeros(4, dtype=int), 0.1)
    with pytest.raises(ValueError, match="probs"):
        kde.ece_kde(np.full((1, 2), 0.5), np.zeros(1, dtype=int), 0.1)
    with pytest.raises(ValueError, match="bandwidth"):
        kde.ece_kde(np.full((4, 2), 0.5), np.zeros(4, dtype=int), -0.1)
    with pytest.raises(ValueError, match="labels"):
        kde.ece_kde(np.full((4, 2), 0.5), np.full(4, 2), 0.1)
    with pytest.raises(ValueError, match="mode"):
        kde.ece_kde(np.full((4, 2), 0.5), np.zeros(4, dtype=int), 0.1, mode="classwise")
    with pytest.raises(ValueError, match="p"):
        kde.ece_kde(np.full((4, 2), 0.5), np.zeros(4, dtype=int), 0.1, p=3)


def test_p2_and_top_label_match_their_definitions_by_brute_force():
    """The squared error (p = 2, canonical, Dirichlet kernel) and the top-label estimate (Beta
    kernel on max_c f_c, outcome 1[argmax f = y]) computed point by point with scipy's densities."""
    f, y, _ = _kde_data(12, 2.0, 4)
    h, onehot = 0.3, np.eye(3)[y]
    sq = 0.0
    for j in range(12):
        k = np.array([stats.dirichlet.pdf(f[j], f[i] / h + 1) for i in range(12) if i != j])
        sq += (((k[:, None] * np.delete(onehot, j, 0)).sum(0) / k.sum() - f[j]) ** 2).sum()
    assert float(kde.ece_kde(f, y, h, p=2)) == pytest.approx(sq / 12, rel=1e-8)
    conf, right = f.max(1), (f.argmax(1) == y).astype(float)
    for p in (1, 2):
        err = 0.0
        for j in range(12):
            k = np.array([stats.beta.pdf(conf[j], c / h + 1, (1 - c) / h + 1) for c in np.delete(conf, j)])
            err += abs((k * np.delete(right, j)).sum() / k.sum() - conf[j]) ** p
        assert float(kde.ece_kde(f, y, h, p=p, mode="top_label")) == pytest.approx(err / 12, rel=1e-8)
