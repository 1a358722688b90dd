"""MoCaE: one temperature per expert of a mixture, mixed with the router's weights (paper 1, section 6.2).

MoCaE (Oksuz et al. 2024) is the calibrated-MoE paper's post-hoc baseline (section 6): each expert k
gets its own temperature T_k in [0.1, 10], fitted on validation data (:func:`lib.moe.evaluate.mocae_calibrate`),
and the tempered experts are mixed in probability space with the router's weights,
p = sum_k r_k softmax(z_k / T_k)."""

from __future__ import annotations

import torch

from lib.calibration.posthoc import same_kind
from lib.validation import ArrayLike, check_probs, to_float_tensor, to_tensor

T_MIN, T_MAX = 0.1, 10.0  # MoCaE clamp for per-expert temperatures (paper 1, section 6.2)


def mocae_probs(expert_logits: ArrayLike, routing: ArrayLike, temps: ArrayLike) -> ArrayLike:
    """MoCaE mixture p = sum_k r_k softmax(z_k / T_k) (mixing in probability space, paper 1, section 6.2).

    With all T_k = 1 this is the plain (vanilla) mixture. Returns the kind of ``expert_logits``."""
    z = to_float_tensor(expert_logits, "expert_logits", 3, "N examples x K experts x C classes", torch.float64)
    r = to_tensor(routing, "routing")
    check_probs(r, "routing")
    if tuple(r.shape) != tuple(z.shape[:2]):
        raise ValueError(f"routing: expected shape (N, K) = {tuple(z.shape[:2])}, got {tuple(r.shape)}")
    t = to_float_tensor(temps, "temps", 1, "one temperature per expert")
    if t.shape[0] != z.shape[1]:
        raise ValueError(f"temps: expected {z.shape[1]} temperatures (one per expert), got {t.shape[0]}")
    if (t <= 0).any().item():
        raise ValueError("temps: temperatures must be > 0")
    t = t.to(device=z.device, dtype=z.dtype)
    r = r.to(device=z.device, dtype=z.dtype)
    p = torch.softmax(z / t[None, :, None], dim=-1)
    return same_kind((r[:, :, None] * p).sum(dim=1), expert_logits)
