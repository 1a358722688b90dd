"""The CivilComments page (``notebooks/civilcomments.py``): paper 1's Table 3 and Figure 2."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lib.engine.plan import Item
from lib.moe import civilcomments, paper as paper_text
from lib.moe.pages import MoEPage, moe_items

__all__ = ["PAGE", "CivilCommentsPage"]


class CivilCommentsPage(MoEPage):
    name = "civilcomments"
    title = "CivilComments: Table 3, Figure 2"
    paper_numbers = paper_text.PAPER_STATEMENTS["civilcomments"]
    rank = 4
    needs = ("transformers",)
    max_stack = 1

    def runs(self, cfg: Mapping[str, Any], target: str | None = None) -> list[Item]:
        from lib.moe import experiment as exp

        pre = {"backbone": "text:" + exp.tiny_text_model()} if cfg["backbone"] == exp.TINY_TEXT else {}
        return moe_items(self.name, exp.train_configs(cfg, **pre))

    def data(self, cfg: Mapping[str, Any], target: str | None = None) -> Any:
        from lib.data.locate import DataNotFoundError

        data, why = civilcomments.load_data(cfg)
        if data is None:
            raise DataNotFoundError(why)
        return data

    def claims(self, *args: Any, **kwargs: Any) -> Any:
        """The page's claims (:func:`lib.moe.civilcomments.civilcomments_claims`)."""
        return civilcomments.civilcomments_claims(*args, **kwargs)


PAGE = CivilCommentsPage()
