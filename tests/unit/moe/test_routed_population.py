"""lib.moe.routed_population against the math of sections 3-4 of the calibrated-MoE paper: experts
calibrated on their routing-weighted views, and the disagreement identity that calibration implies."""

from __future__ import annotations

import numpy as np
import pytest

from lib.moe import routed_population as rp


def _brute_expert_residual(pop: rp.RoutedPopulation, k: int, v: float, weights: np.ndarray) -> float:
    m = np.isclose(pop.experts[:, k], v)
    return float((pop.pi[m] * weights[m, k] * (pop.eta[m] - v)).sum())


def test_example_experts_calibrated_on_weighted_views_by_brute_force() -> None:
    pop = rp.two_configuration_example(levels=(0.3, 0.5, 0.7), overlap=0.7, overlap_mass=0.4, delta=0.15)
    for k in range(2):
        for v in np.unique(pop.experts[:, k]):
            assert abs(_brute_expert_residual(pop, k, v, pop.routing)) < 1e-12
            assert abs(_brute_expert_residual(pop, k, v, rp.hard_routing(pop.routing))) < 1e-12
    assert np.abs(rp.expert_residuals(pop).residual).max() < 1e-12


@pytest.mark.parametrize("seed", range(4))
def test_disagreement_identity_for_calibrated_soft_experts(seed: int) -> None:
    pop = rp.random_population(n_cells=50, num_experts=4, n_groups=5, routing="soft", seed=seed)
    ident = rp.disagreement_identity(pop)
    assert ident["disagreement"] > 1e-4
    assert ident["covariance"] == pytest.approx(ident["disagreement"], rel=1e-9, abs=1e-14)


def test_calibrated_experts_are_weighted_group_means() -> None:
    pi = np.array([0.25, 0.25, 0.5])
    eta = np.array([0.2, 0.6, 0.9])
    r = np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
    groups = np.zeros((3, 2), dtype=int)
    f = rp.calibrated_experts(pi, eta, r, groups)
    assert f[0, 0] == pytest.approx((0.25 * 0.2 + 0.125 * 0.6) / 0.375)
    assert f[0, 1] == pytest.approx((0.125 * 0.6 + 0.5 * 0.9) / 0.625)


def test_validation_errors_name_the_argument() -> None:
    with pytest.raises(ValueError, match="overlap"):
        rp.two_configuration_example(overlap=0.5)
    with pytest.raises(ValueError, match="levels"):
        rp.two_configuration_example(levels=(0.95,), delta=0.1)
    pop = rp.two_configuration_example()
    with pytest.raises(ValueError, match="routing"):
        pop.prediction("sparse")
    with pytest.raises(ValueError, match="pi"):
        rp.RoutedPopulation(pi=np.array([0.5, 0.6]), eta=np.zeros(2), routing=np.ones((2, 1)), experts=np.zeros((2, 1)))
