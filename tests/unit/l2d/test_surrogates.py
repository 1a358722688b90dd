"""Tests of lib.l2d.surrogates against the math of the L2D paper (eqs. 1-3, Sec. 2 surrogates) and Sec. 5 (deferral and its metrics)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from lib.l2d import surrogates as l2d


pytestmark = pytest.mark.usefixtures("float64")  # double precision (tests/conftest.py)


# A small discrete problem: 3 inputs x, K = 3 classes, J = 2 experts.
ETA = np.array([[0.7, 0.2, 0.1], [0.2, 0.5, 0.3], [0.34, 0.33, 0.33]])  # P(y | x)
Q = np.array([[0.3, 0.6], [0.9, 0.8], [0.05, 0.5]])  # P(m_j = y | x)
K, J = 3, 2


def population_loss(loss_fn, g: torch.Tensor, x: int) -> torch.Tensor:
    """E_{y ~ eta(x), correctness ~ Bernoulli(q(x))}[loss(g; y, correctness)] by enumeration
    (expert correctness independent of y and of each other given x)."""
    ys, cs, ws = [], [], []
    for y in range(K):
        for c in itertools.product([0, 1], repeat=J):
            w = ETA[x, y] * np.prod([Q[x, j] if c[j] else 1 - Q[x, j] for j in range(J)])
            ys.append(y), cs.append(c), ws.append(w)
    n = len(ys)
    per = loss_fn(g.expand(n, -1), torch.tensor(ys), torch.tensor(cs, dtype=torch.bool), reduction="none")
    return (per * torch.tensor(ws)).sum()


def minimize(loss_fn, x: int) -> torch.Tensor:
    g = torch.zeros(1, K + J, requires_grad=True)
    opt = torch.optim.LBFGS(
        [g], lr=1, max_iter=500, tolerance_grad=1e-12, tolerance_change=1e-14, line_search_fn="strong_wolfe"
    )

    def closure():
        opt.zero_grad()
        loss = population_loss(loss_fn, g, x)
        loss.backward()
        return loss

    for _ in range(5):
        opt.step(closure)
    return g.detach()


@pytest.mark.parametrize("x", range(3))
def test_bayes_optimal_logits_recover_expert_correctness(x):
    g_sm = minimize(l2d.softmax_l2d_loss, x)
    g_ova = minimize(l2d.ova_l2d_loss, x)
    np.testing.assert_allclose(l2d.expert_correctness_softmax(g_sm, K)[0].numpy(), Q[x], atol=2e-4)
    np.testing.assert_allclose(l2d.expert_correctness_ova(g_ova, K)[0].numpy(), Q[x], atol=2e-4)
    # eq. 1: p*_{⊥j} = q_j / (1 + sum_j' q_j')
    p = torch.softmax(g_sm, 1)[0, K:].numpy()
    np.testing.assert_allclose(p, Q[x] / (1 + Q[x].sum()), atol=1e-4)
    # The classifier part recovers h*(x) = argmax eta (x = 2 is nearly tied, so skip it there)
    if x < 2:
        assert int(g_sm[0, :K].argmax()) == int(ETA[x].argmax()) == int(g_ova[0, :K].argmax())


@pytest.mark.parametrize("x", range(3))
def test_zero_population_gradient_at_closed_form_optimum(x):
    eta, q = torch.tensor(ETA[x]), torch.tensor(Q[x])
    g_sm = torch.cat([eta.log(), q.log()])[None].requires_grad_(True)  # softmax = (eta, q)/(1+sum q)
    g_ova = torch.cat([torch.logit(eta), torch.logit(q)])[None].requires_grad_(True)
    for fn, g in ((l2d.softmax_l2d_loss, g_sm), (l2d.ova_l2d_loss, g_ova)):
        (grad,) = torch.autograd.grad(population_loss(fn, g, x), g)
        assert grad.abs().max() < 1e-10
    # ...and the other surrogate's optimum is not a stationary point of this one (test can fail)
    (grad,) = torch.autograd.grad(population_loss(l2d.ova_l2d_loss, g_sm, x), g_sm)
    assert grad.abs().max() > 1e-3


def test_losses_match_formulas_by_hand():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(6, K + J)) * 2
    y = rng.integers(0, K, 6)
    c = rng.random((6, J)) < 0.5
    sm = ova = 0.0
    phi = lambda t: math.log1p(math.exp(-t))  # noqa: E731
    for i in range(6):
        lse = math.log(sum(math.exp(v) for v in z[i]))
        sm += -(z[i, y[i]] - lse) - sum(c[i, j] * (z[i, K + j] - lse) for j in range(J))
        ova += phi(z[i, y[i]]) + sum(phi(-z[i, k]) for k in range(K) if k != y[i])
        ova += sum(phi(-z[i, K + j]) + c[i, j] * (phi(z[i, K + j]) - phi(-z[i, K + j])) for j in range(J))
    assert float(l2d.softmax_l2d_loss(z, y, c)) == pytest.approx(sm / 6, rel=1e-10)
    assert float(l2d.ova_l2d_loss(z, y, c)) == pytest.approx(ova / 6, rel=1e-10)
    assert float(l2d.ova_l2d_loss(z, y, c, reduction="sum")) == pytest.approx(ova, rel=1e-10)


def test_softmax_estimator_exceeds_one_and_matches_eq2():
    z = torch.tensor([[0.0, 0.0, 0.0, 5.0, 5.0], [1.0, 0.0, -1.0, -2.0, 0.5]])
    p = torch.softmax(z, 1)
    eq2 = p[:, K:] / (1 - p[:, K:].sum(1, keepdim=True))
    est = l2d.expert_correctness_softmax(z, K)
    torch.testing.assert_close(est, eq2)
    assert p[0, K:].sum() > 0.98 and (est[0] > 1).all()
    assert est[0, 0] == pytest.approx(math.exp(5) / 3)
    ova = l2d.expert_correctness_ova(z, K)
    assert ((ova > 0) & (ova < 1)).all()


def test_ova_estimates_independent_of_other_experts():
    z = torch.tensor([[0.5, -0.2, 0.1, 0.3, -1.0, 0.7]])  # K = 3, J = 3
    z2 = z.clone()
    z2[0, K + 2] += 3.0  # perturb expert 3's deferral logit
    # OvA (eq. 3): experts 1 and 2 keep exactly the same estimate
    assert torch.equal(l2d.expert_correctness_ova(z, K)[:, :2], l2d.expert_correctness_ova(z2, K)[:, :2])
    # Softmax (eq. 2): p_{⊥1}, p_{⊥2} all move when expert 3's logit moves (shared normalizer) ...
    p, p2 = torch.softmax(z, 1)[:, K:], torch.softmax(z2, 1)[:, K:]
    assert (p2[:, :2] < p[:, :2] - 1e-3).all()

    # ... and eq. 2 couples the experts through sum_j' p_{⊥j'}: holding the probability p_{⊥1}
    # fixed while p_{⊥3} grows (taking mass from the classes) raises expert 1's estimate.
    def eq2(pd):
        return pd / (1 - pd.sum(-1, keepdim=True))

    base = torch.tensor([0.1, 0.2, 0.1])
    more = torch.tensor([0.1, 0.2, 0.4])
    assert eq2(more)[0] > eq2(base)[0] * 1.5
    torch.testing.assert_close(l2d.expert_correctness_softmax(z, K), eq2(p))
    # by hand: three class logits 0 and deferral logits ln 2, ln 3 give exp(g_j) / sum_k exp(g_k) = 2/3, 1
    hand = torch.tensor([[0.0, 0.0, 0.0, math.log(2), math.log(3)]], dtype=torch.float64)
    torch.testing.assert_close(
        l2d.expert_correctness_softmax(hand, 3), torch.tensor([[2 / 3, 1.0]], dtype=torch.float64)
    )


def test_softmax_estimate_depends_on_other_experts_during_training():
    """At a fixed class block, raising one deferral logit changes the softmax-parameterized
    gradient for the other experts' logits; OvA's gradient for them is unchanged."""
    y = torch.tensor([0])
    c = torch.tensor([[True, False]])
    z = torch.tensor([[1.0, 0.0, -1.0, 0.2, 0.1]], requires_grad=True)
    z2 = torch.tensor([[1.0, 0.0, -1.0, 0.2, 3.1]], requires_grad=True)
    gs = [
        torch.autograd.grad(fn(v, y, c), v)[0][0, K] for fn in (l2d.softmax_l2d_loss, l2d.ova_l2d_loss) for v in (z, z2)
    ]
    assert abs(float(gs[0] - gs[1])) > 1e-2  # softmax: expert 1's gradient moved
    assert float(gs[2]) == float(gs[3])  # OvA: identical


def test_losses_finite_for_extreme_logits():
    rng = np.random.default_rng(1)
    z = torch.tensor(np.sign(rng.normal(size=(32, K + J))) * 1e4, requires_grad=True)
    y = torch.tensor(rng.integers(0, K, 32))
    c = torch.tensor(rng.random((32, J)) < 0.5)
    for fn in (l2d.softmax_l2d_loss, l2d.ova_l2d_loss):
        loss = fn(z, y, c)
        (g,) = torch.autograd.grad(loss, z)
        assert torch.isfinite(loss) and torch.isfinite(g).all()
    assert torch.isfinite(l2d.expert_correctness_ova(z.detach(), K)).all()


def test_defer_decisions_system_accuracy_coverage():
    z = torch.tensor(
        [
            [3.0, 1.0, 0.0, 2.0, 1.0],  # classifier (pred 0)
            [0.0, 1.0, 0.0, 2.0, 1.5],  # defer to expert 0
            [0.0, 1.0, 0.0, 0.5, 4.0],  # defer to expert 1
            [
                2.0,
                0.0,
                0.0,
                2.0,
                1.0,
            ],  # exact tie g_0 = g_perp1 = 2 -> defer (paper App. B: r* = 0 only if strictly better)
        ]
    )
    pred, defer_to = l2d.defer_decisions(z, K)
    assert pred.tolist() == [0, 1, 1, 0]
    assert defer_to.tolist() == [-1, 0, 1, 0]
    labels = np.array([0, 2, 2, 1])
    experts = np.array([[1, 1], [2, 0], [0, 2], [1, 0]])
    # final: 0 (ok), expert0 -> 2 (ok), expert1 -> 2 (ok), tie: expert0 -> 1 (ok; the classifier's 0 would be wrong)
    assert l2d.system_accuracy(z, labels, experts, K) == pytest.approx(1.0)
    np.testing.assert_allclose(l2d.coverage_per_expert(z, K), [0.25, 0.5, 0.25])


def test_defer_decisions_ties_between_experts_pick_the_first():
    z = torch.tensor([[0.0, 0.5, 0.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.5, 0.5]])
    _, defer_to = l2d.defer_decisions(z, K)
    assert defer_to.tolist() == [0, -1]  # tied experts above the classifier -> expert 0; below -> classifier


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------
def test_bad_input_raises_naming_argument():
    z = torch.zeros(4, 5)
    y = torch.zeros(4, dtype=torch.long)
    c = torch.zeros(4, 2, dtype=torch.bool)
    with pytest.raises(ValueError, match="logits"):
        l2d.softmax_l2d_loss(torch.zeros(4), y, c)
    with pytest.raises(ValueError, match="expert_correct"):
        l2d.ova_l2d_loss(z, y, torch.zeros(4, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="expert_correct"):
        l2d.ova_l2d_loss(z, y, torch.full((4, 2), 0.5))
    with pytest.raises(ValueError, match="labels"):
        l2d.softmax_l2d_loss(z, torch.full((4,), 3), c)
    with pytest.raises(ValueError, match="logits and labels"):
        l2d.softmax_l2d_loss(z, torch.zeros(3, dtype=torch.long), c)
    with pytest.raises(ValueError, match="logits"):
        l2d.softmax_l2d_loss(torch.full((4, 5), float("nan")), y, c)
    with pytest.raises(ValueError, match="num_classes"):
        l2d.expert_correctness_softmax(z, 5)
    with pytest.raises(ValueError, match="reduction"):
        l2d.softmax_l2d_loss(z, y, c, reduction="avg")
    with pytest.raises(ValueError, match="expert_preds"):
        l2d.system_accuracy(z, y, np.zeros((4, 3)), 3)
