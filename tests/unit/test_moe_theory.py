"""lib.moe_theory against the math of sections 3-4 and Prop. 4.1 of the calibrated-MoE paper."""

from __future__ import annotations

import numpy as np
import pytest

from lib import moe_theory as mt


def _brute_expert_residual(pop: mt.RoutedPopulation, k: int, v: float, weights: np.ndarray) -> float:
    m = np.isclose(pop.experts[:, k], v)
    return float((pop.pi[m] * weights[m, k] * (pop.eta[m] - v)).sum())


def test_example_experts_calibrated_on_weighted_views_by_brute_force() -> None:
    pop = mt.two_configuration_example(levels=(0.3, 0.5, 0.7), overlap=0.7, overlap_mass=0.4, delta=0.15)
    for k in range(2):
        for v in np.unique(pop.experts[:, k]):
            assert abs(_brute_expert_residual(pop, k, v, pop.routing)) < 1e-12
            assert abs(_brute_expert_residual(pop, k, v, mt.hard_routing(pop.routing))) < 1e-12
    assert np.abs(mt.expert_residuals(pop).residual).max() < 1e-12


def test_example_aggregate_calibrated_on_training_but_not_per_configuration() -> None:
    pop = mt.two_configuration_example()
    for routing in ("soft", "hard"):
        res = mt.calibration_residuals(pop, routing)
        assert np.abs(res.residual).max() < 1e-12
    p = pop.prediction("soft")
    # two configurations with the same aggregate prediction and different outcome frequencies
    lvl = np.isclose(p, 0.4)
    assert len(np.unique(pop.eta[lvl])) == 2
    assert np.abs(pop.eta - p).min() > 0.05


@pytest.mark.parametrize("seed", range(5))
def test_hard_routing_calibrated_under_every_region_reweighting(seed: int) -> None:
    """Section 3.2: Q = sum_k omega_k P(. | R_k) keeps a region-calibrated hard MoE calibrated."""
    pop = mt.random_population(n_cells=40, num_experts=3, n_groups=3, routing="hard", seed=seed)
    assert np.abs(mt.expert_residuals(pop, "hard").residual).max() < 1e-12
    rng = np.random.default_rng(100 + seed)
    for omega in [*rng.dirichlet(np.full(3, 0.5), 20), np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])]:
        rho = mt.region_reweighting(pop, omega)
        # Q is a probability distribution with region prevalences omega
        q = pop.pi * rho
        assert q.sum() == pytest.approx(1.0)
        for k in range(3):
            assert q[pop.regions() == k].sum() == pytest.approx(omega[k])
        res = mt.calibration_residuals(pop, "hard", rho)
        assert np.abs(res.residual).max() < 1e-9


def test_region_reweighting_can_break_a_soft_mixture() -> None:
    """The contrast: soft mixtures of calibrated experts are not protected by the same argument."""
    pop = mt.random_population(n_cells=40, num_experts=3, n_groups=3, routing="soft", seed=3)
    res = mt.calibration_residuals(pop, "soft", mt.region_reweighting(pop, [0.8, 0.1, 0.1]))
    assert np.abs(res.residual).max() > 1e-3


def test_eq4_closed_form_and_definition_agree() -> None:
    m, delta = 0.4, 0.12
    pop = mt.two_configuration_example(levels=(0.3, 0.6), overlap=0.6, overlap_mass=m, delta=delta)
    ratio = 3.0
    rho = np.where(pop.kind == "overlap", ratio, 1.0)
    rho = rho / (pop.pi * rho).sum()
    pred = mt.predicted_gap(pop, rho)
    eps = delta * m / (1 - m)
    hand = (ratio * m * delta - (1 - m) * eps) / (ratio * m + 1 - m)
    assert np.allclose(pred.predicted, hand)
    assert mt.predicted_gap_closed_form(m, delta, ratio) == pytest.approx(hand)
    # eq. (4) is the calibration residual of the reweighted population
    assert np.allclose(mt.calibration_residuals(pop, "soft", rho).residual, hand)
    # rho == 1: calibrated; ratio < 1 flips the sign
    assert mt.predicted_gap_closed_form(m, delta, 1.0) == 0.0
    assert mt.predicted_gap_closed_form(m, delta, 0.5) < 0


def test_soft_miscalibration_under_configuration_reweighting_matches_eq4_by_sampling() -> None:
    pop = mt.two_configuration_example()
    rho = mt.configuration_reweighting(pop, mt.entropy_tilt(3.0))
    assert (pop.pi * rho).sum() == pytest.approx(1.0)
    pred = mt.predicted_gap(pop, rho)
    ratio = rho[pop.kind == "overlap"][0] / rho[pop.kind == "dominant"][0]
    assert np.allclose(pred.predicted, mt.predicted_gap_closed_form(0.5, 0.1, ratio))
    cells, y = mt.sample(pop, 200_000, rho, seed=1)
    meas = mt.measured_gap(pop, cells, y)
    assert np.all(np.abs(meas.measured - pred.predicted) < 4.5 * meas.se)
    assert pred.predicted.abs().min() > 0.05  # the shift really breaks calibration
    # on the training distribution the sample is calibrated within noise
    cells0, y0 = mt.sample(pop, 200_000, None, seed=2)
    m0 = mt.measured_gap(pop, cells0, y0)
    assert np.all(np.abs(m0.measured) < 4.5 * m0.se)


def test_configuration_reweighting_preserves_eta_given_z() -> None:
    """A function of Z leaves P(Y | Z) unchanged: cells sharing Z share rho."""
    pop = mt.two_configuration_example()
    rho = mt.configuration_reweighting(pop, mt.entropy_tilt(-2.0))
    z = np.round(np.hstack([pop.routing, pop.experts]), 12)
    for row in np.unique(z, axis=0):
        m = (z == row).all(axis=1)
        assert np.ptp(rho[m]) < 1e-12


@pytest.mark.parametrize("seed", range(4))
def test_disagreement_identity_for_calibrated_soft_experts(seed: int) -> None:
    pop = mt.random_population(n_cells=50, num_experts=4, n_groups=5, routing="soft", seed=seed)
    ident = mt.disagreement_identity(pop)
    assert ident["disagreement"] > 1e-4
    assert ident["covariance"] == pytest.approx(ident["disagreement"], rel=1e-9, abs=1e-14)


def test_calibrated_experts_are_weighted_group_means() -> None:
    pi = np.array([0.25, 0.25, 0.5])
    eta = np.array([0.2, 0.6, 0.9])
    r = np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
    groups = np.zeros((3, 2), dtype=int)
    f = mt.calibrated_experts(pi, eta, r, groups)
    assert f[0, 0] == pytest.approx((0.25 * 0.2 + 0.125 * 0.6) / 0.375)
    assert f[0, 1] == pytest.approx((0.125 * 0.6 + 0.5 * 0.9) / 0.625)


def test_validation_errors_name_the_argument() -> None:
    with pytest.raises(ValueError, match="overlap"):
        mt.two_configuration_example(overlap=0.5)
    with pytest.raises(ValueError, match="levels"):
        mt.two_configuration_example(levels=(0.95,), delta=0.1)
    pop = mt.two_configuration_example()
    with pytest.raises(ValueError, match="omega"):
        mt.region_reweighting(pop, [0.5, 0.6])
    with pytest.raises(ValueError, match="rho"):
        mt.predicted_gap(pop, -np.ones(len(pop.pi)))
    with pytest.raises(ValueError, match="routing"):
        pop.prediction("sparse")
    with pytest.raises(ValueError, match="pi"):
        mt.RoutedPopulation(pi=np.array([0.5, 0.6]), eta=np.zeros(2), routing=np.ones((2, 1)), experts=np.zeros((2, 1)))


# --- Appendix C: multiaccuracy bound; Table 5 verdicts ------------------------------------------


def test_multiaccuracy_bound_by_hand_on_one_cell():
    from lib.moe_theory import RoutedPopulation, multiaccuracy_bound

    # one cell: r = (0.6, 0.4), f = (0.5, 0.25) -> p = 0.4; eta = 0.7
    pop = RoutedPopulation(pi=np.array([1.0]), eta=np.array([0.7]), routing=np.array([[0.6, 0.4]]),
                           experts=np.array([[0.5, 0.25]]), kind=np.array(["x"], dtype=object))
    t = multiaccuracy_bound(pop)
    sq = (0.7 - 0.4) ** 2 + 0.7 * 0.3  # E[(Y - p)^2] = 0.3
    ce = -(0.7 * np.log(0.4) + 0.3 * np.log(0.6))
    assert t["alignment"].tolist() == pytest.approx([0.6 * 0.3, 0.4 * 0.3])
    assert t["cauchy_schwarz"].tolist() == pytest.approx([0.6 * np.sqrt(sq), 0.4 * np.sqrt(sq)])
    assert t["squared_residual"].iloc[0] == pytest.approx(np.sqrt(sq))
    assert t["cross_entropy"].iloc[0] == pytest.approx(np.sqrt(ce))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_multiaccuracy_bound_chain_holds_under_any_reweighting(seed):
    from lib.moe_theory import multiaccuracy_bound, random_population

    pop = random_population(n_cells=40, num_experts=3, seed=seed)
    rho = np.random.default_rng(seed).exponential(size=40)
    for routing in ("soft", "hard"):
        t = multiaccuracy_bound(pop, rho, routing)
        assert (t["alignment"] <= t["cauchy_schwarz"] + 1e-12).all()
        assert (t["cauchy_schwarz"] <= t["squared_residual"] + 1e-12).all()
        assert (t["squared_residual"] <= t["cross_entropy"] + 1e-12).all()


def test_support_claims_verdicts_are_computed():
    import pandas as pd

    from lib.experiments.moe_paper import PAPER_TABLE5
    from lib.moe_theory import support_claims

    good = PAPER_TABLE5[["lam", "perplexity", "fraction", "ratio_bound"]].copy()
    rows = support_claims(good, PAPER_TABLE5)
    assert [r["verdict"] for r in rows] == ["held", "held"]
    bad = good.copy()
    bad.loc[bad.lam == 2.0, "fraction"] = 0.95  # far from 72.8% and breaks monotonicity
    rows = support_claims(bad, PAPER_TABLE5)
    assert [r["verdict"] for r in rows] == ["did not hold", "did not hold"]
    with pytest.raises(ValueError, match="support"):
        support_claims(pd.DataFrame(), PAPER_TABLE5)
