"""Paper 4's pages: one :class:`~lib.page.Page` per notebook, read by the notebook, the queue and
the paper-scale tables. The CIFAR-10 page's plan is seed 0 of every compared loss and confidence
score, and the AU loss's (coverage, nu) sweep; one run each, trained one at a time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lib.engine.plan import Item
from lib.page import Page, image_data
from lib.rr import cifar10, experiment, losses, released

__all__ = ["AU_SWEEP", "PAGES", "cifar10_runs"]

AU_SWEEP = "au (coverage / nu sweep)"
"""The method label of the AU sweep's runs (its default point is the table's AU run)."""


def cifar10_runs(cfg: Mapping[str, Any], target: str | None = None) -> list[Item]:
    """Every run of the CIFAR-10 page at the settings ``cfg``: seed 0 of each loss of the tables and
    the confidence-score comparison, then the AU sweep's other points; id
    ``losses_cifar10/<loss>/k<coverage>/nu<nu>/s0``, its config :func:`lib.rr.experiment.loss_config`."""
    runs = [
        (experiment.loss_config(name, cfg), name)
        for name in dict.fromkeys([*experiment.TABLE_LOSSES, *experiment.CSF_LOSSES])
    ]
    runs += [
        (experiment.loss_config("au", cfg, coverage=float(k), nu=float(v)), AU_SWEEP)
        for k in cfg["coverages"]
        for v in cfg["nus"]
        if (float(k), float(v)) != (float(cfg["coverage"]), float(cfg["nu"]))
    ]
    return [
        Item(
            "losses_cifar10",
            f"losses_cifar10/{c['loss']}/k{c['coverage']}/nu{c['nu']}/s0",
            0,
            int(cfg["epochs"]),
            label,
            config=c,
        )
        for c, label in runs
    ]


def _run_one(item: Item, cfg: Mapping[str, Any], data: Any) -> dict[str, Any]:
    c = item.config
    return experiment.run_loss(c["loss"], cfg, data, seed=item.seed, coverage=c["coverage"], nu=c["nu"])


PAGES: tuple[Page, ...] = (
    Page(
        "losses_released_logits",
        "rr",
        "The released ResNet-50 logits: Tables 1-2 (as released), gamma selection",
        claims=released.page_claims,
        paper_numbers=experiment.PAPER_RESNET50,
    ),
    Page(
        "losses_cifar10",
        "rr",
        "Trained on CIFAR-10: Tables 1-2, 4, Figures 2-3 and 6",
        runs=cifar10_runs,
        data=image_data,
        run_one=_run_one,
        table=cifar10.paper_scale_table,
        claims=cifar10.page_claims,
        paper_numbers=losses.PAPER_CIFAR10,
        rank=3,
    ),
)
