"""Input checks shared by every ``lib`` module.

Every public function of ``lib`` accepts torch tensors or numpy arrays and rejects bad input with a
``ValueError`` that names the argument and the problem (misspelled names with a difflib suggestion).
"""

from __future__ import annotations

import difflib
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch

PROB_TOL = 1e-4
MAX_BINS = 10_000  # more bins than this is no calibration estimate, and 10**9 bins would need GiBs

ArrayLike = Any  # numpy array, torch tensor or nested list


def to_numpy(x: ArrayLike, name: str, dtype: Any = np.float64) -> np.ndarray:
    """Convert ``x`` to a numpy array (detached, on the CPU) or raise naming ``name``."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        if x.is_floating_point() and x.dtype not in (torch.float16, torch.float32, torch.float64):
            x = x.to(torch.float32)  # bfloat16 / float8 have no numpy dtype
        x = x.numpy()
    try:
        return np.asarray(x, dtype=dtype)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name}: cannot be read as a numeric array ({err})") from None


def to_int_array(x: ArrayLike, name: str) -> np.ndarray:
    """``x`` as an int64 numpy array, or raise naming ``name`` when it holds NaN, infinite or
    fractional values (``np.asarray(x, dtype=np.int64)`` would silently truncate 1.7 to 1)."""
    arr = to_numpy(x, name)
    bad = ~(np.isfinite(arr) & (arr == np.round(arr)))
    if bad.any():
        raise ValueError(f"{name}: must hold integers, got {float(arr[bad].ravel()[0]):g}")
    return arr.astype(np.int64)


def check_nonempty(x: ArrayLike, name: str, what: str = "examples") -> None:
    """Raise when ``x`` has no rows (an empty batch gives a NaN mean or a table of zeros)."""
    if len(x.shape) == 0 or x.shape[0] == 0:
        raise ValueError(f"{name}: is empty (0 {what})")


def to_tensor(x: ArrayLike, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Return ``x`` as a torch tensor (kept on its device, gradient kept) or raise naming ``name``."""
    if isinstance(x, torch.Tensor):
        return x if dtype is None else x.to(dtype)
    try:
        return torch.as_tensor(np.asarray(x), dtype=dtype)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name}: cannot be read as a numeric array ({err})") from None


def to_float_tensor(
    x: ArrayLike, name: str, ndim: int, what: str = "", dtype: torch.dtype | None = None
) -> torch.Tensor:
    """:func:`to_tensor`, integer input cast to ``dtype`` (default: torch's default dtype), checked to
    have ``ndim`` dimensions (``what`` describes them) and finite values."""
    t = to_tensor(x, name)
    if not t.is_floating_point():
        t = t.to(dtype or torch.get_default_dtype())
    check_ndim(t, ndim, name, what)
    check_finite(t, name)
    return t


def check_finite(x: ArrayLike, name: str) -> None:
    """Raise if ``x`` holds NaN or infinite values."""
    if (~torch.isfinite(x)).any().item() if isinstance(x, torch.Tensor) else not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: contains NaN or infinite values")


def check_ndim(x: ArrayLike, ndim: int, name: str, what: str = "") -> None:
    """Raise if ``x`` does not have ``ndim`` dimensions."""
    if len(x.shape) != ndim:
        hint = f" ({what})" if what else ""
        raise ValueError(f"{name}: expected {ndim}-D array{hint}, got shape {tuple(x.shape)}")


def check_same_length(a: ArrayLike, b: ArrayLike, name_a: str, name_b: str) -> None:
    """Raise if ``a`` and ``b`` differ in their first dimension."""
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"{name_a} and {name_b}: lengths differ ({a.shape[0]} vs {b.shape[0]})")


def prob_tolerance(probs: ArrayLike) -> float:
    """Tolerance on a probability row's sum for the dtype of ``probs`` (the caller's original array):
    ``PROB_TOL``, or eps * sqrt(C) for half precision (a float16 softmax over 10 classes is off by ~3e-4)."""
    dtype = getattr(probs, "dtype", None)
    if isinstance(dtype, torch.dtype):
        eps = torch.finfo(dtype).eps if dtype.is_floating_point else 0.0
    else:
        eps = float(np.finfo(dtype).eps) if dtype is not None and np.dtype(dtype).kind == "f" else 0.0
    shape = np.shape(probs)
    return max(PROB_TOL, eps * float(np.sqrt(max(shape[-1] if shape else 1, 1))))


def check_probs(probs: ArrayLike, name: str = "probs", tol: float | None = None) -> None:
    """Raise unless ``probs`` is an (N, C) array of finite, non-negative rows summing to 1 within ``tol``
    (default :func:`prob_tolerance`; pass the original's for an upcast copy of half-precision output)."""
    check_ndim(probs, 2, name, "N examples x C classes")
    check_finite(probs, name)
    tol = prob_tolerance(probs) if tol is None else tol
    p = probs.detach() if isinstance(probs, torch.Tensor) else probs
    if (p < -tol).any():
        raise ValueError(f"{name}: contains negative probabilities")
    off = float(abs(p.sum(1) - 1).max()) if p.shape[0] else 0.0
    if off > tol:
        raise ValueError(
            f"{name}: rows must sum to 1 (largest deviation {off:.2e} > {tol:.2g}); pass probabilities, not logits"
        )


def check_labels(labels: ArrayLike, num_classes: int, name: str = "labels") -> None:
    """Raise unless ``labels`` is a 1-D integer array with values in ``[0, num_classes)``."""
    check_ndim(labels, 1, name, "one integer label per example")
    y = labels if isinstance(labels, torch.Tensor) else np.asarray(labels)
    if y.dtype.is_floating_point if isinstance(y, torch.Tensor) else y.dtype.kind == "f":
        if not (y == y.round()).all():
            raise ValueError(f"{name}: labels must be integers")
    lo, hi = (y.min().item(), y.max().item()) if y.shape[0] else (0, 0)
    if lo < 0 or hi >= num_classes:
        raise ValueError(f"{name}: labels must lie in [0, {num_classes}), got range [{lo}, {hi}]")


def check_probs_labels(probs: ArrayLike, labels: ArrayLike, tol: float | None = None) -> None:
    """Validate a (probs, labels) pair: (N, C) probabilities and N labels in range."""
    check_probs(probs, "probs", tol)
    check_labels(labels, probs.shape[1], "labels")
    check_same_length(probs, labels, "probs", "labels")


def check_logits_labels(logits: ArrayLike, labels: ArrayLike, num_classes: int | None = None) -> None:
    """Validate (N, C) finite logits and N labels in ``[0, num_classes or C)``."""
    check_ndim(logits, 2, "logits", "N examples x C classes")
    check_finite(logits, "logits")
    check_labels(labels, num_classes or logits.shape[1], "labels")
    check_same_length(logits, labels, "logits", "labels")


def check_unit_interval(x: ArrayLike, name: str, clip: bool = False) -> None:
    """Raise unless ``x`` is a finite 1-D array in [0, 1] (``clip`` skips the range check)."""
    check_ndim(x, 1, name)
    check_finite(x, name)
    lo, hi = (float(x.min()), float(x.max())) if x.shape[0] and not clip else (0.0, 0.0)
    if lo < 0 or hi > 1:
        raise ValueError(f"{name}: values must lie in [0, 1], got range [{lo:.4g}, {hi:.4g}]")


def to_unit_vector(x: ArrayLike, name: str) -> np.ndarray:
    """``x`` as a 1-D float64 numpy array of finite values in [0, 1] (:func:`check_unit_interval`)."""
    arr = to_numpy(x, name)
    check_unit_interval(arr, name)
    return arr


def to_flags(x: ArrayLike, name: str) -> np.ndarray:
    """``x`` as a 1-D boolean numpy array, or raise naming ``name`` unless each value is 0/1 or a bool."""
    arr = to_numpy(x, name)
    check_ndim(arr, 1, name)
    if not np.all((arr == 0) | (arr == 1)):
        raise ValueError(f"{name}: values must be 0/1 or booleans")
    return arr.astype(bool)


def check_number(
    value: Any,
    name: str,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Return ``value`` as a float, or raise unless it is a finite real number (not a string, bool or
    array; numpy scalars and 0-d tensors are fine) within ``low``/``high`` (inclusive unless open)."""
    if isinstance(value, torch.Tensor | np.ndarray) and value.ndim == 0:
        value = value.item()  # a 0-d tensor or array, e.g. a fitted parameter
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name}: must be a real number, got {value!r} ({type(value).__name__})")
    out = float(value)
    lo_ok = low is None or (out > low if low_open else out >= low)
    hi_ok = high is None or (out < high if high_open else out <= high)
    if np.isfinite(out) and lo_ok and hi_ok:
        return out
    lb, rb = "(" if low_open else "[", ")" if high_open else "]"
    if low is not None and high is not None:
        domain = f"lie in {'the open interval ' * (low_open and high_open)}{lb}{low:g}, {high:g}{rb}"
    elif low is not None:
        domain = f"be {'>' if low_open else '>='} {low:g}"
    else:
        domain = "be finite" if high is None else f"be {'<' if high_open else '<='} {high:g}"
    raise ValueError(f"{name}: must {domain}, got {value!r}")


def check_positive(value: float, name: str, allow_zero: bool = False) -> float:
    """Return ``value`` as a float, or raise unless it is a finite number > 0 (>= 0 with ``allow_zero``)."""
    return check_number(value, name, low=0.0, low_open=not allow_zero)


def check_bool(value: Any, name: str) -> bool:
    """Return ``value``, or raise unless it is ``True`` or ``False``."""
    if not isinstance(value, bool):
        raise ValueError(f"{name}: must be True or False, got {value!r}")
    return value


def check_int(value: Any, name: str, minimum: int = 1, maximum: int | None = None) -> int:
    """Return ``value`` as an int, or raise unless it is an integer (not a bool) in [minimum, maximum]."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name}: must be an integer >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name}: must be an integer <= {maximum}, got {value!r}")
    return int(value)


def check_bins(n_bins: Any, name: str = "n_bins") -> int:
    """Return a bin count as an int, or raise unless it is an integer in [1, ``MAX_BINS``]."""
    return check_int(n_bins, name, 1, MAX_BINS)


def check_open_unit(value: float, name: str) -> float:
    """Return ``value`` as a float, or raise unless ``0 < value < 1``."""
    return check_number(value, name, low=0.0, high=1.0, low_open=True, high_open=True)


def error_line(err: BaseException) -> str:
    """An error in one line: its type and the first line of its message (the type alone without one)."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def close_matches(value: Any, choices: Iterable[Any]) -> str:
    """``"; did you mean 'x'?"`` for the valid name closest to ``value`` (difflib), else ``""``."""
    best = difflib.get_close_matches(value, [str(c) for c in choices], n=1) if isinstance(value, str) else []
    return f"; did you mean {best[0]!r}?" if best else ""


def check_choice(value: str, choices: Any, name: str) -> None:
    """Raise unless ``value`` is one of ``choices``, listing the valid ones (and the closest)."""
    try:
        known = value in choices
    except TypeError:  # unhashable value looked up in a dict or set
        known = False
    if not known:
        valid = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name}: unknown value {value!r}; valid values are {valid}{close_matches(value, choices)}")


def check_keywords(kw: Mapping[str, Any], allowed: Iterable[str], name: str = "kw") -> None:
    """Raise unless every key of ``kw`` is in ``allowed``, suggesting the closest for a misspelling."""
    allowed = sorted(allowed)
    unknown = [key for key in kw if key not in allowed]
    if unknown:
        valid, key = ", ".join(allowed) or "none", unknown[0]
        raise ValueError(f"{name}: unknown keyword argument {key!r} (valid: {valid}){close_matches(key, allowed)}")


def reduce_loss(loss: torch.Tensor, reduction: str) -> torch.Tensor:
    """Reduce per-example losses by ``reduction`` ("mean", "sum" or "none"), checking the name."""
    check_choice(reduction, ("mean", "sum", "none"), "reduction")
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def check_record(rec: Any, what: str, config_keys: Iterable[str], fields: Iterable[str], block: str = "") -> Any:
    """``rec`` if it is ``what``: a run record whose ``config`` holds ``config_keys`` and which has a
    number at each of ``fields``, read in ``rec[block]`` when ``block`` is given;
    otherwise a ``ValueError`` naming the run and the field."""
    if not isinstance(rec, Mapping):
        raise ValueError(f"records: expected {what}, got {type(rec).__name__}")
    run, config = rec.get("key", "?"), rec.get("config")
    missing = [k for k in config_keys if not isinstance(config, Mapping) or k not in config]
    if missing:
        raise ValueError(f"records: run {run} is not {what}: its config lacks {', '.join(missing)}")
    values = rec.get(block) if block else rec
    if not isinstance(values, Mapping):
        raise ValueError(f"records: run {run} has no {block} block (got {type(values).__name__})")
    for k in fields:
        v = values.get(k, ...)
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            field = f"{block}.{k}" if block else k
            got = "missing" if v is ... else f"{v!r} ({type(v).__name__})"
            raise ValueError(f"records: run {run}: {field} is {got}, expected a number")
    return rec
