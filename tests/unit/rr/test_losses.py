"""Tests of lib.rr.losses against the math of the reweighted-risk paper: the focal family
(eqs. 2-3, 33-35, Appendix C), the AURC loss (eq. 7), the AU loss and its gradient (eqs. 23, 36),
KDE-XE, the dispatcher and the paper's rows."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lib.rr import losses as rw
from lib.calibration.ece_kde import ece_kde


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
    torch.testing.assert_close(rw.focal_loss(z, y, 2.0), (-((1 - pt) ** 2) * pt.log()).mean())
    torch.testing.assert_close(rw.inverse_focal_loss(z, y, 1.5), (-((1 + pt) ** 1.5) * pt.log()).mean())
    gam = torch.where(pt < 0.2, 5.0, 3.0)
    torch.testing.assert_close(rw.focal_loss(z, y, "fl53"), (-((1 - pt) ** gam) * pt.log()).mean())
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
    torch.testing.assert_close(intended, -((1 - pt + pj) ** gamma) * pt.log())
    eq35 = rw.dual_focal_loss(z, y, gamma, variant="eqs34_35", reduction="none")
    differ = ~torch.isclose(intended, eq35, rtol=1e-12, atol=0)
    assert torch.equal(differ, pt < pj)
    assert (pt < pj).sum() > 20 and (pt >= pj).sum() > 20
    torch.testing.assert_close(eq35[pt < pj], (-((1 - pt) ** gamma) * pt.log())[pt < pj])


@pytest.mark.parametrize(
    "label,weights",
    [
        # p = (0.5, 0.3, 0.2): (eq. 33, eqs. 34-35, released) weight bases 1 - p_t + p_j, by hand
        (0, (1 - 0.5 + 0.3, 1 - 0.5 + 0.3, 1 - 0.5 + 0.3)),  # true class on top: all three agree
        (1, (1 - 0.3 + 0.5, 1 - 0.3, 1 - 0.3 + 0.2)),  # middle: released takes 0.2 (below p_t)
        (2, (1 - 0.2 + 0.5, 1 - 0.2, 1 - 0.2 + 0.0)),  # smallest: released has nothing below
    ],
)
def test_dual_focal_variants_hand_computed(label, weights):
    probs = torch.tensor([[0.5, 0.3, 0.2]], dtype=torch.float64)
    z, y = probs.log(), torch.tensor([label])
    gamma = 2.0
    pt = float(probs[0, label])
    for variant, base in zip(("eq33", "eqs34_35", "released"), weights):
        got = float(rw.dual_focal_loss(z, y, gamma, variant=variant))
        assert got == pytest.approx(-(base**gamma) * math.log(pt), rel=1e-12), variant
    assert float(rw.dual_focal_loss(z, y, gamma, variant="released")) == pytest.approx(
        -(weights[2] ** gamma) * math.log(pt), rel=1e-12
    )
    assert float(rw.get_loss("dual_focal_released", gamma=gamma)(z, y)) == pytest.approx(
        -(weights[2] ** gamma) * math.log(pt), rel=1e-12
    )
    assert float(rw.get_loss("dual_focal_eqs34_35", gamma=gamma)(z, y)) == pytest.approx(
        -(weights[1] ** gamma) * math.log(pt), rel=1e-12
    )


def test_dual_focal_released_skips_a_tie_with_the_true_class():
    # p = (0.4, 0.4, 0.2), label 0: eq. 33 takes p_j = 0.4 (weight base 1.0); the released code
    # keeps only probabilities strictly below p_t, so p_j = 0.2 (weight base 0.8)
    probs = torch.tensor([[0.4, 0.4, 0.2]], dtype=torch.float64)
    z, y = probs.log(), torch.tensor([0])
    assert float(rw.dual_focal_loss(z, y, 3.0)) == pytest.approx(-math.log(0.4), rel=1e-12)
    assert float(rw.dual_focal_loss(z, y, 3.0, variant="released")) == pytest.approx(
        -(0.8**3) * math.log(0.4), rel=1e-12
    )
    with pytest.raises(ValueError, match="variant"):
        rw.dual_focal_loss(z, y, 3.0, variant="paper")


# ---------------------------------------------------------------------------------------------
# AURC loss (eq. 7)
# ---------------------------------------------------------------------------------------------
def test_aurc_loss_is_cross_entropy_weighted_by_detached_rank_weights():
    z, y = _batch(n=40)
    z.requires_grad_(True)
    p = torch.softmax(z, 1).detach()
    s = p.max(1).values.numpy()
    n = len(s)
    r = (s[None, :] <= s[:, None]).sum(1)  # brute-force ranks: #{j : s_j <= s_i}
    w = -np.log(1 - r / (n + 1))
    loss = rw.aurc_loss(z, y)
    ce = -torch.log_softmax(z, 1)[torch.arange(n), y]
    assert float(loss.detach()) == pytest.approx(float((torch.tensor(w) * ce.detach()).mean()), rel=1e-12)
    # weights detached: gradient = (1/n) w_i (p_i - onehot(y_i))
    (g,) = torch.autograd.grad(loss, z)
    expect = torch.tensor(w)[:, None] * (p - F.one_hot(y, 5)) / n
    torch.testing.assert_close(g, expect)


# ---------------------------------------------------------------------------------------------
# AU loss (eqs. 23, 36)
# ---------------------------------------------------------------------------------------------
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
# KDE-XE
# ---------------------------------------------------------------------------------------------
def test_kde_xe_is_cross_entropy_plus_weighted_ece_kde():
    z, yy = _batch(n=32, c=3)
    z.requires_grad_(True)
    loss = rw.kde_xe_loss(z, yy, weight=0.3, bandwidth=0.05)
    expect = F.cross_entropy(z, yy) + 0.3 * ece_kde(torch.softmax(z, 1), yy, 0.05)
    torch.testing.assert_close(loss, expect)
    (g,) = torch.autograd.grad(loss, z)
    assert torch.isfinite(g).all()
    torch.testing.assert_close(rw.kde_xe_loss(z, yy, weight=0.0), F.cross_entropy(z, yy))
    with pytest.raises(ValueError, match="^released: "):
        rw.kde_xe_loss(z, yy, released="yes")


# ---------------------------------------------------------------------------------------------
# Robustness, dispatch and bad input
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,kw",
    [
        ("xe", {}),
        ("fl53", {}),
        ("focal", {"gamma": 0.5}),
        ("inverse_focal", {"gamma": 2}),
        ("dual_focal", {"gamma": 4}),
        ("dual_focal", {"variant": "released"}),
        ("dual_focal_released", {"gamma": 4}),
        ("dual_focal_eqs34_35", {}),
        ("kde_xe", {}),
        ("aurc", {}),
        ("au", {}),
        ("au", {"csf": "negative_entropy"}),
        ("au", {"csf": "softmax_margin"}),
    ],
)
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
    assert set(rw.LOSSES) == {
        "xe",
        "fl53",
        "focal",
        "inverse_focal",
        "dual_focal",
        "dual_focal_eqs34_35",
        "dual_focal_released",
        "kde_xe",
        "kde_xe_released",
        "aurc",
        "au",
        "au_released",
    }


def test_bad_input_raises_naming_argument():
    z, y = _batch(n=16)
    for cov in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="coverage"):
            rw.au_loss(z, y, coverage=cov)
    with pytest.raises(ValueError, match="csf"):
        rw.au_loss(z, y, csf="entropy")
    with pytest.raises(ValueError, match="csf"):
        rw.aurc_loss(z, y, csf="entropy")
    with pytest.raises(ValueError, match="logits"):
        rw.focal_loss(z[:, 0], y, 2.0)
    with pytest.raises(ValueError, match="labels"):
        rw.au_loss(z, y[:10])
    with pytest.raises(ValueError, match="labels"):
        rw.focal_loss(z, y + 5, 2.0)
    with pytest.raises(ValueError, match="gamma"):
        rw.focal_loss(z, y, -1.0)
    with pytest.raises(ValueError, match="gamma"):
        rw.focal_loss(z, y, "fl54")
    with pytest.raises(ValueError, match="weight"):
        rw.kde_xe_loss(z, y, weight=-1.0)
    with pytest.raises(ValueError, match="name"):
        rw.get_loss("mse")
    with pytest.raises(ValueError, match="reduction"):
        rw.au_loss(z, y, reduction="average")


def test_paper_rows_match_the_scales_config():
    """The paper-scale config's gammas, coverage and row are the WRN ones of App. Table 2, Table 3 and
    Tables 1, 2 and 4, and the cpu scale's the ResNet-50 ones: architecture, settings and quoted row agree."""
    from lib import config
    from lib.rr.pages.losses_cifar10 import PAPER_CIFAR10

    for scale in ("smoke", "cpu", "paper"):
        cfg = config.settings("losses_cifar10", scale)
        row = PAPER_CIFAR10[cfg["paper_row"]]
        assert cfg["gamma_dual_focal"] == row["gamma_dual_focal"]
        assert cfg["gamma_inverse_focal"] == row["gamma_inverse_focal"]
        assert cfg["coverage"] == row["coverage"]  # Table 3 for the row compared with (cpu: ResNet-50's 0.88)
    paper = config.settings("losses_cifar10", "paper")
    assert paper["arch"].startswith("wrn") and paper["paper_row"] == "wrn"
    assert paper["coverage"] == PAPER_CIFAR10["wrn"]["coverage"]


def test_kde_xe_released_is_cross_entropy_in_its_gradient():
    """The released code adds ECE^KDE as a plain number: same loss value, cross-entropy's gradient
    (softmax - one-hot) / n, hand-computed; the loss as defined has a different gradient."""
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    z0 = torch.randn(64, 4, generator=g, dtype=torch.float64) * 3
    y = torch.randint(0, 4, (64,), generator=g)
    grads, values = {}, {}
    for name in ("kde_xe", "kde_xe_released"):
        z = z0.clone().requires_grad_(True)
        loss = rw.get_loss(name, bandwidth=0.2)(z, y)
        loss.backward()
        grads[name], values[name] = z.grad, float(loss.detach())
    by_hand = (F.softmax(z0, dim=1) - F.one_hot(y, 4).to(z0.dtype)) / len(y)
    assert torch.allclose(grads["kde_xe_released"], by_hand, atol=1e-12)
    assert values["kde_xe_released"] == pytest.approx(values["kde_xe"])
    assert not torch.allclose(grads["kde_xe"], by_hand, atol=1e-6)


def test_au_released_uses_the_epoch_histogram():
    """G from counts accumulated over the epoch (64 bins on [0, 1]), hand-computed from eq. 21."""
    from lib.rr.weights import EpochHistogram, au_weights

    h = EpochHistogram(64, epoch_batches=2)
    h.update(torch.tensor([0.1, 0.2]))
    s = torch.tensor([0.9, 0.5, 0.3, 0.95], dtype=torch.float64)
    nu = 0.05
    beta = au_weights(s, coverage=0.5, nu=nu, histogram=h)
    assert h.n == 6 and h.batches == 2
    centres = (torch.arange(64, dtype=torch.float64) + 0.5) / 64
    counts = torch.zeros(64, dtype=torch.float64)
    for v in (0.1, 0.2, 0.9, 0.5, 0.3, 0.95):
        counts[int(v * 64)] += 1
    G = lambda x: float((torch.sigmoid((x - centres) / nu) * counts).sum() / 6)  # noqa: E731
    tau = 0.5  # the 2nd smallest of the batch (coverage 0.5 of 4)
    lo, hi = 1 / 7, 6 / 7
    want = [
        -math.log(1 - min(max(G(tau), lo), hi)) if v >= tau else -math.log(1 - min(max(G(v), lo), hi))
        for v in s.tolist()
    ]
    assert beta.tolist() == pytest.approx(want, rel=1e-9)
    # the batch-only estimate (the paper's Algorithm 1) differs when earlier batches are counted
    assert not torch.allclose(beta, au_weights(s, coverage=0.5, nu=nu, n_bins=64))
    h.update(torch.tensor([0.4, 0.6]))  # a third batch starts a new epoch
    assert h.n == 2 and h.batches == 1
    # "au_released" counts every batch of the epoch: its second batch is weighted by the G of both
    # batches' scores (eq. 23 with au_weights on a histogram of batch A then B), not by batch B's alone
    loss = rw.get_loss("au_released", epoch_batches=10, coverage=0.5)
    gen, y = torch.Generator().manual_seed(1), torch.zeros(16, dtype=torch.long)
    z_a, z_b = (
        torch.randn(16, 3, generator=gen, dtype=torch.float64),
        torch.randn(16, 3, generator=gen, dtype=torch.float64),
    )
    loss(z_a, y)
    seen = EpochHistogram(64, epoch_batches=10)
    seen.update(torch.softmax(z_a, 1).max(1).values)
    s_b, ce_b = torch.softmax(z_b, 1).max(1).values, F.cross_entropy(z_b, y, reduction="none")
    by_eq23 = (au_weights(s_b, coverage=0.5, histogram=seen) * ce_b).mean()
    z_b.requires_grad_(True)
    got = loss(z_b, y)
    assert got.item() == pytest.approx(by_eq23.item(), rel=1e-12)
    assert got.item() != pytest.approx(rw.au_loss(z_b, y, coverage=0.5).item(), rel=1e-6)  # the batch's own G
    got.backward()
    assert torch.isfinite(z_b.grad).all()
    with pytest.raises(ValueError, match="histogram"):
        rw.get_loss("au_released", histogram=h)
