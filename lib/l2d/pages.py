"""Paper 2's pages: one :class:`~lib.page.Page` per notebook, read by the notebook, the queue and
the paper-scale tables. The CIFAR-10 page's plan is every (experiment, value, surrogate, seed)
point of :func:`lib.l2d.experiment.grid`, one WRN run each, trained one at a time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lib.engine.plan import Item
from lib.l2d import claims, results
from lib.page import Page, image_data

__all__ = ["PAGES", "cifar10_runs"]


def cifar10_runs(cfg: Mapping[str, Any], target: str | None = None) -> list[Item]:
    """Every run of the CIFAR-10 study at the settings ``cfg``: one per grid point, id
    ``l2d_cifar10/<experiment>/<value>/<surrogate>/s<seed>``, its point in ``extra["point"]``."""
    from lib.l2d.cifar10 import cifar_config
    from lib.l2d.experiment import EXPERIMENTS, grid

    return [
        Item(
            "l2d_cifar10",
            f"l2d_cifar10/{p['experiment']}/{p['value']}/{p['surrogate']}/s{p['seed']}",
            int(p["seed"]),
            int(cfg["epochs"]),
            p["surrogate"],
            config=cifar_config(**p, cfg=cfg),
            extra={"point": p},
        )
        for p in grid(cfg, EXPERIMENTS)
    ]


def _run_one(item: Item, cfg: Mapping[str, Any], data: Any) -> dict[str, Any]:
    from lib.l2d.cifar10 import run_cifar

    p = item.extra["point"]
    return run_cifar(p["experiment"], p["value"], p["surrogate"], int(p["seed"]), cfg, data)


PAGES: tuple[Page, ...] = (
    Page("l2d_gaussians", "l2d", "Mixture of Gaussians: Figure 1, top row", claims=claims.gaussians_claims),
    Page(
        "l2d_cifar10",
        "l2d",
        "CIFAR-10 with synthetic experts: Figure 1, bottom row; Figure 2",
        runs=cifar10_runs,
        data=image_data,
        run_one=_run_one,
        table=results.paper_scale_table,
        claims=claims.cifar_claims,
        paper_numbers=claims.PAPER_CIFAR,
        rank=2,
    ),
)
