"""The CIFAR-10 page of paper 2 (``notebooks/l2d_cifar10.py``): Figure 1, bottom row; Figure 2.
Its plan is every (experiment, value, surrogate, seed) point of :func:`lib.l2d.experiment.grid`, one
WRN run each, trained one at a time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lib.engine.plan import Item
from lib.l2d import claims, results
from lib.page import Page

__all__ = ["PAGE", "L2DCifar10Page"]


class L2DCifar10Page(Page):
    name = "l2d_cifar10"
    paper = "l2d"
    title = "CIFAR-10 with synthetic experts: Figure 1, bottom row; Figure 2"
    paper_numbers = claims.PAPER_CIFAR
    rank = 2

    def runs(self, cfg: Mapping[str, Any], target: str | None = None) -> list[Item]:
        """One run per grid point, id ``l2d_cifar10/<experiment>/<value>/<surrogate>/s<seed>``, its
        point in ``extra["point"]``."""
        from lib.l2d.cifar10 import cifar_config
        from lib.l2d.experiment import EXPERIMENTS, grid

        return [
            Item(
                self.name,
                f"{self.name}/{p['experiment']}/{p['value']}/{p['surrogate']}/s{p['seed']}",
                int(p["seed"]),
                int(cfg["epochs"]),
                p["surrogate"],
                config=cifar_config(**p, cfg=cfg),
                extra={"point": p},
            )
            for p in grid(cfg, EXPERIMENTS)
        ]

    def data(self, cfg: Mapping[str, Any], target: str | None = None) -> Any:
        from lib.nets.image_training import image_data

        self.check_target(target)
        return image_data(cfg)

    def run_one(self, item: Item, cfg: Mapping[str, Any], data: Any) -> dict[str, Any]:
        from lib.l2d.cifar10 import run_cifar

        p = item.extra["point"]
        return run_cifar(p["experiment"], p["value"], p["surrogate"], int(p["seed"]), cfg, data)

    def table(self, items: Sequence[Item], got: Mapping[str, dict[str, Any]]) -> Any:
        return results.paper_scale_table(items, got)

    def claims(self, *args: Any, **kwargs: Any) -> Any:
        """The page's claims (:func:`lib.l2d.claims.cifar_claims`)."""
        return claims.cifar_claims(*args, **kwargs)


PAGE = L2DCifar10Page()
