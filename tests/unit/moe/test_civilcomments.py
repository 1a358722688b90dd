"""lib.moe.pages.civilcomments: Figure 2's group table, its claim and the page's gate."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lib.moe.pages import civilcomments as civ


def _groups(robust: list[float], plain: list[float]) -> pd.DataFrame:
    """One seed's group ECEs (lib.moe.pages.civilcomments.group_frame's shape)."""
    rows = [{"method": "Robust MoE", "seed": 0, "group": f"g{i}", "ece": e} for i, e in enumerate(robust)]
    rows += [{"method": "Vanilla MoE", "seed": 0, "group": f"g{i}", "ece": e} for i, e in enumerate(plain)]
    return pd.DataFrame(rows)


def test_group_table_means_ece_and_recomputes_accuracy() -> None:
    records = [
        {"method": "vanilla", "metrics": {"groups": {"a": {"ece": 0.1, "n": 2}, "b": {"ece": 0.3, "n": 1}}}},
        {"method": "vanilla", "metrics": {"groups": {"a": {"ece": 0.2, "n": 2}}}, "config": {"train": {"seed": 1}}},
    ]
    assert civ.group_frame(records)["seed"].tolist() == [0, 0, 1]
    # two seeds of three test comments; group a = comments 0 and 1, group b = comment 2
    preds = {"Vanilla MoE": {"correct": np.array([1, 0, 1, 1, 1, 0])}}
    masks = {"a": np.array([True, True, False]), "b": np.array([False, False, True])}
    table = civ.group_table(records, preds, masks, ["a", "b"]).set_index("group")
    assert table.loc["a", "ece"] == pytest.approx(0.15)
    assert table.loc["b", "ece"] == pytest.approx(0.3)
    assert table.loc["a", "accuracy"] == pytest.approx(0.75)  # 1, 0, 1, 1
    assert table.loc["b", "accuracy"] == pytest.approx(0.5)  # 1, 0
    assert civ.group_ece_published(table.reset_index()) == {
        "Vanilla MoE/a": pytest.approx(0.15),
        "Vanilla MoE/b": pytest.approx(0.3),
    }
    with pytest.raises(ValueError, match="groups"):
        civ.group_table(records, preds, masks, [])


def test_group_claim_holds_fails_and_is_inconclusive() -> None:
    assert civ.group_claim(_groups([0.05, 0.06], [0.10, 0.12]))[0]["verdict"] == "held"
    row = civ.group_claim(_groups([0.05, 0.20], [0.10, 0.12]))[0]
    assert row["verdict"] == "did not hold"
    assert row["ours"] == "of 2 groups: lower in 1, higher in 1, inconclusive in 0 (margin 0.01)"
    assert civ.group_claim(_groups([0.05, 0.115], [0.10, 0.12]))[0]["verdict"] == "inconclusive at this scale"
    assert civ.group_claim(_groups([0.05, 0.115], [0.10, 0.12]), margin=0.001)[0]["verdict"] == "held"
    only_robust = _groups([0.05], [0.1])
    assert civ.group_claim(only_robust[only_robust["method"] == "Robust MoE"]) == []


def test_civilcomments_claims_gate_against_the_majority_rate(robust_wins_frame) -> None:
    claims, why = civ.PAGE.claims(robust_wins_frame, (), chance=0.5)
    assert list(claims.columns) == ["claim", "paper", "ours", "verdict", "paper_own"]
    assert claims["verdict"].tolist() == ["held"] * 4  # (i)-(iv); no group ECEs in these records
    assert why.startswith("The model is judged")
    # a majority rate of 0.887: the floor 0.887 + 0.8 x (0.915 - 0.887) = 0.909 exceeds the best 0.905
    gated, why = civ.PAGE.claims(robust_wins_frame, (), chance=0.887)
    assert set(gated["verdict"]) == {"inconclusive at this scale"}
    assert "did not learn enough" in why


def test_load_data_and_scale_summary() -> None:
    smoke = {
        "data": "synthetic",
        "n_train": 60,
        "backbone": "text:tiny-random-bert",
        "epochs": 1,
        "lr": 0.001,
        "seeds": [0],
    }
    data, missing = civ.load_data(smoke)
    assert missing is None
    sizes = data.sizes()
    assert sizes["train"] + sizes["val"] + sizes["test"] == 60
    text = civ.scale_summary(smoke, data)
    assert text.startswith("tiny random 1-layer BERT (smoke only); SYNTHETIC template comments")
    assert f"{sizes['test']} test ({sizes['hard']} identity); 1 epochs, lr 0.001; seeds [0]" in text
    # real data asked for but absent: no bundle, the loader's message, and a "not run" summary
    data, missing = civ.load_data({**smoke, "data": "real"}, data_dir="/nonexistent/civil")
    assert data is None and "/nonexistent/civil" in missing
    assert civ.scale_summary(smoke, None).startswith("not run")
