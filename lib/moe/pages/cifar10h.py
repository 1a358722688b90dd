"""The CIFAR-10H page (``notebooks/cifar10h.py``): paper 1's Table 1, Figures 3 and E.6."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lib.engine.plan import Item
from lib.moe import cifar10h, paper as paper_text
from lib.moe.pages import MoEPage, moe_items

__all__ = ["PAGE", "Cifar10hPage"]


class Cifar10hPage(MoEPage):
    name = "cifar10h"
    title = "CIFAR-10H: Table 1, Figures 3 and E.6"
    paper_numbers = paper_text.PAPER_STATEMENTS["cifar10h"]
    rank = 0
    bench = "cifar10h"

    def runs(self, cfg: Mapping[str, Any], target: str | None = None) -> list[Item]:
        from lib.moe import experiment as exp

        return moe_items(self.name, exp.train_configs(cfg))

    def data(self, cfg: Mapping[str, Any], target: str | None = None) -> Any:
        from lib.moe import experiment as exp

        return exp.cifar10h_data(cfg)

    def claims(self, *args: Any, **kwargs: Any) -> Any:
        """The page's claims (:func:`lib.moe.cifar10h.cifar10h_claims`)."""
        return cifar10h.cifar10h_claims(*args, **kwargs)


PAGE = Cifar10hPage()
