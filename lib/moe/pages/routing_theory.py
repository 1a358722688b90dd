"""The routing-theory page (``notebooks/routing_theory.py``): paper 1's sections 3-5 and Appendices
B-C, checked on simulated populations and closed forms (no trained runs)."""

from __future__ import annotations

from typing import Any

from lib.moe import paper as paper_text, theory_claims
from lib.page import Page

__all__ = ["PAGE", "RoutingTheoryPage"]


class RoutingTheoryPage(Page):
    name = "routing_theory"
    paper = "moe"
    title = "Routing and calibration under shift: sections 3-5, Appendices B-C"
    paper_numbers = paper_text.PAPER_TABLE5

    def claims(self, *args: Any, **kwargs: Any) -> Any:
        """The page's claims (:func:`lib.moe.theory_claims.theory_claims`)."""
        return theory_claims.theory_claims(*args, **kwargs)


PAGE = RoutingTheoryPage()
