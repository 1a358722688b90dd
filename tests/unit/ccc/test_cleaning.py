"""lib.ccc.cleaning: hand-built flag sets, the noise injector's exact counts, and Confident Learning
called only with out-of-sample probabilities."""

from __future__ import annotations

import numpy as np
import pytest

from lib.ccc import cleaning as K


def test_basic_flags_truth_table():
    y = np.array([0, 0, 0, 0])
    a = np.array([0, 1, 0, 1])
    b = np.array([0, 0, 2, 2])
    np.testing.assert_array_equal(K.basic_flags(a, b, y), [False, False, False, True])


def test_precision_is_one_when_flags_equal_the_injected_noise():
    y = np.random.default_rng(0).integers(0, 10, 1000)
    noisy, is_noisy = K.inject_symmetric_noise(y, 10, 0.05, seed=1)
    assert K.precision_detection(is_noisy, is_noisy) == (1.0, 1.0)
    # Flag half of the noisy ones and as many clean ones: precision 1/2, detection 1/2.
    idx_noisy = np.flatnonzero(is_noisy)
    idx_clean = np.flatnonzero(~is_noisy)
    f = np.zeros(1000, bool)
    f[idx_noisy[:25]] = True
    f[idx_clean[:25]] = True
    assert K.precision_detection(f, is_noisy) == pytest.approx((0.5, 0.5))


def test_noise_injection_is_exact_and_seeded():
    y = np.random.default_rng(0).integers(0, 4, 2000)
    noisy, is_noisy = K.inject_symmetric_noise(y, 4, 0.1, seed=7)
    assert is_noisy.sum() == 200
    np.testing.assert_array_equal(noisy != y, is_noisy)  # every flipped label really changed
    again, _ = K.inject_symmetric_noise(y, 4, 0.1, seed=7)
    np.testing.assert_array_equal(noisy, again)
    # Symmetric: the new class is uniform over the other three (each ~1/3 of flips).
    shift = (noisy[is_noisy] - y[is_noisy]) % 4
    assert set(np.unique(shift)) == {1, 2, 3}
    assert np.all(np.abs(np.bincount(shift)[1:] / 200 - 1 / 3) < 0.1)


def test_calibrated_flags_keep_only_confident_disagreements():
    n = 100
    y = np.zeros(n, int)
    pred = np.ones(n, int)  # every example disagrees
    conf = (np.arange(n) + 0.5) / n
    flags = K.calibrated_flags(conf, pred, conf, pred, y, k=1, n_bins=10)
    np.testing.assert_array_equal(flags, conf > 0.9)  # the top decile only
    with pytest.raises(ValueError, match="k"):
        K.calibrated_flags(conf, pred, conf, pred, y, k=0, n_bins=10)


def test_bins_partition_the_flagged_samples_as_the_paper_says():
    """Ten labels, six flagged by the basic rule (both models disagree: samples 0-5). With 3 bins
    and k = 1, the paper's rule keeps the top third *of the flagged samples* by each model's
    confidence (hand-computed: model A ranks 4, 5 highest among 0-5, model B ranks 5, 3 highest), so
    only sample 5 is in both (binning the whole pool instead would keep the top third of all ten:
    samples 6-9 rank above every flagged sample for A, so nothing would be flagged)."""
    y = np.zeros(10, int)
    pred = np.r_[np.ones(6, int), np.zeros(4, int)]
    conf_a = np.array([0.10, 0.20, 0.30, 0.40, 0.50, 0.60, 0.91, 0.92, 0.93, 0.94])
    conf_b = np.array([0.15, 0.25, 0.35, 0.55, 0.20, 0.65, 0.91, 0.92, 0.93, 0.94])
    paper = K.calibrated_flags(conf_a, pred, conf_b, pred, y, k=1, n_bins=3)
    np.testing.assert_array_equal(np.flatnonzero(paper), [5])
    # k = n_bins keeps every flagged sample (the basic rule)
    np.testing.assert_array_equal(K.calibrated_flags(conf_a, pred, conf_b, pred, y, k=3, n_bins=3), pred != y)


def test_confident_learning_refuses_in_sample_use():
    p = np.full((10, 2), 0.5)
    y = np.array([0, 1] * 5)
    with pytest.raises(ValueError, match="out_of_sample"):
        K.confident_learning_flags(p, y, out_of_sample=False)
    with pytest.raises(TypeError):
        K.confident_learning_flags(p, y)  # the declaration is required


def test_cross_fitted_probs_are_out_of_sample():
    """A row's probabilities do not depend on that row's own label: corrupting labels in fold f
    leaves fold f's probabilities unchanged (they come from a temperature fit on the other fold)."""
    rng = np.random.default_rng(3)
    n = 400
    y = rng.integers(0, 3, n)
    z = 3 * np.eye(3)[y] + rng.standard_normal((n, 3))
    p = K.cross_fitted_probs(z, y, n_folds=2, seed=0)
    fold = np.random.default_rng(0).permutation(n) % 2  # the documented fold assignment
    y2 = y.copy()
    y2[fold == 0] = (y2[fold == 0] + 1) % 3  # corrupt fold 0's labels only
    p2 = K.cross_fitted_probs(z, y2, n_folds=2, seed=0)
    np.testing.assert_allclose(p2[fold == 0], p[fold == 0], atol=1e-8)
    assert not np.allclose(p2[fold == 1], p[fold == 1])  # fold 1 used fold 0's labels
    np.testing.assert_allclose(p.sum(1), 1.0)


def test_cleanlab_receives_the_out_of_sample_probabilities(monkeypatch):
    import cleanlab.filter

    seen = {}

    def fake(labels, pred_probs, **kwargs):
        seen["probs"], seen["labels"], seen["kwargs"] = pred_probs, labels, kwargs
        return np.zeros(len(labels), bool)

    monkeypatch.setattr(cleanlab.filter, "find_label_issues", fake)
    rng = np.random.default_rng(4)
    y = rng.integers(0, 3, 200)
    z = 2 * np.eye(3)[y] + rng.standard_normal((200, 3))
    p = K.cross_fitted_probs(z, y, seed=1)
    K.confident_learning_flags(p, y, out_of_sample=True)
    np.testing.assert_allclose(seen["probs"], p)
    assert seen["kwargs"]["filter_by"] == "confident_learning"


def test_confident_learning_finds_obvious_flips():
    """Confident, correct out-of-sample probabilities: CL flags exactly the flipped labels."""
    rng = np.random.default_rng(5)
    y = rng.integers(0, 4, 800)
    noisy, is_noisy = K.inject_symmetric_noise(y, 4, 0.05, seed=0)
    p = np.full((800, 4), 0.02)
    p[np.arange(800), y] = 0.94
    flags = K.confident_learning_flags(p, noisy, out_of_sample=True)
    assert K.precision_detection(flags, is_noisy) == (1.0, 1.0)
    ranked = K.confident_learning_flags(p, noisy, out_of_sample=True, return_ranked=True)
    assert set(ranked) == set(np.flatnonzero(is_noisy))


def test_calibrated_rule_curve_names_a_bad_bin_count():
    conf, pred, y, noisy = [0.9, 0.8], [1, 1], [0, 0], [True, False]
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError, match="n_bins"):
            K.calibrated_rule_curve(conf, pred, conf, pred, y, noisy, n_bins=bad)


def test_curves_by_hand():
    """ranking_curve: ranked [2, 0, 5] with noisy {0, 2}: the top 1, 2, 3 have precision 1, 1, 2/3
    and detection 1/2, 1, 1. calibrated_rule_curve on the ten labels above with noisy {2, 5}: k = 1
    keeps {5}; k = 2 the top two thirds of the six flagged by each model ({2, 3, 4, 5} for A,
    {1, 2, 3, 5} for B), so {2, 3, 5}; k = 3 all six."""
    r = K.ranking_curve([2, 0, 5], [1, 0, 1, 0, 0, 0], n_points=3)
    assert r["precision"].tolist() == pytest.approx([1, 1, 2 / 3])
    assert r["detection"].tolist() == [0.5, 1, 1]
    y = np.zeros(10, int)
    pred = np.r_[np.ones(6, int), np.zeros(4, int)]
    conf_a = np.array([0.10, 0.20, 0.30, 0.40, 0.50, 0.60, 0.91, 0.92, 0.93, 0.94])
    conf_b = np.array([0.15, 0.25, 0.35, 0.55, 0.20, 0.65, 0.91, 0.92, 0.93, 0.94])
    noisy = np.isin(np.arange(10), [2, 5])
    c = K.calibrated_rule_curve(conf_a, pred, conf_b, pred, y, noisy, n_bins=3)
    assert c["n_flagged"].tolist() == [1, 3, 6]
    assert c["precision"].tolist() == pytest.approx([1, 2 / 3, 1 / 3])
    assert c["detection"].tolist() == [0.5, 1, 1]


def test_cleanlab_keeps_a_label_its_argmax_agrees_with_where_method_2_flags_it():
    """Paper 3's CL baseline is cleanlab's filter (SPEC: no hand-written copy), which differs from
    Method 2 as section 2.3 states it on one kind of example, as our docstring says. Per-class
    thresholds t_j = mean p_j over the examples labelled j are (.76, .3, .9) here; the example
    labelled 0 with p = (.4, .35, .25) has one candidate class (1: .35 >= .3), so Method 2 flags it,
    while cleanlab never flags an example whose argmax is its given label."""
    p = np.array([[0.8, 0.1, 0.1]] * 9 + [[0.4, 0.35, 0.25]] + [[0.1, 0.3, 0.6]] * 10 + [[0.05, 0.05, 0.9]] * 10)
    y = np.repeat([0, 1, 2], 10)
    t = np.array([p[y == j, j].mean() for j in range(3)])
    np.testing.assert_allclose(t, [0.76, 0.3, 0.9])
    candidates = p >= t
    method_2 = candidates.any(axis=1) & (np.where(candidates, p, -1).argmax(axis=1) != y)
    assert method_2.tolist() == [i == 9 for i in range(30)]
    assert not K.confident_learning_flags(p, y, out_of_sample=True).any()
