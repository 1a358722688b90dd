"""Paper 2's pages, one module per notebook (``lib/l2d/pages/<notebook>.py``), and their base
:class:`L2DPage`: its plan is every (experiment, value, surrogate, seed) point of
:func:`lib.l2d.experiment.grid`, one run each. The pages' tables and claims are plain functions
(each page module's, and :func:`lib.l2d.results.gated_claims`) that the notebook calls on the runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from lib.engine.plan import Item
from lib.engine.cache import training
from lib.l2d.experiment import grid
from lib.l2d.results import result_row, summarize
from lib.page import Page


class L2DPage(Page):
    """A paper-2 page: one run per grid point of its ``experiments`` (the point in ``extra["point"]``)."""

    experiments: tuple[str, ...] = ()

    def config(self, point: Mapping[str, Any], cfg: Mapping[str, Any]) -> Any:
        """What determines one run besides its data (the grid point by default)."""
        return dict(point)

    def runs(self, cfg: Mapping[str, Any], target: str | None = None) -> list[Item]:
        """One run per grid point (:func:`lib.l2d.experiment.grid`)."""
        tail = "{experiment}/{value}/{surrogate}/s{seed}".format
        return [
            self.item(
                tail(**p), p["seed"], cfg["epochs"], p["surrogate"], config=self.config(p, cfg), extra={"point": p}
            )
            for p in grid(cfg, self.experiments)
        ]

    def run(self, cfg: Mapping[str, Any], data: Any = None, train: bool = True) -> pd.DataFrame:
        """Every planned run (none trained unless ``train``), one row each: the point and ``RESULT_COLUMNS``."""
        rows: list[dict[str, Any]] = []
        with training(train):
            self.train(
                self.runs(cfg), cfg, data, on_done=lambda it, rec: rows.append(result_row(it.extra["point"], rec))
            )
        return pd.DataFrame(rows)

    def table(self, items: Sequence[Item], got: Mapping[str, dict[str, Any]]) -> pd.DataFrame | None:
        """The sweeps' means over the published records ``got`` of the planned ``items``, with the runs
        published of those planned."""
        rows = [result_row(it.extra["point"], got[it.id]) for it in items if it.id in got]
        if not rows:
            return None
        table = summarize(pd.DataFrame(rows), metrics=["ece", "system_accuracy", "ece_random_expert"])
        planned = pd.DataFrame([it.extra["point"] for it in items]).groupby(["experiment", "value", "surrogate"]).size()
        table["coverage"] = [
            f"{int(n)} of {int(planned.loc[(e, v, s)])} runs"
            for e, v, s, n in zip(table["experiment"], table["value"], table["surrogate"], table["seeds"])
        ]
        return table[["experiment", "value", "surrogate", "ece", "system_accuracy", "ece_random_expert", "coverage"]]
