"""The calibration page (``notebooks/calibration.py``): paper 3, Calibration of one model: Section 3, Figure 1."""

from __future__ import annotations

from typing import Any

from lib.ccc import claims
from lib.page import Page

__all__ = ["PAGE", "CalibrationPage"]


class CalibrationPage(Page):
    name = "calibration"
    paper = "ccc"
    title = "Calibration of one model: Section 3, Figure 1"
    paper_numbers = {"mmlu": claims.PAPER_ECE_MMLU, "vision": claims.PAPER_ECE_VISION}

    def claims(self, *args: Any, **kwargs: Any) -> Any:
        """The page's claims (:func:`lib.ccc.claims.calibration_claims`)."""
        return claims.calibration_claims(*args, **kwargs)


PAGE = CalibrationPage()
