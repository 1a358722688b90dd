"""lib.moe.tables: runs as rows, means and standard errors over seeds, the paper's layout."""

from __future__ import annotations

import math

import pytest

from lib.moe import experiment as exp
from lib.moe.pages.pacs import PAPER_TABLE2
from lib.moe import tables as moe_tables


def test_summarize_mean_and_standard_error(moe_frame) -> None:
    frame = moe_frame({"vanilla": {"accuracy": [0.8, 0.9, 0.7], "ece": [0.1, 0.2, 0.3], "ece_ts": [0.05, 0.05, 0.05]}})
    s = moe_tables.summarize(frame)
    row = s[s.subset == "hard"].iloc[0]
    assert row["accuracy"] == pytest.approx(0.8)
    assert row["accuracy_se"] == pytest.approx(0.1 / math.sqrt(3))  # std(ddof=1) = 0.1
    assert row["ece_ts_se"] == pytest.approx(0.0)
    assert row["seeds"] == 3
    one = moe_tables.summarize(moe_frame({"robust": {"accuracy": [0.5], "ece": [0.1], "ece_ts": [0.1]}}))
    assert math.isnan(one["accuracy_se"].iloc[0])


def test_fmt_paper_style() -> None:
    assert moe_tables.fmt(0.9434, 0.0041) == ".943 ± .004"
    assert moe_tables.fmt(0.5) == ".500"
    assert moe_tables.fmt(float("nan")) == "—"
    assert moe_tables.fmt(1.25, float("nan")) == "1.250"


def test_mocae_fit_table_reads_both_variants() -> None:
    block = {
        "all": {"accuracy": 0.9, "ece": 0.05, "ece_ts": 0.04},
        "hard": {"accuracy": 0.5, "ece": 0.3, "ece_ts": 0.2},
    }
    rec = {
        "method": "vanilla",
        "config": {"train": {"seed": 3}},
        "metrics": {
            **block,
            "mocae": {**block, "expert_temperatures": [1.1, 1.3]},
            "mocae_converged": {**block, "expert_temperatures": [1.5, 2.5]},
        },
    }
    t = moe_tables.mocae_fit_table([rec])
    assert len(t) == 6 and set(t.seed) == {3} and list(t.columns[3:6]) == ["Accuracy", "ECE", "ECE+TS"]
    assert t.loc[t.variant == "MoCaE, converged fit", "expert T"].iloc[0] == "1.50-2.50"
    assert moe_tables.mocae_fit_table([{"method": "vanilla", "metrics": block}]).empty


def test_paper_table_and_beside_paper_layout(robust_wins_summary) -> None:
    s = robust_wins_summary
    t = moe_tables.paper_table(s)
    assert list(t["Method"]) == [exp.METHOD_LABELS[m] for m in exp.METHODS]
    assert list(t.columns[1:7]) == ["Accuracy", "Hard Accuracy", "ECE", "ECE+TS", "Hard ECE", "Hard ECE+TS"]
    assert t.loc[t.Method == "Robust MoE", "Hard ECE"].iloc[0] == ".055 ± .005"
    b = moe_tables.beside_paper(s, PAPER_TABLE2["sketch"], subset="all")
    assert b.loc[b.Method == "Robust MoE", "ECE (paper)"].iloc[0] == ".033 ± .017"
    with pytest.raises(ValueError, match="subset"):
        moe_tables.beside_paper(s, PAPER_TABLE2["sketch"], subset="easy")


def test_results_frame_one_row_per_subset(moe_frame) -> None:
    rec = {
        "method": "robust",
        "key": "k",
        "config": {"train": {"seed": 3, "lam": 2.0}},
        "metrics": {
            "all": {"n": 10, "accuracy": 0.7, "ece": 0.1, "ece_ts": 0.05, "nll": 0.9},
            "hard": {"n": 2, "accuracy": 0.5, "ece": 0.2, "ece_ts": 0.1, "nll": 1.2},
            "routing_entropy": {"all": 1.0, "hard": 1.1},
        },
    }
    f = moe_tables.results_frame([rec])
    assert list(f.subset) == ["all", "hard"] and list(f.seed) == [3, 3]
    assert f.loc[f.subset == "hard", "routing_entropy"].iloc[0] == 1.1


def test_provenance_names_the_backbone_once_and_sums_minutes_per_method() -> None:
    def rec(method: str, seed: int, seconds: float) -> dict:
        return {
            "method": method,
            "backbone": "tiny_cnn",
            "pretrained": False,
            "device": "cpu",
            "provenance": {"date": "2026-11-25T10:00:00"},
            "version": 3,
            "wall_time": {"train": seconds},
            "config": {"train": {"seed": seed, "epochs": 2}},
            "metrics": {"all": {"accuracy": 0.5, "ece": 0.1}},
        }

    line, table = moe_tables.provenance_table([rec("vanilla", 0, 60), rec("vanilla", 1, 120), rec("robust", 0, 30)])
    assert line == "Backbone: tiny_cnn (random init)."
    assert table["method"].tolist() == ["Vanilla MoE", "Robust MoE"]
    assert table["seeds"].tolist() == ["0, 1", "0"] and table["training minutes"].tolist() == [3.0, 0.5]
    assert table["source"].tolist() == ["computed here"] * 2 and table["date"].iloc[0] == "2026-11-25"


def test_temperature_fits_name_the_runs_whose_partial_fit_overshot() -> None:
    """Per run: the converged T below 1 marks an underconfident model; the partial fit's T below it
    overshot, below 1e-5 it sits at the lower bound; runs without a converged fit are left out."""

    def rec(method: str, seed: int, t: float, t_conv: float | None) -> dict:
        metrics = {"temperature": t} | ({} if t_conv is None else {"temperature_converged": t_conv})
        return {"method": method, "config": {"train": {"seed": seed}}, "metrics": metrics}

    runs = [rec("vanilla", 0, 1.2, 1.5), rec("vanilla", 1, 0.9, 0.8), rec("robust", 0, 0.2, 0.4)]
    runs += [rec("robust", 1, 1e-6, 0.35), rec("single", 0, 0.7, None)]
    assert moe_tables.temperature_fits(runs) == (
        "Temperature fits: 3 of 4 runs' models were underconfident on the validation split (converged T < 1). "
        "The paper's partial LBFGS fit is no partial move in 2 runs: it ended past the converged T, 1 of them "
        "at T's lower bound, where every prediction is one-hot and ECE+TS is 1 - accuracy: Robust MoE s0 (T 0.2 "
        "vs 0.40), Robust MoE s1 (T 1e-06 vs 0.35, at the bound)."
    )
    assert moe_tables.temperature_fits(runs[:2]).endswith(
        "1 of 2 runs' models were underconfident on the validation split (converged T < 1); the paper's "
        "partial fit ended between 1 and the converged T in every run."
    )
    assert "Vanilla MoE s0 (T 1.6 vs 1.50)" in moe_tables.temperature_fits([rec("vanilla", 0, 1.6, 1.5)])
    assert moe_tables.temperature_fits(runs[-1:]) == "Temperature fits: no run here has both fits."
