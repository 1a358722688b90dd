"""Paper 1's figures (section 4, eq. 4; Appendix E, Figs. E.2, E.3): calibration residual per
prediction level, confidence histograms, image strips, the methods' accuracy-calibration trade-off.
Like :mod:`lib.plots`, every function returns an altair chart and never displays or saves it."""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd
from PIL import Image

from lib.plots import check_columns
from lib.validation import ArrayLike, check_int


def calibration_gap_chart(df: pd.DataFrame, title: str = "Calibration residual per prediction level") -> alt.LayerChart:
    """Measured calibration residual E[Y - p | p = q] per ``level`` q (points with +-2 ``se`` rules) next
    to the value eq. (4) ``predicted`` (hollow diamonds), one colour per ``shift``.

    Data: lib.moe.theory.measured_gap merged with predicted_gap."""
    check_columns(df, level="level", measured="measured", se="se", predicted="predicted", color="shift")
    data = df.assign(_lo=df["measured"] - 2 * df["se"], _hi=df["measured"] + 2 * df["se"])
    base = alt.Chart(data)
    x = alt.X("level:Q", title="aggregate prediction q", scale=alt.Scale(domain=[0, 1]))
    col = alt.Color("shift:N", title="shift")
    tip = ["level", "measured", "se", "predicted", "shift"]
    pts = base.mark_point(filled=True, size=50).encode(
        x=x, y=alt.Y("measured:Q", title="E[Y - p | p = q]"), color=col, tooltip=tip
    )
    rules = base.mark_rule().encode(x=x, y="_lo:Q", y2="_hi:Q", color=col)
    pred = base.mark_point(shape="diamond", size=140, filled=False, strokeWidth=2).encode(
        x=x, y="predicted:Q", color=col, tooltip=tip
    )
    zero = alt.Chart(pd.DataFrame({"y": [0.0]})).mark_rule(color="gray", strokeDash=[4, 4]).encode(y="y:Q")
    return alt.layer(zero, rules, pts, pred).properties(title=title, width=320, height=220)


def confidence_histograms(df: pd.DataFrame, facet: str = "subset", n_bins: int = 10) -> alt.FacetChart:
    """Share of predictions per confidence bin (``n_bins`` equal-width bins of ``conf``), one line per
    ``method``, one panel per ``facet`` value (e.g. easy vs hard images; paper Fig. E.3)."""
    check_columns(df, conf="conf", method="method", facet=facet)
    n_bins = check_int(n_bins, "n_bins")
    data = df[["conf", "method", facet]].copy()
    data["bin"] = np.clip(np.ceil(data["conf"].to_numpy(dtype=float) * n_bins) - 1, 0, n_bins - 1)
    counts = data.groupby([facet, "method", "bin"]).size().rename("count").reset_index()
    counts["share"] = counts["count"] / counts.groupby([facet, "method"])["count"].transform("sum")
    counts["confidence"] = (counts["bin"] + 0.5) / n_bins
    return (
        alt.Chart(counts)
        .mark_line(point=True)
        .encode(
            x=alt.X("confidence:Q", scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("share:Q", title="share of predictions"),
            color=alt.Color("method:N"),
            tooltip=[facet, "method", "confidence", "share", "count"],
        )
        .properties(width=160, height=120)
        .facet(column=alt.Column(f"{facet}:N", title=None))
        .properties(title="Confidence distribution")
    )


def image_strip(images: ArrayLike, captions: Sequence[str], size: int = 96, columns: int = 4) -> alt.ConcatChart:
    """Small images (uint8 (N, 3, H, W) or (N, H, W, 3)) with a caption under each, as altair image
    marks holding PNG data URIs (rendered offline by vl-convert)."""
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
        Image.fromarray(np.ascontiguousarray(img.astype(np.uint8))).resize((size, size), Image.NEAREST).save(
            buf, format="PNG"
        )
        url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
        lines = str(cap).split("\n")
        pic = (
            alt.Chart(pd.DataFrame({"x": [0.5], "y": [0.5], "url": [url]}))
            .mark_image(width=size, height=size)
            .encode(
                x=alt.X("x:Q", axis=None, scale=alt.Scale(domain=[0, 1])),
                y=alt.Y("y:Q", axis=None, scale=alt.Scale(domain=[0, 1])),
                url="url:N",
            )
            .properties(width=size, height=size)
        )
        text = (
            alt.Chart(pd.DataFrame({"line": lines, "row": range(len(lines))}))
            .mark_text(fontSize=9, align="center")
            .encode(y=alt.Y("row:O", axis=None), text="line:N")
            .properties(width=size + 40, height=12 * len(lines))
        )
        charts.append(alt.vconcat(pic, text, spacing=2))
    return alt.concat(*charts, columns=int(columns)).configure_view(stroke=None)


def tradeoff_chart(
    ours: pd.DataFrame, paper: pd.DataFrame | None = None, title: str = "Accuracy vs ECE"
) -> alt.LayerChart:
    """Each method's accuracy against its ECE (claims (i) and (iii) are about this trade-off): ours
    as filled points with +-2 s.e. bars where there are seeds, the paper's (``paper``, same columns,
    optional) as hollow squares. Columns: ``method``, ``ece``, ``accuracy`` and, for ours,
    ``ece_se`` and ``accuracy_se`` (NaN with one seed)."""
    check_columns(ours, method="method", ece="ece", accuracy="accuracy", ece_se="ece_se", accuracy_se="accuracy_se")
    data = ours.assign(_x0=ours["ece"] - 2 * ours["ece_se"].fillna(0), _x1=ours["ece"] + 2 * ours["ece_se"].fillna(0))
    x, y = (
        alt.X("ece:Q", title="ECE (lower is better)"),
        alt.Y("accuracy:Q", title="accuracy", scale=alt.Scale(zero=False)),
    )
    col = alt.Color("method:N", title="method")
    layers = [
        alt.Chart(data).mark_rule().encode(x="_x0:Q", x2="_x1:Q", y=y, color=col),
        alt.Chart(data)
        .mark_point(filled=True, size=70)
        .encode(x=x, y=y, color=col, tooltip=["method", "ece", "accuracy"]),
    ]
    if paper is not None:
        check_columns(paper, method="method", ece="ece", accuracy="accuracy")
        layers.append(
            alt.Chart(paper)
            .mark_square(filled=False, size=90, strokeWidth=2)
            .encode(x=x, y=y, color=col, tooltip=["method", "ece", "accuracy"])
        )
    return alt.layer(*layers).properties(title=title, width=360, height=240)
