"""Tests of lib.moe.plots (paper 1's figures): the charts draw the numbers they are given, validate
against the Vega-Lite schema and render to SVG offline."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import vl_convert as vlc

from lib.moe import plots as moe_plots


def _svg(chart) -> str:
    svg = vlc.vegalite_to_svg(chart.to_dict())  # to_dict validates against the Vega-Lite schema
    assert svg.lstrip().startswith("<svg") and "</svg>" in svg
    return svg


def test_calibration_gap_chart_draws_two_standard_error_rules() -> None:
    df = pd.DataFrame(
        {
            "level": [0.2, 0.5, 0.8] * 2,
            "measured": [0.01, -0.02, 0.03, 0.0, 0.05, -0.01],
            "se": [0.01, 0.02, 0.005, 0.01, 0.01, 0.01],
            "predicted": [0.0, -0.01, 0.02, 0.0, 0.04, 0.0],
            "shift": ["none"] * 3 + ["strong"] * 3,
        }
    )
    chart = moe_plots.calibration_gap_chart(df, title="t")
    zero, rules, pts, pred = chart.layer
    data = rules.data
    assert np.allclose(data["_lo"], df["measured"] - 2 * df["se"])
    assert np.allclose(data["_hi"], df["measured"] + 2 * df["se"])
    spec = chart.to_dict()
    assert spec["title"] == "t"
    assert [layer["mark"]["type"] for layer in spec["layer"]] == ["rule", "rule", "point", "point"]
    assert spec["layer"][3]["mark"]["shape"] == "diamond"
    _svg(chart)
    with pytest.raises(ValueError, match="predicted"):
        moe_plots.calibration_gap_chart(df.drop(columns="predicted"))


def test_confidence_histograms_shares_sum_to_one_per_method_and_panel() -> None:
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {"conf": np.r_[rng.random(98), 0.0, 1.0], "method": ["A", "B"] * 50, "subset": ["easy"] * 60 + ["hard"] * 40}
    )
    chart = moe_plots.confidence_histograms(df, n_bins=5)
    counts = chart.data
    assert counts.groupby(["subset", "method"])["share"].sum().to_numpy() == pytest.approx(1.0)
    assert counts["count"].sum() == 100
    assert counts["bin"].between(0, 4).all()  # conf 0 falls in the first bin, conf 1 in the last
    assert set(counts["confidence"]) <= {0.1, 0.3, 0.5, 0.7, 0.9}
    _svg(chart)
    with pytest.raises(ValueError, match="n_bins"):
        moe_plots.confidence_histograms(df, n_bins=0)
    with pytest.raises(ValueError, match="facet"):
        moe_plots.confidence_histograms(df, facet="missing")


def test_image_strip_takes_either_channel_layout() -> None:
    imgs = np.random.default_rng(0).integers(0, 256, (3, 3, 8, 8), dtype=np.uint8)
    chw = moe_plots.image_strip(imgs, ["a", "b\nc", "d"], size=16, columns=2)
    hwc = moe_plots.image_strip(imgs.transpose(0, 2, 3, 1), ["a", "b\nc", "d"], size=16, columns=2)
    assert len(chw.concat) == len(hwc.concat) == 3
    assert chw.to_dict()["columns"] == 2
    assert list(chw.concat[1].vconcat[1].data["line"]) == ["b", "c"]  # one text row per caption line
    assert chw.concat[0].vconcat[0].data["url"][0].startswith("data:image/png;base64,")
    _svg(chw)
    with pytest.raises(ValueError, match="captions"):
        moe_plots.image_strip(imgs, ["a"])
    with pytest.raises(ValueError, match="images"):
        moe_plots.image_strip(imgs[0], ["a"])


def test_tradeoff_chart_draws_ours_with_two_se_bars_and_the_papers_points(robust_wins_summary) -> None:
    from lib.moe.pages.pacs import tradeoff_points

    ours, paper = tradeoff_points(robust_wins_summary, "sketch")
    assert set(ours["method"]) == set(paper["method"]) and "Robust MoE" in set(ours["method"])
    assert paper.set_index("method").loc["Robust MoE", "ece"] == 0.033  # Table 2, sketch
    chart = moe_plots.tradeoff_chart(ours, paper, title="t")
    bars = pd.DataFrame(chart.layer[0].data)
    row = bars[bars["method"] == "Robust MoE"].iloc[0]
    assert row["_x1"] - row["_x0"] == pytest.approx(4 * row["ece_se"])
    _svg(chart)
    _svg(moe_plots.tradeoff_chart(ours))  # ours alone (no paper table)
    with pytest.raises(ValueError):
        moe_plots.tradeoff_chart(ours.drop(columns="ece_se"))
