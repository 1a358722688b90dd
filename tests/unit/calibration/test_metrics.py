"""Tests for lib.calibration.metrics against hand-worked values, closed forms, brute force and torchmetrics."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy.stats import norm

from lib.calibration import metrics
from lib.calibration.metrics import (
    accuracy,
    aurc,
    bin_edges,
    bin_index,
    binary_ece,
    brier,
    classwise_ece,
    ece,
    nll,
    reliability_table,
)


def _dirichlet_calibrated(n: int, c: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Probabilities from a Dirichlet and labels drawn from them: calibrated by construction."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(c, 0.5), size=n)
    u = rng.random((n, 1))
    y = (p.cumsum(axis=1) > u).argmax(axis=1)
    return p, y


# --- ECE ---------------------------------------------------------------------------------------

# Hand example, 5 equal-width bins with edges 0, .2, .4, .6, .8, 1 and bins (lo, hi]:
#   row  probs              label  conf  correct  bin
#   1    [.90, .05, .05]    0      .90   1        (.8, 1]
#   2    [.60, .30, .10]    1      .60   0        (.4, .6]   (0.6 sits on the edge -> lower bin)
#   3    [.20, .50, .30]    1      .50   1        (.4, .6]
#   4    [.45, .35, .20]    2      .45   0        (.4, .6]
#   5    [.80, .10, .10]    1      .80   0        (.6, .8]   (0.8 on the edge -> lower bin)
# bin (.4,.6]: conf mean (.6+.5+.45)/3 = .51667, acc 1/3, |gap| = .18333, weight 3/5 -> .11
# bin (.6,.8]: conf .8, acc 0, |gap| = .8, weight 1/5 -> .16
# bin (.8, 1]: conf .9, acc 1, |gap| = .1, weight 1/5 -> .02
# ECE = .11 + .16 + .02 = .29.  (With [lo, hi) bins row 5 would join row 1 and ECE would be .25.)
HAND_PROBS = np.array(
    [[0.90, 0.05, 0.05], [0.60, 0.30, 0.10], [0.20, 0.50, 0.30], [0.45, 0.35, 0.20], [0.80, 0.10, 0.10]]
)
HAND_LABELS = np.array([0, 1, 1, 2, 1])


def test_ece_hand_example() -> None:
    value = ece(HAND_PROBS, HAND_LABELS, n_bins=5)
    assert isinstance(value, float)
    assert value == pytest.approx(0.29, abs=1e-12)


def test_ece_accepts_torch_and_lists() -> None:
    expected = 0.29
    assert ece(torch.tensor(HAND_PROBS), torch.tensor(HAND_LABELS), n_bins=5) == pytest.approx(expected)
    assert ece(HAND_PROBS.tolist(), HAND_LABELS.tolist(), n_bins=5) == pytest.approx(expected)


def test_bins_are_half_open_with_zero_in_first_bin() -> None:
    edges = np.linspace(0, 1, 5)  # 0, .25, .5, .75, 1
    conf = np.array([0.0, 0.25, 0.2500001, 0.5, 0.75, 0.76, 1.0])
    assert bin_index(conf, edges).tolist() == [0, 0, 1, 1, 2, 3, 3]


def test_binary_ece_hand_example_and_clipping() -> None:
    # 2 bins (0, .5], (.5, 1]: conf 0 -> bin 0; conf 1.3 is clipped to 1.
    # bin 0: conf {0, .4} mean .2, outcomes {0, 1} acc .5 -> |.3| * 2/4 = .15
    # bin 1: conf {.6, 1} mean .8, outcomes {1, 1} acc 1 -> |.2| * 2/4 = .10  => .25
    conf = np.array([0.0, 0.4, 0.6, 1.3])
    outcome = np.array([0, 1, 1, 1])
    assert binary_ece(conf, outcome, n_bins=2) == pytest.approx(0.25, abs=1e-12)
    # Clipping equals passing the capped value.
    assert binary_ece(conf, outcome, n_bins=2) == binary_ece(np.minimum(conf, 1), outcome, n_bins=2)


def test_ece_equals_binary_ece_of_top_label() -> None:
    p, y = _dirichlet_calibrated(2000, 5, seed=3)
    top = p.max(axis=1)
    correct = (p.argmax(axis=1) == y).astype(float)
    for binning in ("width", "mass"):
        assert ece(p, y, binning=binning) == pytest.approx(binary_ece(top, correct, binning=binning))


@pytest.mark.parametrize("n,scale,n_bins", [(3000, 2.0, 5), (3000, 2.0, 15), (20_000, 6.0, 15)])
def test_ece_agrees_with_torchmetrics(n: int, scale: float, n_bins: int) -> None:
    """torchmetrics casts the confidences to float32 and sums each bin in float32; ours runs in
    float64, here on the same float32-rounded probabilities, so both put every example in the same
    bin. The tolerance is float32's: a float32 sum of terms in [0, 1] is off by at most (n - 1) u
    of their total (u = 2^-24), so each bin's mean accuracy and mean confidence by (n - 1) u, and
    the ECE, a proportion-weighted sum of their gaps, by 2 (n - 1) u (1.2e-3 at n = 10,000: the
    size of the differences on real CIFAR-10 logits, most confidences near 1 in one bin)."""
    from torchmetrics.functional.classification import multiclass_calibration_error

    # Continuous random probabilities never land on an inner bin edge, where torchmetrics' [lo, hi)
    # and our (lo, hi] conventions would differ; scale 6 puts most confidences near 1, as CIFAR's.
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(n, 7)) * scale
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = rng.integers(0, 7, size=n)
    theirs = multiclass_calibration_error(
        torch.tensor(p, dtype=torch.float64), torch.tensor(y), num_classes=7, n_bins=n_bins, norm="l1"
    ).item()
    p32 = p.astype(np.float32).astype(np.float64)
    assert ece(p32, y, n_bins=n_bins) == pytest.approx(theirs, abs=2 * (n - 1) * 2.0**-24)


def test_ece_of_calibrated_data_is_small_and_shrinks_with_n() -> None:
    values = {}
    for n in (1_000, 100_000):
        p, y = _dirichlet_calibrated(n, 10, seed=n)
        values[n] = ece(p, y)
    assert values[100_000] < 0.01
    # The binned estimator's bias is O(sqrt(bins / n)): 100x more data -> several times smaller.
    assert values[100_000] < values[1_000] / 3


def test_ece_of_overconfident_model_equals_gap() -> None:
    # Every example predicts class 0 with probability .9 but is right half the time: ECE = .4.
    p = np.tile([0.9, 0.1], (10, 1))
    y = np.array([0, 1] * 5)
    assert ece(p, y) == pytest.approx(0.4)
    assert ece(p, y, binning="mass") == pytest.approx(0.4)


# --- binning ------------------------------------------------------------------------------------


@pytest.mark.parametrize("n,n_bins", [(150, 15), (157, 15), (1000, 10), (31, 4)])
def test_mass_bins_hold_equal_counts(n: int, n_bins: int) -> None:
    conf = np.random.default_rng(n).random(n)  # distinct with probability 1
    edges = bin_edges(conf, n_bins, "mass")
    counts = np.bincount(bin_index(conf, edges), minlength=n_bins)
    assert counts.sum() == n
    assert set(counts.tolist()) <= {n // n_bins, -(-n // n_bins)}
    assert edges[0] == 0.0 and edges[-1] == 1.0 and np.all(np.diff(edges) >= 0)


def test_width_bins_are_linspace() -> None:
    assert np.array_equal(bin_edges(np.array([0.3]), 4, "width"), np.linspace(0, 1, 5))


def test_mass_ece_hand_example() -> None:
    # 4 confidences, 2 equal-count bins -> {.1, .3} and {.6, .9} (edge at (.3 + .6) / 2 = .45).
    # bin 0: conf .2, acc 0 -> .2 * 1/2; bin 1: conf .75, acc 1 -> .25 * 1/2; total .225.
    conf = np.array([0.9, 0.1, 0.6, 0.3])
    outcome = np.array([1, 0, 1, 0])
    assert bin_edges(conf, 2, "mass")[1] == pytest.approx(0.45)
    assert binary_ece(conf, outcome, n_bins=2, binning="mass") == pytest.approx(0.225)


# --- classwise ECE ------------------------------------------------------------------------------


# Hand example, 2 bins (0, .5], (.5, 1]:
#   probs [.7 .2 .1] y0 | [.2 .6 .2] y2 | [.1 .3 .6] y2 | [.5 .25 .25] y1
# class 0: p = .7 .2 .1 .5, targets 1 0 0 0: bin0 {.2 .1 .5}: |0 - .8| ; bin1 {.7}: |1 - .7|
#          error = (.8 + .3) / 4 = .275
# class 1: p = .2 .6 .3 .25, targets 0 0 0 1: bin0 |1 - .75| = .25 ; bin1 |0 - .6| = .6 -> .2125
# class 2: p = .1 .2 .6 .25, targets 0 1 1 0: bin0 |1 - .55| = .45 ; bin1 |1 - .6| = .4 -> .2125
# classwise ECE = (.275 + .2125 + .2125) / 3 = .7 / 3
def test_classwise_ece_hand_example() -> None:
    p = np.array([[0.7, 0.2, 0.1], [0.2, 0.6, 0.2], [0.1, 0.3, 0.6], [0.5, 0.25, 0.25]])
    y = np.array([0, 2, 2, 1])
    assert classwise_ece(p, y, n_bins=2) == pytest.approx(0.7 / 3, abs=1e-12)


# Paper 4's cwECE^a (equal-mass bins per class) apart from equal-width bins, 2 bins:
#   p(class 0) = .9 .8 .6 .3, p(class 1) = 1 - p(class 0), y = 0 1 0 1
# mass:  class 0 splits {.3 .6 | .8 .9}: (|1 - .9| + |1 - 1.7|) / 4 = .2; class 1 {.1 .2 | .4 .7}: (.7 + .1) / 4 = .2
# width: class 0 {.3 | .6 .8 .9}: (.3 + |2 - 2.3|) / 4 = .15; class 1 {.1 .2 .4 | .7}: (.3 + .3) / 4 = .15
def test_classwise_ece_with_equal_mass_bins_hand_example() -> None:
    p0 = np.array([0.9, 0.8, 0.6, 0.3])
    p, y = np.stack([p0, 1 - p0], axis=1), np.array([0, 1, 0, 1])
    assert classwise_ece(p, y, n_bins=2, binning="mass") == pytest.approx(0.2, abs=1e-12)
    assert classwise_ece(p, y, n_bins=2) == pytest.approx(0.15, abs=1e-12)


def test_classwise_ece_of_calibrated_data_is_small() -> None:
    p, y = _dirichlet_calibrated(50_000, 5, seed=11)
    assert classwise_ece(p, y) < 0.01
    assert classwise_ece(p, y, binning="mass") < 0.01


# --- reliability table ----------------------------------------------------------------------------


def test_reliability_table_counts_means_and_wilson_intervals() -> None:
    rng = np.random.default_rng(5)
    conf = rng.random(500)
    outcome = (rng.random(500) < conf**2).astype(int)
    table = reliability_table(conf, outcome, n_bins=10)
    assert list(table.columns[:8]) == ["bin", "lo", "hi", "count", "conf", "acc", "acc_lo", "acc_hi"]
    assert len(table) == 10 and table["count"].sum() == 500
    z = norm.ppf(0.975)
    for row in table.itertuples():
        inside = (conf > row.lo) & (conf <= row.hi) if row.bin else conf <= row.hi
        k, m = outcome[inside].sum(), inside.sum()
        assert row.count == m
        assert row.conf == pytest.approx(conf[inside].mean())
        assert row.acc == pytest.approx(k / m)
        # Wilson score interval, closed form.
        centre = (k / m + z**2 / (2 * m)) / (1 + z**2 / m)
        half = z / (1 + z**2 / m) * np.sqrt(k / m * (1 - k / m) / m + z**2 / (4 * m**2))
        assert row.acc_lo == pytest.approx(centre - half, abs=1e-9)
        assert row.acc_hi == pytest.approx(centre + half, abs=1e-9)
        assert row.acc_lo <= row.acc <= row.acc_hi


def test_reliability_table_keeps_empty_bins_as_nan() -> None:
    table = reliability_table(np.array([0.95, 0.97]), np.array([1, 0]), n_bins=4)
    assert table["count"].tolist() == [0, 0, 0, 2]
    assert table.loc[:2, "acc"].isna().all()
    assert table.loc[3, "acc"] == 0.5


# --- proper scores ------------------------------------------------------------------------------


def test_brier_and_nll_known_values() -> None:
    uniform = np.full((3, 4), 0.25)
    y = np.array([0, 1, 3])
    assert brier(uniform, y) == pytest.approx(1 - 1 / 4)  # (3/4)^2 + 3 (1/4)^2
    assert nll(uniform, y) == pytest.approx(np.log(4))
    onehot = np.eye(4)[y]
    assert brier(onehot, y) == 0.0 and nll(onehot, y) == pytest.approx(0.0)
    wrong = np.eye(4)[[1, 2, 0]]
    assert brier(wrong, y) == pytest.approx(2.0)
    assert nll(wrong, y) == pytest.approx(-np.log(1e-12))  # clamped at 1e-12
    # One example by hand: p = (.5, .3, .2), y = 1 -> .25 + .49 + .04 = .78 and -log .3.
    p = np.array([[0.5, 0.3, 0.2]])
    assert brier(p, [1]) == pytest.approx(0.78)
    assert nll(p, [1]) == pytest.approx(-np.log(0.3))


def test_accuracy() -> None:
    assert accuracy(HAND_PROBS, HAND_LABELS) == pytest.approx(2 / 5)


# --- AURC ---------------------------------------------------------------------------------------


def _brute_force_aurc(conf: np.ndarray, errors: np.ndarray) -> float:
    """Mean selective risk over the n coverages k/n, accepting the k most confident examples."""
    n = len(conf)
    risks = []
    for k in range(1, n + 1):
        threshold = np.sort(conf)[::-1][k - 1]
        accepted = conf >= threshold  # no ties here, so exactly k examples
        assert accepted.sum() == k
        risks.append(errors[accepted].mean())
    return float(np.mean(risks))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_aurc_equals_brute_force_risk_coverage_integral(seed: int) -> None:
    rng = np.random.default_rng(seed)
    conf = rng.random(60)
    errors01 = (rng.random(60) < 1 - conf).astype(float)
    losses = rng.exponential(size=60)
    assert aurc(conf, errors01) == pytest.approx(_brute_force_aurc(conf, errors01))
    assert aurc(conf, losses) == pytest.approx(_brute_force_aurc(conf, losses))


def test_aurc_with_ties_is_the_mean_over_tie_breaks() -> None:
    conf = np.array([0.9, 0.5, 0.5, 0.5, 0.2])
    errors = np.array([0.0, 1.0, 0.0, 0.0, 1.0])
    values = []
    for perm in itertools.permutations([1, 2, 3]):
        order = [0, *perm, 4]  # confidence order with the ties broken by ``perm``
        e = errors[order]
        values.append(np.mean([e[:k].mean() for k in range(1, 6)]))
    assert aurc(conf, errors) == pytest.approx(np.mean(values))
    # Independent of the input order.
    shuffle = np.array([3, 0, 4, 2, 1])
    assert aurc(conf[shuffle], errors[shuffle]) == pytest.approx(aurc(conf, errors))


def test_aurc_limits() -> None:
    conf = np.array([0.9, 0.8, 0.7, 0.6])
    assert aurc(conf, np.zeros(4)) == 0.0
    assert aurc(conf, np.ones(4)) == pytest.approx(1.0)
    # One error, ranked last: risks 0, 0, 0, 1/4 -> 1/16. Ranked first: 1, 1/2, 1/3, 1/4.
    assert aurc(conf, np.array([0, 0, 0, 1.0])) == pytest.approx(1 / 16)
    assert aurc(conf, np.array([1.0, 0, 0, 0])) == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)


# --- bad input ----------------------------------------------------------------------------------


def test_bad_input_raises_naming_the_argument() -> None:
    with pytest.raises(ValueError, match="probs"):
        ece(np.array([[0.5, 0.6]]), [0])  # row sums to 1.1
    with pytest.raises(ValueError, match="probs"):
        ece(np.array([[np.nan, 1.0]]), [0])
    with pytest.raises(ValueError, match="probs"):
        ece(np.array([0.5, 0.5]), [0])  # 1-D
    with pytest.raises(ValueError, match="labels"):
        ece(HAND_PROBS, [0, 1, 1, 2, 3])  # 3 classes only
    with pytest.raises(ValueError, match="labels"):
        brier(HAND_PROBS, [0, 1])  # wrong length
    with pytest.raises(ValueError, match="binning.*'width'.*'mass'"):
        ece(HAND_PROBS, HAND_LABELS, binning="quantile")
    with pytest.raises(ValueError, match="n_bins"):
        ece(HAND_PROBS, HAND_LABELS, n_bins=0)
    with pytest.raises(ValueError, match="outcome"):
        binary_ece([0.2, 0.4], [0, 2])
    with pytest.raises(ValueError, match="conf"):
        binary_ece([0.2, np.nan], [0, 1])
    with pytest.raises(ValueError, match="conf"):
        reliability_table([0.2, 1.5, 0.3], [0, 1])  # lengths differ
    with pytest.raises(ValueError, match="errors"):
        aurc([0.2, 0.4], [0.0, -1.0])
    with pytest.raises(ValueError, match="conf"):
        bin_edges([0.2, 1.4], 5, "mass")


def test_public_names() -> None:
    for name in metrics.__all__:
        assert callable(getattr(metrics, name)) or name == "BINNINGS"
