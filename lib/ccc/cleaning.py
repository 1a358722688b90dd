"""Finding mislabelled examples with two calibrated models (paper 3, sections 2.3 and 3.5): the
basic rule flags an example both models' predictions disagree with; the calibrated rule also asks
both confidences to lie in their top-k equal-count bins. The baseline, Confident Learning (Northcutt
et al. 2021), runs through ``cleanlab`` on out-of-sample probabilities (:func:`cross_fitted_probs`);
precision is measured against injected label noise (:func:`inject_symmetric_noise`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lib.calibration.metrics import bin_index
from lib.ccc.cascade import equal_count_bins
from lib.validation import (
    ArrayLike, check_bins, check_int, check_labels, check_logits_labels, check_ndim, check_number, check_probs_labels,
    check_same_length, to_flags, to_int_array, to_numpy, to_unit_vector,
)  # fmt: skip


def _ints(x: ArrayLike, name: str) -> np.ndarray:
    arr = to_int_array(x, name)
    check_ndim(arr, 1, name)
    return arr


def basic_flags(pred_a: ArrayLike, pred_b: ArrayLike, labels: ArrayLike) -> np.ndarray:
    """Both models' top-1 predictions disagree with the given label (paper 3, "Basic Cleaning")."""
    a, b, y = _ints(pred_a, "pred_a"), _ints(pred_b, "pred_b"), _ints(labels, "labels")
    for arr, nm in ((a, "pred_a"), (b, "pred_b"), (y, "labels")):
        if arr.size and arr.min() < 0:
            raise ValueError(f"{nm}: class indices must be >= 0, got {int(arr.min())}")
    check_same_length(a, y, "pred_a", "labels")
    check_same_length(b, y, "pred_b", "labels")
    return (a != y) & (b != y)


def calibrated_flags(
    conf_a: ArrayLike,
    pred_a: ArrayLike,
    conf_b: ArrayLike,
    pred_b: ArrayLike,
    labels: ArrayLike,
    k: int,
    n_bins: int = 15,
) -> np.ndarray:
    """Basic rule AND both calibrated confidences in the top-``k`` of ``n_bins`` equal-count bins,
    built over the flagged samples (paper 3: "we partition the flagged samples into 15 equal-count
    bins"). Monotone calibrators leave the flags unchanged."""
    check_int(k, "k", 1, n_bins)
    return _lower_bin(conf_a, pred_a, conf_b, pred_b, labels, n_bins) >= n_bins - k


def _lower_bin(
    conf_a: ArrayLike, pred_a: ArrayLike, conf_b: ArrayLike, pred_b: ArrayLike, labels: ArrayLike, n_bins: int
) -> np.ndarray:
    """The lower of an example's two bins (:func:`calibrated_flags`), -1 where the basic rule does not flag it."""
    flags = basic_flags(pred_a, pred_b, labels)
    ca, cb = to_unit_vector(conf_a, "conf_a"), to_unit_vector(conf_b, "conf_b")
    check_same_length(ca, flags, "conf_a", "labels")
    check_same_length(cb, flags, "conf_b", "labels")
    lower = np.full(flags.shape, -1)
    if flags.any():
        lower[flags] = np.minimum(*(bin_index(c, equal_count_bins(c, n_bins)) for c in (ca[flags], cb[flags])))
    return lower


def precision_detection(flags: ArrayLike, is_noisy: ArrayLike) -> tuple[float, float]:
    """(precision, detection) of ``flags`` against ``is_noisy``; precision 1.0 when nothing is flagged."""
    f, t = to_flags(flags, "flags"), to_flags(is_noisy, "is_noisy")
    check_same_length(f, t, "flags", "is_noisy")
    if not t.any():
        raise ValueError("is_noisy: no example is noisy, detection is undefined")
    hit = float((f & t).sum())
    precision = hit / f.sum() if f.any() else 1.0
    return float(precision), hit / float(t.sum())


def calibrated_rule_curve(*rule: ArrayLike, n_bins: int = 15) -> pd.DataFrame:
    """Precision and detection of the calibrated rule for k = 1..n_bins (k = n_bins: basic rule);
    ``rule``: the five arrays of :func:`calibrated_flags`, then ``is_noisy``."""
    n_bins = check_bins(n_bins)  # 0 bins would be an empty table
    if len(rule) != 6:
        raise ValueError(f"rule: expected conf_a, pred_a, conf_b, pred_b, labels, is_noisy; got {len(rule)} arrays")
    *arrays, is_noisy = rule
    lower = _lower_bin(*arrays, n_bins)  # the bins do not depend on k
    rows = []
    for k in range(1, n_bins + 1):
        f = lower >= n_bins - k
        p, d = precision_detection(f, is_noisy)
        rows.append({"k": k, "n_flagged": int(f.sum()), "precision": p, "detection": d})
    return pd.DataFrame(rows)


def ranking_curve(ranked: ArrayLike, is_noisy: ArrayLike, n_points: int = 50) -> pd.DataFrame:
    """Precision/detection of the top-m of a ranked list of flagged indices, for m on a grid."""
    n_points = check_int(n_points, "n_points")  # 0 points would be an empty table
    r = _ints(ranked, "ranked")
    t = to_flags(is_noisy, "is_noisy")
    if r.size and (r.min() < 0 or r.max() >= t.shape[0]):
        raise ValueError(f"ranked: indices must lie in [0, {t.shape[0]})")
    rows = []
    for m in np.unique(np.linspace(1, max(r.size, 1), n_points).round().astype(int)):
        f = np.zeros(t.shape[0], dtype=bool)
        f[r[:m]] = True
        p, d = precision_detection(f, t)
        rows.append({"n_flagged": int(min(m, r.size)), "precision": p, "detection": d})
    return pd.DataFrame(rows)


def inject_symmetric_noise(
    labels: ArrayLike, num_classes: int, rate: float, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Flip exactly round(rate * n) random labels, each to a uniformly drawn other class:
    ``(noisy_labels, is_noisy)``."""
    num_classes = check_int(num_classes, "num_classes", minimum=2)  # 3.5 classes would make label 3
    y = to_int_array(labels, "labels")
    check_labels(y, num_classes, "labels")
    rate = check_number(rate, "rate", 0.0, 1.0)
    rng = np.random.default_rng(seed)
    n = y.shape[0]
    idx = rng.choice(n, size=int(round(rate * n)), replace=False)
    shift = rng.integers(1, num_classes, size=idx.shape[0])
    noisy = y.copy()
    noisy[idx] = (y[idx] + shift) % num_classes
    is_noisy = np.zeros(n, dtype=bool)
    is_noisy[idx] = True
    return noisy, is_noisy


def cross_fitted_probs(logits: ArrayLike, labels: ArrayLike, n_folds: int = 2, seed: int = 0) -> np.ndarray:
    """Temperature-scaled probabilities whose temperature is fitted on the other folds, so no row's
    label shapes its own (the logits must be out-of-sample too)."""
    from lib.calibration.posthoc import TemperatureScaler

    z = to_numpy(logits, "logits")
    y = to_int_array(labels, "labels")
    check_logits_labels(z, y)
    check_int(n_folds, "n_folds", minimum=2)
    if z.shape[0] < n_folds:
        raise ValueError(f"logits: need at least n_folds={n_folds} rows")
    fold = np.random.default_rng(seed).permutation(z.shape[0]) % n_folds
    out = np.empty_like(z)
    for f in range(n_folds):
        out[fold == f] = TemperatureScaler().fit(z[fold != f], y[fold != f])(z[fold == f])
    return out


def confident_learning_flags(
    pred_probs: ArrayLike, labels: ArrayLike, *, out_of_sample: bool, return_ranked: bool = False
) -> np.ndarray:
    """Confident Learning's label issues (``cleanlab.filter.find_label_issues``, the confident
    joint's off-diagonal filter, CL "Method 2" in paper 3) as a mask, or with ``return_ranked`` the
    flagged indices by self-confidence. ``pred_probs`` must be out-of-sample (``out_of_sample=True``).

    cleanlab, not a copy of section 2.3's rule (SPEC), so differences stand; for one, cleanlab never
    flags an example whose argmax is its given label, while Method 2 as the paper states it (candidates
    j with p_j >= t_j, the class mean confidence; flag when the most probable candidate is not the
    given label) can. Hand case: thresholds (.8, .3, .9), label 0, p = (.4, .35, .25): the only
    candidate is class 1, so Method 2 flags it and cleanlab does not."""
    if out_of_sample is not True:
        raise ValueError(
            "out_of_sample: Confident Learning needs out-of-sample pred_probs (e.g. "
            "lib.ccc.cleaning.cross_fitted_probs); in-sample probabilities are refused"
        )
    from cleanlab.filter import find_label_issues

    p = to_numpy(pred_probs, "pred_probs")
    y = to_int_array(labels, "labels")
    check_probs_labels(p, y)
    ranked = {"return_indices_ranked_by": "self_confidence"} if return_ranked else {}
    issues = find_label_issues(
        labels=y, pred_probs=p / p.sum(axis=1, keepdims=True), filter_by="confident_learning", **ranked
    )
    return np.asarray(issues, dtype=np.int64 if return_ranked else bool)
