"""The released-logits page (``notebooks/losses_released_logits.py``): paper 4's Tables 1-2 from
the released ResNet-50 logits, and the gamma selection."""

from __future__ import annotations

from typing import Any

from lib.page import Page
from lib.rr import experiment, released

__all__ = ["PAGE", "ReleasedLogitsPage"]


class ReleasedLogitsPage(Page):
    name = "losses_released_logits"
    paper = "rr"
    title = "The released ResNet-50 logits: Tables 1-2 (as released), gamma selection"
    paper_numbers = experiment.PAPER_RESNET50

    def claims(self, *args: Any, **kwargs: Any) -> Any:
        """The page's claims (:func:`lib.rr.released.page_claims`)."""
        return released.page_claims(*args, **kwargs)


PAGE = ReleasedLogitsPage()
