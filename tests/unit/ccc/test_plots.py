"""Tests of lib.ccc.plots (paper 3's figures): the charts draw the rows they are given, validate
against the Vega-Lite schema and render to SVG offline."""

from __future__ import annotations

import numpy as np
import pandas as pd
import vl_convert as vlc

from lib.ccc import plots as ccc_plots


def _svg(chart) -> str:
    svg = vlc.vegalite_to_svg(chart.to_dict())  # to_dict validates against the Vega-Lite schema
    assert svg.lstrip().startswith("<svg") and "</svg>" in svg
    return svg


def test_ccc_reliability_grid_facets_and_drops_empty_bins() -> None:
    table = pd.DataFrame(
        {
            "conf": [0.3, 0.7, np.nan, 0.4, 0.8, 0.9],
            "acc": [0.25, 0.75, np.nan, 0.4, 0.7, 0.95],
            "acc_lo": [0.1, 0.6, np.nan, 0.3, 0.6, 0.9],
            "acc_hi": [0.4, 0.9, np.nan, 0.5, 0.8, 1.0],
            "count": [10, 10, 0, 10, 10, 10],
            "stage": ["before", "after", "after", "before", "after", "before"],
            "split": ["val", "val", "val", "test", "test", "test"],
            "model": ["small"] * 3 + ["large"] * 3,
        }
    )
    chart = ccc_plots.ccc_reliability_grid(table)
    assert len(chart.data) == 5 and chart.data["conf"].notna().all()
    spec = chart.to_dict()
    assert spec["facet"]["row"]["field"] == "model" and spec["facet"]["column"]["field"] == "split"
    _svg(chart)


def test_cascade_chart_facets_only_with_a_panel_column() -> None:
    curves = pd.DataFrame(
        {
            "method": ["ours"] * 3 + ["baseline"] * 3,
            "frac_small": [0, 0.5, 1] * 2,
            "accuracy": [0.9, 0.88, 0.8, 0.9, 0.85, 0.8],
        }
    )
    plain = ccc_plots.cascade_chart(curves, title="t").to_dict()
    assert "facet" not in plain and plain["encoding"]["x"]["field"] == "frac_small"
    faceted = ccc_plots.cascade_chart(curves.assign(panel="MMLU"))
    assert faceted.to_dict()["facet"]["column"]["field"] == "panel"
    _svg(faceted)


def test_advantage_chart_drops_bins_without_an_advantage() -> None:
    table = pd.DataFrame(
        {
            "bin": [0, 1, 2],
            "count": [5, 5, 0],
            "advantage": [0.1, 0.2, np.nan],
            "acc_advantage": [0.12, 0.18, np.nan],
            "method": ["TS"] * 3,
        }
    )
    chart = ccc_plots.advantage_chart(table)
    assert list(chart.data["bin"]) == [0, 1]
    _svg(chart)


def test_precision_detection_chart_tooltips_name_present_columns() -> None:
    curves = pd.DataFrame(
        {"method": ["calibrated", "calibrated"], "k": [1, 2], "detection": [0.2, 0.4], "precision": [0.9, 0.8]}
    )
    spec = ccc_plots.precision_detection_chart(curves).to_dict()
    assert [t["field"] for t in spec["encoding"]["tooltip"]] == ["method", "k", "detection", "precision"]
    _svg(ccc_plots.precision_detection_chart(curves))
