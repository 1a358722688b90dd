"""Paper 3's figures (Figs. 1-3 and 6a): reliability diagrams, cascade curves, the confidence
advantage and cleaning precision, altair charts like :mod:`lib.plots`'s."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd


def _method_lines(
    curves: pd.DataFrame, x: tuple[str, str], y: tuple[str, str], title: str, width: int, **encode: Any
) -> alt.Chart:
    """One line per ``method`` of ``y`` against ``x`` in [0, 1] (each a (column, title) pair)."""
    return (
        alt.Chart(curves)
        .mark_line(point=alt.OverlayMarkDef(size=20))
        .encode(
            x=alt.X(f"{x[0]}:Q", title=x[1], scale=alt.Scale(domain=[0, 1])),
            y=alt.Y(f"{y[0]}:Q", title=y[1], scale=alt.Scale(zero=False)),
            color=alt.Color("method:N", title="method"),
            **encode,
        )
        .properties(width=width, height=width * 0.75, title=title)
    )


def ccc_reliability_grid(
    table: pd.DataFrame, column: str = "split", row: str = "model", width: int = 150
) -> alt.FacetChart:
    """Reliability diagrams (paper 3, Fig. 1) of :func:`lib.calibration.metrics.reliability_table`
    rows faceted by ``row`` x ``column``, coloured by ``stage``."""
    data = table.dropna(subset=["conf", "acc"])
    base = alt.Chart().encode(
        x=alt.X("conf:Q", title="mean confidence", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("stage:N", title="confidence"),
    )
    points = base.mark_line(point=True).encode(
        y=alt.Y("acc:Q", title="accuracy", scale=alt.Scale(domain=[0, 1])), tooltip=["conf:Q", "acc:Q", "count:Q"]
    )
    bars = base.mark_errorbar().encode(y=alt.Y("acc_lo:Q", title="accuracy"), y2="acc_hi:Q")
    diagonal = alt.Chart().mark_rule(color="gray", strokeDash=[4, 4])  # y = x, inside a faceted layer
    diagonal = diagonal.encode(x=alt.datum(0), y=alt.datum(0), x2=alt.datum(1), y2=alt.datum(1))
    return (
        alt.layer(diagonal, points, bars, data=data)
        .properties(width=width, height=width)
        .facet(row=alt.Row(f"{row}:N", title=None), column=alt.Column(f"{column}:N", title=None))
    )


def cascade_chart(
    curves: pd.DataFrame, title: str = "", width: int = 260, x_title: str = "fraction kept on the small model"
) -> alt.Chart:
    """Accuracy against the fraction kept on the small model (``x_title``: on the first model of a
    same-size pair), one line per ``method`` (paper 3, Figs. 2-3), faceted by ``panel`` when there is one."""
    chart = _method_lines(
        curves, ("frac_small", x_title), ("accuracy", "accuracy"), title, width,
        strokeDash=alt.StrokeDash("method:N", title="method"),  # one legend shows colour and dash
        tooltip=["method:N", "frac_small:Q", "accuracy:Q"],
    )  # fmt: skip
    if "panel" in curves.columns:
        return chart.facet(column=alt.Column("panel:N", title=None)).resolve_scale(y="independent")
    return chart


def advantage_chart(table: pd.DataFrame, width: int = 220) -> alt.Chart:
    """Per-bin confidence advantage against accuracy advantage (paper 3, section 2.2): on the
    diagonal, the calibrated confidences are comparable across the two models."""
    pts = (
        alt.Chart()
        .mark_point(filled=True)
        .encode(
            x=alt.X("advantage:Q", title="confidence advantage a_b"),
            y=alt.Y("acc_advantage:Q", title="accuracy advantage"),
            color=alt.Color("method:N"),
            tooltip=["bin:Q", "count:Q", "advantage:Q", "acc_advantage:Q"],
        )
    )
    diag = alt.Chart().mark_line(color="gray", strokeDash=[4, 4]).encode(x="advantage:Q", y="advantage:Q")
    return alt.layer(diag, pts, data=table.dropna(subset=["advantage"])).properties(width=width, height=width)


def precision_detection_chart(curves: pd.DataFrame, title: str = "", width: int = 280) -> alt.Chart:
    """Cleaning precision against detection rate, one line per ``method`` (paper 3, Fig. 6a).
    ``curves``: ``method``, ``detection``, ``precision`` (optionally ``k``, ``n_flagged``)."""
    tips = [c for c in ("method", "k", "n_flagged", "detection", "precision") if c in curves.columns]
    x = ("detection", "detection rate (recall of noisy labels)")
    return _method_lines(curves, x, ("precision", "precision"), title, width, tooltip=tips)
