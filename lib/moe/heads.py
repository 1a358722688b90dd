"""Mixture-of-experts classification head and its per-example losses.

Paper: "Calibrated mixture-of-experts under distribution shift" (paper 1),
section 3 eq. (1)-(3) and Appendix D.3: a backbone feature h feeds K linear experts z_k = A_k h + b_k
with p_k = softmax(z_k) and a 2-layer MLP router r(h) = softmax(W2 relu(W1 h)); the mixture is taken
in probability space, p = sum_k r_k p_k. The loss is cross-entropy of the mixture, l_i = -log p_{y_i}.

One forward pass returns everything every objective needs, so Robust Filtered never runs the backbone
twice (paper 1, section 5)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lib.validation import check_finite, check_int, check_ndim, to_float_tensor

PROB_CLAMP = 1e-12


@dataclass
class MoEOutput:
    """What a head returns: mixture ``probs`` (N,C), ``routing`` (N,K), ``expert_probs`` (N,K,C),
    ``expert_logits`` (N,K,C); K=1 and routing all ones for a single expert."""

    probs: torch.Tensor
    routing: torch.Tensor
    expert_probs: torch.Tensor
    expert_logits: torch.Tensor


def _check_features(h: torch.Tensor, in_features: int, dtype: torch.dtype) -> torch.Tensor:
    """``h`` checked (a floating (N, d) tensor, or (runs, N, d) for packed runs) and cast to the layers'
    ``dtype``. Values are checked finite only where reading them costs no host-device wait per step
    (not in a training step on an accelerator, nor in a pack of runs, lib.engine.packed)."""
    if not isinstance(h, torch.Tensor):
        raise ValueError(f"h: expected a torch tensor of features, got {type(h).__name__}")
    if h.ndim != 3:
        check_ndim(h, 2, "h", "N examples x d features, or runs x N x d")
    if h.shape[-1] != in_features or not h.is_floating_point():
        raise ValueError(f"h: expected {in_features} floating-point features, got {h.shape[-1]} of {h.dtype}")
    if h.ndim == 2 and not (h.device.type != "cpu" and torch.is_grad_enabled()):
        check_finite(h, "h")
    if h.dtype != dtype and not torch.is_autocast_enabled(h.device.type):
        h = h.to(dtype)
    return h


class MoEHead(nn.Module):
    """K linear experts mixed in probability space by an MLP router r = softmax(W2 relu(W1 h)) (paper
    eq. (1), App. D.4). Features of another floating dtype are cast to the head's parameter dtype;
    integer or non-finite features raise."""

    def __init__(self, in_features: int, num_classes: int, num_experts: int = 4, router_hidden: int = 128) -> None:
        super().__init__()
        for name, value in dict(in_features=in_features, num_experts=num_experts, router_hidden=router_hidden).items():
            check_int(value, name)
        check_int(num_classes, "num_classes", minimum=2)
        self.in_features, self.num_classes, self.num_experts = in_features, num_classes, num_experts
        self.router = nn.Sequential(
            nn.Linear(in_features, router_hidden), nn.ReLU(), nn.Linear(router_hidden, num_experts)
        )
        # All K experts as one (d -> K*C) linear layer: one matmul instead of K.
        self.experts = nn.Linear(in_features, num_experts * num_classes)

    #: In a pack of runs (lib.engine.packed) the head runs on (runs, N, d).
    packed_layout = "leading"

    def forward(self, h: torch.Tensor) -> MoEOutput:
        h = _check_features(h, self.in_features, self.experts.weight.dtype)
        r = F.softmax(self.router(h), dim=-1)
        z = self.experts(h).unflatten(-1, (self.num_experts, self.num_classes))
        pk = F.softmax(z, dim=-1)
        p = torch.einsum("...k,...kc->...c", r, pk)
        return MoEOutput(probs=p, routing=r, expert_probs=pk, expert_logits=z)


class SingleExpertHead(nn.Module):
    """Single Expert baseline: one linear layer, reported as an MoE with K=1 and routing all ones."""

    def __init__(self, in_features: int, num_classes: int) -> None:
        super().__init__()
        check_int(in_features, "in_features")
        check_int(num_classes, "num_classes", minimum=2)
        self.in_features = in_features
        self.linear = nn.Linear(in_features, num_classes)

    packed_layout = "leading"  # as MoEHead's

    def forward(self, h: torch.Tensor) -> MoEOutput:
        h = _check_features(h, self.in_features, self.linear.weight.dtype)
        z = self.linear(h).unsqueeze(-2)
        pk = F.softmax(z, dim=-1)
        r = torch.ones(*h.shape[:-1], 1, dtype=pk.dtype, device=h.device)
        return MoEOutput(probs=pk[..., 0, :], routing=r, expert_probs=pk, expert_logits=z)


class MoEModel(nn.Module):
    """Backbone followed by a head; ``forward(x)`` returns the head's :class:`MoEOutput`."""

    def __init__(self, backbone: nn.Module, head: nn.Module) -> None:
        super().__init__()
        for name, module in (("backbone", backbone), ("head", head)):
            if not isinstance(module, nn.Module):
                raise ValueError(f"{name}: expected an nn.Module, got {type(module).__name__}")
        self.backbone = backbone
        self.head = head

    def forward(self, x: object) -> MoEOutput:
        """The head on the backbone's features; a dict input (tokenized text) is passed as keyword arguments."""
        return self.head(self.backbone(**x) if isinstance(x, dict) else self.backbone(x))


def label_nll(probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """-log p[..., y_i] with p clamped at 1e-12, for mixture probs (N, C) -> (N,) or expert probs
    (N, K, C) -> (N, K), with labels (N,); packed runs add leading run dimensions to both (labels
    (G, N)): the mixture loss l_i (App. D.3) of ``out.probs``, the experts' l_ik (the regret's) of
    ``out.expert_probs``. No input checks (the training loop's, lib.moe.methods)."""
    extra = probs.dim() - labels.dim() - 1  # the expert dimension, if any
    index = labels.view(*labels.shape, *([1] * (extra + 1))).expand(*probs.shape[:-1], 1)
    return -probs.gather(-1, index)[..., 0].clamp_min(PROB_CLAMP).log()


def routing_entropy(routing: torch.Tensor) -> torch.Tensor:
    """Per-example entropy -sum_k r_k log r_k of the routing weights (nats), shape (N,)."""
    routing = to_float_tensor(routing, "routing", 2, "N examples x K experts", torch.float64)
    if (routing < -1e-6).any() or ((routing.sum(1) - 1).abs() > 1e-4).any():
        raise ValueError("routing: rows must be non-negative and sum to 1")
    return -torch.special.xlogy(routing, routing).sum(dim=1)
