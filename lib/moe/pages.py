"""Paper 1's pages: one :class:`~lib.page.Page` per notebook, read by the notebook, the queue and
the paper-scale tables.

The pages with paper-scale runs (CIFAR-10H, Sensitivity, CivilComments, PACS) share how they train:
a page's whole grid goes to the stacked engine at once (:func:`lib.moe.grid.train_stacked`), and
MoCaE is made post hoc from each Vanilla MoE run (its plan item is ``post_hoc``; the queue
publishes it inside the Vanilla record). Each page's plan, data, paper-scale table, claims and the
paper's numbers are named here once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from lib.engine.plan import Item
from lib.moe import cifar10h, civilcomments, claims, paper, sensitivity, tables, theory_claims
from lib.page import OnDone, Page

__all__ = ["PACS_TARGETS", "PAGES", "moe_items", "sensitivity_warmups"]

PACS_TARGETS: tuple[str, ...] = ("photo", "art_painting", "cartoon", "sketch")


def moe_items(page: str, configs: Sequence[Any], target: str | None = None) -> list[Item]:
    """Plan items of paper-1 ``configs`` (TrainConfigs), one per distinct run: id
    ``<page>[/<target>]/<method>/lam<lam>/w<warmup>/s<seed>``; MoCaE items are ``post_hoc``."""
    items: list[Item] = []
    seen: set[str] = set()
    for c in configs:
        tag = f"{page}{'/' + target if target else ''}/{c.method}/lam{c.lam}/w{c.warmup}/s{c.seed}"
        if tag not in seen:  # the sweeps of the sensitivity page share a point
            seen.add(tag)
            items.append(
                Item(page, tag, c.seed, c.epochs, c.method, config=c, target=target, post_hoc=c.method == "mocae")
            )
    return items


def _cifar10h_runs(cfg: Mapping[str, Any], target: str | None = None) -> list[Item]:
    from lib.moe import experiment as exp

    return moe_items("cifar10h", exp.train_configs(cfg))


def sensitivity_warmups(cfg: Mapping[str, Any]) -> list[int]:
    """The warmups of the warmup sweep that fit the scale's epochs."""
    return [int(w) for w in cfg["warmups"] if int(w) <= int(cfg["epochs"])]


def _sensitivity_runs(cfg: Mapping[str, Any], target: str | None = None) -> list[Item]:
    return moe_items("sensitivity", sensitivity.sweep_configs(cfg, sensitivity_warmups(cfg)))


def _civilcomments_runs(cfg: Mapping[str, Any], target: str | None = None) -> list[Item]:
    from lib.moe import experiment as exp

    pre = {"backbone": "text:" + exp.tiny_text_model()} if cfg["backbone"] == exp.TINY_TEXT else {}
    return moe_items("civilcomments", exp.train_configs(cfg, **pre))


def _pacs_runs(cfg: Mapping[str, Any], target: str | None = None) -> list[Item]:
    from lib.moe import experiment as exp
    from lib.moe.pacs import pacs_backbone

    if target is None:
        raise ValueError("target: the PACS page plans one held-out domain at a time")
    changes = {"progress": True, **pacs_backbone(cfg).train_changes()}  # a live line: the longest grid of the book
    return moe_items("pacs", exp.train_configs(cfg, **changes), target)


def _cifar10h_data(cfg: Mapping[str, Any], target: str | None = None) -> Any:
    from lib.moe import experiment as exp

    return exp.cifar10h_data(cfg)


def _civilcomments_data(cfg: Mapping[str, Any], target: str | None = None) -> Any:
    from lib.data.locate import DataNotFoundError

    data, why = civilcomments.load_data(cfg)
    if data is None:
        raise DataNotFoundError(why)
    return data


def _pacs_data(cfg: Mapping[str, Any], target: str | None = None) -> Any:
    from lib.moe.pacs import pacs_backbone, pacs_data

    return pacs_data(cfg, target, pacs_backbone(cfg))


def _run_one(item: Item, cfg: Mapping[str, Any], data: Any) -> dict[str, Any]:
    from lib.moe.train import train_run

    return train_run(item.config, data)


def _run_grid(
    items: Sequence[Item],
    data: Any,
    stack: int | None,
    on_done: OnDone,
    log: Callable[[str], None],
    max_stack: int | None = None,
) -> None:
    """The whole grid at once on the stacked engine (``max_stack`` caps the stack: text runs train
    one at a time)."""
    from lib.moe.grid import train_stacked

    if max_stack is not None:
        stack = min(stack or max_stack, max_stack)
    train_stacked(
        [it.config for it in items],
        data,
        stack=stack,
        log=log,
        on_done=lambda cfg, rec: on_done(next(it for it in items if it.config == cfg), rec),
    )


_TRAINED = dict(run_one=_run_one, run_grid=_run_grid, unit="seeds")

PAGES: tuple[Page, ...] = (
    Page(
        "routing_theory",
        "moe",
        "Routing and calibration under shift: sections 3-5, Appendices B-C",
        claims=theory_claims.theory_claims,
        paper_numbers=paper.PAPER_TABLE5,
    ),
    Page(
        "cifar10h",
        "moe",
        "CIFAR-10H: Table 1, Figures 3 and E.6",
        runs=_cifar10h_runs,
        data=_cifar10h_data,
        table=tables.paper_scale_table,
        claims=cifar10h.cifar10h_claims,
        paper_numbers=paper.PAPER_STATEMENTS["cifar10h"],
        rank=0,
        bench="cifar10h",
        **_TRAINED,
    ),
    Page(
        "sensitivity",
        "moe",
        "Sensitivity to lambda and warmup: Figures E.7, E.8, Table 5",
        runs=_sensitivity_runs,
        data=_cifar10h_data,
        table=sensitivity.paper_scale_sweep_table,
        claims=sensitivity.sensitivity_claims,
        paper_numbers=paper.PAPER_TABLE5,
        rank=1,
        bench="cifar10h",
        **{**_TRAINED, "unit": "runs"},
    ),
    Page(
        "civilcomments",
        "moe",
        "CivilComments: Table 3, Figure 2",
        runs=_civilcomments_runs,
        data=_civilcomments_data,
        table=tables.paper_scale_table,
        claims=civilcomments.civilcomments_claims,
        paper_numbers=paper.PAPER_STATEMENTS["civilcomments"],
        rank=4,
        needs=("transformers",),
        **{**_TRAINED, "run_grid": partial(_run_grid, max_stack=1)},
    ),
    Page(
        "pacs",
        "moe",
        "PACS: Table 2, Figures D.1 and E.5",
        runs=_pacs_runs,
        data=_pacs_data,
        table=tables.paper_scale_table,
        claims=claims.moe_claims,
        paper_numbers=paper.PAPER_PACS,
        targets=PACS_TARGETS,
        rank=5,
        needs=("timm", "PIL"),
        bench="pacs-224",
        **_TRAINED,
    ),
)
