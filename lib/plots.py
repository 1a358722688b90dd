"""Altair figures for the book, rendered offline as SVG (CONTRIBUTING: "altair figures from lib.plots").

Structure: the shared plots below (renderer, reliability diagrams, line and bar charts) are used by
every page; paper-specific functions are appended after them, each in its own section headed by a
``# --- <page or paper> plots ---`` comment. Every function returns an ``alt.Chart`` (or a layered /
concatenated chart) and never displays or saves it; notebooks show it as the last expression of a
cell, which :func:`use_offline_renderer` turns into inline SVG (vl-convert, no internet needed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from lib.metrics import reliability_table
from lib.validation import ArrayLike

# --- shared plots ---

DEFAULT_WIDTH = 220
DEFAULT_HEIGHT = 220


def use_offline_renderer() -> str:
    """Set up a page's output: render altair charts as inline SVG through vl-convert (no CDN, no
    internet) and return the renderer's name; lift altair's 5,000-row limit for inline data; show
    text cells of pandas tables in full (claims tables hold sentences that pandas would cut at 50
    characters).

    Raises ``RuntimeError`` if a test chart does not come back as ``image/svg+xml``.
    Used in: every notebook page (first code cell after the imports; the skeleton in book/start_here).
    """
    pd.set_option("display.max_colwidth", None)
    alt.renderers.enable("svg")
    alt.data_transformers.disable_max_rows()
    probe = alt.Chart(pd.DataFrame({"x": [0, 1]})).mark_point().encode(x="x:Q")
    bundle = probe._repr_mimebundle_()
    if isinstance(bundle, tuple):  # some IPython versions return (data, metadata)
        bundle = bundle[0]
    if "image/svg+xml" not in (bundle or {}):
        raise RuntimeError("altair's svg renderer did not produce image/svg+xml; is vl-convert-python installed?")
    return "svg"


def to_svg(chart: alt.TopLevelMixin) -> str:
    """The chart as an SVG string (validated by altair, rendered by vl-convert, offline)."""
    import vl_convert as vlc  # imported on use: only needed when rendering

    return vlc.vegalite_to_svg(chart.to_dict())


def _check_columns(df: pd.DataFrame, **columns: Any) -> None:
    """Raise ``ValueError`` naming the argument whose column is missing from ``df``."""
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"df: expected a pandas DataFrame, got {type(df).__name__}")
    for arg, col in columns.items():
        if col is None:
            continue
        for c in (col if isinstance(col, (tuple, list)) else [col]):
            if c not in df.columns:
                raise ValueError(f"{arg}: column {c!r} not in df (columns: {list(df.columns)})")


def _field_type(df: pd.DataFrame, col: str) -> str:
    """Altair type shorthand: quantitative for numeric columns, nominal otherwise."""
    return "Q" if pd.api.types.is_numeric_dtype(df[col]) and not pd.api.types.is_bool_dtype(df[col]) else "N"


def _diagonal() -> alt.Chart:
    """The y = x line of perfect calibration."""
    diag = pd.DataFrame({"x": [0.0, 1.0], "y": [0.0, 1.0]})
    return alt.Chart(diag).mark_line(color="gray", strokeDash=[4, 4]).encode(x="x:Q", y="y:Q")


def reliability_data(
    conf: ArrayLike, outcome: ArrayLike, n_bins: int = 10, binning: str = "width"
) -> pd.DataFrame:
    """The non-empty rows of :func:`lib.metrics.reliability_table` plus the bin centre ``mid``:
    exactly the data a reliability diagram draws."""
    table = reliability_table(conf, outcome, n_bins=n_bins, binning=binning)
    table = table[table["count"] > 0].reset_index(drop=True)
    table["mid"] = 0.5 * (table["lo"] + table["hi"])
    return table


def reliability_diagram(
    conf: ArrayLike,
    outcome: ArrayLike,
    n_bins: int = 10,
    binning: str = "width",
    title: str = "Reliability diagram",
    width: int = DEFAULT_WIDTH,
    height: int = DEFAULT_HEIGHT,
) -> alt.LayerChart:
    """Accuracy per confidence bin (bars spanning each bin), the diagonal, the mean confidence of
    each bin (points) and 95% Wilson error bars on the accuracy; counts in the tooltip.

    Data: :func:`reliability_data` (10 bins with error bars: calibrated-MoE paper, Figs. E.1, E.6).
    Used in: notebooks/cifar10h, notebooks/pacs, notebooks/civilcomments, notebooks/losses_cifar10.
    """
    data = reliability_data(conf, outcome, n_bins=n_bins, binning=binning)
    x_scale = alt.Scale(domain=[0, 1])
    y_scale = alt.Scale(domain=[0, 1])
    tooltip = [
        alt.Tooltip("lo:Q", format=".3f", title="bin from"),
        alt.Tooltip("hi:Q", format=".3f", title="bin to"),
        alt.Tooltip("count:Q", title="count"),
        alt.Tooltip("conf:Q", format=".3f", title="mean confidence"),
        alt.Tooltip("acc:Q", format=".3f", title="accuracy"),
        alt.Tooltip("acc_lo:Q", format=".3f", title="95% CI low"),
        alt.Tooltip("acc_hi:Q", format=".3f", title="95% CI high"),
    ]
    base = alt.Chart(data)
    bars = base.mark_bar(opacity=0.7, stroke="white").encode(
        x=alt.X("lo:Q", scale=x_scale, title="confidence"),
        x2="hi:Q",
        y=alt.Y("acc:Q", scale=y_scale, title="accuracy"),
        y2=alt.datum(0),  # bars rise from 0 (a ranged x alone would draw a thin bar at acc)
        tooltip=tooltip,
    )
    errors = base.mark_rule(color="black").encode(x="mid:Q", y="acc_lo:Q", y2="acc_hi:Q", tooltip=tooltip)
    means = base.mark_point(color="firebrick", filled=True, size=30).encode(
        x="conf:Q", y="acc:Q", tooltip=tooltip
    )
    return alt.layer(bars, errors, means, _diagonal()).properties(
        title=title, width=width, height=height
    )


def reliability_grid(
    diagrams: Mapping[str, tuple[ArrayLike, ArrayLike]],
    columns: int = 3,
    n_bins: int = 10,
    binning: str = "width",
    width: int = 180,
    height: int = 180,
) -> alt.ConcatChart:
    """Several reliability diagrams side by side (wrapping after ``columns``), one per
    ``name -> (conf, outcome)`` entry, titled by name, in the mapping's order.

    Used in: notebooks/cifar10h, notebooks/pacs, notebooks/civilcomments (one diagram per method).
    """
    if not isinstance(diagrams, Mapping) or not diagrams:
        raise ValueError("diagrams: expected a non-empty mapping name -> (conf, outcome)")
    if isinstance(columns, bool) or not isinstance(columns, (int, np.integer)) or columns < 1:
        raise ValueError(f"columns: must be a positive integer, got {columns!r}")
    charts = []
    for name, pair in diagrams.items():
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"diagrams: entry {name!r} must be a (conf, outcome) pair")
        charts.append(
            reliability_diagram(*pair, n_bins=n_bins, binning=binning, title=str(name), width=width, height=height)
        )
    return alt.concat(*charts, columns=int(columns))


def line_chart(
    df: pd.DataFrame,
    x: str,
    y: str,
    color: str | None = None,
    band: tuple[str, str] | None = None,
    yerr: str | None = None,
    title: str = "",
    x_title: str | None = None,
    y_title: str | None = None,
    points: bool = True,
    width: int = 320,
    height: int = 220,
    log: bool = False,
) -> alt.Chart | alt.LayerChart:
    """Lines of ``y`` against ``x`` (one per ``color`` value), with an optional error band given
    either as two columns ``band=(lo, hi)`` or as a symmetric half-width column ``yerr``
    (e.g. a standard error over seeds). ``log=True`` puts both axes on log scales (a power law is
    then a straight line). Used in: notebooks/l2d_cifar10, notebooks/sensitivity, notebooks/performance.
    """
    _check_columns(df, x=x, y=y, color=color, band=band, yerr=yerr)
    if band is not None and yerr is not None:
        raise ValueError("band: give either band=(lo, hi) or yerr, not both")
    if band is not None and (not isinstance(band, (tuple, list)) or len(band) != 2):
        raise ValueError("band: expected a pair of column names (lo, hi)")
    data = df.copy()
    if yerr is not None:
        data["_lo"], data["_hi"] = data[y] - data[yerr], data[y] + data[yerr]
        band = ("_lo", "_hi")
    scale = alt.Scale(type="log") if log else alt.Undefined
    if log and ((data[x] <= 0).any() or (data[y] <= 0).any()):
        raise ValueError(f"log: {x} and {y} must be > 0 on log axes")
    enc: dict[str, Any] = {
        "x": alt.X(f"{x}:{_field_type(data, x)}", title=x_title or x, scale=scale),
        "y": alt.Y(f"{y}:Q", title=y_title or y, scale=scale),
    }
    tooltip = [x, y] + ([color] if color else []) + ([yerr] if yerr else list(band or []))
    if color is not None:
        enc["color"] = alt.Color(f"{color}:N", title=color)
    base = alt.Chart(data)
    line = base.mark_line(point=points).encode(**enc, tooltip=tooltip)
    if band is None:
        return line.properties(title=title, width=width, height=height)
    band_enc = {"x": enc["x"], "y": alt.Y(f"{band[0]}:Q", title=y_title or y), "y2": f"{band[1]}:Q"}
    if color is not None:
        band_enc["color"] = enc["color"]
    area = base.mark_area(opacity=0.2).encode(**band_enc)
    return alt.layer(area, line).properties(title=title, width=width, height=height)


def bar_chart(
    df: pd.DataFrame,
    x: str,
    y: str,
    color: str | None = None,
    yerr: str | None = None,
    title: str = "",
    x_title: str | None = None,
    y_title: str | None = None,
    sort: Sequence[str] | None = None,
    width: int = 320,
    height: int = 220,
) -> alt.Chart | alt.LayerChart:
    """Bars of ``y`` per category ``x``; with ``color``, grouped bars (side by side via xOffset);
    ``yerr`` adds +-error rules. ``sort`` fixes the order of the x categories.
    Used in: notebooks/cifar10h, notebooks/pacs, notebooks/civilcomments, notebooks/losses_cifar10.
    """
    _check_columns(df, x=x, y=y, color=color, yerr=yerr)
    data = df.copy()
    if yerr is not None:
        data["_lo"], data["_hi"] = data[y] - data[yerr], data[y] + data[yerr]
    x_enc = alt.X(f"{x}:N", title=x_title or x, sort=list(sort) if sort is not None else alt.Undefined)
    enc: dict[str, Any] = {"x": x_enc, "y": alt.Y(f"{y}:Q", title=y_title or y)}
    tooltip = [x, y] + ([color] if color else []) + ([yerr] if yerr else [])
    if color is not None:
        enc["color"] = alt.Color(f"{color}:N", title=color)
        enc["xOffset"] = alt.XOffset(f"{color}:N")
    base = alt.Chart(data)
    bars = base.mark_bar().encode(**enc, tooltip=tooltip)
    if yerr is None:
        return bars.properties(title=title, width=width, height=height)
    rule_enc: dict[str, Any] = {"x": x_enc, "y": "_lo:Q", "y2": "_hi:Q"}
    if color is not None:
        rule_enc["xOffset"] = enc["xOffset"]
    rules = base.mark_rule(color="black").encode(**rule_enc)
    return alt.layer(bars, rules).properties(title=title, width=width, height=height)


# --- paper 2: learning to defer ---


def gaussian_scatter(
    x: ArrayLike, cluster: ArrayLike, means: ArrayLike | None = None, title: str = "Mixture of Gaussians",
    width: int = 320, height: int = 280,
) -> alt.Chart | alt.LayerChart:
    """The 2-D mixture-of-Gaussians data coloured by cluster (numbered 1..4 as in the paper), with
    the cluster means as crosses (L2D paper Figure 3). Used in: notebooks/l2d_gaussians."""
    pts = np.asarray(x, dtype=float)
    cl = np.asarray(cluster).astype(int)
    if pts.ndim != 2 or pts.shape[1] != 2:
        raise ValueError(f"x: expected (N, 2) points, got shape {pts.shape}")
    if len(cl) != len(pts):
        raise ValueError("cluster: needs one id per point")
    df = pd.DataFrame({"x1": pts[:, 0], "x2": pts[:, 1], "cluster": [f"cluster {c + 1}" for c in cl]})
    dots = alt.Chart(df).mark_circle(size=12, opacity=0.5).encode(
        x=alt.X("x1:Q", title="x₁"), y=alt.Y("x2:Q", title="x₂"), color=alt.Color("cluster:N", title="cluster"))
    if means is None:
        return dots.properties(title=title, width=width, height=height)
    m = np.asarray(means, dtype=float)
    mdf = pd.DataFrame({"x1": m[:, 0], "x2": m[:, 1], "cluster": [f"cluster {c + 1}" for c in range(len(m))]})
    crosses = alt.Chart(mdf).mark_point(shape="cross", size=200, filled=True, color="black").encode(
        x="x1:Q", y="x2:Q", tooltip=["cluster"])
    return alt.layer(dots, crosses).properties(title=title, width=width, height=height)


def l2d_panels(
    summary: pd.DataFrame, panels: Sequence[tuple[str, str, str, str]], width: int = 240, height: int = 200,
) -> alt.HConcatChart:
    """Side-by-side panels of an L2D study (L2D paper Figures 1 and 2): each panel
    ``(experiment, metric, x title, y title)`` draws ``metric`` against the sweep ``value`` for
    softmax and OvA with +-1 standard error bands over seeds (columns from
    ``lib.experiments.l2d.summarize``). Used in: notebooks/l2d_gaussians, notebooks/l2d_cifar10."""
    charts = []
    for experiment, metric, x_title, y_title in panels:
        sub = summary[summary["experiment"] == experiment]
        if sub.empty:
            raise ValueError(f"summary: no rows for experiment {experiment!r}")
        charts.append(line_chart(sub, "value", metric, color="surrogate", yerr=f"{metric}_se", x_title=x_title,
                                 y_title=y_title, width=width, height=height))
    return alt.hconcat(*charts)


# --- paper 4: reweighted risk ---


def curves_chart(
    x: ArrayLike, curves: Mapping[str, ArrayLike], title: str = "", x_title: str = "p_t", y_title: str = "",
    y_domain: tuple[float, float] | None = None, width: int = 300, height: int = 220,
) -> alt.LayerChart:
    """Several functions of one variable (``name -> values`` on the grid ``x``) as lines, with a
    dashed zero line: the gradient and weight plots of the reweighted-risk paper (Fig. 1 and
    Appendix C Figs. 1 and 4). Values outside ``y_domain`` are clipped away.
    Used in: notebooks/losses_cifar10."""
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
    lines = alt.Chart(df).mark_line().encode(
        x=alt.X("x:Q", title=x_title), y=alt.Y("y:Q", title=y_title, scale=scale),
        color=alt.Color("curve:N", title=None, sort=list(curves)))
    zero = alt.Chart(pd.DataFrame({"y": [0.0]})).mark_rule(strokeDash=[4, 4], color="gray").encode(y="y:Q")
    return alt.layer(lines, zero).properties(title=title, width=width, height=height)


def heatmap(
    df: pd.DataFrame, x: str, y: str, value: str, title: str = "", fmt: str = ".2f",
    width: int = 220, height: int = 180,
) -> alt.LayerChart:
    """A value per (x, y) cell with the number printed in it (reweighted-risk paper Fig. 6:
    validation performance across coverage and nu). Used in: notebooks/losses_cifar10."""
    _check_columns(df, x=x, y=y, value=value)
    base = alt.Chart(df).encode(x=alt.X(f"{x}:O", title=x), y=alt.Y(f"{y}:O", title=y))
    cells = base.mark_rect().encode(color=alt.Color(f"{value}:Q", title=value, scale=alt.Scale(scheme="blues")))
    text = base.mark_text(fontSize=11).encode(text=alt.Text(f"{value}:Q", format=fmt))
    return alt.layer(cells, text).properties(title=title, width=width, height=height)

# --- paper 3: cascades and cleaning ---


def _diagonal_layer() -> alt.Chart:
    """The y = x reference line from (0, 0) to (1, 1), usable inside a faceted layer."""
    return alt.Chart().mark_rule(color="gray", strokeDash=[4, 4]).encode(
        x=alt.datum(0), y=alt.datum(0), x2=alt.datum(1), y2=alt.datum(1)
    )


def ccc_reliability_grid(
    table: pd.DataFrame, column: str = "split", row: str = "model", width: int = 150
) -> alt.FacetChart:
    """Reliability diagrams (equal-count bins) faceted by ``row`` x ``column``.

    ``table``: rows of :func:`lib.metrics.reliability_table` (``conf``, ``acc``, ``acc_lo``,
    ``acc_hi``, ``count``) plus the facet columns and a ``stage`` column ("before"/"after" TS).
    Paper 3, Fig. 1. Used in: notebooks/calibration.
    """
    data = table.dropna(subset=["conf", "acc"])
    base = alt.Chart().encode(
        x=alt.X("conf:Q", title="mean confidence", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("stage:N", title="confidence"),
    )
    points = base.mark_line(point=True).encode(
        y=alt.Y("acc:Q", title="accuracy", scale=alt.Scale(domain=[0, 1])),
        tooltip=["conf:Q", "acc:Q", "count:Q"],
    )
    bars = base.mark_errorbar().encode(y="acc_lo:Q", y2="acc_hi:Q")
    return alt.layer(_diagonal_layer(), points, bars, data=data).properties(
        width=width, height=width
    ).facet(row=alt.Row(f"{row}:N", title=None), column=alt.Column(f"{column}:N", title=None))


def cascade_chart(curves: pd.DataFrame, title: str = "", width: int = 260) -> alt.Chart:
    """Accuracy against the fraction kept on the small model, one line per ``method``.

    ``curves``: rows of :meth:`lib.cascade.CascadeCurve.to_frame` (``method``, ``frac_small``,
    ``accuracy``), optionally with a ``panel`` column to facet on. Paper 3, Figs. 2-3.
    Used in: notebooks/cascading, notebooks/same_size.
    """
    chart = alt.Chart(curves).mark_line(point=alt.OverlayMarkDef(size=20)).encode(
        x=alt.X("frac_small:Q", title="fraction kept on the small model", scale=alt.Scale(domain=[0, 1])),
        y=alt.Y("accuracy:Q", title="accuracy", scale=alt.Scale(zero=False)),
        color=alt.Color("method:N", title="method"),
        strokeDash=alt.StrokeDash("method:N", legend=None),
        tooltip=["method:N", "frac_small:Q", "accuracy:Q"],
    ).properties(width=width, height=width * 0.75, title=title)
    if "panel" in curves.columns:
        return chart.facet(column=alt.Column("panel:N", title=None)).resolve_scale(y="independent")
    return chart


def advantage_chart(table: pd.DataFrame, width: int = 220) -> alt.Chart:
    """Per-bin confidence advantage against accuracy advantage (paper 3, section 2.2): points on
    the diagonal mean the calibrated confidences are comparable across the two models.
    ``table``: rows of :func:`lib.cascade.advantage_table` with a ``method`` column.

    Used in: notebooks/cascading.
    """
    pts = alt.Chart().mark_point(filled=True).encode(
        x=alt.X("advantage:Q", title="confidence advantage a_b"),
        y=alt.Y("acc_advantage:Q", title="accuracy advantage"),
        color=alt.Color("method:N"),
        tooltip=["bin:Q", "count:Q", "advantage:Q", "acc_advantage:Q"],
    )
    diag = alt.Chart().mark_line(color="gray", strokeDash=[4, 4]).encode(x="advantage:Q", y="advantage:Q")
    return alt.layer(diag, pts, data=table.dropna(subset=["advantage"])).properties(
        width=width, height=width
    )


def precision_detection_chart(curves: pd.DataFrame, title: str = "", width: int = 280) -> alt.Chart:
    """Cleaning precision against detection rate, one line per ``method`` (paper 3, Fig. 6a).
    ``curves``: ``method``, ``detection``, ``precision`` (optionally ``k``, ``n_flagged``).
    Used in: notebooks/cleaning."""
    tips = [c for c in ("method", "k", "n_flagged", "detection", "precision") if c in curves.columns]
    return alt.Chart(curves).mark_line(point=alt.OverlayMarkDef(size=20)).encode(
        x=alt.X("detection:Q", title="detection rate (recall of noisy labels)", scale=alt.Scale(domain=[0, 1])),
        y=alt.Y("precision:Q", title="precision", scale=alt.Scale(zero=False)),
        color=alt.Color("method:N", title="method"),
        tooltip=tips,
    ).properties(width=width, height=width * 0.75, title=title)


# --- across the papers ---


def method_comparison_chart(table: pd.DataFrame, columns: int = 3, width: int = 200) -> alt.ConcatChart:
    """One bar chart per (failure, data) panel: each method's value, from a long ``table`` with
    columns ``failure, data, method, metric, value`` (:func:`lib.experiments.cross_paper.long_table`).
    Used in: notebooks/cross_paper."""
    _check_columns(table, failure="failure", data="data", method="method", metric="metric", value="value")
    panels = []
    for (failure, data, metric), grp in table.groupby(["failure", "data", "metric"], sort=False):
        panels.append(
            alt.Chart(grp, title=alt.TitleParams(f"{failure}: {data}", fontSize=11))
            .mark_bar()
            .encode(
                x=alt.X("value:Q", title=metric),
                y=alt.Y("method:N", sort=None, title=None),
                tooltip=["method", alt.Tooltip("value:Q", format=".4f")],
            )
            .properties(width=width, height=18 * grp["method"].nunique())
        )
    return alt.concat(*panels, columns=columns)


# --- paper 1: mixture of experts ---


def calibration_gap_chart(
    df: pd.DataFrame,
    level: str = "level",
    measured: str = "measured",
    se: str = "se",
    predicted: str = "predicted",
    color: str = "shift",
    title: str = "Calibration residual per prediction level",
    width: int = 320,
    height: int = 220,
) -> alt.LayerChart:
    """Measured calibration residual E[Y - p | p = q] per level q (points with +-2 s.e. rules) next to
    the value eq. (4) predicts (hollow diamonds), one colour per shift.

    Data: lib.moe_theory.measured_gap merged with predicted_gap. Used in: notebooks/routing_theory.
    """
    _check_columns(df, level=level, measured=measured, se=se, predicted=predicted, color=color)
    data = df.copy()
    data["_lo"], data["_hi"] = data[measured] - 2 * data[se], data[measured] + 2 * data[se]
    base = alt.Chart(data)
    x = alt.X(f"{level}:Q", title="aggregate prediction q", scale=alt.Scale(domain=[0, 1]))
    col = alt.Color(f"{color}:N", title=color)
    tip = [level, measured, se, predicted, color]
    pts = base.mark_point(filled=True, size=50).encode(x=x, y=alt.Y(f"{measured}:Q", title="E[Y - p | p = q]"), color=col, tooltip=tip)
    rules = base.mark_rule().encode(x=x, y="_lo:Q", y2="_hi:Q", color=col)
    pred = base.mark_point(shape="diamond", size=140, filled=False, strokeWidth=2).encode(
        x=x, y=f"{predicted}:Q", color=col, tooltip=tip)
    zero = alt.Chart(pd.DataFrame({"y": [0.0]})).mark_rule(color="gray", strokeDash=[4, 4]).encode(y="y:Q")
    return alt.layer(zero, rules, pts, pred).properties(title=title, width=width, height=height)


def confidence_histograms(
    df: pd.DataFrame,
    conf: str = "conf",
    method: str = "method",
    facet: str = "subset",
    n_bins: int = 10,
    title: str = "Confidence distribution",
    width: int = 160,
    height: int = 120,
) -> alt.FacetChart:
    """Share of predictions per confidence bin (10 equal-width bins), one line per ``method``, one
    panel per ``facet`` value (e.g. easy vs hard images; paper Fig. E.3). Used in: notebooks/cifar10h."""
    _check_columns(df, conf=conf, method=method, facet=facet)
    if isinstance(n_bins, bool) or not isinstance(n_bins, int) or n_bins < 1:
        raise ValueError(f"n_bins: must be a positive integer, got {n_bins!r}")
    data = df[[conf, method, facet]].copy()
    data["bin"] = np.clip(np.ceil(data[conf].to_numpy(dtype=float) * n_bins) - 1, 0, n_bins - 1)
    counts = data.groupby([facet, method, "bin"]).size().rename("count").reset_index()
    counts["share"] = counts["count"] / counts.groupby([facet, method])["count"].transform("sum")
    counts["confidence"] = (counts["bin"] + 0.5) / n_bins
    return alt.Chart(counts).mark_line(point=True).encode(
        x=alt.X("confidence:Q", scale=alt.Scale(domain=[0, 1])),
        y=alt.Y("share:Q", title="share of predictions"),
        color=alt.Color(f"{method}:N"),
        tooltip=[facet, method, "confidence", "share", "count"],
    ).properties(width=width, height=height).facet(column=alt.Column(f"{facet}:N", title=None)).properties(title=title)


def image_strip(
    images: ArrayLike, captions: Sequence[str], size: int = 96, columns: int = 4
) -> alt.ConcatChart:
    """Small images (uint8 (N, 3, H, W) or (N, H, W, 3)) with a caption under each, as altair image
    marks holding PNG data URIs (rendered offline by vl-convert). Used in: notebooks/cifar10h (Fig. E.2)."""
    import base64
    import io

    from PIL import Image

    arr = np.asarray(images)
    if arr.ndim != 4:
        raise ValueError(f"images: expected a 4-D uint8 array, got shape {arr.shape}")
    if arr.shape[1] == 3 and arr.shape[-1] != 3:
        arr = arr.transpose(0, 2, 3, 1)
    if len(captions) != arr.shape[0]:
        raise ValueError(f"captions: expected {arr.shape[0]} captions, got {len(captions)}")
    charts = []
    for img, cap in zip(arr, captions):
        buf = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(img.astype(np.uint8))).resize((size, size), Image.NEAREST).save(buf, format="PNG")
        url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
        lines = str(cap).split("\n")
        pic = alt.Chart(pd.DataFrame({"x": [0.5], "y": [0.5], "url": [url]})).mark_image(width=size, height=size).encode(
            x=alt.X("x:Q", axis=None, scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("y:Q", axis=None, scale=alt.Scale(domain=[0, 1])), url="url:N",
        ).properties(width=size, height=size)
        text = alt.Chart(pd.DataFrame({"line": lines, "row": range(len(lines))})).mark_text(
            fontSize=9, align="center").encode(
            y=alt.Y("row:O", axis=None), text="line:N").properties(width=size + 40, height=12 * len(lines))
        charts.append(alt.vconcat(pic, text, spacing=2))
    return alt.concat(*charts, columns=int(columns)).configure_view(stroke=None)
