"""lib.moe.theory against the math of sections 3-4, Prop. 4.1 and Appendix C of the calibrated-MoE paper."""

from __future__ import annotations

import numpy as np
import pytest

from lib.moe import theory as mt
from lib.moe import routed_population as rp


def test_example_aggregate_calibrated_on_training_but_not_per_configuration() -> None:
    pop = rp.two_configuration_example()
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
    pop = rp.random_population(n_cells=40, num_experts=3, n_groups=3, routing="hard", seed=seed)
    assert np.abs(rp.expert_residuals(pop, "hard").residual).max() < 1e-12
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
    pop = rp.random_population(n_cells=40, num_experts=3, n_groups=3, routing="soft", seed=3)
    res = mt.calibration_residuals(pop, "soft", mt.region_reweighting(pop, [0.8, 0.1, 0.1]))
    assert np.abs(res.residual).max() > 1e-3


def test_eq4_closed_form_and_definition_agree() -> None:
    m, delta = 0.4, 0.12
    pop = rp.two_configuration_example(levels=(0.3, 0.6), overlap=0.6, overlap_mass=m, delta=delta)
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
    pop = rp.two_configuration_example()
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
    pop = rp.two_configuration_example()
    rho = mt.configuration_reweighting(pop, mt.entropy_tilt(-2.0))
    z = np.round(np.hstack([pop.routing, pop.experts]), 12)
    for row in np.unique(z, axis=0):
        m = (z == row).all(axis=1)
        assert np.ptp(rho[m]) < 1e-12


def test_validation_errors_name_the_argument() -> None:
    pop = rp.two_configuration_example()
    with pytest.raises(ValueError, match="omega"):
        mt.region_reweighting(pop, [0.5, 0.6])
    with pytest.raises(ValueError, match="rho"):
        mt.predicted_gap(pop, -np.ones(len(pop.pi)))


# --- Appendix C: multiaccuracy bound -------------------------------------------------------------


def test_multiaccuracy_bound_by_hand_on_one_cell():
    from lib.moe.theory import multiaccuracy_bound
    from lib.moe.routed_population import RoutedPopulation

    # one cell: r = (0.6, 0.4), f = (0.5, 0.25) -> p = 0.4; eta = 0.7
    pop = RoutedPopulation(
        pi=np.array([1.0]),
        eta=np.array([0.7]),
        routing=np.array([[0.6, 0.4]]),
        experts=np.array([[0.5, 0.25]]),
        kind=np.array(["x"], dtype=object),
    )
    t = multiaccuracy_bound(pop)
    sq = (0.7 - 0.4) ** 2 + 0.7 * 0.3  # E[(Y - p)^2] = 0.3
    ce = -(0.7 * np.log(0.4) + 0.3 * np.log(0.6))
    assert t["alignment"].tolist() == pytest.approx([0.6 * 0.3, 0.4 * 0.3])
    assert t["cauchy_schwarz"].tolist() == pytest.approx([0.6 * np.sqrt(sq), 0.4 * np.sqrt(sq)])
    assert t["rms_residual"].iloc[0] == pytest.approx(np.sqrt(sq))
    assert t["sqrt_cross_entropy"].iloc[0] == pytest.approx(np.sqrt(ce))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_multiaccuracy_bound_chain_holds_under_any_reweighting(seed):
    from lib.moe.theory import multiaccuracy_bound
    from lib.moe.routed_population import random_population

    pop = random_population(n_cells=40, num_experts=3, seed=seed)
    rho = np.random.default_rng(seed).exponential(size=40)
    for routing in ("soft", "hard"):
        t = multiaccuracy_bound(pop, rho, routing)
        assert (t["alignment"] <= t["cauchy_schwarz"] + 1e-12).all()
        assert (t["cauchy_schwarz"] <= t["rms_residual"] + 1e-12).all()
        assert (t["rms_residual"] <= t["sqrt_cross_entropy"] + 1e-12).all()


def test_the_measured_gap_and_closed_form_name_bad_input() -> None:
    """A negative cell index would wrap around silently, and an overlap mass of 1 divides by zero in
    eps: each is a one-line error naming its argument."""
    pop = rp.two_configuration_example(levels=(0.3, 0.6), overlap=0.6, overlap_mass=0.2, delta=0.1)
    cells, y = mt.sample(pop, 50, seed=0)
    assert mt.measured_gap(pop, cells.tolist(), y.tolist())["n"].sum() == 50  # lists are read as arrays
    for bad_cells, bad_y, name in ((cells - 100, y, "cells"), (cells, y + 2, "y"), (cells[:3], y, "cells and y")):
        with pytest.raises(ValueError, match=f"^{name}"):
            mt.measured_gap(pop, bad_cells, bad_y)
    for args, name in (((1.0, 0.1, 2.0), "overlap_mass"), ((0.2, -0.1, 2.0), "delta"), ((0.2, 0.1, 0.0), "ratio")):
        with pytest.raises(ValueError, match=f"^{name}"):
            mt.predicted_gap_closed_form(*args)


def test_entropy_tilt_is_exp_beta_times_the_routing_entropy():
    """rho(Z) = exp(beta H(r)), H in nats: an even split of two experts has H = ln 2 (weight 2 at
    beta = 1), a one-hot routing H = 0 (weight 1); (0.6, 0.4) at beta = 3 gives
    exp(3 (-0.6 ln 0.6 - 0.4 ln 0.4)) = 7.531054."""
    assert mt.entropy_tilt(1.0)(np.array([[0.5, 0.5], [1.0, 0.0]]), None) == pytest.approx([2.0, 1.0])
    assert mt.entropy_tilt(3.0)(np.array([[0.6, 0.4]]), None) == pytest.approx([7.531054], rel=1e-6)
