"""lib.cross_paper.claims: the cross-paper expectations follow the numbers of a hand-made table."""

from __future__ import annotations

import pandas as pd
import pytest

from lib.cross_paper import claims as cpc
from lib.cross_paper.study import long_table

SMALL, LARGE = "small", "large"


def _table(
    ts: float = 0.05, other: float = 0.08, mixture_ts: float = 0.03, platt: float = 0.04, apgr: float = 0.7
) -> pd.DataFrame:
    rows = [
        long_table("over-confidence", "mmlu", {"none": 0.19, "temperature": ts}),
        long_table("over-confidence", "cifar", {"none": 0.10, "temperature": ts}),
        long_table(
            "shift", SMALL, {"none": 0.20, "temperature (other subjects)": other, "temperature (same subjects)": 0.06}
        ),
        long_table(
            "shift", LARGE, {"none": 0.20, "temperature (other subjects)": other, "temperature (same subjects)": 0.06}
        ),
        long_table(
            "routing",
            cpc.MIXTURE,
            {"none": 0.1, "per-expert temperature": 0.05, "temperature on the mixture": mixture_ts},
        ),
        long_table("deferral", f"P({LARGE} is right)", {"none": 0.15, "platt": platt}),
        long_table("deferral", f"cascade {SMALL} -> {LARGE}", {"none": 0.6, "temperature": apgr}, metric="APGR"),
    ]
    return pd.concat(rows, ignore_index=True)


LOSSES = pd.DataFrame({"loss": ["ce", "focal"], "ECE": [0.10, 0.02], "ECE after TS": [0.03, 0.02]})
MIX = {"accuracy (vanilla)": 0.9, "accuracy (per-expert temperature)": 0.9002}


def test_every_expectation_holds_on_numbers_that_meet_it() -> None:
    claims = cpc.cross_paper_claims(_table(), MIX, LOSSES, SMALL, LARGE)
    assert list(claims.columns) == ["claim", "paper", "ours", "verdict"]
    assert claims["verdict"].tolist() == ["held"] * 7
    assert claims["ours"].iloc[0] == "mmlu: raw 0.190, TS 0.050; cifar: raw 0.100, TS 0.050"


def test_each_expectation_fails_when_its_numbers_turn() -> None:
    turned = [
        (0, dict(ts=0.15)),  # TS above cifar's raw 0.10
        (1, dict(other=0.05)),  # other subjects better than same subjects
        (2, dict(mixture_ts=0.06)),  # the mixture temperature worse than per-expert
        (4, dict(platt=0.2)),  # Platt worse than raw
        (5, dict(apgr=cpc.RANDOM_ROUTING_APGR)),  # no better than random routing
    ]
    for index, kwargs in turned:
        verdicts = cpc.cross_paper_claims(_table(**kwargs), MIX, LOSSES, SMALL, LARGE)["verdict"].tolist()
        assert verdicts[index] == "did not hold", (index, kwargs)
        assert verdicts.count("did not hold") == 1, (index, kwargs)
    moved = {"accuracy (vanilla)": 0.9, "accuracy (per-expert temperature)": 0.899}  # differs at 3 decimals
    assert cpc.cross_paper_claims(_table(), moved, LOSSES, SMALL, LARGE)["verdict"].iloc[3] == "did not hold"
    wider = LOSSES.assign(**{"ECE after TS": [0.20, 0.02]})  # spread 0.18 after TS > 0.08 before
    assert cpc.cross_paper_claims(_table(), MIX, wider, SMALL, LARGE)["verdict"].iloc[6] == "did not hold"


def test_published_values_rows_and_validation() -> None:
    table = _table()
    assert cpc.overconfidence_published(table) == {"ece_overconfidence_raw": 0.19, "ece_overconfidence_ts": 0.05}
    rows = pd.concat(cpc.training_loss_rows(LOSSES), ignore_index=True)
    assert rows["method"].tolist() == ["none", "ce + temperature", "focal", "focal + temperature"]
    assert rows["value"].tolist() == [0.10, 0.03, 0.02, 0.02]
    with pytest.raises(ValueError, match="table"):
        cpc.table_value(table, "shift", "nobody", "none")
    with pytest.raises(ValueError, match="mix"):
        cpc.cross_paper_claims(table, {}, LOSSES, SMALL, LARGE)
    with pytest.raises(ValueError, match="table"):
        cpc.cross_paper_claims(table.drop(columns="value"), MIX, LOSSES, SMALL, LARGE)
