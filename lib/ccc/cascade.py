"""Cascading two models with the calibrated confidence advantage (paper 3, sections 2.2 and 3.2-3.4).

Each model is calibrated on a calibration half (:mod:`lib.ccc.confidence`); B equal-count bins on the
small model's confidence are sorted by the confidence advantage a_b = mean(conf_large) -
mean(conf_small); keeping the first k on the small model gives one point of the cascade curve per k
(:func:`cascade_curve`), scored by APGR (appendix A.1, eqs. 1-2). Baselines: UC (uncalibrated) and RC
(random routing). :func:`same_size_route` routes between two models of the same size (section 3.3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lib.calibration.metrics import bin_edges, bin_index
from lib.ccc.confidence import ModelOutputs
from lib.validation import (
    ArrayLike, check_bins, check_choice, check_finite, check_int, check_ndim, check_nonempty, check_number,
    check_open_unit, check_same_length, to_flags, to_int_array, to_numpy, to_unit_vector,
)  # fmt: skip

# --- splitting ----------------------------------------------------------------------------------


def split_halves(n: int, seed: int = 0, cal_fraction: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Random (calibration, test) index split of ``n`` examples (paper 3, section 3: "We split the
    validation set in half"). Both index arrays are sorted."""
    check_int(n, "n", minimum=2)
    cal_fraction = check_open_unit(cal_fraction, "cal_fraction")
    seed = check_int(seed, "seed", minimum=0)
    perm = np.random.default_rng(seed).permutation(n)
    k = min(max(int(round(cal_fraction * n)), 1), n - 1)
    return np.sort(perm[:k]), np.sort(perm[k:])


# --- bins and the confidence advantage --------------------------------------------------------


def equal_count_bins(conf_cal: ArrayLike, n_bins: int = 15) -> np.ndarray:
    """Edges of ``n_bins`` equal-count bins on ``conf_cal`` (paper 3, section 2.1, "Sample-based binning");
    an example's bin is :func:`lib.calibration.metrics.bin_index` of them."""
    return bin_edges(to_unit_vector(conf_cal, "conf_cal"), n_bins, "mass")


def advantage_table(
    bins: ArrayLike,
    n_bins: int,
    conf_small: ArrayLike,
    conf_large: ArrayLike,
    correct_small: ArrayLike,
    correct_large: ArrayLike,
) -> pd.DataFrame:
    """Per-bin ``count``, mean confidences/accuracies, ``advantage`` a_b = mean(conf_large) -
    mean(conf_small) and ``acc_advantage`` = acc_large - acc_small (paper 3, section 2.2).
    Empty bins get NaN statistics."""
    n_bins = check_bins(n_bins)
    b = to_int_array(bins, "bins")  # 1.7 is no bin (a cast would truncate it to 1)
    cs, cl = to_unit_vector(conf_small, "conf_small"), to_unit_vector(conf_large, "conf_large")
    ks, kl = to_flags(correct_small, "correct_small"), to_flags(correct_large, "correct_large")
    for arr, nm in ((cs, "conf_small"), (cl, "conf_large"), (ks, "correct_small"), (kl, "correct_large")):
        check_same_length(b, arr, "bins", nm)
    if b.size and (b.min() < 0 or b.max() >= n_bins):
        raise ValueError(f"bins: values must lie in [0, {n_bins})")
    count = np.bincount(b, minlength=n_bins).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = {
            key: np.bincount(b, weights=v.astype(np.float64), minlength=n_bins) / count
            for key, v in (("conf_small", cs), ("conf_large", cl), ("acc_small", ks), ("acc_large", kl))
        }
    df = pd.DataFrame({"bin": np.arange(n_bins), "count": count.astype(np.int64), **mean})
    return df.assign(advantage=df["conf_large"] - df["conf_small"], acc_advantage=df["acc_large"] - df["acc_small"])


def _binned_table(
    first: ModelOutputs, second: ModelOutputs, n_bins: int, joint: bool = False
) -> tuple[pd.DataFrame, np.ndarray]:
    """The calibration half's :func:`advantage_table` of ``second`` over ``first`` on ``n_bins``
    equal-count bins of ``first``'s confidence (``joint``: n_bins x n_bins cells of both models'),
    with each bin's ``test_count``, and the bin of each test example."""
    e1 = equal_count_bins(first.conf_cal, n_bins)
    c_cal, c_test = bin_index(first.conf_cal, e1), bin_index(first.conf_test, e1)
    n_cells = n_bins
    if joint:
        e2 = equal_count_bins(second.conf_cal, n_bins)
        c_cal = c_cal * n_bins + bin_index(second.conf_cal, e2)
        c_test = c_test * n_bins + bin_index(second.conf_test, e2)
        n_cells = n_bins * n_bins
    table = advantage_table(c_cal, n_cells, first.conf_cal, second.conf_cal, first.correct_cal, second.correct_cal)
    table["test_count"] = np.bincount(c_test, minlength=n_cells)
    return table, c_test


# --- the cascade curve ------------------------------------------------------------------------


@dataclass
class CascadeCurve:
    """A cascade's test-half (fraction on small, accuracy) points for k = 0..B bins kept on the small
    model, the bins' ``order`` and calibration-half ``table``, and the two models' accuracies alone.
    A curve of :func:`cascade_curve` also holds, per test example, ``to_large`` (the share of the
    cost axis, trapezoid-weighted as APGR integrates it, over which the example goes to the large
    model) and ``gain`` (large's correctness minus small's), from which its APGR is the ratio
    mean(to_large x gain) / mean(gain) (:func:`apgr_test_se`)."""

    frac_small: np.ndarray
    accuracy: np.ndarray
    order: np.ndarray
    table: pd.DataFrame
    acc_small: float
    acc_large: float
    to_large: np.ndarray | None = None
    gain: np.ndarray | None = None

    @property
    def cost(self) -> np.ndarray:
        return 1.0 - self.frac_small

    def apgr(self) -> float:
        """APGR of this curve (appendix A.1)."""
        return apgr(self.cost, self.accuracy, self.acc_small, self.acc_large)


def cascade_curve(small: ModelOutputs, large: ModelOutputs, n_bins: int = 15) -> CascadeCurve:
    """The cascade curve of paper 3, section 2.2 (Alg. 1): bins sorted by the calibration half's
    confidence advantage, ties by index, empty bins last."""
    for a, b, nm in ((small.conf_cal, large.conf_cal, "conf_cal"), (small.conf_test, large.conf_test, "conf_test")):
        check_same_length(a, b, f"small.{nm}", f"large.{nm}")
    table, bins_test = _binned_table(small, large, n_bins)
    key = table["advantage"].to_numpy()
    key = np.where(np.isfinite(key), key, np.inf)
    order = np.argsort(key, kind="stable")
    table["rank"] = np.argsort(order)
    n = bins_test.shape[0]
    cs = np.bincount(bins_test, weights=small.correct_test.astype(np.float64), minlength=n_bins)
    cl = np.bincount(bins_test, weights=large.correct_test.astype(np.float64), minlength=n_bins)
    cnt = table["test_count"].to_numpy().astype(np.float64)
    # Keeping bins order[:k] on the small model: correct = small's hits there + large's elsewhere.
    kept_small, kept_large, kept_n = (np.concatenate([[0.0], np.cumsum(v[order])]) for v in (cs, cl, cnt))
    accuracy = (kept_small + cl.sum() - kept_large) / n
    frac_small = kept_n / n
    # APGR's trapezoid weight of each point k (sorted by cost as apgr sorts it); an example in the bin
    # of rank r stays on the small model for k > r, so it goes to the large one over points 0..r
    cost = 1.0 - frac_small
    by_cost = np.argsort(cost, kind="stable")
    step = np.diff(cost[by_cost]) / 2
    weight = np.zeros_like(cost)
    weight[by_cost] = np.concatenate([step, [0.0]]) + np.concatenate([[0.0], step])
    to_large = np.cumsum(weight)[table["rank"].to_numpy()[bins_test]]
    gain = large.correct_test.astype(np.float64) - small.correct_test.astype(np.float64)
    return CascadeCurve(frac_small, accuracy, order, table, small.acc_test, large.acc_test, to_large, gain)


CURVES: tuple[str, ...] = ("CC (calibrated)", "UC (uncalibrated)", "RC (random)")
"""The methods of a cascade chart, in order: calibrated, uncalibrated and random routing."""


def curves_frame(panel: str, *curves: CascadeCurve) -> pd.DataFrame:
    """The :data:`CURVES` (CC, UC, RC) of one ``panel`` in one frame, for :func:`lib.ccc.plots.cascade_chart`."""
    frames = []
    for name, c in zip(CURVES, curves, strict=True):
        points = {"k": np.arange(c.frac_small.shape[0]), "frac_small": c.frac_small, "cost": c.cost}
        frames.append(pd.DataFrame({"method": name, **points, "accuracy": c.accuracy, "panel": panel}))
    return pd.concat(frames)


def random_curve(acc_small: float, acc_large: float, n_points: int = 16) -> CascadeCurve:
    """RC: random routing, expected accuracy on the straight line between the two models."""
    n_points = check_int(n_points, "n_points", minimum=2)
    acc_small = check_number(acc_small, "acc_small", 0.0, 1.0)
    acc_large = check_number(acc_large, "acc_large", 0.0, 1.0)
    frac = np.linspace(0.0, 1.0, n_points)
    acc = acc_large + frac * (acc_small - acc_large)
    return CascadeCurve(frac, acc, np.arange(n_points - 1), pd.DataFrame(), acc_small, acc_large)


def random_routing_curve(
    correct_small: ArrayLike, correct_large: ArrayLike, n_points: int = 16, seed: int = 0
) -> CascadeCurve:
    """RC on a real model pair: in one random order of the test examples (``seed``), the first
    round(k n / (n_points - 1)) stay on the small model, the rest go to the large one; in expectation
    the straight line between the two models, whose APGR is 0.5 (paper 3, App. A.1)."""
    ks, kl = to_flags(correct_small, "correct_small"), to_flags(correct_large, "correct_large")
    check_same_length(ks, kl, "correct_small", "correct_large")
    n_points = check_int(n_points, "n_points", minimum=2)
    seed = check_int(seed, "seed", minimum=0)
    check_nonempty(ks, "correct_small")
    n = ks.shape[0]
    order = np.random.default_rng(seed).permutation(n)
    m = np.rint(np.arange(n_points) * n / (n_points - 1)).astype(np.int64)
    small_hits, large_hits = (np.concatenate([[0], np.cumsum(k[order])]) for k in (ks, kl))  # hits among the first m
    accuracy = (small_hits[m] + kl.sum() - large_hits[m]) / n
    return CascadeCurve(m / n, accuracy.astype(np.float64), order, pd.DataFrame(), float(ks.mean()), float(kl.mean()))


def apgr(cost: ArrayLike, performance: ArrayLike, weak: float, strong: float) -> float:
    """Average Performance Gap Recovered (paper 3, appendix A.1, eqs. 1-2): the trapezoid integral
    over ``cost`` c (the share sent to the strong model, spanning [0, 1]) of
    r(c) = (P(c) - P_weak) / (P_strong - P_weak), ``performance`` P(c); random routing gives 0.5."""
    c, p = to_numpy(cost, "cost"), to_numpy(performance, "performance")
    for arr, name in ((c, "cost"), (p, "performance")):
        check_ndim(arr, 1, name)
        check_finite(arr, name)
    check_same_length(c, p, "cost", "performance")
    if c.shape[0] < 2:
        raise ValueError("cost: need at least 2 points")
    if c.min() < -1e-9 or c.max() > 1 + 1e-9:
        raise ValueError(f"cost: values must lie in [0, 1], got [{c.min():.4g}, {c.max():.4g}]")
    if c.min() > 1e-9 or c.max() < 1 - 1e-9:
        raise ValueError(f"cost: points must span [0, 1], got [{c.min():.4g}, {c.max():.4g}]")
    weak, strong = check_number(weak, "weak"), check_number(strong, "strong")
    if abs(strong - weak) < 1e-12:
        raise ValueError("strong: must differ from weak (APGR normalises by P_strong - P_weak)")
    order = np.argsort(c, kind="stable")
    r = (p[order] - weak) / (strong - weak)
    return float(np.trapezoid(r, c[order]))


def apgr_test_se(curve: CascadeCurve, other: CascadeCurve | None = None) -> float:
    """The standard error, over the test half's examples, of ``curve``'s APGR, or of the difference
    of its APGR and ``other``'s on the same test half (the same two models' correctness: another
    calibrator, uncalibrated, or other bins): the delta method on APGR = mean(u g) / mean(g), u an
    example's share of the cost axis on the large model and g large's correctness minus small's
    (:class:`CascadeCurve`), for the bins fixed by the calibration half. Its influence per example
    is (u - APGR) g / mean(g), so SE = sd of that / sqrt(n); it is at most about sqrt(d / n) /
    abs(mean(g)), d the share of examples where one model alone is right (as abs(u - APGR) <= 1),
    and far smaller for two curves that route alike. The noise of a finite test set, which
    resampling one data set into halves does not show (paper 3's pages floor their split-to-split SE
    by it)."""
    for c, nm in ((curve, "curve"), (other, "other")):
        if c is not None and (c.to_large is None or c.gain is None):
            raise ValueError(f"{nm}: needs the per-example terms of cascade_curve (to_large, gain)")
    u, g, value = curve.to_large, curve.gain, curve.apgr()
    if other is not None:
        if other.gain.shape != g.shape or not np.array_equal(other.gain, g):
            raise ValueError("other: must be a curve of the same two models' correctness on the same test half")
        u, value = u - other.to_large, value - other.apgr()
    if g.size < 2 or abs(float(g.mean())) < 1e-12:
        raise ValueError("curve: needs two or more test examples and models that differ in accuracy")
    influence = (u - value) * g / float(g.mean())
    return float(influence.std(ddof=1) / np.sqrt(g.size))


# --- routing between two models of the same size (section 3.3) ------------------------------------


@dataclass
class RouteResult:
    """Same-size routing: accuracy of the routed pair and of each model alone (test half), the share
    sent to the second model, the per-bin table, and whether each routed test example is right."""

    accuracy: float
    acc_first: float
    acc_second: float
    frac_second: float
    table: pd.DataFrame
    correct: np.ndarray


def same_size_route(first: ModelOutputs, second: ModelOutputs, n_bins: int = 15, binning: str = "first") -> RouteResult:
    """Route each test example to the model with the higher calibrated confidence in its bin
    (paper 3, section 3.3): B bins on the first model (``binning="first"``) or B x B cells on both
    (``"joint"``), advantages from the calibration half."""
    check_choice(binning, ("first", "joint"), "binning")
    table, c_test = _binned_table(first, second, n_bins, joint=binning == "joint")
    adv = np.nan_to_num(table["advantage"].to_numpy(), nan=0.0)
    to_second = adv[c_test] > 0
    correct = np.where(to_second, second.correct_test, first.correct_test)
    return RouteResult(float(correct.mean()), first.acc_test, second.acc_test, float(to_second.mean()), table, correct)
