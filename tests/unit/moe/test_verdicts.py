"""Every claim of paper 1's training pages can say "held", "did not hold" and "inconclusive at this
scale", at the number of seeds each scale's plan runs: a case where the claim plainly holds, one where
it plainly fails, and a noisy one (one seed: an effect inside the margin; several: effects of
alternating sign). The test fails when a page's plan at some scale cannot reach a verdict."""

from __future__ import annotations

import pandas as pd
import pytest

from lib.config import settings
from lib.moe import claims as moe_claims
from lib.moe import experiment as exp
from lib.moe.pages import cifar10h, civilcomments, sensitivity

HELD, FAILED, NOISY = "held", "did not hold", "inconclusive at this scale"
SCALES = ("smoke", "cpu", "paper")


def planned_seeds(name: str) -> list[int]:
    """The distinct seed counts the page's settings plan at smoke, cpu and paper scale."""
    return sorted({len(settings(name, s)["seeds"]) for s in SCALES})


def effects(case: str, n: int, size: float, noise: float | None = None) -> list[float]:
    """Per-seed effects: plainly positive, plainly negative, or noise (inside the margin with one
    seed, alternating +-``noise``, 3 x size by default, with several)."""
    if case == HELD:
        return [size] * n
    if case == FAILED:
        return [-size] * n
    return [0.005] if n == 1 else [(noise or 3 * size) * (-1) ** s for s in range(n)]


def moe_frame(d: list[float]) -> pd.DataFrame:
    """Per-seed rows where every robust method's ECE (and ECE+TS) is the non-robust ones' minus d,
    MoCaE equals Vanilla (so (ii)'s effect is d too) and Robust Filtered's accuracy is Robust MoE's plus d."""
    rows = []
    for s, e in enumerate(d):
        for m in exp.METHODS:
            robust = m in moe_claims.ROBUST
            acc = 0.85 + (e if m == "robust_filtered" else 0.0)
            ece = 0.2 - (e if robust else 0.0)
            for subset in ("all", "hard"):
                rows.append({"method": m, "seed": s, "subset": subset, "accuracy": acc, "ece": ece, "ece_ts": ece})
    return pd.DataFrame(rows)


CASES = [(case, n) for case in (HELD, FAILED, NOISY) for n in (1, 2, 3, 5)]


@pytest.mark.parametrize("name", ["cifar10h", "pacs", "civilcomments", "sensitivity"])
def test_every_scale_plans_seeds_the_rules_can_judge(name: str) -> None:
    """1 seed: the margin decides; 2 or more: the Student-t bar at n - 1 degrees of freedom and the
    margin (tested below)."""
    assert set(planned_seeds(name)) <= {1, 2, 3, 5}


@pytest.mark.parametrize(("case", "n"), CASES)
def test_claims_i_to_iv_reach_each_verdict(case: str, n: int) -> None:
    claims = moe_claims.moe_claims(moe_frame(effects(case, n, 0.1)))
    assert claims["verdict"].tolist() == [case] * 4


@pytest.mark.parametrize(("case", "n"), CASES)
def test_figure_3_confidence_drop_reaches_each_verdict(case: str, n: int) -> None:
    rows = []
    for s, e in enumerate(effects(case, n, 0.1)):
        for m in ("Robust MoE", "Vanilla MoE"):
            low = 0.9 - (e if m == "Robust MoE" else 0.0)
            rows += [
                {"method": m, "seed": s, "bin": 0, "confidence": low},
                {"method": m, "seed": s, "bin": 3, "confidence": 0.95},
            ]
    assert cifar10h.agreement_claim(pd.DataFrame(rows))[0]["verdict"] == case


@pytest.mark.parametrize(("case", "n"), CASES)
def test_best_overall_ece_reaches_each_verdict(case: str, n: int) -> None:
    frame = moe_frame([0.0] * n)
    d = effects(case, n, 0.1)
    rf = (frame["method"] == "robust_filtered") & (frame["subset"] == "all")
    frame.loc[rf, "ece"] = 0.2 - frame.loc[rf, "seed"].map(dict(enumerate(d)))
    frame.loc[(frame["method"] != "robust_filtered"), "ece"] = 0.2
    assert cifar10h.best_overall_ece_claim(frame)[0]["verdict"] == case


@pytest.mark.parametrize(("case", "n"), CASES)
def test_figure_2_group_claim_reaches_each_verdict(case: str, n: int) -> None:
    rows = []
    for s, e in enumerate(effects(case, n, 0.1)):
        for g in ("male", "female"):
            rows += [
                {"method": "Vanilla MoE", "seed": s, "group": g, "ece": 0.2, "n": 10},
                {"method": "Robust MoE", "seed": s, "group": g, "ece": 0.2 - e, "n": 10},
            ]
    assert civilcomments.group_claim(pd.DataFrame(rows))[0]["verdict"] == case


@pytest.mark.parametrize(("case", "n"), CASES)
def test_sensitivity_claims_reach_each_verdict(case: str, n: int) -> None:
    # near the optimum: the gap to the sweep's lowest is the tolerance minus the effect (noise small
    # enough that lambda = 2 stays above the lowest point on average)
    gaps = [sensitivity.NEAR_TOL - e for e in effects(case, n, 0.03, noise=0.018)]
    lam = pd.DataFrame(
        [{"lam": 2.0, "seed": s, "ece": 0.10 + g} for s, g in enumerate(gaps)]
        + [{"lam": 5.0, "seed": s, "ece": 0.10} for s in range(n)]
    )
    warm = lam.rename(columns={"lam": "warmup_epochs"}).replace({"warmup_epochs": {2.0: 20, 5.0: 40}})
    support = pd.DataFrame(
        [{"lam": 0.5, "seed": s, "fraction": 0.6 + f} for s, f in enumerate(effects(case, n, 0.2))]
        + [{"lam": 5.0, "seed": s, "fraction": 0.6} for s in range(n)]
    )
    support[["perplexity", "ratio_bound"]] = 1.0
    rows = sensitivity.sensitivity_claims(lam, warm, support, epochs=50)
    assert [r["verdict"] for r in rows] == [case] * 3
