"""Tests of lib.l2d.experiment against known values: metrics of hand-built logits, the experts'
correctness rates in the committees, and early stopping's model selection."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lib.engine import loop
from lib.l2d import surrogates as l2d
from lib.l2d import experiment as lx
from lib.l2d.gaussian_mixture import gaussian_mixture


def _split(y, m) -> lx.L2DSplit:
    y = torch.as_tensor(y)
    return lx.L2DSplit(torch.zeros(len(y), 1), y, torch.as_tensor(m))


def test_l2d_metrics_of_hand_built_ova_logits():
    # K = 2 classes, J = 1 expert; every deferral logit gives sigmoid = 0.7, the expert is right on
    # half the examples -> one occupied bin, ECE = |0.5 - 0.7| = 0.2.
    n = 10
    y = np.zeros(n, dtype=int)
    m = np.where(np.arange(n) < 5, 0, 1)[:, None]  # right on the first half
    g_def = np.log(0.7 / 0.3)
    # examples 0..3 defer (deferral logit above both class logits), the others predict class 0
    cls = np.where(np.arange(n)[:, None] < 4, [[-1.0, -2.0]], [[3.0, -2.0]])
    logits = np.concatenate([cls, np.full((n, 1), g_def)], 1)
    out = lx.l2d_metrics(torch.tensor(logits), _split(y, m), "ova")
    assert out["ece"] == pytest.approx(0.2)
    assert out["ece_per_expert"] == [pytest.approx(0.2)]
    # deferred 0..3 -> expert right (indices < 5); the rest -> classifier predicts 0 = y: all right
    assert out["system_accuracy"] == pytest.approx(1.0)
    assert out["defer_rate"] == pytest.approx(0.4)
    assert out["coverage"] == [pytest.approx(0.6), pytest.approx(0.4)]
    assert out["classifier_accuracy"] == pytest.approx(1.0)  # argmax of [-1, -2] is class 0 too
    assert out["frac_estimate_above_1"] == 0.0


def test_l2d_metrics_caps_softmax_estimates_above_one():
    # softmax estimate p_def / (1 - p_def) = exp(g_def - logsumexp(class logits)) = e^2 > 1:
    # capped at 1; the expert is always right -> ECE 0, and the estimate counts as degenerate.
    logits = torch.tensor([[0.0, -50.0, 2.0]] * 4)
    out = lx.l2d_metrics(logits, _split([0, 0, 0, 0], [[0], [0], [0], [0]]), "softmax")
    assert out["ece"] == pytest.approx(0.0, abs=1e-9)
    assert out["frac_estimate_above_1"] == 1.0


def test_committees_have_the_papers_correctness_rates():
    n = 40_000
    x, y, cluster = gaussian_mixture(n, seed=1)
    experts = lx.committee("experts", 3, "gaussians", seed=0)
    assert len(experts) == 3
    split = lx.annotate(x, y, experts)
    ok = split.correct.numpy()
    region = np.isin(cluster, [2, 3])  # clusters 3 and 4 (1-based)
    assert ok[region].all()
    np.testing.assert_allclose(ok[~region].mean(0), 0.25, atol=0.015)  # random over 4 classes
    dep = lx.committee("dependence", 0.6, "gaussians", seed=0)
    ok = lx.annotate(x, y, dep).correct.numpy()
    assert abs(ok[:, 0].mean() - 0.25) < 0.015  # the random expert, everywhere
    np.testing.assert_allclose(ok[region, 1:].mean(0), 0.6, atol=0.02)
    spec = lx.committee("specialized", 5, "cifar10", seed=0)
    yc = np.repeat(np.arange(10), 2000)
    ok = lx.annotate(np.zeros((len(yc), 1)), yc, spec).correct.numpy()
    for j in range(5):
        assert ok[np.isin(yc, [2 * j, 2 * j + 1]), j].all()
        assert abs(ok[~np.isin(yc, [2 * j, 2 * j + 1]), j].mean() - 0.1) < 0.02
    with pytest.raises(ValueError, match="experiment"):
        lx.committee("specialized", 2, "gaussians")


def test_annotate_noise_is_keyed_by_example_id():
    y = np.arange(1000) % 4
    experts = lx.committee("experts", 1, "gaussians", seed=3)
    a = lx.annotate(np.zeros((1000, 2)), y, experts, offset=0).m
    b = lx.annotate(np.zeros((1000, 2)), y, experts, offset=0).m
    c = lx.annotate(np.zeros((1000, 2)), y, experts, offset=10**6).m
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_train_and_score_keeps_the_best_validation_epoch_and_learns_the_expert():
    torch.manual_seed(0)
    n = 600
    x = torch.randn(n, 2)
    y = (x[:, 0] > 0).long()
    m = torch.where(x[:, 1] > 0, y, 1 - y)[:, None]  # the expert is right exactly where x2 > 0
    tr, va = lx.L2DSplit(x[:400], y[:400], m[:400]), lx.L2DSplit(x[400:], y[400:], m[400:])
    model = torch.nn.Sequential(torch.nn.Linear(2, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    cfg = {"epochs": 40, "lr": 0.1, "weight_decay": 5e-4, "batch_size": 128, "patience": 5}
    chosen: list = []

    class Spy(loop.SelectBest):  # the validation losses the epochs reached
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            chosen.append(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loop, "SelectBest", Spy)
        out = lx.train_and_score(model, (tr, va, va), "ova", cfg, seed=0)
    with torch.no_grad():
        final = float(l2d.ova_l2d_loss(model(va.x), va.y, va.correct))
    assert final == pytest.approx(chosen[0].best, rel=1e-5) and out["epochs_run"] <= 40
    est = torch.sigmoid(model(va.x)[:, 2]).detach()
    assert est[va.x[:, 1] > 0.5].mean() > 0.8 and est[va.x[:, 1] < -0.5].mean() < 0.2
    with pytest.raises(ValueError, match="surrogate"):
        lx.train_and_score(model, (tr, va, va), "hinge", cfg, seed=0)
