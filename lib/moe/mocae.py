"""MoCaE: one temperature per expert of a mixture, mixed with the router's weights (paper 1, section 6.2).

MoCaE (Oksuz et al. 2024) is the calibrated-MoE paper's post-hoc baseline (section 6): each expert k
gets its own temperature T_k in [0.1, 10], fitted on validation data, and the tempered experts are
mixed in probability space with the router's weights, p = sum_k r_k softmax(z_k / T_k). The fit is
:func:`lib.calibration.posthoc.fit_log_temperatures`, the one behind :func:`lib.calibration.posthoc.fit_temperature`.

Inputs are numpy arrays or torch tensors, validated with :mod:`lib.validation`; the mixture comes
back as the same kind (numpy or torch) as the expert logits.
"""

from __future__ import annotations

import numpy as np
import torch

from lib.calibration.posthoc import EPS, fit_log_temperatures, same_kind
from lib.validation import (
    ArrayLike,
    check_finite,
    check_int,
    check_labels,
    check_ndim,
    check_positive,
    check_probs,
    check_same_length,
    to_tensor,
)

T_MIN, T_MAX = 0.1, 10.0  # MoCaE clamp for per-expert temperatures (paper 1, section 6.2)

__all__ = ["fit_expert_temperatures", "mocae_probs"]


def _check_expert_inputs(expert_logits: torch.Tensor, routing: torch.Tensor) -> None:
    check_ndim(expert_logits, 3, "expert_logits", "N examples x K experts x C classes")
    check_finite(expert_logits, "expert_logits")
    check_probs(routing, "routing")
    if tuple(routing.shape) != tuple(expert_logits.shape[:2]):
        raise ValueError(
            f"routing: expected shape (N, K) = {tuple(expert_logits.shape[:2])}, got {tuple(routing.shape)}"
        )


def fit_expert_temperatures(
    expert_logits: ArrayLike,
    labels: ArrayLike,
    routing: ArrayLike,
    max_iter: int = 50,
    lr: float = 1.0,
    weighting: str = "none",
) -> np.ndarray:
    """Per-expert temperatures T_k for MoCaE, each clamped to [0.1, 10] (paper 1, section 6.2).

    Choice (documented here; the paper leaves it open): T_k minimises expert k's own NLL,
    mean_i -log softmax(z_ik / T_k)_{y_i}, on all validation examples, i.e. each expert is calibrated
    as a stand-alone classifier before mixing, as in MoCaE (Oksuz et al. 2024) where experts are
    calibrated individually. ``weighting="routing"`` instead weights example i by r_ik (the
    expert's routing-weighted view, calibrated-MoE paper section 4). The objective separates over
    experts, so all K are fitted jointly in one LBFGS run, with each T_k constrained to [0.1, 10]
    during the fit (equal to clamping the unconstrained optimum, as the NLL is unimodal in log T).
    ``routing`` is validated (rows sum to 1) and used only by ``weighting="routing"``.
    """
    z = to_tensor(expert_logits, "expert_logits")
    r = to_tensor(routing, "routing")
    y = to_tensor(labels, "labels")
    _check_expert_inputs(z, r)
    check_labels(y, int(z.shape[2]), "labels")
    check_same_length(z, y, "expert_logits", "labels")
    if z.shape[0] == 0:
        raise ValueError("expert_logits: is empty (0 examples)")
    if weighting not in ("none", "routing"):
        raise ValueError(f"weighting: unknown value {weighting!r}; valid values are 'none', 'routing'")
    max_iter = check_int(max_iter, "max_iter")
    check_positive(lr, "lr")
    z = z.detach().to(torch.float64)
    y = y.detach().to(device=z.device, dtype=torch.long)
    n, k, _ = z.shape
    if weighting == "routing":
        w = r.detach().to(device=z.device, dtype=torch.float64)
        w = w / w.sum(dim=0, keepdim=True).clamp_min(EPS)  # per-expert weighted mean
    else:
        w = torch.full((n, k), 1.0 / n, dtype=torch.float64, device=z.device)
    idx = y[:, None, None].expand(n, k, 1)

    def nll_fn(temps: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(z / temps[None, :, None], dim=-1)
        return -(w * logp.gather(-1, idx).squeeze(-1)).sum()

    fitted = fit_log_temperatures(nll_fn, k, max_iter, lr, z.device, bounds=(T_MIN, T_MAX))
    return fitted.clamp(T_MIN, T_MAX).cpu().numpy()


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
