"""Tests of lib.l2d.results against known values: summaries over seeds, claim verdicts
and the plots drawn from them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lib.l2d import results as lr


def test_summarize_matches_numpy():
    df = pd.DataFrame(
        {"experiment": "experts", "value": [1, 1, 1], "surrogate": "ova", "seed": [0, 1, 2], "ece": [0.1, 0.2, 0.6]}
    )
    s = lr.summarize(df, metrics=["ece"])
    assert s["ece"].iloc[0] == pytest.approx(0.3)
    assert s["ece_sd"].iloc[0] == pytest.approx(np.std([0.1, 0.2, 0.6], ddof=1))
    assert s["ece_se"].iloc[0] == pytest.approx(np.std([0.1, 0.2, 0.6], ddof=1) / np.sqrt(3))
    assert int(s["seeds"].iloc[0]) == 3


def test_verdict_positive():
    assert lr.verdict_positive(np.array([0.1, 0.11, 0.12])) == "held"
    assert lr.verdict_positive(np.array([-0.1, 0.0, -0.05])) == "did not hold"
    assert lr.verdict_positive(np.array([0.5, -0.4, 0.1])) == "inconclusive at this scale"
    assert lr.verdict_positive(np.array([0.3])) == "inconclusive at this scale"  # one seed cannot tell


def test_l2d_claims_follow_the_numbers(l2d_fake_runs):
    held = {r["claim"]: r["verdict"] for r in lr.l2d_claims(l2d_fake_runs(0.03, 0.0, 0.01))}
    assert all(v == "held" for v in held.values()), held
    rev = lr.l2d_claims(l2d_fake_runs(-0.01, 0.0, -0.05))
    verdicts = [r["verdict"] for r in rev]
    assert verdicts[0] == "did not hold"  # softmax ECE falls
    assert "held" not in verdicts[2:]  # no dependence effect, OvA clearly less accurate
    assert rev[-1]["verdict"] == "did not hold"
