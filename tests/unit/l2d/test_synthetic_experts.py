"""Tests of lib.l2d.synthetic_experts: the experts' correctness rates, fixed per-example noise and the
paper's committees (lib.l2d.experiment.committee, L2D paper Sec. 5.2-5.4)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lib.l2d import synthetic_experts as sx
from lib.l2d.experiment import committee

N = 40_000
LABELS = np.random.default_rng(2).integers(0, 10, N)


def _tol(p: float, n: int) -> float:
    return 5 * math.sqrt(p * (1 - p) / n)


def _rate(e: sx.SyntheticExpert, group: np.ndarray) -> np.ndarray:
    """The expert's true P(m = y | x): p_in inside its region, 1/K outside."""
    return np.where(np.isin(group, list(e.region)), e.p_in, 1 / e.num_classes)


def test_expert_noise_is_fixed_per_example():
    e = sx.SyntheticExpert(10, frozenset(range(5)), 0.6, seed=3)
    a = e(LABELS)
    assert np.array_equal(a, e(LABELS))
    perm = np.random.default_rng(0).permutation(N)
    b = e(LABELS[perm], index=perm)  # same examples, another order
    assert np.array_equal(b, a[perm])
    assert not np.array_equal(a, sx.SyntheticExpert(10, frozenset(range(5)), 0.6, seed=4)(LABELS))


def test_oracle_and_random_expert_rates():
    e = sx.SyntheticExpert(10, frozenset(range(5)))  # oracle on the first five classes, random elsewhere
    m = e(LABELS)
    inside = LABELS < 5  # "first five classes" = 0..4, exclusive upper end
    assert np.array_equal(m[inside], LABELS[inside])
    assert abs((m[~inside] == LABELS[~inside]).mean() - 0.1) < _tol(0.1, (~inside).sum())
    # outside: random over all classes -> every class about equally likely
    freq = np.bincount(m[~inside], minlength=10) / (~inside).sum()
    assert np.abs(freq - 0.1).max() < _tol(0.1, (~inside).sum())
    r = sx.SyntheticExpert(10, seed=5)(LABELS)  # no region: random everywhere
    assert abs((r == LABELS).mean() - 0.1) < _tol(0.1, N)


def test_probabilistic_expert_rates_and_independence():
    e1 = sx.SyntheticExpert(10, frozenset(range(5)), 0.6, seed=1)
    e2 = sx.SyntheticExpert(10, frozenset(range(5)), 0.6, seed=2)
    c1, c2 = e1(LABELS) == LABELS, e2(LABELS) == LABELS
    inside = LABELS < 5
    assert abs(c1[inside].mean() - 0.6) < _tol(0.6, inside.sum())
    assert abs(c1[~inside].mean() - 0.1) < _tol(0.1, (~inside).sum())
    assert abs((c1 & c2)[inside].mean() - 0.36) < _tol(0.36, inside.sum())
    wrong = e1(LABELS) != LABELS
    assert np.all((e1(LABELS)[wrong] >= 0) & (e1(LABELS)[wrong] < 10))
    # a wrong answer is uniform over the K - 1 other classes: each shift 1..9 about 1/9 of them
    shifts = np.bincount(((e1(LABELS) - LABELS) % 10)[wrong], minlength=10) / wrong.sum()
    assert shifts[0] == 0 and np.abs(shifts[1:] - 1 / 9).max() < _tol(1 / 9, wrong.sum())


def test_committee_settings():
    ex = committee("experts", 8, "cifar10")
    assert len(ex) == 8 and len({e.seed for e in ex}) == 8
    dep = committee("dependence", 0.8, "cifar10")
    assert len(dep) == 4
    np.testing.assert_allclose(_rate(dep[0], LABELS), 0.1)
    for e in dep[1:]:
        np.testing.assert_allclose(_rate(e, LABELS), np.where(LABELS < 5, 0.8, 0.1))
    sp = committee("specialized", 5, "cifar10")
    ok = np.stack([e(LABELS) for e in sp], axis=1) == LABELS[:, None]
    for j in range(5):
        pair = (LABELS == 2 * j) | (LABELS == 2 * j + 1)
        assert ok[pair, j].all()
        assert abs(ok[~pair, j].mean() - 0.1) < _tol(0.1, (~pair).sum())
    g = committee("experts", 3, "gaussians")
    y4 = LABELS % 4
    for e in g:
        np.testing.assert_allclose(_rate(e, y4), np.where(y4 >= 2, 1.0, 0.25))
    with pytest.raises(ValueError, match="num_experts"):
        committee("specialized", 6, "cifar10")


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------
def test_bad_input_raises_naming_argument():
    with pytest.raises(ValueError, match="experiment"):
        committee("oracles", 1, "cifar10")
    with pytest.raises(ValueError, match="^p:"):
        committee("dependence", 1.5, "cifar10")
    with pytest.raises(ValueError, match="p_in"):
        sx.SyntheticExpert(10, frozenset([0]), 1.5)
    with pytest.raises(ValueError, match="labels"):
        sx.SyntheticExpert(10, frozenset(range(5)))(np.array([0, 10]))
