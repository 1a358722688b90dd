"""lib.ccc.claims: each page's verdict rules on hand-made numbers where the verdict is
known, one case where the claim holds and one where it does not (thresholds read from the module)."""

from __future__ import annotations

import pandas as pd
import pytest

from lib.ccc import claims as C
from lib.report import claims_table


def verdicts(rows) -> list[str]:
    return list(claims_table(rows)["verdict"])


def test_calibration_claims_hold_and_fail():
    models = ["8b-instruct", "8b-base"]
    good = C.calibration_claims(
        0.95,
        {"8b-instruct": 0.2, "8b-base": 0.05},
        {"8b-instruct": 0.05, "8b-base": 0.04},
        {"8b-instruct": 0.05, "8b-base": 0.045},
        0.08,
        "8b-instruct",
    )
    assert verdicts(good) == ["held"] * 4
    bad = C.calibration_claims(
        C.SPEARMAN_MIN,
        {m: 0.1 for m in models},
        {"8b-instruct": 0.12, "8b-base": 0.1},
        {"8b-instruct": 0.12 + 2 * C.HALVES_ECE_TOL, "8b-base": 0.1},
        0.0902,
        "8b-instruct",
    )
    assert verdicts(bad) == ["did not hold"] * 4  # Spearman must exceed the bar; Platt must reach 0.0901
    with pytest.raises(ValueError, match="small"):
        C.calibration_claims(1.0, {"a": 0.1}, {"a": 0.1}, {"a": 0.1}, 0.1, "b")


def test_cascading_claims_hold_and_fail():
    apgr = {("instruct", "CC (TS)"): 0.71, ("instruct", "UC"): 0.65, ("base", "CC (TS)"): 0.69, ("base", "UC"): 0.6}
    good = C.cascading_claims(
        apgr, {"temperature": 0.71, "platt": 0.705}, {"5": 0.70, "15": 0.71}, {"x": 0.6, "y": 0.55}
    )
    assert verdicts(good) == ["held"] * 6
    apgr_bad = {("instruct", "CC (TS)"): 0.55, ("instruct", "UC"): 0.6, ("base", "CC (TS)"): 0.45, ("base", "UC"): 0.4}
    bad = C.cascading_claims(
        apgr_bad,
        {"temperature": 0.55, "platt": 0.55 + C.ABLATION_RANGE_MAX},
        {"5": 0.5, "100": 0.6},
        {"x": 0.6, "y": 0.5},
    )
    assert verdicts(bad) == ["did not hold"] * 6


def test_same_size_claims_hold_and_fail():
    cols = pd.MultiIndex.from_tuples([("gain (bins on first)", "mean"), ("gain (bins on first)", "min")])
    gains = pd.DataFrame([[0.02, 0.01], [0.01, -0.001]], index=["p", "q"], columns=cols)
    summary = pd.DataFrame(
        {
            "first alone": [0.8, 0.7],
            "second alone": [0.79, 0.72],
            "routed (TS, bins on first)": [0.82, 0.73],
            "routed (uncalibrated, bins on first)": [0.81, 0.73],
        },
        index=["p", "q"],
    )
    assert verdicts(C.same_size_claims(gains, summary, ["p", "q"])) == ["held", "did not hold", "held"]
    summary.loc["q", "routed (uncalibrated, bins on first)"] = 0.74
    assert verdicts(C.same_size_claims(gains, summary, ["p", "q"]))[-1] == "did not hold"
    table = C.same_size_paper_table(summary, ["q", "p"])
    assert table.loc["q", "single models"] == "72.00% (ours, better one)" and len(table) == 4
    assert list(table.index[2:]) == ["q", "p"]  # the page's order, not the sorted one
    assert verdicts(C.same_size_claims(gains, summary, ["q", "p"]))[:2] == ["did not hold", "held"]
    with pytest.raises(ValueError, match="pairs"):
        C.same_size_claims(gains, summary, ["p"])


def test_cleaning_claims_hold_and_fail():
    curve = pd.DataFrame(
        {"k": [1, 2, 3], "n_flagged": [10, 30, 60], "precision": [0.97, 0.975, 0.9], "detection": [0.1, 0.3, 0.6]}
    )
    compare = pd.DataFrame(
        {"precision": [0.97, 0.9, 0.5], "cl_precision": [0.9, 0.9, 0.9], "cl_reaches": [True, True, False]}
    )
    assert verdicts(C.cleaning_claims(curve, compare)) == ["held"] * 3  # 0.005 rise is within the noise
    curve2 = curve.assign(precision=[0.9, 0.9 + 2 * C.PRECISION_DROP_TOL, 0.8])
    compare2 = compare.assign(cl_precision=[0.99, 0.9, 0.9])  # CL more precise at the first point
    assert verdicts(C.cleaning_claims(curve2, compare2)) == ["did not hold"] * 3
    table = C.cleaning_paper_table(0.8, 0.7)
    assert list(table["paper"]) == [C.PAPER_CLEANING_PRECISION, C.PAPER_CL_PRECISION]
