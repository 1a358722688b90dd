"""The cross-paper page (``notebooks/cross_paper.py``): the four papers' calibration methods on the
same logits."""

from __future__ import annotations

from typing import Any

from lib.cross_paper import claims
from lib.page import Page

__all__ = ["PAGE", "CrossPaperPage"]


class CrossPaperPage(Page):
    name = "cross_paper"
    paper = "cross_paper"
    title = "The four papers' calibration methods on the same logits"

    def claims(self, *args: Any, **kwargs: Any) -> Any:
        """The page's claims (:func:`lib.cross_paper.claims.cross_paper_claims`)."""
        return claims.cross_paper_claims(*args, **kwargs)


PAGE = CrossPaperPage()
