"""Tests for the shared plots of lib.plots: chart data equal the metrics they show, the encodings
are present, and every chart validates against the Vega-Lite schema and renders to SVG offline."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
import pytest
import vl_convert as vlc

from lib import plots
from lib.calibration.metrics import reliability_table


def _calibrated(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    conf = rng.random(n)
    return conf, (rng.random(n) < conf).astype(int)


def _svg(chart: alt.TopLevelMixin) -> str:
    spec = chart.to_dict()  # validates against the Vega-Lite schema (raises on an invalid spec)
    svg = vlc.vegalite_to_svg(spec)
    assert svg.lstrip().startswith("<svg") and "</svg>" in svg
    return svg


def _layer_data(chart: alt.LayerChart, i: int) -> pd.DataFrame:
    """Data of layer ``i`` (altair moves data shared by all layers up to the layer chart)."""
    data = chart.layer[i].data
    return chart.data if data is alt.Undefined else data


def test_offline_renderer_gives_svg_mimebundle() -> None:
    assert plots.use_offline_renderer() is None  # a setup cell ending with it shows nothing
    assert alt.renderers.active == "svg"
    long_claim = ("a claim of a paper, quoted in full in the claims table of a page " * 2).strip()
    assert long_claim in pd.DataFrame({"claim": [long_claim]})._repr_html_()  # as Jupyter shows it: not cut
    chart = alt.Chart(pd.DataFrame({"a": [1, 2]})).mark_bar().encode(x="a:Q")
    bundle = chart._repr_mimebundle_()
    bundle = bundle[0] if isinstance(bundle, tuple) else bundle
    assert "image/svg+xml" in bundle and "<svg" in bundle["image/svg+xml"]


@pytest.mark.parametrize("binning", ["width", "mass"])
def test_reliability_diagram_data_are_the_reliability_table(binning: str) -> None:
    conf, outcome = _calibrated()
    chart = plots.reliability_diagram(conf, outcome, n_bins=8, binning=binning, title="t")
    expected = reliability_table(conf, outcome, n_bins=8, binning=binning)
    expected = expected[expected["count"] > 0].reset_index(drop=True)
    data = _layer_data(chart, 0)
    for col in ["lo", "hi", "count", "conf", "acc", "acc_lo", "acc_hi"]:
        assert np.allclose(data[col].to_numpy(float), expected[col].to_numpy(float)), col
    assert np.allclose(data["mid"], (expected["lo"] + expected["hi"]) / 2)
    spec = chart.to_dict()
    assert spec["title"] == "t"
    bars, errors, means, diag = spec["layer"]
    assert bars["mark"]["type"] == "bar"
    assert {bars["encoding"][k]["field"] for k in ("x", "x2", "y")} == {"lo", "hi", "acc"}
    assert bars["encoding"]["y2"] == {"datum": 0}  # bars rise from accuracy 0
    assert "count" in [t["field"] for t in bars["encoding"]["tooltip"]]
    assert errors["mark"]["type"] == "rule"
    assert (errors["encoding"]["y"]["field"], errors["encoding"]["y2"]["field"]) == ("acc_lo", "acc_hi")
    assert means["encoding"]["x"]["field"] == "conf"
    # The diagonal runs from (0, 0) to (1, 1).
    diag_values = spec["datasets"][diag["data"]["name"]]
    assert [(d["x"], d["y"]) for d in diag_values] == [(0.0, 0.0), (1.0, 1.0)]
    _svg(chart)


def test_reliability_diagram_drops_empty_bins() -> None:
    chart = plots.reliability_diagram(np.array([0.95, 0.97, 0.15]), np.array([1, 0, 0]), n_bins=10)
    data = _layer_data(chart, 0)
    assert data["count"].tolist() == [1, 2]
    assert data["acc"].tolist() == [0.0, 0.5]
    _svg(chart)


def test_reliability_grid_has_one_diagram_per_entry() -> None:
    entries = {"Vanilla": _calibrated(seed=1), "Robust": _calibrated(seed=2), "MoCaE": _calibrated(seed=3)}
    chart = plots.reliability_grid(entries, columns=2, n_bins=5)
    spec = chart.to_dict()
    assert spec["columns"] == 2
    assert [view["title"]["text"] for view in spec["concat"]] == list(entries)
    for sub, (conf, outcome) in zip(chart.concat, entries.values()):
        expected = reliability_table(conf, outcome, n_bins=5)
        assert np.allclose(_layer_data(sub, 0)["acc"], expected.loc[expected["count"] > 0, "acc"])
    _svg(chart)


def test_line_chart_with_yerr_band() -> None:
    df = pd.DataFrame(
        {
            "experts": [1, 2, 4, 8] * 2,
            "ece": [0.02, 0.04, 0.08, 0.12, 0.02, 0.02, 0.03, 0.02],
            "se": [0.01] * 8,
            "method": ["softmax"] * 4 + ["ova"] * 4,
        }
    )
    plain = plots.line_chart(df, "experts", "ece", color="method").to_dict()
    assert plain["mark"]["type"] == "line"
    assert plain["encoding"]["x"] == {"field": "experts", "type": "quantitative", "title": "experts"}
    assert plain["encoding"]["color"]["field"] == "method"

    chart = plots.line_chart(df, "experts", "ece", color="method", yerr="se")
    band = _layer_data(chart, 0)
    assert np.allclose(band["_lo"], df["ece"] - df["se"]) and np.allclose(band["_hi"], df["ece"] + df["se"])
    spec = chart.to_dict()
    assert spec["layer"][0]["mark"]["type"] == "area"
    assert spec["layer"][0]["encoding"]["y2"]["field"] == "_hi"
    _svg(chart)


def test_line_chart_log_axes() -> None:
    df = pd.DataFrame({"n": [128, 1024, 8192], "seconds": [1e-4, 1e-3, 1e-2]})
    spec = plots.line_chart(df, "n", "seconds", log=True).to_dict()
    assert spec["encoding"]["x"]["scale"] == spec["encoding"]["y"]["scale"] == {"type": "log"}
    assert "scale" not in plots.line_chart(df, "n", "seconds").to_dict()["encoding"]["x"]
    _svg(plots.line_chart(df, "n", "seconds", log=True))
    with pytest.raises(ValueError, match="log"):
        plots.line_chart(df.assign(seconds=[0.0, 1.0, 2.0]), "n", "seconds", log=True)


def test_bar_chart_grouped_and_sorted() -> None:
    df = pd.DataFrame(
        {
            "target": ["photo", "photo", "sketch", "sketch"],
            "method": ["Vanilla", "Robust", "Vanilla", "Robust"],
            "ece": [0.033, 0.018, 0.183, 0.033],
        }
    )
    chart = plots.bar_chart(df, "target", "ece", color="method", sort=["sketch", "photo"])
    bars = chart.to_dict()
    assert bars["mark"]["type"] == "bar"
    assert bars["encoding"]["xOffset"]["field"] == "method"
    assert bars["encoding"]["x"]["sort"] == ["sketch", "photo"]
    _svg(chart)
    _svg(plots.bar_chart(df, "method", "ece"))


def test_bad_input_raises_naming_the_argument() -> None:
    df = pd.DataFrame({"a": [1, 2], "b": [3, 4]})
    with pytest.raises(ValueError, match="y"):
        plots.line_chart(df, "a", "missing")
    with pytest.raises(ValueError, match="color"):
        plots.bar_chart(df, "a", "b", color="missing")
    with pytest.raises(ValueError, match="df"):
        plots.line_chart({"a": [1]}, "a", "a")
    with pytest.raises(ValueError, match="outcome"):
        plots.reliability_diagram([0.2, 0.3], [0, 3])
    with pytest.raises(ValueError, match="diagrams"):
        plots.reliability_grid({})
    with pytest.raises(ValueError, match="binning"):
        plots.reliability_diagram([0.2, 0.3], [0, 1], binning="equal")


def test_paper4_plot_helpers_draw_their_data():
    x = np.linspace(0.1, 0.9, 9)
    chart = plots.curves_chart(x, {"a": x, "b": 10 * x}, y_domain=(0, 2))
    data = chart.layer[0].data
    assert set(data["curve"]) == {"a", "b"}
    assert data["y"].max() <= 2  # values outside the domain are dropped, not drawn off-axis
    with pytest.raises(ValueError, match="curves"):
        plots.curves_chart(x, {"a": x[:3]})
    df = pd.DataFrame({"k": [0.5, 0.8], "nu": [0.1, 0.1], "v": [1.0, 2.0]})
    hm = plots.heatmap(df, "k", "nu", "v")
    assert any(isinstance(d, pd.DataFrame) and d.equals(df) for d in (hm.data, *(layer.data for layer in hm.layer)))


def _svg_width(chart) -> float:
    import re

    return float(re.search(r'width="([\d.]+)"', vlc.vegalite_to_svg(chart.to_dict())).group(1))


@pytest.mark.parametrize("columns", [2, 3, 4])
def test_grids_and_side_by_side_charts_fit_the_book_width(columns: int) -> None:
    """Seven reliability panels (paper 1's methods) and Figure 3's two charts with a shared legend
    below fit the page's text column (BOOK_WIDTH) at their natural size, so nothing is scaled down."""
    names = [
        "Single Expert",
        "Vanilla MoE",
        "MoCaE",
        "FGR",
        "Robust MoE",
        "Robust Filtered (identity)",
        "FGR + Robust (identity)",
    ]
    grid = plots.reliability_grid({n: _calibrated(seed=i) for i, n in enumerate(names)}, columns=columns)
    assert _svg_width(grid) <= plots.BOOK_WIDTH
    df = pd.DataFrame([{"method": n, "bin": b, "y": 0.1 * b} for n in names for b in range(4)])
    pair = plots.legend_below(
        plots.line_chart(df, "bin", "y", color="method", width=300)
        | plots.line_chart(df, "bin", "y", color="method", width=300)
    )
    assert pair.to_dict()["config"]["legend"]["orient"] == "bottom"
    assert _svg_width(pair) <= plots.BOOK_WIDTH
    with pytest.raises(ValueError, match="columns"):
        plots.legend_below(pair, columns=0)
