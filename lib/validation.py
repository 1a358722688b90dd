"""Input checks shared by every ``lib`` module (SPEC section 0).

Every public function of ``lib`` accepts torch tensors or numpy arrays and rejects bad input with a
``ValueError`` that names the argument and the problem: wrong shapes, NaNs, probability rows that do
not sum to 1 (tolerance 1e-4), labels out of range, parameters outside their domain.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

PROB_TOL = 1e-4

ArrayLike = Any  # numpy array, torch tensor or nested list


def to_numpy(x: ArrayLike, name: str, dtype: Any = np.float64) -> np.ndarray:
    """Convert ``x`` to a numpy array (detached, on the CPU) or raise naming ``name``."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    try:
        arr = np.asarray(x, dtype=dtype)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name}: cannot be read as a numeric array ({err})") from None
    return arr


def to_tensor(x: ArrayLike, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Return ``x`` as a torch tensor (kept on its device, gradient kept) or raise naming ``name``."""
    if isinstance(x, torch.Tensor):
        return x if dtype is None else x.to(dtype)
    try:
        return torch.as_tensor(np.asarray(x), dtype=dtype)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name}: cannot be read as a numeric array ({err})") from None


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(x.shape)


def check_finite(x: ArrayLike, name: str) -> None:
    """Raise if ``x`` holds NaN or infinite values."""
    bad = (~torch.isfinite(x)).any().item() if isinstance(x, torch.Tensor) else not np.all(np.isfinite(x))
    if bad:
        raise ValueError(f"{name}: contains NaN or infinite values")


def check_ndim(x: ArrayLike, ndim: int, name: str, what: str = "") -> None:
    """Raise if ``x`` does not have ``ndim`` dimensions."""
    if len(_shape(x)) != ndim:
        hint = f" ({what})" if what else ""
        raise ValueError(f"{name}: expected {ndim}-D array{hint}, got shape {_shape(x)}")


def check_same_length(a: ArrayLike, b: ArrayLike, name_a: str, name_b: str) -> None:
    """Raise if ``a`` and ``b`` differ in their first dimension."""
    if _shape(a)[0] != _shape(b)[0]:
        raise ValueError(
            f"{name_a} and {name_b}: lengths differ ({_shape(a)[0]} vs {_shape(b)[0]})"
        )


def check_probs(probs: ArrayLike, name: str = "probs") -> None:
    """Raise unless ``probs`` is an (N, C) array of finite, non-negative rows summing to 1."""
    check_ndim(probs, 2, name, "N examples x C classes")
    check_finite(probs, name)
    if isinstance(probs, torch.Tensor):
        p = probs.detach()
        neg = (p < -PROB_TOL).any().item()
        off = (p.sum(dim=1) - 1).abs().max().item() if p.shape[0] else 0.0
    else:
        neg = bool(np.any(probs < -PROB_TOL))
        off = float(np.max(np.abs(probs.sum(axis=1) - 1))) if probs.shape[0] else 0.0
    if neg:
        raise ValueError(f"{name}: contains negative probabilities")
    if off > PROB_TOL:
        raise ValueError(
            f"{name}: rows must sum to 1 (largest deviation {off:.2e} > {PROB_TOL:g}); "
            "pass probabilities, not logits"
        )


def check_labels(labels: ArrayLike, num_classes: int, name: str = "labels") -> None:
    """Raise unless ``labels`` is a 1-D integer array with values in ``[0, num_classes)``."""
    check_ndim(labels, 1, name, "one integer label per example")
    if isinstance(labels, torch.Tensor):
        if labels.is_floating_point() and not torch.equal(labels, labels.round()):
            raise ValueError(f"{name}: labels must be integers")
        lo = labels.min().item() if labels.numel() else 0
        hi = labels.max().item() if labels.numel() else 0
    else:
        arr = np.asarray(labels)
        if arr.dtype.kind == "f" and not np.all(arr == np.round(arr)):
            raise ValueError(f"{name}: labels must be integers")
        lo = arr.min() if arr.size else 0
        hi = arr.max() if arr.size else 0
    if lo < 0 or hi >= num_classes:
        raise ValueError(f"{name}: labels must lie in [0, {num_classes}), got range [{lo}, {hi}]")


def check_probs_labels(probs: ArrayLike, labels: ArrayLike) -> None:
    """Validate a (probs, labels) pair: (N, C) probabilities and N labels in range."""
    check_probs(probs, "probs")
    check_labels(labels, _shape(probs)[1], "labels")
    check_same_length(probs, labels, "probs", "labels")


def check_logits_labels(logits: ArrayLike, labels: ArrayLike, num_classes: int | None = None) -> None:
    """Validate (N, C) finite logits and N labels in ``[0, num_classes or C)``."""
    check_ndim(logits, 2, "logits", "N examples x C classes")
    check_finite(logits, "logits")
    check_labels(labels, num_classes or _shape(logits)[1], "labels")
    check_same_length(logits, labels, "logits", "labels")


def check_unit_interval(x: ArrayLike, name: str, clip: bool = False) -> None:
    """Raise unless ``x`` is a finite 1-D array in [0, 1] (``clip`` skips the range check)."""
    check_ndim(x, 1, name)
    check_finite(x, name)
    if not clip:
        lo = float(x.min()) if _shape(x)[0] else 0.0
        hi = float(x.max()) if _shape(x)[0] else 0.0
        if lo < 0 or hi > 1:
            raise ValueError(f"{name}: values must lie in [0, 1], got range [{lo:.4g}, {hi:.4g}]")


def check_positive(value: float, name: str, allow_zero: bool = False) -> None:
    """Raise unless ``value`` is a finite number > 0 (or >= 0 with ``allow_zero``)."""
    ok = np.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name}: must be {bound}, got {value!r}")


def check_int(value: Any, name: str, minimum: int = 1) -> int:
    """Return ``value`` as an int, or raise unless it is an integer (not a bool) >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name}: must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_open_unit(value: float, name: str) -> None:
    """Raise unless ``0 < value < 1``."""
    if not (np.isfinite(value) and 0 < value < 1):
        raise ValueError(f"{name}: must lie in the open interval (0, 1), got {value!r}")


def check_choice(value: str, choices: Any, name: str) -> None:
    """Raise unless ``value`` is one of ``choices``, listing the valid ones."""
    if value not in choices:
        valid = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name}: unknown value {value!r}; valid values are {valid}")


REDUCTIONS: tuple[str, ...] = ("mean", "sum", "none")


def reduce_loss(loss: torch.Tensor, reduction: str) -> torch.Tensor:
    """Reduce per-example losses by ``reduction`` ("mean", "sum" or "none"), checking the name."""
    check_choice(reduction, REDUCTIONS, "reduction")
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss
