"""Tests of lib.rr.weights against the math of the reweighted-risk paper: the confidence
score functions (Appendix Table 1), the AURC weights (eq. 7), the smoothed CDF (eq. 21), the AU
weights (eqs. 18-19, 22), and the analytic weights and gradients of Figure 1 and Appendix C
against autograd of the loss definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from lib.rr import weights as rwt


pytestmark = pytest.mark.usefixtures("float64")  # double precision (tests/conftest.py)


# ---------------------------------------------------------------------------------------------
# CSFs
# ---------------------------------------------------------------------------------------------
def test_csfs_against_numpy():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(6), size=50)

    def csf(name, p):
        return rwt.csf_values(name, torch.as_tensor(p)).numpy()

    srt = np.sort(probs, 1)
    np.testing.assert_allclose(csf("msp", probs), srt[:, -1])
    np.testing.assert_allclose(csf("softmax_margin", probs), srt[:, -1] - srt[:, -2])
    ent = (probs * np.log(probs)).sum(1)
    np.testing.assert_allclose(csf("negative_entropy", probs), ent)
    np.testing.assert_allclose(csf("normalized_entropy", probs), 1 + ent / np.log(6))
    edge = np.array([[1.0, 0, 0, 0], [0.25, 0.25, 0.25, 0.25]])
    np.testing.assert_allclose(csf("normalized_entropy", edge), [1.0, 0.0], atol=1e-12)


# ---------------------------------------------------------------------------------------------
# AURC weights (eq. 7)
# ---------------------------------------------------------------------------------------------
def test_aurc_weights_closed_form_and_detached():
    rng = np.random.default_rng(0)
    s = rng.random(40)
    n = len(s)
    r = (s[None, :] <= s[:, None]).sum(1)  # brute-force ranks: #{j : s_j <= s_i}
    np.testing.assert_allclose(rwt.aurc_weights(s).numpy(), -np.log(1 - r / (n + 1)), rtol=1e-12)
    w = rwt.aurc_weights(torch.tensor(s, requires_grad=True))
    assert not w.requires_grad


def test_aurc_weights_of_ties_share_the_largest_rank():
    np.testing.assert_allclose(
        rwt.aurc_weights(np.array([0.5, 0.5, 0.2])).numpy(), -np.log(1 - np.array([3, 3, 1]) / 4)
    )


# ---------------------------------------------------------------------------------------------
# Smoothed CDF (eq. 21)
# ---------------------------------------------------------------------------------------------
def test_smoothed_cdf_matches_eq21_and_is_monotone():
    rng = np.random.default_rng(1)
    s = rng.beta(5, 2, 300)
    s[0] = 1.0  # the right end goes to the last bin
    edges = np.linspace(0, 1, 16)
    h, _ = np.histogram(s, edges)  # numpy: last bin closed, like eq. 21's convention here
    c = (edges[:-1] + edges[1:]) / 2
    at = np.linspace(-0.2, 1.2, 500)
    expect = (h[None] / (1 + np.exp(-(at[:, None] - c[None]) / 0.1))).sum(1) / len(s)
    got = rwt.smoothed_cdf(s, edges, 0.1, at=at).numpy()
    np.testing.assert_allclose(got, expect, rtol=1e-10)
    assert np.all(np.diff(got) >= 0)
    assert got.min() >= 0 and got.max() <= 1
    np.testing.assert_allclose(
        rwt.smoothed_cdf(s, edges, 0.1).numpy(), (h[None] / (1 + np.exp(-(s[:, None] - c[None]) / 0.1))).sum(1) / len(s)
    )


def test_smoothed_cdf_converges_to_empirical_cdf():
    rng = np.random.default_rng(2)
    s = rng.random(400)
    ecdf = (s[None, :] <= s[:, None]).mean(1)
    for m in (15, 200, 4000):
        edges = np.linspace(0, 1, m + 1)
        h, _ = np.histogram(s, edges)
        g = rwt.smoothed_cdf(s, edges, 1e-7).numpy()
        # nu -> 0: G(s) = (1/n) sum_m h_m 1[s > c_m], within one bin's mass of the empirical CDF
        assert np.abs(g - ecdf).max() <= h.max() / len(s) + 1e-9
    assert np.abs(g - ecdf).max() <= 2 / len(s) + 1e-9
    edges = np.linspace(0, 1, 4001)
    errs = [np.abs(rwt.smoothed_cdf(s, edges, nu).numpy() - ecdf).max() for nu in (1e-1, 1e-2, 1e-3, 1e-5)]
    assert errs[0] > errs[1] > errs[2]
    assert errs[3] < 3 / len(s)


# ---------------------------------------------------------------------------------------------
# AU weights (eqs. 18-19, 22)
# ---------------------------------------------------------------------------------------------
def test_au_weights_match_eq19_for_uniform_scores():
    rng = np.random.default_rng(4)
    n, kappa = 20_000, 0.8
    s = rng.random(n)
    beta = rwt.au_weights(s, coverage=kappa, n_bins=400, nu=1e-4).numpy()
    # G(s) = s for Uniform(0, 1): beta = -ln(1 - s) below tau ~ kappa, -ln(1 - kappa) above
    expect = np.where(s < kappa, -np.log1p(-np.minimum(s, kappa)), -math.log(1 - kappa))
    assert np.abs(beta - expect).max() < 0.06
    low = s < np.quantile(s, 0.79)
    assert np.abs(beta[low] - expect[low]).mean() < 0.01
    # weights are constant above tau and bounded by the clamp G <= n/(n+1)
    tau = float(rwt.au_threshold(s, kappa))
    assert np.ptp(beta[s >= tau]) == 0
    assert (s < tau).mean() <= kappa
    tiny = rwt.au_weights(np.array([0.0, 1.0, 1.0]), coverage=0.99, n_bins=15, nu=1e-6).numpy()
    assert np.all(np.isfinite(tiny)) and tiny.max() <= math.log(4) + 1e-12


def test_au_weights_match_monte_carlo_eq18():
    """beta(x) = E_{s~ ~ P(s | s < tau)} [ 1[s(x) >= s~] / P(S >= s~) ] (eq. 18), estimated by
    plain Monte Carlo on independent draws, equals C * (eq. 19) from au_weights(normalize=True)."""
    rng = np.random.default_rng(5)
    dist = stats.beta(5, 2)
    kappa = 0.75
    batch = dist.rvs(20_000, random_state=rng)
    query = dist.ppf([0.1, 0.3, 0.5, 0.7, 0.9])
    scores = np.concatenate([query, batch])
    beta = rwt.au_weights(scores, coverage=kappa, n_bins=400, nu=1e-4, normalize=True).numpy()[:5]
    tau = dist.ppf(kappa)
    pool = np.sort(dist.rvs(400_000, random_state=rng))  # for P(S >= s~)
    tilde = dist.rvs(400_000, random_state=rng)
    tilde = tilde[tilde < tau][:200_000]
    surv = 1 - np.searchsorted(pool, tilde, side="left") / len(pool)
    mc = np.array([np.mean((q >= tilde) / surv) for q in query])
    se = np.array([np.std((q >= tilde) / surv) / math.sqrt(len(tilde)) for q in query])
    np.testing.assert_allclose(beta, mc, atol=0.03 + 5 * se.max(), rtol=0.03)
    # and the MC values follow the closed form -ln(1 - G(min(s, tau))) / G(tau)
    closed = -np.log1p(-dist.cdf(np.minimum(query, tau))) / kappa
    np.testing.assert_allclose(mc, closed, atol=5 * se.max() + 0.01)


# ---------------------------------------------------------------------------------------------
# Analytic weights and gradients (Figure 1, Appendix C)
# ---------------------------------------------------------------------------------------------
P = np.linspace(0.03, 0.99, 49)


def _autograd(fn, p: np.ndarray) -> np.ndarray:
    t = torch.tensor(p, dtype=torch.float64, requires_grad=True)
    fn(t).sum().backward()
    return t.grad.numpy()


@pytest.mark.parametrize("gamma", [0.5, 1.0, 3.0, 5.0])
def test_gradients_match_autograd_of_the_definitions(gamma):
    np.testing.assert_allclose(rwt.loss_gradient("xe", P), _autograd(lambda t: -torch.log(t), P), rtol=1e-10)
    np.testing.assert_allclose(
        rwt.loss_gradient("focal", P, gamma), _autograd(lambda t: -((1 - t) ** gamma) * torch.log(t), P), rtol=1e-9
    )
    np.testing.assert_allclose(
        rwt.loss_gradient("inverse_focal", P, gamma),
        _autograd(lambda t: -((1 + t) ** gamma) * torch.log(t), P),
        rtol=1e-9,
    )
    g = torch.tensor(np.where(P < 0.2, 5.0, 3.0))
    np.testing.assert_allclose(
        rwt.loss_gradient("fl53", P), _autograd(lambda t: -((1 - t) ** g) * torch.log(t), P), rtol=1e-9
    )


def test_inverse_focal_gradient_turns_positive_exactly_above_the_threshold():
    thr = rwt.inverse_focal_gamma_threshold()
    grid = np.linspace(1e-4, 1 - 1e-4, 200_001)
    brute = float(np.min((1 + grid) / (-grid * np.log(grid))))
    assert thr == pytest.approx(brute, rel=1e-6)
    assert 3.5 < thr < 3.7  # the paper: "gamma > 3.5"
    fine = np.linspace(1e-3, 1.0, 20_001)
    assert rwt.loss_gradient("inverse_focal", fine, thr - 0.01).max() < 0
    assert rwt.loss_gradient("inverse_focal", fine, thr + 0.01).max() > 0


@pytest.mark.parametrize("name,gamma", [("focal", 3.0), ("inverse_focal", 2.0), ("aurc", 0.0)])
def test_normalized_weights_have_mean_one(name, gamma):
    x = (np.arange(200_000) + 0.5) / 200_000  # midpoint rule on [0, 1]
    assert rwt.loss_weight(name, x, gamma).mean() == pytest.approx(1.0, rel=2e-3)


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------
def test_bad_input_raises_naming_argument():
    s = torch.rand(16)
    for nu in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="nu"):
            rwt.au_weights(s, nu=nu)
        with pytest.raises(ValueError, match="nu"):
            rwt.smoothed_cdf(s, torch.linspace(0, 1, 5), nu)
    for cov in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="coverage"):
            rwt.au_weights(s, coverage=cov)
        with pytest.raises(ValueError, match="coverage"):
            rwt.au_threshold(s, cov)
    with pytest.raises(ValueError, match="^scores: expected 1-D"):
        rwt.au_threshold(s[:, None], 0.5)
    with pytest.raises(ValueError, match="^scores: is empty"):
        rwt.au_threshold(s[:0], 0.5)
    with pytest.raises(ValueError, match="scores"):
        rwt.au_weights(s[:, None])
    with pytest.raises(ValueError, match="scores"):
        rwt.aurc_weights(s[:1])
    with pytest.raises(ValueError, match="edges"):
        rwt.smoothed_cdf(s, torch.tensor([0.0, 0.5, 0.5, 1.0]), 0.1)
    with pytest.raises(ValueError, match="n_bins"):
        rwt.au_weights(s, n_bins=0)
    with pytest.raises(ValueError, match="p"):
        rwt.loss_gradient("focal", np.array([0.0, 0.5]))
    with pytest.raises(ValueError, match="name"):
        rwt.loss_weight("dual_focal", np.array([0.5]))


def test_loss_weight_values_by_hand():
    """Focal (1 - p)^2 is 0.25 and 0.01 at p = 0.5, 0.9, three times that normalized (its mean over a
    uniform p is 1/3); inverse focal (1 + p)^2 at 0.5 over its mean 7/3 is 27/28; AURC -ln(1 - p)
    has mean 1, so at 0.5 it is ln 2 either way."""
    assert rwt.loss_weight("focal", [0.5, 0.9], 2.0, normalize=False) == pytest.approx([0.25, 0.01])
    assert rwt.loss_weight("focal", [0.5, 0.9], 2.0) == pytest.approx([0.75, 0.03])
    assert rwt.loss_weight("inverse_focal", [0.5], 2.0) == pytest.approx([27 / 28])
    assert rwt.loss_weight("aurc", [0.5]) == pytest.approx([math.log(2)])
