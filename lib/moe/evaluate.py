"""Paper 1's evaluation protocol (App. D.5; MoCaE, D.1), following the paper's public code
(github.com/ginawong/calibrated_moe, read, not copied):

* **ECE**: top-label, 15 equal-width bins (lo, hi] (``lib.calibration.metrics.ece``), on all test
  points and on the hard subset, each binned on its own ("restricting the sum to test points in the
  subset before binning", D.5).
* **Temperature fit** (``TemperatureScaler(protocol="paper")``): "LBFGS (50 iterations, learning rate
  0.01)" on the validation cross-entropy (D.5; the rate's digits, lost in the paper's text, are
  restored from the public code). T starts at 1 and torch's LBFGS runs without a line search, so
  every step is 0.01 x the quasi-Newton (in one dimension, secant-Newton) step: on an overconfident
  model 50 iterations move T only about 40% of the way to the NLL minimiser. On an underconfident one
  (minimiser below 1) the fit is erratic: once LBFGS's curvature estimate collapses, one step can jump
  past the minimiser, down to T's lower bound (one-hot predictions, ECE+TS = 1 - accuracy;
  :func:`lib.moe.tables.temperature_fits` counts it). This partial fit *is* the paper's protocol;
  ``fit="converged"`` uses the minimiser instead, for comparison.
* **ECE+TS**: one scalar T fitted on log(mixture probs) of the validation split, applied to the test
  mixture as softmax(log p / T) (D.5).
* **MoCaE** (D.1): the Vanilla MoE network; each expert's T_k is fitted *on its own logits over every
  validation example* (not weighted by routing), with the same LBFGS, clamped to [0.1, 10]; the
  tempered experts are mixed with the router's weights (:func:`lib.moe.mocae.mocae_probs`). Such a
  mixture can change the argmax, so MoCaE's accuracy equals Vanilla's only approximately; the paper's
  "identical in every cell" holds to its three printed decimals because the partial fit keeps every
  T_k close to 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from lib.calibration.metrics import accuracy, brier, ece, nll
from lib.calibration.posthoc import FIT_PROTOCOLS, TemperatureScaler, apply_temperature, probs_to_logits
from lib.moe.heads import routing_entropy
from lib.moe.mocae import T_MAX, T_MIN, mocae_probs  # T_MIN/T_MAX: MoCaE's clamp (the paper's public code)
from lib.validation import check_choice

N_BINS = 15  # ECE bins (App. D.5)


# --- metrics --------------------------------------------------------------------------------------


def _metric_block(
    probs: np.ndarray, probs_ts: np.ndarray, y: np.ndarray, probs_ts_converged: np.ndarray
) -> dict[str, float]:
    """Accuracy, ECE, ECE+TS (also by the converged T), NLL, NLL+TS and Brier of one test population (D.5)."""
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
        "ece_ts_converged": ece(probs_ts_converged, y, n_bins=N_BINS),
    }


def _renorm(p: torch.Tensor) -> np.ndarray:
    """float64 probabilities with rows summing to 1 (model outputs are float32 / bf16)."""
    p = p.double().clamp_min(0)
    return (p / p.sum(dim=1, keepdim=True)).numpy()


def _scaled(probs: np.ndarray, T: float) -> np.ndarray:
    return np.asarray(apply_temperature(probs_to_logits(probs), T), dtype=np.float64)


def mocae_calibrate(
    val: Mapping[str, torch.Tensor], val_y: torch.Tensor, test: Mapping[str, torch.Tensor], fit: str = "paper"
) -> tuple[torch.Tensor, torch.Tensor, list[float]]:
    """MoCaE (App. D.1, see the module docstring): per-expert temperatures fitted by ``fit`` ("paper" or
    "converged") on ``val``'s expert logits, and the validation and test mixtures
    p = sum_k r_k softmax(z_k / T_k). ``val``/``test``: dicts with ``expert_logits`` (N, K, C) and
    ``routing`` (N, K). Returns (val probs, test probs, temperatures)."""
    check_choice(fit, FIT_PROTOCOLS, "fit")
    for name, d in (("val", val), ("test", test)):
        if not isinstance(d, Mapping) or "expert_logits" not in d or "routing" not in d:
            raise ValueError(f"{name}: expected a mapping with 'expert_logits' and 'routing'")
    temps = TemperatureScaler(protocol=fit, bounds=(T_MIN, T_MAX)).fit(val["expert_logits"].double(), val_y).temperature
    t = torch.as_tensor(temps, dtype=torch.float64)
    val_p, test_p = (mocae_probs(d["expert_logits"].double(), d["routing"].double(), t) for d in (val, test))
    return val_p, test_p, [float(v) for v in temps]


def evaluate(
    val_probs: torch.Tensor,
    val_y: torch.Tensor,
    test_probs: torch.Tensor,
    test_y: torch.Tensor,
    hard_mask: torch.Tensor,
    test_routing: torch.Tensor | None = None,
    groups: Mapping[str, torch.Tensor] | None = None,
    all_mask: torch.Tensor | None = None,
) -> tuple[dict[str, Any], np.ndarray]:
    """Final metrics of paper 1 (App. D.5) from validation and test mixture probabilities: ``all``
    (accuracy, ECE, ECE+TS, NLL(+TS), Brier on the test points in ``all_mask``, default every one) and
    ``hard`` (the same on ``hard_mask``), ECE+TS by the paper's partial fit and ``ece_ts_converged`` by
    the NLL minimiser; the mean routing entropy (nats) and per-group ECE for text. Returns (metrics,
    test probs as float64)."""
    val_np, test_np = _renorm(val_probs), _renorm(test_probs)
    y, hard = test_y.numpy(), hard_mask.numpy().astype(bool)
    if hard.shape != y.shape:
        raise ValueError(f"hard_mask: expected shape {y.shape}, got {hard.shape}")
    keep = np.ones_like(hard) if all_mask is None else all_mask.numpy().astype(bool)
    if keep.shape != y.shape:
        raise ValueError(f"all_mask: expected shape {y.shape}, got {keep.shape}")
    val_z = probs_to_logits(val_np)
    T = TemperatureScaler(protocol="paper").fit(val_z, val_y.numpy()).temperature
    T_conv = TemperatureScaler().fit(val_z, val_y.numpy()).temperature
    test_ts, test_conv = _scaled(test_np, T), _scaled(test_np, T_conv)
    metrics: dict[str, Any] = {
        "all": _metric_block(test_np[keep], test_ts[keep], y[keep], test_conv[keep]),
        "hard": _metric_block(test_np[hard], test_ts[hard], y[hard], test_conv[hard]),
        "temperature": float(T),
        "temperature_converged": float(T_conv),
    }
    if test_routing is not None:
        ent = routing_entropy(test_routing.double()).numpy()
        metrics["routing_entropy"] = {
            "all": float(ent[keep].mean()),
            "hard": float(ent[hard].mean()) if hard.any() else None,
        }
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
