"""The cross-paper chapter's page (:class:`~lib.page.Page`): the four papers' methods on the same logits."""

from __future__ import annotations

from lib.cross_paper import claims
from lib.page import Page

__all__ = ["PAGES"]

PAGES: tuple[Page, ...] = (
    Page(
        "cross_paper",
        "cross_paper",
        "The four papers' calibration methods on the same logits",
        claims=claims.cross_paper_claims,
    ),
)
