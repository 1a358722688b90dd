"""Tests of lib.moe.heads: the mixture head of paper 1 (eq. 1, App. D.3/D.4) against its definition."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lib.moe.heads import MoEHead, MoEModel, MoEOutput, SingleExpertHead, label_nll, routing_entropy


def _head(seed: int = 0) -> MoEHead:
    torch.manual_seed(seed)
    return MoEHead(6, 5, num_experts=3, router_hidden=7).double()


def test_soft_head_matches_its_definition() -> None:
    head = _head()
    h = torch.randn(9, 6, dtype=torch.float64)
    out = head(h)
    assert out.probs.shape == (9, 5)
    assert out.routing.shape == (9, 3)
    assert out.expert_probs.shape == (9, 3, 5)
    assert out.expert_logits.shape == (9, 3, 5)
    # Router r = softmax(W2 relu(W1 h)).
    w1, w2 = head.router[0], head.router[2]
    r = torch.softmax(w2(torch.relu(w1(h))), dim=1)
    assert torch.allclose(out.routing, r)
    # Mixture in probability space, example by example and expert by expert.
    for i in range(9):
        mix = sum(out.routing[i, k] * torch.softmax(out.expert_logits[i, k], 0) for k in range(3))
        assert torch.allclose(out.probs[i], mix)
    assert torch.allclose(out.probs.sum(1), torch.ones(9, dtype=torch.float64))
    assert torch.allclose(out.expert_probs.sum(2), torch.ones(9, 3, dtype=torch.float64))


def test_expert_k_is_a_linear_map() -> None:
    """z_k(a h1 + b h2) = a z_k(h1) + b z_k(h2) - (a + b - 1) z_k(0): each expert is affine in h."""
    head = _head()
    h1, h2, zero = torch.randn(1, 6).double(), torch.randn(1, 6).double(), torch.zeros(1, 6).double()
    z = lambda h: head(h).expert_logits  # noqa: E731
    assert torch.allclose(z(2 * h1 + 3 * h2), 2 * z(h1) + 3 * z(h2) - 4 * z(zero))


def test_single_expert_is_an_moe_with_one_expert() -> None:
    torch.manual_seed(1)
    head = SingleExpertHead(4, 3)
    h = torch.randn(7, 4)
    out = head(h)
    assert isinstance(out, MoEOutput)
    assert out.routing.shape == (7, 1) and torch.all(out.routing == 1)
    assert torch.allclose(out.probs, torch.softmax(head.linear(h), 1))
    assert torch.allclose(out.expert_probs[:, 0], out.probs)
    y = torch.tensor([0, 1, 2, 0, 1, 2, 0])
    assert torch.allclose(label_nll(out.probs, y), F.cross_entropy(head.linear(h), y, reduction="none"), atol=1e-6)
    assert torch.allclose(label_nll(out.expert_probs, y)[:, 0], label_nll(out.probs, y))


def test_model_wraps_backbone_and_head() -> None:
    torch.manual_seed(2)
    backbone = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 6))
    model = MoEModel(backbone, MoEHead(6, 4, num_experts=2, router_hidden=5))
    x = torch.randn(3, 3, 2, 2)
    out = model(x)
    assert torch.allclose(out.probs, model.head(backbone(x)).probs)
    with pytest.raises(ValueError, match="backbone"):
        MoEModel("not a module", model.head)


def test_losses_are_negative_log_probabilities() -> None:
    probs = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]], dtype=torch.float64)
    ep = torch.stack([probs, torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)], 1)
    out = MoEOutput(probs=probs, routing=torch.ones(2, 2) / 2, expert_probs=ep, expert_logits=ep.log())
    y = torch.tensor([2, 1])
    # p = 0 is clamped at 1e-12 before the log.
    assert label_nll(out.probs, y).tolist() == pytest.approx([-math.log(1e-12), -math.log(0.3)])
    assert label_nll(out.expert_probs, y).tolist() == [
        pytest.approx([-math.log(1e-12), -math.log(1e-12)]),
        pytest.approx([-math.log(0.3), -math.log(1e-12)]),
    ]
    # Packed runs: a leading run dimension on probabilities and labels alike.
    packed = label_nll(torch.stack([ep, ep.flip(1)]), torch.stack([y, y]))
    assert packed.shape == (2, 2, 2) and packed[1].flip(1).tolist() == label_nll(ep, y).tolist()


def test_routing_entropy_known_values() -> None:
    r = torch.tensor([[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]])
    assert routing_entropy(r).tolist() == pytest.approx([math.log(4), 0.0, math.log(2)], abs=1e-6)
    assert routing_entropy(np.array([[0.5, 0.5]])).tolist() == pytest.approx([math.log(2)])
    with pytest.raises(ValueError, match="routing"):
        routing_entropy(torch.tensor([[0.5, 0.6]]))


def test_bad_arguments_raise_naming_them() -> None:
    with pytest.raises(ValueError, match="num_experts"):
        MoEHead(4, 3, num_experts=0)
    with pytest.raises(ValueError, match="num_classes"):
        SingleExpertHead(4, 1)
    with pytest.raises(ValueError, match="h"):
        MoEHead(4, 3)(torch.randn(2, 5))


def test_gradients_reach_router_and_experts() -> None:
    head = _head()
    h = torch.randn(8, 6, dtype=torch.float64)
    label_nll(head(h).probs, torch.randint(0, 5, (8,))).mean().backward()
    for p in head.parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0
