"""MoCaE: one temperature per expert of a mixture, mixed with the router's weights (paper 1, section 6.2).

MoCaE (Oksuz et al. 2024) is the calibrated-MoE paper's post-hoc baseline (section 6): each expert k
gets its own temperature T_k in [0.1, 10], fitted on validation data, and the tempered experts are
mixed in probability space with the router's weights, p = sum_k r_k softmax(z_k / T_k). The fit is
the book's one temperature fit, :class:`lib.calibration.posthoc.TemperatureScaler`, given the expert
logits (N, K, C) and ``bounds = (T_MIN, T_MAX)``: each T_k minimises expert k's own NLL on every
validation example (each expert calibrated as a stand-alone classifier before mixing, as in MoCaE,
where experts are calibrated individually; the paper leaves this open), clamped to [0.1, 10].
Its ``weights`` = the routing (N, K) give the routing-weighted variant (the expert's view of
section 4), not used by the book's pages.

Inputs are numpy arrays or torch tensors, validated with :mod:`lib.validation`; the mixture comes
back as the same kind (numpy or torch) as the expert logits.
"""

from __future__ import annotations

import torch

from lib.calibration.posthoc import same_kind
from lib.validation import ArrayLike, check_finite, check_ndim, check_probs, to_tensor

T_MIN, T_MAX = 0.1, 10.0  # MoCaE clamp for per-expert temperatures (paper 1, section 6.2)

__all__ = ["T_MAX", "T_MIN", "mocae_probs"]


def _check_expert_inputs(expert_logits: torch.Tensor, routing: torch.Tensor) -> None:
    check_ndim(expert_logits, 3, "expert_logits", "N examples x K experts x C classes")
    check_finite(expert_logits, "expert_logits")
    check_probs(routing, "routing")
    if tuple(routing.shape) != tuple(expert_logits.shape[:2]):
        raise ValueError(
            f"routing: expected shape (N, K) = {tuple(expert_logits.shape[:2])}, got {tuple(routing.shape)}"
        )


def mocae_probs(expert_logits: ArrayLike, routing: ArrayLike, temps: ArrayLike) -> ArrayLike:
    """MoCaE mixture p = sum_k r_k softmax(z_k / T_k) (mixing in probability space, paper 1, section 6.2).

    With all T_k = 1 this is the plain (vanilla) mixture. Returns the kind of ``expert_logits``.
    """
    z = to_tensor(expert_logits, "expert_logits")
    r = to_tensor(routing, "routing")
    _check_expert_inputs(z, r)
    t = to_tensor(temps, "temps")
    check_ndim(t, 1, "temps", "one temperature per expert")
    check_finite(t, "temps")
    if t.shape[0] != z.shape[1]:
        raise ValueError(f"temps: expected {z.shape[1]} temperatures (one per expert), got {t.shape[0]}")
    if (t <= 0).any().item():
        raise ValueError("temps: temperatures must be > 0")
    if not z.is_floating_point():
        z = z.to(torch.float64)
    t = t.to(device=z.device, dtype=z.dtype)
    r = r.to(device=z.device, dtype=z.dtype)
    p = torch.softmax(z / t[None, :, None], dim=-1)
    return same_kind((r[:, :, None] * p).sum(dim=1), expert_logits)
