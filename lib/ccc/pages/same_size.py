"""The same size page (``notebooks/same_size.py``): paper 3, Routing between models of the same size: Section 3.3."""

from __future__ import annotations

from typing import Any

from lib.ccc import claims
from lib.page import Page

__all__ = ["PAGE", "SameSizePage"]


class SameSizePage(Page):
    name = "same_size"
    paper = "ccc"
    title = "Routing between models of the same size: Section 3.3"
    paper_numbers = claims.PAPER_SAME_SIZE

    def claims(self, *args: Any, **kwargs: Any) -> Any:
        """The page's claims (:func:`lib.ccc.claims.same_size_claims`)."""
        return claims.same_size_claims(*args, **kwargs)


PAGE = SameSizePage()
