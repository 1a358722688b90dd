"""Paper 4's claims (lib.rr.pages.losses_cifar10.reweighted_claims): every claim reaches "held",
"did not hold" and "inconclusive" on hand-made metrics with the seeds each scale's plan has (so a
plan that cannot reach a verdict fails here), and the paper's own means are judged by the same rule."""

from __future__ import annotations

import numpy as np
import pytest

from lib.config import SCALES, settings
from lib.report import NOT_TESTABLE, VERDICTS
from lib.rr.pages.losses_cifar10 import PAGE, reweighted_claims

HELD, FAILED, INCONCLUSIVE = VERDICTS[:3]


def per_seed(n: int, au_ece: float, au_cw: float, au_acc: float, gap: float, ts: float, noise: float = 0.0) -> dict:
    """``n`` seeds of hand-made metrics: XE at ECE 0.03, cwECE 0.006, accuracy 0.9, ECE after TS
    (ECE^a, equal mass, as Table 4) 0.03 - ``ts``; the AU run at the given values; focal's confidence gap ``gap``, inverse focal's and
    AURC's -``gap``. Per-seed noise of size ``noise``, centred (the means stay as given)."""
    off = np.random.default_rng(2).standard_normal(n) * noise
    off = off - off.mean() if n > 1 else np.zeros(1)
    xe = [
        {"ece": 0.03, "cwece": 0.006, "accuracy": 0.9, "conf_gap": 0.0, "ece_a": 0.03, "ece_a_ts": 0.03 - ts + o / 5}
        for o in off
    ]
    return {
        "xe": xe,
        "au": [{**x, "ece": au_ece + o, "cwece": au_cw + o / 5, "accuracy": au_acc + o} for x, o in zip(xe, off)],
        "fl53": [{**x, "conf_gap": gap + o} for x, o in zip(xe, off)],
        "inverse_focal": [{**x, "conf_gap": -gap + o} for x, o in zip(xe, off)],
        "aurc": [{**x, "conf_gap": -gap + o} for x, o in zip(xe, off)],
    }


@pytest.mark.parametrize("scale", SCALES)
def test_every_claim_can_hold_fail_or_be_inconclusive_with_the_plans_seeds(scale: str) -> None:
    cfg = settings("losses_cifar10", scale)
    n = len({it.seed for it in PAGE.plan(scale) if it.method == "xe"})
    assert n == cfg["seeds"]
    tol = cfg["claim_tol"]
    held = reweighted_claims(per_seed(n, 0.01, 0.004, 0.89, 0.03, 0.01), tol, cfg["paper_row"])
    failed = reweighted_claims(per_seed(n, 0.05, 0.008, 0.85, -0.03, -0.01), tol, cfg["paper_row"])
    # every effect within its margin (and, with several seeds, inside the noise)
    noisy = reweighted_claims(per_seed(n, 0.028, 0.0055, 0.875, 0.004, 0.0005, noise=0.05), tol, cfg["paper_row"])
    assert len(held) == len(failed) == len(noisy) == 7
    assert [r["verdict"] for r in held] == [HELD] * 7, held
    assert [r["verdict"] for r in failed] == [FAILED] * 7, failed
    assert [r["verdict"] for r in noisy] == [INCONCLUSIVE] * 7, noisy


def test_the_paper_column_and_the_papers_own_verdict_follow_the_row():
    m = per_seed(1, 0.01, 0.004, 0.89, 0.03, 0.01)
    wrn = {r["claim"]: r for r in reweighted_claims(m, row="wrn")}
    assert wrn["AU loss has lower ECE than XE"]["paper"].startswith("1.54 vs 1.99 (WRN-28-10, Table 2")
    assert wrn["AU loss has lower cwECE than XE"]["paper"].startswith("0.432 vs 0.472 (WRN-28-10, Table 1")
    # the 2.5-point bar is the book's, not a sentence of the paper: an expectation, counted apart
    cost = wrn["AU loss costs little accuracy (at most 2.5 points below XE)"]
    assert cost["paper"].startswith("the book's bar") and cost["paper"].endswith("95.32 vs 95.88 (WRN-28-10)")
    assert cost["kind"] == "expectation" and all(r.get("kind", "claim") == "claim" for r in wrn.values() if r != cost)
    # the paper's own means, by the same margin: ResNet-50's ECE gap (1.31 points) holds, WRN's
    # 0.45 points is within half a point; the cwECE gaps (0.08, 0.04 points) are within 0.1
    r50 = {r["claim"]: r for r in reweighted_claims(m)}
    assert r50["AU loss has lower ECE than XE"]["paper_own"] == HELD
    assert wrn["AU loss has lower ECE than XE"]["paper_own"] == INCONCLUSIVE
    assert {
        r50["AU loss has lower cwECE than XE"]["paper_own"],
        wrn["AU loss has lower cwECE than XE"]["paper_own"],
    } == {INCONCLUSIVE}
    assert wrn["temperature scaling lowers XE's ECE^a"]["paper_own"] == HELD  # ECE^a 1.93 -> 1.31
    assert r50["focal loss leaves the model overconfident (mean confidence > accuracy)"]["paper_own"] == NOT_TESTABLE
    with pytest.raises(ValueError, match="row"):
        reweighted_claims(m, row="resnet110")


def test_pairs_are_per_seed_and_the_same_evidence_counts_both_ways():
    # AU 0.6 points lower (or higher) than XE, each seed noisy: the same noise keeps both from a verdict
    up = reweighted_claims(per_seed(3, 0.024, 0.006, 0.9, 0.0, 0.0, noise=0.05), 0.005)[0]
    down = reweighted_claims(per_seed(3, 0.036, 0.006, 0.9, 0.0, 0.0, noise=0.05), 0.005)[0]
    assert up["verdict"] == down["verdict"] == INCONCLUSIVE
    steady = reweighted_claims(per_seed(3, 0.024, 0.006, 0.9, 0.0, 0.0), 0.005)[0]
    assert steady["verdict"] == HELD and "3 seeds" in steady["ours"]
