"""Tests of lib.reweighted against the math of the reweighted-risk paper (eqs. 2-3, 7, 18-23,
33-36, Appendix C) and of ECE-KDE (Popordanoska et al. 2022)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy import stats

from lib import reweighted as rw


pytestmark = pytest.mark.usefixtures("float64")  # double precision (tests/conftest.py)


def _batch(n=64, c=5, scale=2.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, c, generator=g) * scale
    y = torch.randint(0, c, (n,), generator=g)
    return z, y


# ---------------------------------------------------------------------------------------------
# Focal family
# ---------------------------------------------------------------------------------------------
def test_focal_gamma0_is_cross_entropy_and_formulas():
    z, y = _batch()
    torch.testing.assert_close(rw.focal_loss(z, y, 0), F.cross_entropy(z, y))
    torch.testing.assert_close(rw.inverse_focal_loss(z, y, 0), F.cross_entropy(z, y))
    pt = torch.softmax(z, 1)[torch.arange(len(y)), y]
    torch.testing.assert_close(rw.focal_loss(z, y, 2.0), (-(1 - pt) ** 2 * pt.log()).mean())
    torch.testing.assert_close(rw.inverse_focal_loss(z, y, 1.5), (-(1 + pt) ** 1.5 * pt.log()).mean())
    gam = torch.where(pt < 0.2, 5.0, 3.0)
    torch.testing.assert_close(rw.focal_loss(z, y, "fl53"), (-(1 - pt) ** gam * pt.log()).mean())
    assert (pt < 0.2).any() and (pt >= 0.2).any()


def _ifl_derivative(gamma: float, p: np.ndarray) -> np.ndarray:
    """d/dp of the inverse focal loss as a function of p_t, from the library via autograd:
    two classes with logits (log p, log(1-p)) give p_t = p exactly."""
    pt = torch.tensor(p, requires_grad=True)
    z = torch.stack([pt.log(), torch.log1p(-pt)], 1)
    loss = rw.inverse_focal_loss(z, torch.zeros(len(p), dtype=torch.long), gamma, reduction="sum")
    (g,) = torch.autograd.grad(loss, pt)
    return g.numpy()


def test_inverse_focal_gradient_turns_positive_for_large_gamma():
    p = np.linspace(1e-3, 1 - 1e-3, 2000)
    # Appendix C.2: d/dp[-(1+p)^g log p] = -g (1+p)^(g-1) log p - (1+p)^g / p
    for gamma in (1.0, 4.0):
        expect = -gamma * (1 + p) ** (gamma - 1) * np.log(p) - (1 + p) ** gamma / p
        np.testing.assert_allclose(_ifl_derivative(gamma, p), expect, rtol=1e-8)
    for gamma in (0.0, 1.0, 2.0, 3.0):
        assert (_ifl_derivative(gamma, p) < 0).all()
    for gamma in (4.0, 5.0, 6.0):
        assert (_ifl_derivative(gamma, p) > 0).any()
    # positive somewhere iff gamma > min_p (1 + p) / (-p log p) (about 3.6, "gamma > 3.5")
    gstar = float(np.min((1 + p) / (-p * np.log(p))))
    assert 3.5 < gstar < 3.8
    assert (_ifl_derivative(gstar + 0.05, p) > 0).any()
    assert not (_ifl_derivative(gstar - 0.05, p) > 0).any()


def test_dual_focal_intended_and_eqs34_35():
    z, y = _batch(n=200, c=4, scale=2.5)
    p = torch.softmax(z, 1)
    pt = p[torch.arange(len(y)), y]
    pj = p.masked_fill(F.one_hot(y, 4).bool(), -1).max(1).values
    gamma = 3.0
    intended = rw.dual_focal_loss(z, y, gamma, reduction="none")
    torch.testing.assert_close(intended, -(1 - pt + pj) ** gamma * pt.log())
    eq35 = rw.dual_focal_loss(z, y, gamma, variant="eqs34_35", reduction="none")
    differ = ~torch.isclose(intended, eq35, rtol=1e-12, atol=0)
    assert torch.equal(differ, pt < pj)
    assert (pt < pj).sum() > 20 and (pt >= pj).sum() > 20
    torch.testing.assert_close(eq35[pt < pj], (-(1 - pt) ** gamma * pt.log())[pt < pj])


@pytest.mark.parametrize("label,weights", [
    # p = (0.5, 0.3, 0.2): (eq. 33, eqs. 34-35, released) weight bases 1 - p_t + p_j, by hand
    (0, (1 - 0.5 + 0.3, 1 - 0.5 + 0.3, 1 - 0.5 + 0.3)),  # true class on top: all three agree
    (1, (1 - 0.3 + 0.5, 1 - 0.3, 1 - 0.3 + 0.2)),        # middle: released takes 0.2 (below p_t)
    (2, (1 - 0.2 + 0.5, 1 - 0.2, 1 - 0.2 + 0.0)),        # smallest: released has nothing below
])
def test_dual_focal_variants_hand_computed(label, weights):
    probs = torch.tensor([[0.5, 0.3, 0.2]], dtype=torch.float64)
    z, y = probs.log(), torch.tensor([label])
    gamma = 2.0
    pt = float(probs[0, label])
    for variant, base in zip(("eq33", "eqs34_35", "released"), weights):
        got = float(rw.dual_focal_loss(z, y, gamma, variant=variant))
        assert got == pytest.approx(-(base**gamma) * math.log(pt), rel=1e-12), variant
    assert float(rw.dual_focal_loss(z, y, gamma, as_released=True)) == pytest.approx(
        -(weights[2] ** gamma) * math.log(pt), rel=1e-12)
    assert float(rw.get_loss("dual_focal_released", gamma=gamma)(z, y)) == pytest.approx(
        -(weights[2] ** gamma) * math.log(pt), rel=1e-12)
    assert float(rw.get_loss("dual_focal_eqs34_35", gamma=gamma)(z, y)) == pytest.approx(
        -(weights[1] ** gamma) * math.log(pt), rel=1e-12)


def test_dual_focal_released_skips_a_tie_with_the_true_class():
    # p = (0.4, 0.4, 0.2), label 0: eq. 33 takes p_j = 0.4 (weight base 1.0); the released code
    # keeps only probabilities strictly below p_t, so p_j = 0.2 (weight base 0.8)
    probs = torch.tensor([[0.4, 0.4, 0.2]], dtype=torch.float64)
    z, y = probs.log(), torch.tensor([0])
    assert float(rw.dual_focal_loss(z, y, 3.0)) == pytest.approx(-math.log(0.4), rel=1e-12)
    assert float(rw.dual_focal_loss(z, y, 3.0, variant="released")) == pytest.approx(
        -(0.8**3) * math.log(0.4), rel=1e-12)
    with pytest.raises(ValueError, match="variant"):
        rw.dual_focal_loss(z, y, 3.0, variant="paper")
    with pytest.raises(ValueError, match="as_released"):
        rw.dual_focal_loss(z, y, 3.0, as_released=True, variant="eq33")


# ---------------------------------------------------------------------------------------------
# CSFs
# ---------------------------------------------------------------------------------------------
def test_csfs_against_numpy():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(6), size=50)
    srt = np.sort(probs, 1)
    np.testing.assert_allclose(rw.msp(probs), srt[:, -1])
    np.testing.assert_allclose(rw.softmax_margin(probs), srt[:, -1] - srt[:, -2])
    ent = (probs * np.log(probs)).sum(1)
    np.testing.assert_allclose(rw.negative_entropy(probs), ent)
    np.testing.assert_allclose(rw.negative_entropy(probs, normalized=True), 1 + ent / np.log(6))
    assert isinstance(rw.csf("msp", probs), np.ndarray)
    assert isinstance(rw.csf("msp", torch.tensor(probs)), torch.Tensor)
    edge = np.array([[1.0, 0, 0, 0], [0.25, 0.25, 0.25, 0.25]])
    np.testing.assert_allclose(rw.csf("normalized_entropy", edge), [1.0, 0.0], atol=1e-12)


# ---------------------------------------------------------------------------------------------
# AURC loss (eq. 7)
# ---------------------------------------------------------------------------------------------
def test_aurc_weights_closed_form_and_detached():
    z, y = _batch(n=40)
    z.requires_grad_(True)
    p = torch.softmax(z, 1).detach()
    s = p.max(1).values.numpy()
    n = len(s)
    r = (s[None, :] <= s[:, None]).sum(1)  # brute-force ranks: #{j : s_j <= s_i}
    w = -np.log(1 - r / (n + 1))
    np.testing.assert_allclose(rw.aurc_weights(s).numpy(), w, rtol=1e-12)
    loss = rw.aurc_loss(z, y)
    ce = -torch.log_softmax(z, 1)[torch.arange(n), y]
    assert float(loss.detach()) == pytest.approx(float((torch.tensor(w) * ce.detach()).mean()), rel=1e-12)
    # weights detached: gradient = (1/n) w_i (p_i - onehot(y_i))
    (g,) = torch.autograd.grad(loss, z)
    expect = torch.tensor(w)[:, None] * (p - F.one_hot(y, 5)) / n
    torch.testing.assert_close(g, expect)


def test_aurc_harmonic_weights_equal_empirical_aurc():
    rng = np.random.default_rng(3)
    s = rng.random(30)
    losses = rng.random(30)
    order = np.argsort(-s)  # most confident first
    lk = losses[order]
    area = np.mean([lk[: k + 1].mean() for k in range(30)])  # mean selective risk over coverages k/n
    w = rw.aurc_weights(s, weights="harmonic").numpy()
    assert float(np.mean(w * losses)) == pytest.approx(area, rel=1e-12)
    # ties share the largest rank
    np.testing.assert_allclose(rw.aurc_weights(np.array([0.5, 0.5, 0.2])).numpy(),
                               -np.log(1 - np.array([3, 3, 1]) / 4))


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
    got = rw.smoothed_cdf(s, edges, 0.1, at=at).numpy()
    np.testing.assert_allclose(got, expect, rtol=1e-10)
    assert np.all(np.diff(got) >= 0)
    assert got.min() >= 0 and got.max() <= 1
    np.testing.assert_allclose(rw.smoothed_cdf(s, edges, 0.1).numpy(),
                               (h[None] / (1 + np.exp(-(s[:, None] - c[None]) / 0.1))).sum(1) / len(s))


def test_smoothed_cdf_converges_to_empirical_cdf():
    rng = np.random.default_rng(2)
    s = rng.random(400)
    ecdf = (s[None, :] <= s[:, None]).mean(1)
    for m in (15, 200, 4000):
        edges = np.linspace(0, 1, m + 1)
        h, _ = np.histogram(s, edges)
        g = rw.smoothed_cdf(s, edges, 1e-7).numpy()
        # nu -> 0: G(s) = (1/n) sum_m h_m 1[s > c_m], within one bin's mass of the empirical CDF
        assert np.abs(g - ecdf).max() <= h.max() / len(s) + 1e-9
    assert np.abs(g - ecdf).max() <= 2 / len(s) + 1e-9
    edges = np.linspace(0, 1, 4001)
    errs = [np.abs(rw.smoothed_cdf(s, edges, nu).numpy() - ecdf).max() for nu in (1e-1, 1e-2, 1e-3, 1e-5)]
    assert errs[0] > errs[1] > errs[2]
    assert errs[3] < 3 / len(s)


# ---------------------------------------------------------------------------------------------
# AU weights (eqs. 18-19, 22) and AU loss (eqs. 23, 36)
# ---------------------------------------------------------------------------------------------
def test_au_weights_match_eq19_for_uniform_scores():
    rng = np.random.default_rng(4)
    n, kappa = 20_000, 0.8
    s = rng.random(n)
    beta = rw.au_weights(s, coverage=kappa, n_bins=400, nu=1e-4).numpy()
    # G(s) = s for Uniform(0, 1): beta = -ln(1 - s) below tau ~ kappa, -ln(1 - kappa) above
    expect = np.where(s < kappa, -np.log1p(-np.minimum(s, kappa)), -math.log(1 - kappa))
    assert np.abs(beta - expect).max() < 0.06
    low = s < np.quantile(s, 0.79)
    assert np.abs(beta[low] - expect[low]).mean() < 0.01
    # weights are constant above tau and bounded by the clamp G <= n/(n+1)
    tau = float(rw.au_threshold(s, kappa))
    assert np.ptp(beta[s >= tau]) == 0
    assert (s < tau).mean() <= kappa
    tiny = rw.au_weights(np.array([0.0, 1.0, 1.0]), coverage=0.99, n_bins=15, nu=1e-6).numpy()
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
    beta = rw.au_weights(scores, coverage=kappa, n_bins=400, nu=1e-4, normalize=True).numpy()[:5]
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


def test_au_loss_gradient_matches_eq36():
    n, c, nu, kappa, m = 48, 5, 0.1, 0.8, 15
    z, y = _batch(n=n, c=c, scale=1.5, seed=7)
    z.requires_grad_(True)
    loss = rw.au_loss(z, y, csf="msp", coverage=kappa, n_bins=m, nu=nu)
    (g,) = torch.autograd.grad(loss, z)
    # eq. 36 by hand, in numpy
    zn, yn = z.detach().numpy(), y.numpy()
    p = np.exp(zn - zn.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    a = p.argmax(1)
    s = p.max(1)
    edges = np.linspace(0, 1, m + 1)
    h, _ = np.histogram(s, edges)
    cm = (edges[:-1] + edges[1:]) / 2
    sig = 1 / (1 + np.exp(-(s[:, None] - cm[None]) / nu))
    G = (h * sig).sum(1) / n
    dG = (h * sig * (1 - sig)).sum(1) / (n * nu)
    tau = np.sort(s)[math.ceil(kappa * n) - 1]
    Gtau = (h / (1 + np.exp(-(tau - cm) / nu))).sum() / n
    lo, hi = 1 / (n + 1), n / (n + 1)
    assert np.all((G > lo) & (G < hi))  # no clamping active in this batch
    beta = np.where(s < tau, -np.log1p(-G), -np.log1p(-Gtau))
    dbeta = np.where(s < tau, dG / (1 - G), 0.0)
    ce = -np.log(p[np.arange(n), yn])
    ds_dz = s[:, None] * (np.eye(c)[a] - p)
    onehot = np.eye(c)[yn]
    expect = (dbeta[:, None] * ce[:, None] * ds_dz + beta[:, None] * (p - onehot)) / n
    np.testing.assert_allclose(g.numpy(), expect, rtol=1e-9, atol=1e-12)
    assert float(loss.detach()) == pytest.approx(float(np.mean(beta * ce)), rel=1e-10)
    assert np.abs(dbeta).max() > 0  # the CDF term is really there


# ---------------------------------------------------------------------------------------------
# ECE-KDE and KDE-XE
# ---------------------------------------------------------------------------------------------
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
    assert float(rw.ece_kde(f, y, h)) == pytest.approx(err / 15, rel=1e-8)


def test_ece_kde_small_when_calibrated_large_when_not():
    f, y, true0 = _kde_data(1000, 1.0, 0)
    f2, y2, true1 = _kde_data(1000, 3.0, 10)
    assert true0 < 1e-12 and true1 > 0.25
    # canonical L1 with a fixed bandwidth: the estimate shrinks with n when calibrated (a positive
    # finite-sample bias remains) and tracks the true error when not
    e0, e1 = float(rw.ece_kde(f, y, 0.05)), float(rw.ece_kde(f2, y2, 0.05))
    assert e0 < 0.15 and e1 > 2 * e0 and abs(e1 - true1) < 0.1
    assert e0 < float(rw.ece_kde(f[:200], y[:200], 0.05))
    # top-label with the leave-one-out bandwidth: near 0 when calibrated
    t0, t1 = float(rw.ece_kde(f, y, mode="top_label")), float(rw.ece_kde(f2, y2, mode="top_label"))
    assert t0 < 0.05 and t1 > 3 * t0


def test_select_bandwidth_and_kde_xe():
    f, y, _ = _kde_data(60, 1.0, 2)
    h = rw.select_bandwidth(f)
    assert h in rw.BANDWIDTH_GRID
    # leave-one-out log-likelihood by brute force (scipy's Dirichlet density) at h and neighbours
    def loo(bw):
        total = 0.0
        for j in range(len(f)):
            dens = [stats.dirichlet.pdf(np.clip(f[j], 1e-10, None) / np.clip(f[j], 1e-10, None).sum(),
                                        f[i] / bw + 1) for i in range(len(f)) if i != j]
            total += math.log(np.mean(dens))
        return total

    k = rw.BANDWIDTH_GRID.index(h)
    for other in {rw.BANDWIDTH_GRID[max(k - 1, 0)], rw.BANDWIDTH_GRID[min(k + 1, len(rw.BANDWIDTH_GRID) - 1)]}:
        assert loo(h) >= loo(other) - 1e-6
    z, yy = _batch(n=32, c=3)
    z.requires_grad_(True)
    loss = rw.kde_xe_loss(z, yy, weight=0.3, bandwidth=0.05)
    expect = F.cross_entropy(z, yy) + 0.3 * rw.ece_kde(torch.softmax(z, 1), yy, 0.05)
    torch.testing.assert_close(loss, expect)
    (g,) = torch.autograd.grad(loss, z)
    assert torch.isfinite(g).all()


# ---------------------------------------------------------------------------------------------
# Robustness, dispatch and bad input
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,kw", [
    ("xe", {}), ("fl53", {}), ("focal", {"gamma": 0.5}), ("inverse_focal", {"gamma": 2}),
    ("dual_focal", {"gamma": 4}), ("dual_focal", {"as_released": True}),
    ("dual_focal_released", {"gamma": 4}), ("dual_focal_eqs34_35", {}), ("kde_xe", {}),
    ("aurc", {}), ("au", {}), ("au", {"csf": "negative_entropy"}), ("au", {"csf": "softmax_margin"}),
])
def test_losses_finite_for_extreme_logits(name, kw):
    g = torch.Generator().manual_seed(0)
    z = (torch.randint(0, 2, (64, 10), generator=g) * 2 - 1).double() * 1e4
    z[:, 0] = 0.0
    z.requires_grad_(True)
    y = torch.randint(0, 10, (64,), generator=g)
    loss = rw.get_loss(name, **kw)(z, y)
    (grad,) = torch.autograd.grad(loss, z)
    assert loss.ndim == 0 and torch.isfinite(loss) and torch.isfinite(grad).all()


def test_get_loss_binds_arguments():
    z, y = _batch()
    torch.testing.assert_close(rw.get_loss("focal", gamma=0)(z, y), F.cross_entropy(z, y))
    torch.testing.assert_close(rw.get_loss("xe")(z, y), F.cross_entropy(z, y))
    assert set(rw.LOSSES) == {"xe", "fl53", "focal", "inverse_focal", "dual_focal", "dual_focal_eqs34_35",
                              "dual_focal_released", "kde_xe", "aurc", "au"}


def test_bad_input_raises_naming_argument():
    z, y = _batch(n=16)
    s = torch.rand(16)
    for cov in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="coverage"):
            rw.au_loss(z, y, coverage=cov)
    for nu in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="nu"):
            rw.au_weights(s, nu=nu)
        with pytest.raises(ValueError, match="nu"):
            rw.smoothed_cdf(s, torch.linspace(0, 1, 5), nu)
    with pytest.raises(ValueError, match="csf"):
        rw.au_loss(z, y, csf="entropy")
    with pytest.raises(ValueError, match="csf"):
        rw.csf("maxprob", torch.softmax(z, 1))
    with pytest.raises(ValueError, match="logits"):
        rw.focal_loss(z[:, 0], y, 2.0)
    with pytest.raises(ValueError, match="labels"):
        rw.au_loss(z, y[:10])
    with pytest.raises(ValueError, match="labels"):
        rw.focal_loss(z, y + 5, 2.0)
    with pytest.raises(ValueError, match="scores"):
        rw.au_weights(s[:, None])
    with pytest.raises(ValueError, match="edges"):
        rw.smoothed_cdf(s, torch.tensor([0.0, 0.5, 0.5, 1.0]), 0.1)
    with pytest.raises(ValueError, match="gamma"):
        rw.focal_loss(z, y, -1.0)
    with pytest.raises(ValueError, match="gamma"):
        rw.focal_loss(z, y, "fl54")
    with pytest.raises(ValueError, match="n_bins"):
        rw.au_weights(s, n_bins=0)
    with pytest.raises(ValueError, match="probs"):
        rw.msp(torch.rand(4, 3) + 1)
    with pytest.raises(ValueError, match="probs"):
        rw.ece_kde(np.ones((4, 3)), np.zeros(4, dtype=int), 0.1)
    with pytest.raises(ValueError, match="bandwidth"):
        rw.ece_kde(np.full((4, 2), 0.5), np.zeros(4, dtype=int), -0.1)
    with pytest.raises(ValueError, match="name"):
        rw.get_loss("mse")
    with pytest.raises(ValueError, match="reduction"):
        rw.au_loss(z, y, reduction="average")


def test_paper_rows_match_the_scales_config():
    """The paper-scale config's gammas and row are the WRN ones of App. Table 2 / Table 2, and the
    cpu scale's the ResNet-50 ones: architecture, gammas and quoted row agree."""
    from lib import config

    for scale in ("smoke", "cpu", "paper"):
        cfg = config.settings("losses_cifar10", scale)
        row = rw.PAPER_CIFAR10[cfg["paper_row"]]
        assert cfg["gamma_dual_focal"] == row["gamma_dual_focal"]
        assert cfg["gamma_inverse_focal"] == row["gamma_inverse_focal"]
    paper = config.settings("losses_cifar10", "paper")
    assert paper["arch"].startswith("wrn") and paper["paper_row"] == "wrn"
    assert paper["coverage"] == rw.PAPER_CIFAR10["wrn"]["coverage"]
