"""Paper 2's pages, one module per notebook (``lib/l2d/pages/<notebook>.py``), and their base
:class:`L2DPage`: its plan is every (experiment, value, surrogate, seed) point of
:func:`lib.l2d.experiment.grid`, one run each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from lib import report
from lib.engine.plan import Item
from lib.engine.cache import training
from lib.l2d import surrogates
from lib.l2d.experiment import grid
from lib.l2d.results import l2d_claims, result_row, summarize
from lib.page import Page


class L2DPage(Page):
    """A paper-2 page: one run per grid point of its ``experiments`` (the point in ``extra["point"]``)."""

    experiments: tuple[str, ...] = ()

    def config(self, point: Mapping[str, Any], cfg: Mapping[str, Any]) -> Any:
        """What determines one run besides its data (the grid point by default)."""
        return dict(point)

    def runs(self, cfg: Mapping[str, Any], target: str | None = None) -> list[Item]:
        """One run per grid point (:func:`lib.l2d.experiment.grid`)."""
        tail = "{experiment}/{value}/{surrogate}/s{seed}"
        return [
            self.item(
                tail.format(**p),
                p["seed"],
                cfg["epochs"],
                p["surrogate"],
                config=self.config(p, cfg),
                extra={"point": p},
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

    @staticmethod
    def gated_claims(runs: pd.DataFrame, reference: float, labels: Any) -> tuple[list[dict[str, Any]], str]:
        """:func:`~lib.l2d.results.l2d_claims` gated by the accuracy floor (:func:`lib.report.gate_claims`)
        on the classifier's mean accuracy against ``reference``: the rows and the floor's sentence."""
        accuracy = float(runs["classifier_accuracy"].mean())
        return report.gate_claims(l2d_claims(runs), accuracy, reference, report.chance_accuracy(labels))

    @staticmethod
    def method_table() -> pd.DataFrame:
        """Both surrogates and both correctness estimates (:mod:`lib.l2d.surrogates`) on two examples
        with K = J = 2 whose logits are log p, each row followed by its one-line closed form (phi_j:
        log(1 + 1/p_perp_j) if expert j is right, log(1 + p_perp_j) if not)."""
        p = torch.tensor([[0.05, 0.05, 0.45, 0.45], [0.6, 0.2, 0.1, 0.1]])  # K = J = 2
        g, y = p.log(), torch.tensor([0, 0])
        right = torch.tensor([[True, False], [False, False]])  # 1[m_j = y]
        phi = torch.where(right, 1 / p[:, 2:], p[:, 2:]).log1p().sum(1)  # sum_j phi_j
        rows = {
            "softmax loss": surrogates.softmax_l2d_loss(g, y, right, reduction="none"),
            "  -log p_y - sum_j 1[m_j=y] log p_perp_j": -(g[:, 0] + (right * g[:, 2:]).sum(1)),
            "OvA loss": surrogates.ova_l2d_loss(g, y, right, reduction="none"),
            "  log(1+1/p_y) + log(1+p_2) + sum_j phi_j": (1 / p[:, 0]).log1p() + p[:, 1].log1p() + phi,
            "softmax estimate, expert 1": surrogates.expert_correctness_softmax(g, 2)[:, 0],
            "  p_perp_1 / (1 - p_perp_1 - p_perp_2)": p[:, 2] / (1 - p[:, 2:].sum(1)),
            "OvA estimate, expert 1": surrogates.expert_correctness_ova(g, 2)[:, 0],
            "  sigmoid(log p_perp_1) = p_perp_1 / (1 + p_perp_1)": p[:, 2] / (1 + p[:, 2]),
        }
        return pd.DataFrame({k: v.detach().numpy() for k, v in rows.items()}, index=["example 1", "example 2"]).T.round(
            4
        )
