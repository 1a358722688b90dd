"""lib.rr.released on hand-made logits and metrics whose answers are known."""

from __future__ import annotations

import numpy as np
import pytest

from lib.rr import released as R


def test_dual_focal_weights_match_the_formula_on_correct_examples():
    z = np.array([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [1.0, 0.0, 2.5]])
    y = np.array([0, 1, 0])  # the last one is misclassified
    table = R.dual_focal_weights(z, y, gamma=2.0)
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    # On correct examples every reading takes p_j = the largest competing probability (eq. 33).
    w_correct = [(1 - p[i, y[i]] + np.sort(p[i])[-2]) ** 2 for i in (0, 1)]
    for reading in ("eq33", "eqs34_35", "released"):
        assert table.loc[reading, "mean weight, correct"] == pytest.approx(np.mean(w_correct))
    # eq. 33 on the misclassified one: p_j = the top (wrong) probability.
    assert table.loc["eq33", "mean weight, misclassified"] == pytest.approx((1 - p[2, 0] + p[2, 2]) ** 2)
    assert list(table["get_loss name"]) == ["dual_focal", "dual_focal_eqs34_35", "dual_focal_released"]


def test_failed_run_claim_is_inconclusive_and_quotes_the_paper():
    rows = R.failed_run_claims({"inverse_focal": 0.1})
    assert rows == [
        {
            "claim": "inverse focal loss: accuracy and ECE as in Table 2",
            "paper": "94.36 / 4.05",
            "ours": "released run is degenerate (10.00% accuracy): a failed run",
            "verdict": "inconclusive at this scale",
        }
    ]
    assert R.failed_run_claims({}) == []


def test_published_metrics_and_tables():
    m = {k: float(i) for i, k in enumerate(R.PUBLISHED_METRICS)}
    pub = R.published_metrics({"xe": m})
    assert len(pub) == len(R.PUBLISHED_METRICS) and pub["released_xe_ece"] == 1.0
    t = R.temperature_table({"xe": m})
    assert t.loc["xe", "T (NLL fit)"] == m["temperature_nll"]
    z = np.array([[1.0, 0.0], [0.0, 1.0]])
    acc = R.accuracy_table({"xe": z}, np.array([0, 0]), {"inverse_focal": 0.1})
    assert list(acc["test accuracy"]) == [0.5, 0.1] and acc["loss"].iloc[1].endswith("(failed run)")


def test_load_logits_synthetic_and_validation():
    logits, targets, failed = R.load_logits("synthetic", 100)
    assert set(logits) == {"xe", "fl53", "dual_focal", "kde_xe", "aurc"} and failed == {} and len(targets) == 100
    with pytest.raises(ValueError, match="source"):
        R.load_logits("cached")


def test_reliability_diagrams_use_the_given_examples_untempered():
    z = np.array([[3.0, 0.0], [0.0, 1.0], [2.0, 0.0]])
    y = np.array([0, 0, 1])
    d = R.reliability_diagrams({"xe": z}, y, np.array([1, 2]), {"xe": {"ece": 0.1234}})
    ((label, (conf, correct)),) = d.items()
    assert label == "XE (ECE 12.34)"
    assert conf == pytest.approx([1 / (1 + np.exp(-1.0)), 1 / (1 + np.exp(-2.0))]) and list(correct) == [False, False]
