"""Paper 1's pages, one module per notebook (``lib/moe/pages/<notebook>.py``), and what the pages
with trained runs share: :func:`moe_items` (a grid of configs as plan items) and :class:`MoEPage`
(a whole grid trained at once on the stacked engine, :func:`lib.moe.grid.train_stacked`, with
MoCaE made post hoc from each Vanilla MoE run: its plan item is ``post_hoc`` and the queue publishes
it inside the Vanilla record)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lib.engine.plan import Item
from lib.page import OnDone, Page

PACS_TARGETS: tuple[str, ...] = ("photo", "art_painting", "cartoon", "sketch")


def moe_items(page: str, configs: Sequence[Any], target: str | None = None) -> list[Item]:
    """Plan items of paper-1 ``configs`` (TrainConfigs), one per distinct run: id
    ``<page>[/<target>]/<method>/lam<lam>/w<warmup>/s<seed>``; MoCaE items are ``post_hoc``."""
    items: dict[str, Item] = {}
    for c in configs:
        tag = f"{page}{'/' + target if target else ''}/{c.method}/lam{c.lam}/w{c.warmup}/s{c.seed}"
        if tag not in items:  # the sweeps of the sensitivity page share a point
            items[tag] = Item(
                page, tag, c.seed, c.epochs, c.method, config=c, target=target, post_hoc=c.method == "mocae"
            )
    return list(items.values())


class MoEPage(Page):
    """A paper-1 page with trained runs: its plan, by default every method and seed of
    :func:`lib.moe.experiment.train_configs`; one run through :func:`lib.moe.train.train_run`, a grid
    through the stacked engine (text runs train one at a time)."""

    paper = "moe"
    unit = "seeds"
    packed = True

    def runs(self, cfg: Mapping[str, Any], target: str | None = None) -> list[Item]:
        from lib.moe.experiment import train_configs

        return moe_items(self.name, train_configs(cfg))

    def run_one(self, item: Item, cfg: Mapping[str, Any], data: Any) -> dict[str, Any]:
        from lib.moe.train import train_run

        return train_run(item.config, data)

    def train(
        self,
        items: Sequence[Item],
        cfg: Mapping[str, Any],
        data: Any,
        on_done: OnDone = lambda it, rec: None,
        stack: int | None = None,
        log: Callable[[str], None] = print,
        compile: bool = False,
    ) -> None:
        """The whole grid at once on the packed engine: packs of at most ``stack`` runs (``None``: the
        engine's choice), ``log`` for its lines, ``compile``: packs under ``torch.compile``."""
        from lib.moe.grid import train_stacked

        train_stacked(
            [it.config for it in items],
            data,
            stack=stack,
            log=log,
            compile=compile,
            on_done=lambda c, rec: on_done(next(it for it in items if it.config == c), rec),
        )

    def table(self, items: Sequence[Item], got: Mapping[str, dict[str, Any]]) -> Any:
        """The paper's table of the published runs, the paper's surviving values beside ours."""
        from lib.moe import tables
        from lib.moe.paper import PAPER_STATEMENTS

        return tables.paper_scale_table(items, got, statements=PAPER_STATEMENTS.get(self.name, ()))
