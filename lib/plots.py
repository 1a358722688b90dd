"""The book's chart kinds and their offline renderer (CONTRIBUTING: "altair figures from lib.plots").

A figure only one paper draws lives with the paper (:mod:`lib.moe.plots`, :mod:`lib.l2d.plots`,
:mod:`lib.ccc.plots`). Every function returns an altair chart and never displays or saves it;
:func:`use_offline_renderer` renders a cell's last expression as inline SVG (offline).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from lib.calibration.metrics import reliability_table
from lib.validation import ArrayLike, check_int

BOOK_WIDTH = 740
"""The width (px) a figure may take on a book page without being scaled down (the theme's text
column); grids and side-by-side charts are sized to fit it, so their labels stay legible."""


FONT = "Liberation Sans, Arial, Helvetica, sans-serif"
"""The charts' font: vl-convert lays text out with Liberation Sans, so a browser showing the SVG must
use it or a font of the same widths (Arial, Helvetica); with its own default (DejaVu Sans on many
Linux machines, 13% wider) legend labels and titles ran past the chart's edge."""


@alt.theme.register("book", enable=False)
def _book_theme() -> alt.theme.ThemeConfig:
    return {"config": {"font": FONT}}


def use_offline_renderer() -> None:
    """Set up a page's output: altair charts as inline SVG through vl-convert (``RuntimeError`` if a test
    chart is not) in the book's :data:`FONT`, no row limit on inline data, pandas text cells in full
    (claims are sentences)."""
    pd.set_option("display.max_colwidth", None)
    alt.renderers.enable("svg")
    alt.theme.enable("book")
    alt.data_transformers.disable_max_rows()
    bundle = alt.Chart(pd.DataFrame({"x": [0, 1]})).mark_point().encode(x="x:Q")._repr_mimebundle_()
    if "image/svg+xml" not in ((bundle[0] if isinstance(bundle, tuple) else bundle) or {}):  # (data, metadata)
        raise RuntimeError("altair's svg renderer did not produce image/svg+xml; is vl-convert-python installed?")


def check_columns(df: pd.DataFrame, **columns: Any) -> None:
    """Raise ``ValueError`` naming the argument whose column is missing from ``df``."""
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"df: expected a pandas DataFrame, got {type(df).__name__}")
    for arg, col in columns.items():
        if col is not None and col not in df.columns:
            raise ValueError(f"{arg}: column {col!r} not in df (columns: {list(df.columns)})")


def reliability_diagram(
    conf: ArrayLike,
    outcome: ArrayLike,
    n_bins: int = 10,
    binning: str = "width",
    title: str | alt.TitleParams = "Reliability diagram",
    width: int = 220,
    height: int = 220,
) -> alt.LayerChart:
    """Accuracy per confidence bin (bars spanning each bin), the diagonal, the mean confidence of
    each bin (points) and 95% Wilson error bars on the accuracy; counts in the tooltip.

    Data: the non-empty rows of :func:`lib.calibration.metrics.reliability_table` (10 bins with error
    bars: calibrated-MoE paper, Figs. E.1, E.6).
    """
    data = reliability_table(conf, outcome, n_bins=n_bins, binning=binning)
    data = data[data["count"] > 0].reset_index(drop=True)
    data["mid"] = 0.5 * (data["lo"] + data["hi"])
    x_scale = y_scale = alt.Scale(domain=[0, 1])
    names = {"lo": "bin from", "hi": "bin to", "conf": "mean confidence", "acc": "accuracy"}
    names |= {"acc_lo": "95% CI low", "acc_hi": "95% CI high"}
    tooltip = [alt.Tooltip(f"{k}:Q", format=".3f", title=t) for k, t in names.items()]
    tooltip.insert(2, alt.Tooltip("count:Q", title="count"))
    base = alt.Chart(data)
    bars = base.mark_bar(opacity=0.7, stroke="white").encode(
        x=alt.X("lo:Q", scale=x_scale, title="confidence"),
        x2="hi:Q",
        y=alt.Y("acc:Q", scale=y_scale, title="accuracy"),
        y2=alt.datum(0),  # bars rise from 0 (a ranged x alone would draw a thin bar at acc)
        tooltip=tooltip,
    )
    errors = base.mark_rule(color="black").encode(x="mid:Q", y="acc_lo:Q", y2="acc_hi:Q", tooltip=tooltip)
    means = base.mark_point(color="firebrick", filled=True, size=30).encode(x="conf:Q", y="acc:Q", tooltip=tooltip)
    diagonal = alt.Chart(pd.DataFrame({"x": [0.0, 1.0], "y": [0.0, 1.0]})).mark_line(color="gray", strokeDash=[4, 4])
    diagonal = diagonal.encode(x="x:Q", y="y:Q")  # perfect calibration
    return alt.layer(bars, errors, means, diagonal).properties(title=title, width=width, height=height)


def reliability_grid(
    diagrams: Mapping[str, tuple[ArrayLike, ArrayLike]], columns: int = 3, n_bins: int = 10
) -> alt.ConcatChart:
    """One reliability diagram per ``name -> (conf, outcome)`` entry, titled by name, ``columns`` a row;
    the panels are square and fit ``BOOK_WIDTH``."""
    if not isinstance(diagrams, Mapping) or not diagrams:
        raise ValueError("diagrams: expected a non-empty mapping name -> (conf, outcome)")
    columns = check_int(columns, "columns")
    width = max(120, (BOOK_WIDTH - _PANEL_AXES * columns) // columns)
    charts = []
    for name, pair in diagrams.items():
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"diagrams: entry {name!r} must be a (conf, outcome) pair")
        title = alt.TitleParams(str(name), fontSize=12, limit=width + _PANEL_AXES - 10)
        charts.append(reliability_diagram(*pair, n_bins=n_bins, width=width, height=width, title=title))
    return alt.concat(*charts, columns=columns)


_PANEL_AXES = 75  # px a panel's axis labels, titles and spacing add to its plotting width


def legend_below(chart: alt.TopLevelMixin, columns: int = 4) -> alt.TopLevelMixin:
    """``chart`` with its legend under the plots in ``columns`` columns, labels never cut: side by
    side charts then keep their width for the data and fit ``BOOK_WIDTH``."""
    columns = check_int(columns, "columns")
    return chart.configure_legend(orient="bottom", columns=columns, labelLimit=0, titleLimit=0)


def line_chart(
    df: pd.DataFrame,
    x: str,
    y: str,
    color: str | None = None,
    yerr: str | None = None,
    title: str = "",
    x_title: str | None = None,
    y_title: str | None = None,
    points: bool = True,
    width: int = 320,
    height: int = 220,
    log: bool = False,
) -> alt.Chart | alt.LayerChart:
    """Lines of ``y`` against ``x`` (one per ``color`` value), with an optional error band of the
    symmetric half-width column ``yerr`` (e.g. a standard error over seeds). ``log=True`` puts both
    axes on log scales (a power law is then a straight line).
    """
    check_columns(df, x=x, y=y, color=color, yerr=yerr)
    data = df.copy()
    if yerr is not None:
        data["_lo"], data["_hi"] = data[y] - data[yerr], data[y] + data[yerr]
    scale = alt.Scale(type="log") if log else alt.Undefined
    if log and ((data[x] <= 0).any() or (data[y] <= 0).any()):
        raise ValueError(f"log: {x} and {y} must be > 0 on log axes")
    numeric = pd.api.types.is_numeric_dtype(data[x]) and not pd.api.types.is_bool_dtype(data[x])
    enc: dict[str, Any] = {
        "x": alt.X(f"{x}:{'Q' if numeric else 'N'}", title=x_title or x, scale=scale),
        "y": alt.Y(f"{y}:Q", title=y_title or y, scale=scale),
    }
    tooltip = [x, y] + ([color] if color else []) + ([yerr] if yerr else [])
    if color is not None:
        enc["color"] = alt.Color(f"{color}:N", title=color)
    base = alt.Chart(data)
    line = base.mark_line(point=points).encode(**enc, tooltip=tooltip)
    if yerr is None:
        return line.properties(title=title, width=width, height=height)
    band_enc = {"x": enc["x"], "y": alt.Y("_lo:Q", title=y_title or y), "y2": "_hi:Q"}
    if color is not None:
        band_enc["color"] = enc["color"]
    area = base.mark_area(opacity=0.2).encode(**band_enc)
    return alt.layer(area, line).properties(title=title, width=width, height=height)


def bar_chart(
    df: pd.DataFrame,
    x: str,
    y: str,
    color: str | None = None,
    title: str = "",
    x_title: str | None = None,
    y_title: str | None = None,
    sort: Sequence[str] | None = None,
    width: int = 320,
    height: int = 220,
) -> alt.Chart:
    """Bars of ``y`` per category ``x``; with ``color``, grouped bars (side by side via xOffset).
    ``sort`` fixes the order of the x categories.
    """
    check_columns(df, x=x, y=y, color=color)
    x_enc = alt.X(f"{x}:N", title=x_title or x, sort=list(sort) if sort is not None else alt.Undefined)
    enc: dict[str, Any] = {"x": x_enc, "y": alt.Y(f"{y}:Q", title=y_title or y)}
    if color is not None:
        enc["color"] = alt.Color(f"{color}:N", title=color)
        enc["xOffset"] = alt.XOffset(f"{color}:N")
    bars = alt.Chart(df).mark_bar().encode(**enc, tooltip=[x, y] + ([color] if color else []))
    return bars.properties(title=title, width=width, height=height)


def curves_chart(
    x: ArrayLike,
    curves: Mapping[str, ArrayLike],
    title: str = "",
    x_title: str = "p_t",
    y_title: str = "",
    y_domain: tuple[float, float] | None = None,
    width: int = 300,
    height: int = 220,
) -> alt.LayerChart:
    """Several functions of one variable (``name -> values`` on the grid ``x``) as lines, with a
    dashed zero line: the gradient and weight plots of the reweighted-risk paper (Fig. 1 and
    Appendix C Figs. 1 and 4). Values outside ``y_domain`` are clipped away."""
    xs = np.asarray(x, dtype=float)
    if not curves:
        raise ValueError("curves: expected at least one named curve")
    rows = []
    for name, ys in curves.items():
        ys = np.asarray(ys, dtype=float)
        if ys.shape != xs.shape:
            raise ValueError(f"curves: {name!r} has shape {ys.shape}, x has {xs.shape}")
        keep = np.isfinite(ys) if y_domain is None else (ys >= y_domain[0]) & (ys <= y_domain[1])
        rows.append(pd.DataFrame({"x": xs[keep], "y": ys[keep], "curve": name}))
    df = pd.concat(rows, ignore_index=True)
    scale = alt.Scale(domain=list(y_domain)) if y_domain is not None else alt.Undefined
    lines = (
        alt.Chart(df)
        .mark_line()
        .encode(
            x=alt.X("x:Q", title=x_title),
            y=alt.Y("y:Q", title=y_title, scale=scale),
            color=alt.Color("curve:N", title=None, sort=list(curves)),
        )
    )
    zero = alt.Chart(pd.DataFrame({"y": [0.0]})).mark_rule(strokeDash=[4, 4], color="gray").encode(y="y:Q")
    return alt.layer(lines, zero).properties(title=title, width=width, height=height)


def heatmap(
    df: pd.DataFrame, x: str, y: str, value: str, title: str = "", fmt: str = ".2f", width: int = 220, height: int = 180
) -> alt.LayerChart:
    """A value per (x, y) cell with the number printed in it (reweighted-risk paper Fig. 6:
    validation performance across coverage and nu)."""
    check_columns(df, x=x, y=y, value=value)
    base = alt.Chart(df).encode(x=alt.X(f"{x}:O", title=x), y=alt.Y(f"{y}:O", title=y))
    cells = base.mark_rect().encode(color=alt.Color(f"{value}:Q", title=value, scale=alt.Scale(scheme="blues")))
    text = base.mark_text(fontSize=11).encode(text=alt.Text(f"{value}:Q", format=fmt))
    return alt.layer(cells, text).properties(title=title, width=width, height=height)


def method_comparison_chart(table: pd.DataFrame, columns: int = 2, width: int = 150) -> alt.ConcatChart:
    """One bar chart per (failure, data) panel: each method's value, from a long ``table`` with
    columns ``failure, data, method, metric, value`` (:func:`lib.cross_paper.pages.cross_paper.long_table`).
    The defaults (two panels a row, method names beside each) fit ``BOOK_WIDTH``."""
    check_columns(table, failure="failure", data="data", method="method", metric="metric", value="value")
    panels = []
    for (failure, data, metric), grp in table.groupby(["failure", "data", "metric"], sort=False):
        panels.append(
            alt.Chart(grp, title=alt.TitleParams(f"{failure}: {data}", fontSize=11))
            .mark_bar()
            .encode(
                x=alt.X("value:Q", title=metric, axis=alt.Axis(tickCount=4, labelOverlap=True)),
                y=alt.Y("method:N", sort=None, title=None),
                tooltip=["method", alt.Tooltip("value:Q", format=".4f")],
            )
            .properties(width=width, height=18 * grp["method"].nunique())
        )
    return alt.concat(*panels, columns=columns)
