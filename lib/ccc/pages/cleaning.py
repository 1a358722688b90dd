"""The cleaning page (``notebooks/cleaning.py``): paper 3, Label cleaning with two models: Section 3.5."""

from __future__ import annotations

from typing import Any

from lib.ccc import claims
from lib.page import Page

__all__ = ["PAGE", "CleaningPage"]


class CleaningPage(Page):
    name = "cleaning"
    paper = "ccc"
    title = "Label cleaning with two models: Section 3.5"
    paper_numbers = {"two_model": claims.PAPER_CLEANING_PRECISION, "confident_learning": claims.PAPER_CL_PRECISION}

    def claims(self, *args: Any, **kwargs: Any) -> Any:
        """The page's claims (:func:`lib.ccc.claims.cleaning_claims`)."""
        return claims.cleaning_claims(*args, **kwargs)


PAGE = CleaningPage()
