"""lib.ccc.cleaning_study on hand-made curves and probabilities whose answers are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lib.ccc import cleaning_study as K


def test_compare_at_detection_interpolates_the_best_curve():
    worse = pd.DataFrame({"detection": [0.0, 1.0], "precision": [0.5, 0.5]})
    best = pd.DataFrame({"detection": [0.0, 0.5], "precision": [1.0, 0.8]})  # more precise, but area 0.45 < 0.5
    best_area = float(np.trapezoid(best["precision"], best["detection"]))
    worse_area = float(np.trapezoid(worse["precision"], worse["detection"]))
    assert worse_area > best_area  # so "worse" (larger area) is the one compared against
    ours = pd.DataFrame({"k": [1, 2], "detection": [0.25, 0.75], "precision": [0.9, 0.6]})
    out = K.compare_at_detection(ours, [best, worse])
    assert list(out["cl_precision"]) == [0.5, 0.5] and list(out["cl_reaches"]) == [True, True]
    out2 = K.compare_at_detection(ours, [best])
    assert out2["cl_precision"].iloc[0] == pytest.approx(0.9) and list(out2["cl_reaches"]) == [True, False]
    with pytest.raises(ValueError, match="cl_curves"):
        K.compare_at_detection(ours, [])


def test_confident_learning_finds_flipped_labels_of_confident_probabilities():
    rng = np.random.default_rng(0)
    true = np.repeat(np.arange(3), 40)
    probs = np.full((120, 3), 0.02)
    probs[np.arange(120), true] = 0.96
    labels = true.copy()
    noisy = np.zeros(120, bool)
    noisy[rng.choice(120, 12, replace=False)] = True
    labels[noisy] = (true[noisy] + 1) % 3
    points, curves = K.confident_learning({"cl": probs}, labels, noisy)
    assert points.loc[0, "precision"] == 1.0 and points.loc[0, "detection"] == 1.0
    assert points.loc[0, "n_flagged"] == 12 and curves[0]["method"].iloc[0] == "cl, ranked"


def test_published_reads_first_and_last_points():
    ours = pd.DataFrame({"precision": [1.0, 0.8, 0.61234], "detection": [0.1, 0.5, 0.9]})
    cl = pd.DataFrame({"precision": [0.5, 0.7], "detection": [0.4, 0.6]})
    pub = K.cleaning_published(ours, cl, 7, 3)
    assert pub["cleaning_precision_k1"] == 1.0 and pub["cleaning_precision_basic"] == 0.6123
    assert pub["cl_precision"] == 0.7 and pub["mmlu_flagged_both_pairs_k3"] == 3


def test_mmlu_flags_validates_pair():
    with pytest.raises(ValueError, match="pair"):
        K.mmlu_flags({}, np.zeros(3, int), "chat", 1, 5)
