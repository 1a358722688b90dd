"""Tests of lib.moe.fgr (FGR baseline, paper 1 App. D.1) against the math of soft ECE and the gradient
projection, and of its one-forward step against the definition (two forwards, two backwards)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lib.moe.fgr import (
    fgr_batch,
    fgr_step,
    image_inputs,
    rectified_gradients,
    rectify,
    soft_ece,
    packed_fgr_gradients,
    two_gradients,
)
from lib.data.jpeg import filtered_rows
from lib.moe.heads import MoEHead, MoEModel, label_nll
from lib.moe.robust import robust_moe_loss


def filter_batch(x, mean, std, return_indices=False, **draw):
    """The batch with :func:`lib.data.jpeg.filtered_rows` (same draw) in place of their originals."""
    rows, idx = filtered_rows(x, mean, std, **draw)
    out = x.detach().clone()
    out[idx] = rows
    return (out, idx) if return_indices else out


def _hard_l2_ece(conf: np.ndarray, correct: np.ndarray, n_bins: int) -> float:
    """sqrt(sum_b (n_b/n) (acc_b - conf_b)^2) with equal-width bins, by brute force."""
    total = 0.0
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        sel = [(c, a) for c, a in zip(conf, correct) if (lo <= c < hi) or (b == n_bins - 1 and c == 1.0)]
        if sel:
            cs, as_ = zip(*sel)
            total += len(sel) / len(conf) * (np.mean(as_) - np.mean(cs)) ** 2
    return math.sqrt(total)


def _random_probs(n: int, c: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(torch.randn(n, c, generator=g, dtype=torch.float64) * 2.5, 1)
    labels = torch.randint(0, c, (n,), generator=g)
    return probs, labels


def test_soft_ece_limits() -> None:
    """T -> 0: membership becomes the nearest centre = the equal-width bin, so soft ECE -> the hard
    L2 ECE. T -> infinity: one uniform bin, so soft ECE -> |mean accuracy - mean confidence|."""
    probs, labels = _random_probs(300, 5, 1)
    conf, pred = probs.max(1)
    correct = (pred == labels).double()
    hard = _hard_l2_ece(conf.numpy(), correct.numpy(), 15)
    assert soft_ece(probs, labels, temperature=1e-7).item() == pytest.approx(hard, rel=1e-6)
    big = soft_ece(probs, labels, temperature=1e6).item()
    assert big == pytest.approx(abs(correct.mean() - conf.mean()).item(), rel=1e-3)
    # Jensen: the hard L2 ECE upper-bounds the usual (L1) binned ECE.
    l1 = sum(
        abs(correct[m].mean() - conf[m].mean()).item() * m.double().mean().item()
        for m in [(conf > b / 15) & (conf <= (b + 1) / 15) for b in range(15)]
        if m.any()
    )
    assert hard >= l1 - 1e-12


def test_soft_ece_is_differentiable_and_validates() -> None:
    logits = torch.randn(50, 4, dtype=torch.float64, requires_grad=True)
    labels = torch.randint(0, 4, (50,))
    soft_ece(torch.softmax(logits, 1), labels).backward()
    assert torch.isfinite(logits.grad).all() and logits.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="probs"):
        soft_ece(torch.randn(5, 3), torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="temperature"):
        soft_ece(torch.full((2, 2), 0.5), torch.tensor([0, 1]), temperature=0.0)


def test_rectify_projection() -> None:
    g = torch.Generator().manual_seed(5)
    for _ in range(20):
        gm, gc = torch.randn(30, generator=g, dtype=torch.float64), torch.randn(30, generator=g, dtype=torch.float64)
        r = rectify(gm, gc)
        dot = gm @ gc
        if dot >= 0:
            assert torch.equal(r, gm)
        else:
            assert (r @ gc).item() == pytest.approx(0.0, abs=1e-10)
            # The projection is the closest point to g_m in {g : <g, g_c> >= 0}: compare with
            # random members of that half-space.
            for _ in range(20):
                v = torch.randn(30, generator=g, dtype=torch.float64)
                if v @ gc < 0:
                    v = v - (v @ gc) / (gc @ gc) * gc
                assert (r - gm).norm() <= (v - gm).norm() + 1e-12
        assert (r @ gc).item() >= -1e-10
    with pytest.raises(ValueError, match="g_main"):
        rectify(torch.ones(3), torch.ones(4))


class _CountingBackbone(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.calls = 0
        self.out_features = 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return F.adaptive_avg_pool2d(torch.relu(self.conv(x)), 1).flatten(1)


@pytest.mark.parametrize("robust", [False, True])
def test_fgr_step_applies_the_rectified_gradient(robust: bool, natural_images) -> None:
    """One step with SGD(lr=1) on a model without batch statistics: the parameter change equals minus
    the flat-vector rectification of g_m (main loss on the filtered batch) against g_c (soft ECE on
    the original batch), each computed by the definition (its own forward and backward), while the
    step runs one backbone forward."""
    torch.manual_seed(0)
    mean, std = [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]
    model = MoEModel(_CountingBackbone(), MoEHead(4, 3, num_experts=2, router_hidden=5)).double()
    x = (natural_images(20, 16, 16, seed=3) / 255 - 0.5) / 0.25
    y = torch.randint(0, 3, (20,))

    def loss_fn(out, labels):
        l = label_nll(out.probs, labels)
        return robust_moe_loss(l, 2.0) if robust else l.mean()

    params = list(model.parameters())
    before = [p.detach().clone() for p in params]
    xf = filter_batch(x, mean, std, generator=torch.Generator().manual_seed(42))
    lm, lc = loss_fn(model(xf), y), soft_ece(model(x).probs, y)
    gm = torch.cat([g.flatten() for g in torch.autograd.grad(lm, params)])
    gc = torch.cat([g.flatten() for g in torch.autograd.grad(lc, params)])
    expected = gm if gm @ gc >= 0 else gm - (gm @ gc) / (gc @ gc) * gc

    model.backbone.calls = 0
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    gen = torch.Generator().manual_seed(42)
    info = fgr_step(model, loss_fn, x, y, opt, generator=gen, inputs=image_inputs(mean, std))
    assert model.backbone.calls == 1  # one backbone forward per step
    step = torch.cat([(b - p.detach()).flatten() for b, p in zip(before, params)])
    assert torch.allclose(step, expected, atol=1e-10)
    assert bool(info["rectified"]) == bool(gm @ gc < 0)
    assert float(info["dot"]) == pytest.approx((gm @ gc).item(), rel=1e-6, abs=1e-12)
    assert float(info["loss_main"]) == pytest.approx(lm.item(), rel=1e-12)
    assert float(info["loss_cal"]) == pytest.approx(lc.item(), rel=1e-12)


def test_fgr_batch_holds_both_branches(natural_images) -> None:
    """The forward's input is the batch followed by the filtered copies; the main rows read out
    exactly filter_batch's batch (same generator), the first B rows the original."""
    mean, std = [0.4, 0.5, 0.6], [0.2, 0.25, 0.3]
    x = (natural_images(45, 16, 16, seed=1).float() / 255 - 0.5) / 0.25
    x_cat, rows = fgr_batch(x, mean, std, generator=torch.Generator().manual_seed(7))
    assert x_cat.shape[0] == 45 + 2  # max(1, int(0.05 * 45)) = 2 filtered copies
    assert torch.equal(x_cat[:45], x)
    assert torch.equal(x_cat[rows], filter_batch(x, mean, std, generator=torch.Generator().manual_seed(7)))
    assert sorted(rows[rows >= 45].tolist()) == [45, 46]


def test_two_gradients_equal_two_backward_passes() -> None:
    """One batched backward gives each loss's gradient (here through BatchNorm in training mode)."""
    torch.manual_seed(1)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3),
        torch.nn.BatchNorm2d(4),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 6 * 6, 3),
        torch.nn.Linear(3, 3),
    ).double()
    x, y = torch.randn(10, 3, 8, 8, dtype=torch.float64), torch.randint(0, 3, (10,))
    params = list(net.parameters())
    out = net(x)
    a, b = F.cross_entropy(out, y), soft_ece(out.softmax(1), y)
    ga = torch.autograd.grad(a, params, retain_graph=True)
    gb = torch.autograd.grad(b, params, retain_graph=True)
    both = two_gradients(a, b, params)
    for p, g, u, v in zip(params, both, ga, gb):
        assert g.shape == (2, *p.shape)
        assert torch.allclose(g[0], u, atol=1e-12) and torch.allclose(g[1], v, atol=1e-12)
    unused = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))
    assert torch.equal(two_gradients(net(x).sum(), net(x).mean(), [unused])[0], torch.zeros(2, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="loss_a"):
        two_gradients(out, b, params)


def test_rectified_gradients_project_per_member() -> None:
    """With a leading member dimension, each member's update is rectify() of its own flat vectors
    (member 0's gradients conflict, member 1's agree); a plain channels_last parameter keeps its
    layout."""
    g = torch.Generator().manual_seed(2)
    params = [torch.zeros(3, 4, 2, 5, 5), torch.zeros(3, 7)]
    grads = [torch.randn(2, *p.shape, generator=g) for p in params]
    for t in grads:
        t[1, 0] = -t[0, 0]
        t[1, 1] = t[0, 1]
    update, dot = rectified_gradients(grads, params, runs=3)
    assert dot[0] < 0 < dot[1]
    for i in range(3):
        gm = torch.cat([t[0, i].flatten() for t in grads])
        gc = torch.cat([t[1, i].flatten() for t in grads])
        assert dot[i].item() == pytest.approx((gm @ gc).item(), rel=1e-5)
        assert torch.allclose(torch.cat([u[i].flatten() for u in update]), rectify(gm, gc), atol=1e-5)
    assert torch.allclose(update[0][0], torch.zeros(4, 2, 5, 5), atol=1e-6)  # g_m - (-1) * (-g_m) = 0
    conv = torch.zeros(4, 2, 5, 5).to(memory_format=torch.channels_last)
    one = [torch.randn(2, 4, 2, 5, 5, generator=g)]
    (u,), _ = rectified_gradients(one, [conv])
    assert u.is_contiguous(memory_format=torch.channels_last)
    assert torch.allclose(u.flatten(), rectify(one[0][0].flatten(), one[0][1].flatten()), atol=1e-6)


def test_fgr_step_updates_batchnorm_once_over_both_branches(natural_images) -> None:
    """Batch statistics cover the B + m rows of the one forward, and running statistics move once:
    with BatchNorm first, running_mean = momentum * (channel mean of the B + m rows)."""
    mean, std = [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]
    x = (natural_images(40, 8, 8, seed=4).float() / 255 - 0.5) / 0.25
    y = torch.randint(0, 3, (40,))
    backbone = torch.nn.Sequential(torch.nn.BatchNorm2d(3), torch.nn.Flatten(), torch.nn.Linear(3 * 64, 6))
    backbone.out_features = 6
    model = MoEModel(backbone, MoEHead(6, 3, num_experts=2, router_hidden=4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    fgr_step(
        model,
        lambda o, t: label_nll(o.probs, t).mean(),
        x,
        y,
        opt,
        generator=torch.Generator().manual_seed(5),
        inputs=image_inputs(mean, std),
    )
    x_cat, _ = fgr_batch(x, mean, std, generator=torch.Generator().manual_seed(5))
    bn = backbone[0]
    assert int(bn.num_batches_tracked) == 1
    assert torch.allclose(bn.running_mean, 0.1 * x_cat.mean(dim=(0, 2, 3)), atol=1e-6)


def test_packed_fgr_gradients_equal_each_run_alone(natural_images) -> None:
    """Two models packed into one (lib.engine.packed) get the updates that each model's own
    one-forward FGR gradient gives: per-run inner products and norms over its own parameters."""
    from lib.engine.packed import Packed, pack_inputs

    torch.manual_seed(3)
    models = [MoEModel(_CountingBackbone(), MoEHead(4, 3, num_experts=2, router_hidden=5)).double() for _ in range(2)]
    mean, std = [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]
    xs = [(natural_images(20, 8, 8, seed=s) / 255 - 0.5) / 0.25 for s in (6, 7)]
    ys = [torch.randint(0, 3, (20,)) for _ in range(2)]
    inputs = [fgr_batch(x, mean, std, generator=torch.Generator().manual_seed(s)) for x, s in zip(xs, (1, 2))]
    main = [lambda o, t: label_nll(o.probs, t).mean(), lambda o, t: robust_moe_loss(label_nll(o.probs, t), 2.0)]
    pack = Packed([m for m in models])
    alone = []
    for m, (xc, rows), y, fn in zip(models, inputs, ys, main):
        out = m(xc)
        ps = list(m.parameters())
        sub = type(out)(**{k: v[rows] for k, v in vars(out).items()})
        alone.append(rectified_gradients(two_gradients(fn(sub, y), soft_ece(out.probs[:20], y), ps), ps)[0])
    out = pack(pack_inputs([x for x, _ in inputs]))
    plist = list(pack.parameters())
    update, loss = packed_fgr_gradients(out, [r for _, r in inputs], ys, main, plist)
    assert loss.shape == (2,)
    for i in range(2):
        for u, a in zip(update, alone[i]):
            assert torch.allclose(u.reshape(2, -1)[i].reshape(a.shape), a, atol=1e-10)


def test_fgr_image_rule_needs_the_normalization() -> None:
    with pytest.raises(ValueError, match="mean"):
        image_inputs(None, None)


class _DictEncoder(torch.nn.Module):
    """A text-like backbone: dict inputs, LayerNorm (no batch statistics), dropout off."""

    out_features = 5

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Linear(6, 5)
        self.norm = torch.nn.LayerNorm(5)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:  # MoEModel passes a dict as keywords
        return self.norm(self.emb(input_ids))


def test_fgr_step_on_unfiltered_inputs_matches_the_definition() -> None:
    """Text inputs are not filtered: both losses read the same rows, and the step is the definition's
    rectified gradient exactly (LayerNorm has no batch statistics)."""
    torch.manual_seed(4)
    model = MoEModel(_DictEncoder(), MoEHead(5, 3, num_experts=2, router_hidden=4)).double()
    batch = {"input_ids": torch.randn(30, 6, dtype=torch.float64)}
    y = torch.randint(0, 3, (30,))
    params = list(model.parameters())
    before = [p.detach().clone() for p in params]
    gm = torch.cat([g.flatten() for g in torch.autograd.grad(label_nll(model(batch).probs, y).mean(), params)])
    gc = torch.cat([g.flatten() for g in torch.autograd.grad(soft_ece(model(batch).probs, y), params)])
    fgr_step(model, lambda o, t: label_nll(o.probs, t).mean(), batch, y, torch.optim.SGD(params, lr=1.0))
    step = torch.cat([(b - p.detach()).flatten() for b, p in zip(before, params)])
    assert torch.allclose(step, rectify(gm, gc), atol=1e-10)


def test_soft_ece_gradient_is_finite_where_a_bin_is_nearly_empty() -> None:
    """One prediction at confidence 0.96-0.97 (T = 0.01, 15 bins) leaves bin 0 a mass of ~1e-31: its
    square underflows in float32, and clamping the mass at ``tiny`` gave a 0/0 = NaN gradient. The value
    still equals the hard-bin definition's limit (|acc - conf| of the one prediction)."""
    from lib.moe.fgr import SOFT_ECE_BINS, SOFT_ECE_TEMPERATURE, soft_ece

    for c in torch.linspace(0.95, 0.975, 11).tolist():
        p = torch.tensor([[c, 1 - c]], requires_grad=True)
        v = soft_ece(p, torch.tensor([0]), SOFT_ECE_BINS, SOFT_ECE_TEMPERATURE)
        (g,) = torch.autograd.grad(v, p)
        assert torch.isfinite(g).all(), c
        assert float(v.detach()) == pytest.approx(1 - c, abs=1e-6)  # one sample: sqrt((1 - conf)^2)


def test_soft_ece_at_its_default_temperature_by_hand():
    """Two examples, confidences 0.9 (right) and 0.6 (wrong), 15 centres (b + 0.5)/15, membership
    softmax_b(-(conf - c_b)^2 / 0.01): sqrt(sum_b prop_b (acc_b - conf_b)^2) = 0.4225122 (computed
    in numpy from that formula; the hard L2 ECE of the same two is 0.4301, a kernel of 2T gives 0.3985)."""
    probs = torch.tensor([[0.9, 0.1], [0.6, 0.4]], dtype=torch.float64)
    assert soft_ece(probs, torch.tensor([0, 1])).item() == pytest.approx(0.4225122209, rel=1e-8)


def test_soft_ece_on_a_case_exact_by_hand():
    """Two bins (centres 0.25, 0.75) at T = 0.25 / ln 3, so a confidence on one centre belongs 3/4 to it
    and 1/4 to the other: confidence 0.75 right gives u = (1/4, 3/4), 0.25 wrong gives (3/4, 1/4); each
    bin has mass 1 and gap acc_b - conf_b = -0.125, +0.125, so soft ECE = sqrt(2 x 1/2 x 0.125^2) = 0.125
    (a kernel of 2T gives 0.067; the hard L2 ECE is 0.25)."""
    probs = torch.tensor([[0.75, 0.25 / 3, 0.25 / 3, 0.25 / 3], [0.25, 0.25, 0.25, 0.25]], dtype=torch.float64)
    value = soft_ece(probs, torch.tensor([0, 1]), n_bins=2, temperature=0.25 / math.log(3))
    assert value.item() == pytest.approx(0.125, abs=1e-12)
