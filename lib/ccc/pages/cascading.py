"""The cascading page (``notebooks/cascading.py``): paper 3, Cascades by calibrated advantage: Sections 3.2-3.4 (APGR)."""

from __future__ import annotations

from typing import Any

from lib.ccc import cascading, claims
from lib.page import Page

__all__ = ["PAGE", "CascadingPage"]


class CascadingPage(Page):
    name = "cascading"
    paper = "ccc"
    title = "Cascades by calibrated advantage: Sections 3.2-3.4 (APGR)"
    paper_numbers = {
        "cc": claims.PAPER_APGR_CC,
        "by_calibrator": cascading.PAPER_APGR_BY_CALIBRATOR,
        "by_bins": cascading.PAPER_APGR_BY_BINS,
        "mf_router": cascading.PAPER_APGR_MF_ROUTER,
    }

    def claims(self, *args: Any, **kwargs: Any) -> Any:
        """The page's claims (:func:`lib.ccc.claims.cascading_claims`)."""
        return claims.cascading_claims(*args, **kwargs)


PAGE = CascadingPage()
