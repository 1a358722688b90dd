"""Paper 2's figures (Figures 1-3): the mixture-of-Gaussians data and the panels of an L2D study,
altair charts like :mod:`lib.plots`'s."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from lib.plots import BOOK_WIDTH, line_chart
from lib.validation import ArrayLike


def gaussian_scatter(
    x: ArrayLike, cluster: ArrayLike, means: ArrayLike, title: str = "Mixture of Gaussians"
) -> alt.LayerChart:
    """The 2-D mixture-of-Gaussians data coloured by cluster (numbered 1..4 as in the paper), with
    the cluster means as crosses (L2D paper Figure 3)."""
    pts = np.asarray(x, dtype=float)
    cl = np.asarray(cluster).astype(int)
    if pts.ndim != 2 or pts.shape[1] != 2:
        raise ValueError(f"x: expected (N, 2) points, got shape {pts.shape}")
    if len(cl) != len(pts):
        raise ValueError("cluster: needs one id per point")
    df = pd.DataFrame({"x1": pts[:, 0], "x2": pts[:, 1], "cluster": [f"cluster {c + 1}" for c in cl]})
    dots = (
        alt.Chart(df)
        .mark_circle(size=12, opacity=0.5)
        .encode(x=alt.X("x1:Q", title="x₁"), y=alt.Y("x2:Q", title="x₂"), color=alt.Color("cluster:N", title="cluster"))
    )
    m = np.asarray(means, dtype=float)
    mdf = pd.DataFrame({"x1": m[:, 0], "x2": m[:, 1], "cluster": [f"cluster {c + 1}" for c in range(len(m))]})
    crosses = (
        alt.Chart(mdf)
        .mark_point(shape="cross", size=200, filled=True, color="black")
        .encode(x="x1:Q", y="x2:Q", tooltip=["cluster"])
    )
    return alt.layer(dots, crosses).properties(title=title, width=320, height=280)


def l2d_panels(summary: pd.DataFrame, panels: Sequence[tuple[str, str, str, str]]) -> alt.HConcatChart:
    """Side-by-side panels (L2D paper Figures 1 and 2), each ``(experiment, metric, x title, y title)``:
    ``metric`` against the sweep ``value`` per surrogate with +-1 SE bands, as wide as fits
    ``lib.plots.BOOK_WIDTH``."""
    width = max(140, (BOOK_WIDTH - 110 - 75 * len(panels)) // max(1, len(panels)))
    charts = []
    for experiment, metric, x_title, y_title in panels:
        sub = summary[summary["experiment"] == experiment]
        if sub.empty:
            raise ValueError(f"summary: no rows for experiment {experiment!r}")
        titles = {"x_title": x_title, "y_title": y_title, "width": width, "height": 200}
        charts.append(line_chart(sub, "value", metric, color="surrogate", yerr=f"{metric}_se", **titles))
    return alt.hconcat(*charts)
