"""lib.rr.claims: paper 4's verdicts follow the numbers they are given."""

from __future__ import annotations

import pytest

from lib.rr.claims import reweighted_claims


def test_reweighted_claims_follow_the_numbers():
    base = {"accuracy": 0.9, "ece": 0.03, "cwece": 0.006, "conf_gap": 0.0, "ece_ts": 0.02}
    m = {
        "xe": dict(base),
        "au": {**base, "ece": 0.01, "cwece": 0.004, "accuracy": 0.89},
        "fl53": {**base, "conf_gap": 0.03},
        "inverse_focal": {**base, "conf_gap": -0.03},
        "aurc": {**base, "conf_gap": 0.03},
    }
    v = {r["claim"]: r["verdict"] for r in reweighted_claims(m, tol=0.005)}
    assert v["AU loss has lower ECE than XE"] == "held"
    assert v["AU loss costs little accuracy (at most 2.5 points below XE)"] == "held"
    assert v["focal loss leaves the model overconfident (mean confidence > accuracy)"] == "held"
    assert v["inverse focal loss leaves the model underconfident"] == "held"
    assert v["AURC loss leaves the model underconfident"] == "did not hold"
    m["au"]["ece"] = 0.029
    v = {r["claim"]: r["verdict"] for r in reweighted_claims(m, tol=0.005)}
    assert v["AU loss has lower ECE than XE"] == "inconclusive at this scale"
    # the paper column quotes the row compared with: WRN-28-10's Table 2 row at paper scale
    paper = {r["claim"]: r["paper"] for r in reweighted_claims(m, row="wrn")}
    assert paper["AU loss has lower ECE than XE"].startswith("1.54 vs 1.99 (WRN-28-10")
    assert paper["AU loss costs little accuracy (at most 2.5 points below XE)"].startswith("95.32 vs 95.88")
    assert "no WRN-28-10 row" in paper["AU loss has lower cwECE than XE"]
    paper = {r["claim"]: r["paper"] for r in reweighted_claims(m)}
    assert paper["AU loss has lower ECE than XE"].startswith("1.69 vs 3.00 (ResNet-50")
    with pytest.raises(ValueError, match="row"):
        reweighted_claims(m, row="resnet110")
