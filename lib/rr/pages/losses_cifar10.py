"""The CIFAR-10 page of paper 4 (``notebooks/losses_cifar10.py``): Tables 1-2, 4, Figures 2-3 and
6. Its plan is seed 0 of every compared loss and confidence score, and the AU loss's (coverage, nu)
sweep; one run each, trained one at a time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lib.engine.plan import Item
from lib.page import Page
from lib.rr import cifar10, experiment, losses

__all__ = ["AU_SWEEP", "PAGE", "LossesCifar10Page"]

AU_SWEEP = "au (coverage / nu sweep)"
"""The method label of the AU sweep's runs (its default point is the table's AU run)."""


class LossesCifar10Page(Page):
    name = "losses_cifar10"
    paper = "rr"
    title = "Trained on CIFAR-10: Tables 1-2, 4, Figures 2-3 and 6"
    paper_numbers = losses.PAPER_CIFAR10
    rank = 3

    def runs(self, cfg: Mapping[str, Any], target: str | None = None) -> list[Item]:
        """Seed 0 of each loss of the tables and the confidence-score comparison, then the AU sweep's
        other points; id ``losses_cifar10/<loss>/k<coverage>/nu<nu>/s0``, its config
        :func:`lib.rr.experiment.loss_config`."""
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
                self.name,
                f"{self.name}/{c['loss']}/k{c['coverage']}/nu{c['nu']}/s0",
                0,
                int(cfg["epochs"]),
                label,
                config=c,
            )
            for c, label in runs
        ]

    def data(self, cfg: Mapping[str, Any], target: str | None = None) -> Any:
        from lib.nets.image_training import image_data

        self.check_target(target)
        return image_data(cfg)

    def run_one(self, item: Item, cfg: Mapping[str, Any], data: Any) -> dict[str, Any]:
        c = item.config
        return experiment.run_loss(c["loss"], cfg, data, seed=item.seed, coverage=c["coverage"], nu=c["nu"])

    def table(self, items: Sequence[Item], got: Mapping[str, dict[str, Any]]) -> Any:
        return cifar10.paper_scale_table(items, got)

    def claims(self, *args: Any, **kwargs: Any) -> Any:
        """The page's claims (:func:`lib.rr.cifar10.page_claims`)."""
        return cifar10.page_claims(*args, **kwargs)


PAGE = LossesCifar10Page()
