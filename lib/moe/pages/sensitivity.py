"""The sensitivity page (``notebooks/sensitivity.py``): paper 1's Figures E.7, E.8 and Table 5."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lib.engine.plan import Item
from lib.moe import paper as paper_text, sensitivity
from lib.moe.pages import MoEPage, moe_items

__all__ = ["PAGE", "SensitivityPage", "sensitivity_warmups"]


def sensitivity_warmups(cfg: Mapping[str, Any]) -> list[int]:
    """The warmups of the warmup sweep that fit the scale's epochs."""
    return [int(w) for w in cfg["warmups"] if int(w) <= int(cfg["epochs"])]


class SensitivityPage(MoEPage):
    name = "sensitivity"
    title = "Sensitivity to lambda and warmup: Figures E.7, E.8, Table 5"
    paper_numbers = paper_text.PAPER_TABLE5
    unit = "runs"
    rank = 1
    bench = "cifar10h"

    def runs(self, cfg: Mapping[str, Any], target: str | None = None) -> list[Item]:
        return moe_items(self.name, sensitivity.sweep_configs(cfg, sensitivity_warmups(cfg)))

    def data(self, cfg: Mapping[str, Any], target: str | None = None) -> Any:
        from lib.moe import experiment as exp

        return exp.cifar10h_data(cfg)

    def table(self, items: Sequence[Item], got: Mapping[str, dict[str, Any]]) -> Any:
        return sensitivity.paper_scale_sweep_table(items, got)

    def claims(self, *args: Any, **kwargs: Any) -> Any:
        """The page's claims (:func:`lib.moe.sensitivity.page_claims`)."""
        return sensitivity.page_claims(*args, **kwargs)


PAGE = SensitivityPage()
