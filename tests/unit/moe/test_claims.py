"""lib.moe.claims: claims (i)-(iv) and MoCaE's equal accuracy, judged on per-seed differences by the
book's one symmetric rule, on our runs and on a paper's table of means and standard errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lib import report
from lib.moe import claims as moe_claims
from lib.moe import experiment as exp


def test_paired_differences_use_the_seeds_both_sides_ran(moe_frame) -> None:
    frame = moe_frame(
        {
            "vanilla": {"accuracy": [0.9, 0.9, 0.9], "ece": [0.20, 0.22, 0.24], "ece_ts": [0.1] * 3},
            "mocae": {"accuracy": [0.9, 0.9], "ece": [0.19, 0.20], "ece_ts": [0.1] * 2},
        }
    )
    assert moe_claims.paired(frame, "vanilla", "mocae", "hard", "ece") == pytest.approx([0.01, 0.02])
    assert moe_claims.diff_text(np.array([0.01, 0.03])) == ".020 ± .010 (2 seeds)"
    assert moe_claims.diff_text(np.array([0.5])) == ".500 (1 seed)"
    assert moe_claims.verdict_of(np.array([])) == report.VERDICTS[2]


def test_paired_se_sees_what_an_unpaired_one_misses(moe_frame) -> None:
    """MoCaE recalibrates Vanilla's own network: seeds vary a lot, the gain per seed barely. The
    paired rule finds the steady 0.02 gain that an unpaired (Welch) comparison would drown."""
    van = [0.10, 0.30, 0.50]
    frame = moe_frame(
        {
            "vanilla": {"accuracy": [0.9] * 3, "ece": van, "ece_ts": van},
            "mocae": {"accuracy": [0.9] * 3, "ece": [v - 0.02 for v in van], "ece_ts": van},
        }
    )
    diffs = moe_claims.paired(frame, "vanilla", "mocae", "hard", "ece")
    assert report.paired_verdict(diffs, 0.01) == "held"
    mocae = [v - 0.02 for v in van]
    assert report.welch_verdict(van, mocae, 0.01) == "inconclusive at this scale"


def test_paper_verdict_combines_the_printed_standard_errors() -> None:
    paper = {
        "robust": (0.692, 0.023, 0.088, 0.025, 0.071, 0.023),
        "robust_filtered": (0.732, 0.018, 0.075, 0.013, 0.057, 0.015),
    }
    # Art, five seeds a method: .732 - .692 = .040 < t(7.56 Welch df) 2.33 x sqrt(.018^2 + .023^2) = .068:
    # the paper's own table cannot tell
    assert moe_claims.paper_verdict(paper, "robust_filtered", "robust", "accuracy") == "inconclusive at this scale"
    wide = {**paper, "robust_filtered": (0.80, 0.005, 0, 0, 0, 0), "robust": (0.70, 0.005, 0, 0, 0, 0)}
    assert moe_claims.paper_verdict(wide, "robust_filtered", "robust", "accuracy") == "held"
    assert moe_claims.paper_verdict(wide, "robust", "robust_filtered", "accuracy") == "did not hold"
    assert moe_claims.paper_verdict(None, "robust", "robust_filtered", "accuracy") == report.NOT_TESTABLE
    # equal SEs .01 over five seeds each: Welch df 8, t 2.306, noise 2.306 x .01414 = .0326; a gap of
    # .030 clears two SEs (.0283) but not the Student-t bar
    close = {"robust_filtered": (0.73, 0.01, 0, 0, 0, 0), "robust": (0.70, 0.01, 0, 0, 0, 0)}
    assert moe_claims.paper_verdict(close, "robust_filtered", "robust", "accuracy") == "inconclusive at this scale"
    assert moe_claims.paper_verdict(close, "robust_filtered", "robust", "accuracy", seeds=1000) == "held"


def test_mocae_accuracy_check_and_claim_row(robust_wins_frame) -> None:
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
    claims = moe_claims.moe_claims(robust_wins_frame, [rec])
    assert claims.verdict.iloc[-1] == "did not hold"
    # the paper prints 3 decimals: 0.8004 vs 0.8 prints alike (held), 0.8006 does not (exact per run:
    # there is no noisy case, every MoCaE record carries its own Vanilla accuracy)
    for acc, verdict in ((0.8004, "held"), (0.8006, "did not hold")):
        r = {"method": "mocae", "metrics": {"all": {"accuracy": acc, "ece": 0.1}, "vanilla_accuracy": {"all": 0.8}}}
        assert moe_claims.moe_claims(robust_wins_frame, [r]).verdict.iloc[-1] == verdict
    # the paper's own: its tables print MoCaE's accuracy equal to Vanilla's
    paper = {m: (0.9, 0.01, 0.1, 0.01, 0.1, 0.01) for m in exp.METHODS}
    assert moe_claims.moe_claims(robust_wins_frame, [rec], paper=paper).paper_own.iloc[-1] == "held"


def test_best_accuracy_and_not_run_rows(robust_wins_frame) -> None:
    from lib.moe.tables import summarize

    s = summarize(robust_wins_frame)
    assert moe_claims.best_accuracy(s) == pytest.approx(s.loc[s["subset"] == "all", "accuracy"].max())
    with pytest.raises(ValueError, match="summary"):
        moe_claims.best_accuracy(pd.DataFrame({"x": [1]}))
    with pytest.raises(ValueError, match="verdict"):
        report.claims_table([{"claim": "x", "ours": "1", "verdict": "probably"}])
    nr = moe_claims.not_run_claims()
    assert set(nr.verdict) == {"not run: data unavailable"}
    # the paper column is there even when the page could not run, and it is the same as a run's
    assert nr.paper.tolist() == list(moe_claims.PAPER_SAYS) and all(nr.paper)
