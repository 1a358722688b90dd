"""The PACS page (``notebooks/pacs.py``): paper 1's Table 2, Figures D.1 and E.5, one held-out
domain (``target``) at a time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lib.engine.plan import Item
from lib.moe import paper as paper_text
from lib.moe.pages import PACS_TARGETS, MoEPage, moe_items

__all__ = ["PAGE", "PacsPage"]


class PacsPage(MoEPage):
    name = "pacs"
    title = "PACS: Table 2, Figures D.1 and E.5"
    paper_numbers = paper_text.PAPER_PACS
    targets = PACS_TARGETS
    rank = 5
    needs = ("timm", "PIL")
    bench = "pacs-224"

    def runs(self, cfg: Mapping[str, Any], target: str | None = None) -> list[Item]:
        from lib.moe import experiment as exp
        from lib.moe.pacs import pacs_backbone

        if target is None:
            raise ValueError("target: the PACS page plans one held-out domain at a time")
        changes = {"progress": True, **pacs_backbone(cfg).train_changes()}  # a live line: the book's longest grid
        return moe_items(self.name, exp.train_configs(cfg, **changes), target)

    def data(self, cfg: Mapping[str, Any], target: str | None = None) -> Any:
        from lib.moe.pacs import pacs_backbone, pacs_data

        return pacs_data(cfg, target, pacs_backbone(cfg))

    def claims(self, *args: Any, **kwargs: Any) -> Any:
        """The page's claims (:func:`lib.moe.pacs.pacs_claims`)."""
        from lib.moe.pacs import pacs_claims

        return pacs_claims(*args, **kwargs)


PAGE = PacsPage()
