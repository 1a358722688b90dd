"""Calibration and selective-prediction metrics shared by all four papers.

Every binned metric bins with :func:`bin_edges`: half-open ``(lo, hi]`` bins with 0 in the first;
``binning="width"``: equal-width bins on [0, 1]; ``"mass"``: equal-count bins whose inner edges sit
midway between consecutive order statistics. Inputs are numpy arrays or torch tensors; outputs plain floats.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import binomtest

from lib.validation import (
    ArrayLike,
    check_bins,
    check_choice,
    check_finite,
    check_ndim,
    check_nonempty,
    check_number,
    check_probs_labels,
    check_same_length,
    check_unit_interval,
    prob_tolerance,
    to_numpy,
    to_unit_vector,
)

BINNINGS: tuple[str, ...] = ("width", "mass")
EPS = 1e-12  # probabilities are clamped at this value before a log

__all__ = [
    "BINNINGS",
    "accuracy",
    "aurc",
    "bin_edges",
    "bin_index",
    "binary_ece",
    "brier",
    "classwise_ece",
    "ece",
    "nll",
    "reliability_table",
]


def _probs_labels(probs: ArrayLike, labels: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    p, y = to_numpy(probs, "probs"), to_numpy(labels, "labels")
    check_probs_labels(p, y, prob_tolerance(probs))  # tolerance of the caller's dtype (fp16)
    check_nonempty(p, "probs")
    return p, y.astype(np.int64)


def _conf_outcome(
    conf: ArrayLike, outcome: ArrayLike, clip: bool | None = False, names: tuple[str, str] = ("conf", "outcome")
) -> tuple[np.ndarray, np.ndarray]:
    """Validate a (confidence in [0, 1], binary outcome) pair; ``clip`` clips conf to [0, 1] (``None``:
    any real score, unclipped)."""
    conf_name, outcome_name = names
    c, o = to_numpy(conf, conf_name), to_numpy(outcome, outcome_name)
    check_unit_interval(c, conf_name, clip=clip is not False)
    check_ndim(o, 1, outcome_name, "one 0/1 outcome per example")
    check_same_length(c, o, conf_name, outcome_name)
    check_nonempty(c, conf_name)
    if not np.all((o == 0) | (o == 1)):  # NaN fails too
        raise ValueError(f"{outcome_name}: values must be 0 or 1 (or booleans)")
    return (c if clip is None else np.clip(c, 0.0, 1.0)), o


def bin_edges(conf: ArrayLike, n_bins: int = 15, binning: str = "width") -> np.ndarray:
    """Return the ``n_bins + 1`` edges of the bins on [0, 1] for confidences ``conf``.

    ``"width"``: ``linspace(0, 1, n_bins + 1)``. ``"mass"``: outer edges 0 and 1, inner edge b at the
    midpoint of the order statistics s_(k-1), s_(k) with k = floor(b n / n_bins) (0-based), so that
    with half-open ``(lo, hi]`` bins and no ties every bin holds floor or ceil of n / n_bins examples.
    Ties (or n < n_bins) can leave bins empty; empty bins contribute nothing to any metric.
    """
    n_bins = check_bins(n_bins)
    check_choice(binning, BINNINGS, "binning")
    c = to_unit_vector(conf, "conf")
    if binning == "width" or c.shape[0] < 2:
        return np.linspace(0.0, 1.0, n_bins + 1)
    s, n = np.sort(c), c.shape[0]
    k = np.clip((np.arange(1, n_bins) * n) // n_bins, 1, n - 1)
    inner = 0.5 * (s[k - 1] + s[k])
    return np.concatenate([[0.0], inner, [1.0]])


def bin_index(conf: ArrayLike, edges: ArrayLike) -> np.ndarray:
    """Bin of each confidence for half-open bins ``(edges[b], edges[b+1]]``; values <= edges[1]
    (including 0) go to bin 0 and values above the last inner edge to the last bin."""
    c = to_numpy(conf, "conf")
    check_finite(c, "conf")  # NaN would land in the last bin
    e = to_numpy(edges, "edges")
    check_ndim(e, 1, "edges")
    if e.shape[0] < 2 or np.any(np.diff(e) < 0):
        raise ValueError("edges: need at least 2 non-decreasing edges")
    # searchsorted(side="left") counts inner edges strictly below c: c in (e_b, e_{b+1}] -> b.
    return np.searchsorted(e[1:-1], c, side="left").astype(np.int64)


def _bin_stats(
    conf: np.ndarray, outcome: np.ndarray, n_bins: int, binning: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Edges, per-bin counts, summed confidence and summed outcome (``n_bins`` and ``binning`` are
    checked by :func:`bin_edges`)."""
    edges = bin_edges(conf, n_bins, binning)
    idx = np.searchsorted(edges[1:-1], conf, side="left")
    count = np.bincount(idx, minlength=n_bins).astype(np.float64)
    sum_conf = np.bincount(idx, weights=conf, minlength=n_bins)
    sum_out = np.bincount(idx, weights=outcome, minlength=n_bins)
    return edges, count, sum_conf, sum_out


def _binned_error(conf: np.ndarray, outcome: np.ndarray, n_bins: int, binning: str) -> float:
    """sum_b (n_b / n) |acc_b - conf_b| = (1/n) sum_b |sum_out_b - sum_conf_b|."""
    _, count, sum_conf, sum_out = _bin_stats(conf, outcome, n_bins, binning)
    return float(np.abs(sum_out - sum_conf).sum() / count.sum())


def ece(probs: ArrayLike, labels: ArrayLike, n_bins: int = 15, binning: str = "width") -> float:
    """Top-label expected calibration error, sum_b (n_b / n) |acc_b - conf_b| with conf = max_c p_c (Guo
    et al. 2017, eq. 3; papers 1 and 2 report it as a fraction, paper 4 x100)."""
    p, y = _probs_labels(probs, labels)
    conf = np.clip(p.max(axis=1), 0.0, 1.0)
    correct = (p.argmax(axis=1) == y).astype(np.float64)
    return _binned_error(conf, correct, n_bins, binning)


def classwise_ece(probs: ArrayLike, labels: ArrayLike, n_bins: int = 15, binning: str = "width") -> float:
    """Class-wise ECE: mean over classes c of the binned calibration error of p_c vs 1[y = c] (paper 4,
    Def. 3.9; Kull et al. 2019); equal-count bins are built per class."""
    p, y = _probs_labels(probs, labels)
    p = np.clip(p, 0.0, 1.0)
    errs = [_binned_error(p[:, c], (y == c).astype(np.float64), n_bins, binning) for c in range(p.shape[1])]
    return float(np.mean(errs))


def binary_ece(conf: ArrayLike, outcome: ArrayLike, n_bins: int = 15, binning: str = "width") -> float:
    """Binned calibration error of a probability ``conf`` of a binary event ``outcome`` (0/1), ``conf``
    clipped to [0, 1] (the L2D estimate of expert correctness, paper 2 eq. 2, can exceed 1)."""
    c, o = _conf_outcome(conf, outcome, clip=True)
    return _binned_error(c, o, n_bins, binning)


def reliability_table(
    conf: ArrayLike, outcome: ArrayLike, n_bins: int = 10, binning: str = "width", level: float = 0.95
) -> pd.DataFrame:
    """One row per bin (empty ones with NaN): ``bin``, ``lo``, ``hi``, ``count``, ``conf`` (mean
    confidence), ``acc`` (mean outcome), ``acc_lo``, ``acc_hi`` (scipy's Wilson interval at ``level``)
    and ``gap`` = acc - conf."""
    level = check_number(level, "level", 0.0, 1.0, low_open=True, high_open=True)
    c, o = _conf_outcome(conf, outcome, clip=True)
    edges, count, sum_conf, sum_out = _bin_stats(c, o, n_bins, binning)
    nonempty = count > 0
    mean_conf, acc = (np.where(nonempty, s / np.maximum(count, 1), np.nan) for s in (sum_conf, sum_out))
    lo_ci, hi_ci = np.full(n_bins, np.nan), np.full(n_bins, np.nan)
    for b in np.flatnonzero(nonempty):
        ci = binomtest(int(round(sum_out[b])), int(count[b])).proportion_ci(confidence_level=level, method="wilson")
        lo_ci[b], hi_ci[b] = ci.low, ci.high
    return pd.DataFrame(
        {
            "bin": np.arange(n_bins),
            "lo": edges[:-1],
            "hi": edges[1:],
            "count": count.astype(np.int64),
            "conf": mean_conf,
            "acc": acc,
            "acc_lo": lo_ci,
            "acc_hi": hi_ci,
            "gap": acc - mean_conf,
        }
    )


def accuracy(probs: ArrayLike, labels: ArrayLike) -> float:
    """Top-1 accuracy: fraction of examples whose argmax class equals the label."""
    p, y = _probs_labels(probs, labels)
    return float(np.mean(p.argmax(axis=1) == y))


def brier(probs: ArrayLike, labels: ArrayLike) -> float:
    """Multi-class Brier score (Brier 1950): mean over examples of sum_c (p_c - 1[y = c])^2 (in [0, 2])."""
    p, y = _probs_labels(probs, labels)
    onehot = np.zeros_like(p)
    onehot[np.arange(p.shape[0]), y] = 1.0
    return float(np.mean(np.sum((p - onehot) ** 2, axis=1)))


def nll(probs: ArrayLike, labels: ArrayLike) -> float:
    """Negative log-likelihood, mean_i -log p_{y_i} with p clamped at 1e-12."""
    p, y = _probs_labels(probs, labels)
    py = p[np.arange(p.shape[0]), y]
    return float(np.mean(-np.log(np.maximum(py, EPS))))


def aurc(conf: ArrayLike, errors: ArrayLike) -> float:
    """Area under the risk-coverage curve with the exact sorted estimator (Geifman et al. 2019).

    Sort by confidence, highest first; the selective risk at coverage k/n is the mean error of the
    k most confident examples, and AURC = (1/n) sum_k risk_k = (1/n) sum_j e_(j) (H_n - H_{j-1})
    with H the harmonic numbers (reweighted-risk paper eq. 7 is its population form). Tied
    confidences share the mean of their positions' weights, i.e. the expectation over random
    tie-breaking, so the value does not depend on the input order. ``errors`` may be 0/1 or any
    non-negative losses; ``conf`` is any real score (higher = more confident).
    """
    c, e = to_numpy(conf, "conf"), to_numpy(errors, "errors")
    for x, name in ((c, "conf"), (e, "errors")):
        check_ndim(x, 1, name)
        check_finite(x, name)
    check_same_length(c, e, "conf", "errors")
    check_nonempty(c, "conf")
    n = c.shape[0]
    if np.any(e < 0):
        raise ValueError("errors: must be non-negative (0/1 errors or losses)")
    order = np.argsort(-c, kind="stable")
    harmonic = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, n + 1))])
    weight = harmonic[n] - harmonic[:-1]  # position j (0-based) gets H_n - H_j
    # Average the weights over each group of tied confidences.
    _, group = np.unique(-c[order], return_inverse=True)
    group_mean = np.bincount(group, weights=weight) / np.bincount(group)
    return float(np.sum(e[order] * group_mean[group]) / n)
