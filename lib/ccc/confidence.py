"""Calibrated top-1 confidence of one model (paper 3, "When Models Know When They Do Not Know",
sections 2.1 and 3): the calibrators of :mod:`lib.calibration.posthoc` as maps from logits to the
predicted class's confidence, fitted on a calibration half."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import softmax as scipy_softmax

from lib.validation import (
    ArrayLike,
    check_bins,
    check_choice,
    check_finite,
    check_logits_labels,
    check_ndim,
    to_int_array,
    to_numpy,
)

CALIBRATORS: tuple[str, ...] = ("temperature", "platt", "histogram", "none")


def fit_confidence(
    name: str, logits: ArrayLike, labels: ArrayLike, n_bins: int = 15
) -> Callable[[ArrayLike], np.ndarray]:
    """Fit calibrator ``name`` on (logits, labels); return a map logits -> top-1 confidence (N,).

    ``"temperature"``: max softmax(z / T), T by NLL. ``"platt"``: sigmoid(a s + b), s the log-odds
    of the top-1 probability, fitted to correctness (paper 3, section 2.1: Platt's sigmoid takes "a
    logit estimate" of the answer, and an MMLU confidence is restricted to the four options and
    renormalised, which removes the raw answer logit's offset per question). ``"histogram"``:
    ``n_bins`` equal-count bins on the top-1 probability. ``"none"``: the raw max softmax (UC). None
    changes the argmax.
    The map refuses logits that are not finite, 2-D, over the same classes."""
    from lib.calibration.posthoc import HistogramBinning, TemperatureScaler, fit_platt

    check_choice(name, CALIBRATORS, "name")
    z = to_numpy(logits, "logits")
    y = to_int_array(labels, "labels")
    check_logits_labels(z, y)
    n_bins = check_bins(n_bins)
    p = scipy_softmax(z, axis=1)
    conf = p.max(axis=1)
    correct = (p.argmax(axis=1) == y).astype(np.float64)

    T = TemperatureScaler().fit(z, y).temperature if name == "temperature" else 1.0

    def top(x: ArrayLike) -> np.ndarray:
        """max softmax(x / T) of new logits x (T = 1 but for temperature scaling)."""
        zz = to_numpy(x, "logits")
        check_ndim(zz, 2, "logits")
        check_finite(zz, "logits")
        if zz.shape[1] != z.shape[1]:
            raise ValueError(f"logits: expected {z.shape[1]} classes, got {zz.shape[1]}")
        return scipy_softmax(zz / T, axis=1).max(axis=1)

    if name in ("none", "temperature"):
        return top
    if name == "platt":

        def logodds(c: np.ndarray) -> np.ndarray:
            c = np.clip(c, 1e-12, 1 - 1e-12)
            return np.log(c) - np.log1p(-c)

        a, b = fit_platt(logodds(conf), correct)
        return lambda x: 1.0 / (1.0 + np.exp(-(a * logodds(top(x)) + b)))
    hb = HistogramBinning(n_bins).fit(conf, correct)
    return lambda x: np.asarray(hb.predict(top(x)), dtype=np.float64)


@dataclass
class ModelOutputs:
    """Top-1 confidence and correctness of one model on the calibration and test halves."""

    conf_cal: np.ndarray
    correct_cal: np.ndarray
    conf_test: np.ndarray
    correct_test: np.ndarray

    @property
    def acc_test(self) -> float:
        return float(self.correct_test.mean())


def model_outputs(
    logits: ArrayLike,
    labels: ArrayLike,
    cal_idx: ArrayLike,
    test_idx: ArrayLike,
    calibrator: str = "temperature",
    n_bins: int = 15,
) -> ModelOutputs:
    """Fit ``calibrator`` on the calibration rows and return both halves' confidence/correctness."""
    z = to_numpy(logits, "logits")
    y = to_int_array(labels, "labels")
    check_logits_labels(z, y)
    ci = to_int_array(cal_idx, "cal_idx")  # 2.5 is no index (a cast would truncate it)
    ti = to_int_array(test_idx, "test_idx")
    for idx, nm in ((ci, "cal_idx"), (ti, "test_idx")):
        check_ndim(idx, 1, nm)
        if idx.size == 0 or idx.min() < 0 or idx.max() >= z.shape[0]:
            raise ValueError(f"{nm}: must be non-empty indices in [0, {z.shape[0]})")
    conf_of = fit_confidence(calibrator, z[ci], y[ci], n_bins=n_bins)
    pred = z.argmax(axis=1)
    return ModelOutputs(conf_of(z[ci]), pred[ci] == y[ci], conf_of(z[ti]), pred[ti] == y[ti])
