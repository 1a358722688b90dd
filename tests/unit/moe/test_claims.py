"""lib.moe.claims: verdicts follow the numbers (standard errors or margin, chance level, MoCaE's accuracy)."""

from __future__ import annotations

import pandas as pd
import pytest

from lib.moe import experiment as exp
from lib.moe import claims as moe_claims
from lib.moe import tables as moe_tables
from lib.report import claims_table


def test_compare_uses_standard_errors_or_margin() -> None:
    assert moe_claims.compare(0.05, 0.01, 0.20, 0.01) == "held"
    assert moe_claims.compare(0.20, 0.01, 0.05, 0.01) == "did not hold"
    assert moe_claims.compare(0.10, 0.05, 0.12, 0.05) == "inconclusive at this scale"  # 0.02 < 2*sqrt(2)*0.05
    assert moe_claims.compare(0.10, float("nan"), 0.125, float("nan"), margin=0.01) == "held"
    assert moe_claims.compare(0.10, float("nan"), 0.105, float("nan"), margin=0.01) == "inconclusive at this scale"
    assert moe_claims.compare(float("nan"), 0.0, 0.1, 0.0) == "inconclusive at this scale"


def test_moe_claims_verdicts_follow_the_numbers(robust_wins_summary, moe_frame) -> None:
    claims = moe_claims.moe_claims(robust_wins_summary).set_index("claim")["verdict"].tolist()
    assert claims == ["held", "held", "held", "held"]
    # flip: robust methods worse than the baselines
    vals = {
        m: {
            "accuracy": [0.9, 0.9],
            "ece": [0.05, 0.05] if m in moe_claims.NON_ROBUST else [0.3, 0.3],
            "ece_ts": [0.05, 0.05] if m in moe_claims.NON_ROBUST else [0.3, 0.3],
        }
        for m in exp.METHODS
    }
    flipped = moe_claims.moe_claims(moe_tables.summarize(moe_frame(vals)))
    assert flipped.verdict.iloc[0] == "did not hold"
    assert flipped.verdict.iloc[3] == "did not hold"
    assert flipped.verdict.iloc[2] == "inconclusive at this scale"  # equal accuracies
    # the accuracy the page gates on: the best mean accuracy on all points
    best = robust_wins_summary.loc[robust_wins_summary["subset"] == "all", "accuracy"].max()
    assert moe_claims.best_accuracy(robust_wins_summary) == pytest.approx(best)
    with pytest.raises(ValueError, match="summary"):
        moe_claims.best_accuracy(pd.DataFrame({"x": [1]}))


def test_mocae_accuracy_check_and_claim_row(robust_wins_summary) -> None:
    rec = {
        "method": "mocae",
        "metrics": {
            "all": {"accuracy": 0.8, "ece": 0.1},
            "hard": {"accuracy": 0.5, "ece": 0.2},
            "vanilla_accuracy": {"all": 0.8, "hard": 0.45},
        },
    }
    assert moe_claims.mocae_accuracy_check([rec]) == pytest.approx(0.05)
    assert moe_claims.mocae_accuracy_check([{"method": "vanilla", "metrics": {}}]) is None
    claims = moe_claims.moe_claims(robust_wins_summary, [rec])
    assert claims.verdict.iloc[-1] == "did not hold"
    # the paper prints 3 decimals: 0.8004 vs 0.8 prints alike (held), 0.8006 does not
    for acc, verdict in ((0.8004, "held"), (0.8006, "did not hold")):
        r = {"method": "mocae", "metrics": {"all": {"accuracy": acc, "ece": 0.1}, "vanilla_accuracy": {"all": 0.8}}}
        assert moe_claims.moe_claims(robust_wins_summary, [r]).verdict.iloc[-1] == verdict


def test_claims_table_rejects_unknown_verdicts_and_not_run_rows() -> None:
    with pytest.raises(ValueError, match="verdict"):
        claims_table([{"claim": "x", "ours": "1", "verdict": "probably"}])
    nr = moe_claims.not_run_claims()
    assert set(nr.verdict) == {"not run: data unavailable"}
    # the paper column is there even when the page could not run, and it is the same as a run's
    assert nr.paper.tolist() == list(moe_claims.PAPER_SAYS) and all(nr.paper)
