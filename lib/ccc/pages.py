"""Paper 3's pages: one :class:`~lib.page.Page` per notebook (no paper-scale GPU runs: the paper's
models' logits and predictions are loaded, not trained)."""

from __future__ import annotations

from lib.ccc import cascading, claims
from lib.page import Page

__all__ = ["PAGES"]

PAGES: tuple[Page, ...] = (
    Page(
        "calibration",
        "ccc",
        "Calibration of one model: Section 3, Figure 1",
        claims=claims.calibration_claims,
        paper_numbers={"mmlu": claims.PAPER_ECE_MMLU, "vision": claims.PAPER_ECE_VISION},
    ),
    Page(
        "cascading",
        "ccc",
        "Cascades by calibrated advantage: Sections 3.2-3.4 (APGR)",
        claims=claims.cascading_claims,
        paper_numbers={
            "cc": claims.PAPER_APGR_CC,
            "by_calibrator": cascading.PAPER_APGR_BY_CALIBRATOR,
            "by_bins": cascading.PAPER_APGR_BY_BINS,
            "mf_router": cascading.PAPER_APGR_MF_ROUTER,
        },
    ),
    Page(
        "same_size",
        "ccc",
        "Routing between models of the same size: Section 3.3",
        claims=claims.same_size_claims,
        paper_numbers=claims.PAPER_SAME_SIZE,
    ),
    Page(
        "cleaning",
        "ccc",
        "Label cleaning with two models: Section 3.5",
        claims=claims.cleaning_claims,
        paper_numbers={"two_model": claims.PAPER_CLEANING_PRECISION, "confident_learning": claims.PAPER_CL_PRECISION},
    ),
)
