"""Paper 1's evaluation: metrics on all and hard test points, temperature scaling, MoCaE.

Paper: "Calibrated mixture-of-experts under distribution shift", section 5 and Appendix D.
Used in: lib.moe_train (every paper-1 run), notebooks/cifar10h, notebooks/pacs, notebooks/civilcomments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

N_BINS = 15

__all__ = ["N_BINS", "evaluate", "mocae_calibrate"]


def _metric_block(probs: np.ndarray, probs_ts: np.ndarray, y: np.ndarray) -> dict[str, float]:
    from lib.metrics import accuracy, brier, ece, nll

    if len(y) == 0:
        return {}
    return {
        "n": int(len(y)),
        "accuracy": accuracy(probs, y),
        "ece": ece(probs, y, n_bins=N_BINS),
        "ece_ts": ece(probs_ts, y, n_bins=N_BINS),
        "nll": nll(probs, y),
        "nll_ts": nll(probs_ts, y),
        "brier": brier(probs, y),
    }


def _renorm(p: torch.Tensor) -> np.ndarray:
    p = p.double().clamp_min(0)
    return (p / p.sum(dim=1, keepdim=True)).numpy()


def mocae_calibrate(val: Mapping[str, torch.Tensor], val_y: torch.Tensor,
                    test: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, list[float]]:
    """MoCaE (SPEC section 2): per-expert temperatures T_k fitted on validation (clamped to [0.1, 10]),
    mixture of softmax(z_k / T_k). Returns (val probs, test probs, temperatures)."""
    from lib.calibrate import fit_expert_temperatures, mocae_probs

    temps = fit_expert_temperatures(val["expert_logits"].double(), val_y, val["routing"].double())
    t = torch.as_tensor(temps, dtype=torch.float64)
    val_p = mocae_probs(val["expert_logits"].double(), val["routing"].double(), t)
    test_p = mocae_probs(test["expert_logits"].double(), test["routing"].double(), t)
    return val_p, test_p, [float(v) for v in temps]


def evaluate(
    val_probs: torch.Tensor, val_y: torch.Tensor, test_probs: torch.Tensor, test_y: torch.Tensor,
    hard_mask: torch.Tensor, test_routing: torch.Tensor | None = None,
    groups: Mapping[str, torch.Tensor] | None = None,
) -> tuple[dict[str, Any], np.ndarray]:
    """Final metrics of paper 1 (SPEC section 2) from validation and test mixture probabilities.

    accuracy, ECE (15 equal-width bins), ECE+TS and NLL+TS (one scalar T fitted on validation log
    mixture probabilities: for an MoE, TS acts on log p), NLL and Brier, on all test points and on
    the hard subset; mean routing entropy; per-group ECE for text. Returns (metrics, test probs).
    """
    from lib.calibrate import apply_temperature, fit_temperature, probs_to_logits
    from lib.metrics import ece
    from lib.moe import routing_entropy

    val_np, test_np = _renorm(val_probs), _renorm(test_probs)
    T = fit_temperature(probs_to_logits(val_np), val_y.numpy())
    test_ts = np.asarray(apply_temperature(probs_to_logits(test_np), T), dtype=np.float64)
    y, hard = test_y.numpy(), hard_mask.numpy().astype(bool)
    metrics: dict[str, Any] = {
        "all": _metric_block(test_np, test_ts, y),
        "hard": _metric_block(test_np[hard], test_ts[hard], y[hard]),
        "temperature": float(T),
    }
    if test_routing is not None:
        ent = routing_entropy(test_routing.double()).numpy()
        metrics["routing_entropy"] = {"all": float(ent.mean()), "hard": float(ent[hard].mean()) if hard.any() else None}
    if groups:
        metrics["groups"] = {}
        for g, m in groups.items():
            m = m.numpy().astype(bool)
            metrics["groups"][g] = {
                "n": int(m.sum()),
                "ece": ece(test_np[m], y[m], n_bins=N_BINS) if m.any() else None,
                "ece_ts": ece(test_ts[m], y[m], n_bins=N_BINS) if m.any() else None,
            }
    return metrics, test_np


