"""Tests of lib.l2d.gaussian_mixture: the clusters' overlap (L2D paper Fig. 3) and the generator following
its documented constants."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lib.l2d import gaussian_mixture as gm


def _tol(p: float, n: int) -> float:
    return 5 * math.sqrt(p * (1 - p) / n)


def bhattacharyya(i: int, j: int) -> float:
    m = gm.GAUSSIAN_MEANS[i] - gm.GAUSSIAN_MEANS[j]
    si, sj = gm.GAUSSIAN_COVS[i], gm.GAUSSIAN_COVS[j]
    s = (si + sj) / 2
    return float(
        m @ np.linalg.solve(s, m) / 8
        + 0.5 * math.log(np.linalg.det(s) / math.sqrt(np.linalg.det(si) * np.linalg.det(sj)))
    )


def log_density(X: np.ndarray, k: int) -> np.ndarray:
    mu, cov = gm.GAUSSIAN_MEANS[k], gm.GAUSSIAN_COVS[k]
    d = X - mu
    return -0.5 * np.einsum("ni,ij,nj->n", d, np.linalg.inv(cov), d) - 0.5 * math.log(
        (2 * math.pi) ** 2 * np.linalg.det(cov)
    )


def test_gaussian_picture():
    assert gm.GAUSSIAN_MEANS.shape == (4, 2) and gm.GAUSSIAN_COVS.shape == (4, 2, 2)
    assert np.all(np.linalg.eigvalsh(gm.GAUSSIAN_COVS) > 0)
    # clusters 2 and 3 (0-based 1, 2) overlap strongly; 1 and 4 (0, 3) are nearly separable
    assert bhattacharyya(1, 2) < 0.5
    assert bhattacharyya(0, 3) > 5
    for outer in (0, 3):
        assert min(bhattacharyya(outer, k) for k in range(4) if k != outer) > 2
    # pairwise Bayes error by Monte Carlo with the true densities
    X, y, cluster = gm.gaussian_mixture(40_000, seed=0)
    X = X.astype(np.float64)
    dens = np.stack([log_density(X, k) for k in range(4)], 1)

    def pair_error(i, j):
        m = (y == i) | (y == j)
        guess = np.where(dens[m, i] >= dens[m, j], i, j)
        return (guess != y[m]).mean()

    assert pair_error(1, 2) > 0.2
    assert pair_error(0, 3) < 0.01
    # the generator follows the documented constants
    assert np.array_equal(y, cluster)
    for k in range(4):
        Xk = X[y == k]
        assert abs(len(Xk) / len(X) - 0.25) < _tol(0.25, len(X))
        np.testing.assert_allclose(Xk.mean(0), gm.GAUSSIAN_MEANS[k], atol=0.05)
        np.testing.assert_allclose(np.cov(Xk.T), gm.GAUSSIAN_COVS[k], atol=0.06)
    X2, _, _ = gm.gaussian_mixture(100, seed=0)
    assert np.array_equal(X2, gm.gaussian_mixture(100, seed=0)[0])
    assert not np.array_equal(X2, gm.gaussian_mixture(100, seed=1)[0])


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------
def test_bad_input_raises_naming_argument():
    with pytest.raises(ValueError, match="n"):
        gm.gaussian_mixture(0)
