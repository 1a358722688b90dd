"""The mixture-of-Gaussians page (``notebooks/l2d_gaussians.py``): paper 2's Figure 1, top row."""

from __future__ import annotations

from typing import Any

from lib.l2d import claims
from lib.page import Page

__all__ = ["PAGE", "L2DGaussiansPage"]


class L2DGaussiansPage(Page):
    name = "l2d_gaussians"
    paper = "l2d"
    title = "Mixture of Gaussians: Figure 1, top row"

    def claims(self, *args: Any, **kwargs: Any) -> Any:
        """The page's claims (:func:`lib.l2d.claims.gaussians_claims`)."""
        return claims.gaussians_claims(*args, **kwargs)


PAGE = L2DGaussiansPage()
