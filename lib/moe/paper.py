"""What paper 1 says about the numbers its pages report, quoted or checked, with ours beside it.

Paper: "Calibrated mixture-of-experts under distribution shift" (paper 1).
The text extraction of the paper dropped the digits of Tables 1 and 3 and of the sentences quoting
them. So for each quantity the CIFAR-10H and CivilComments pages report, ``PAPER_STATEMENTS`` holds
the paper's exact sentence (with "[…]" where a number was lost) and the paper's value where it
survived, and :func:`beside_paper_statements` puts our number from the run next to it. Two tables
survived whole, each built by its page: PACS Table 2 (``lib.moe.pages.pacs.PAPER_TABLE2``, with its
standard errors) and the lambda sensitivity of Appendix D.6, Table 5
(``lib.moe.pages.sensitivity.PAPER_TABLE5``). The numbers and sentences are data, ``lib/moe/paper.toml``
(a section per page or table, each naming where in the paper it comes from), read once here (:data:`PAPER`)
and built into these objects, the pages' and the claims'. Nothing there is a number we typed in as the
paper's unless the paper's text still carries it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from lib.config import paper_numbers
from lib.validation import check_choice

LOST = "lost in the text extraction"

#: ``lib/moe/paper.toml`` as read, once (:func:`lib.config.paper_numbers`): the data the objects below and the pages' are built from.
PAPER: dict[str, Any] = paper_numbers("moe")

#: Where a digit lost in our text survives in another public text of the same paper (``paper.toml``, ``[sources]``).
OTHER_TEXT: str = PAPER["sources"]["other_text"]
OURS_TEXT: str = PAPER["sources"]["ours_text"]

Statement = tuple[str, str, str, str, float | None, str]  # quantity, method, subset, metric, paper value, sentence

#: Per page, each quantity the paper states: one row per method, its value where the digits survived.
PAPER_STATEMENTS: dict[str, list[Statement]] = {
    page: [
        (s["quantity"], m, s["subset"], s["metric"], s.get("value"), PAPER["sentences"][s["sentence"]])
        for s in statements
        for m in s["methods"]
    ]
    for page, statements in PAPER["statements"].items()
}

#: The paper's best CivilComments accuracy (Robust Filtered, §6.3; source OTHER_TEXT): the accuracy the
#: CivilComments page's floor is measured against (lib.report.gate_claims).
PAPER_CIVIL_BEST_ACCURACY: float = next(
    v for _, m, _, metric, v, _ in PAPER_STATEMENTS["civilcomments"] if (m, metric) == ("robust_filtered", "accuracy")
)

#: Counts of the data that survived the extraction (App. D.2 / D.5), beside the data a page used.
PAPER_COUNTS: dict[str, tuple[str, float, str]] = {
    name: (c["what"], c["count"] / c["total"], c["sentence"]) for name, c in PAPER["counts"].items()
}


def beside_paper_statements(summary: pd.DataFrame, page: str, labels: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per quantity the paper states for ``page`` ("cifar10h" or "civilcomments"): the
    paper's value (or "lost in the text extraction"), its exact sentence as our text has it, where
    the value was read (``OTHER_TEXT`` for the digits found in another public text of the paper), and
    ours (mean over seeds from ``summary``, :func:`lib.moe.tables.summarize`; "not run"
    when the method is absent)."""
    check_choice(page, tuple(PAPER_STATEMENTS), "page")
    if not isinstance(summary, pd.DataFrame) or not {"method", "subset"} <= set(summary.columns):
        raise ValueError("summary: expected the DataFrame of lib.moe.tables.summarize")
    labels = labels or {}
    rows: list[dict[str, Any]] = []
    for quantity, method, subset, metric, value, sentence in PAPER_STATEMENTS[page]:
        sel = summary[(summary["method"] == method) & (summary["subset"] == subset)]
        ours = float(sel[metric].iloc[0]) if len(sel) and metric in sel else np.nan
        rows.append(
            {
                "quantity": quantity,
                "method": labels.get(method, method),
                "paper": LOST if value is None else f"{value:.3f}",
                "ours": "not run" if not np.isfinite(ours) else f"{ours:.3f}",
                "paper's sentence": sentence,
                "source of the paper's value": "—"
                if value is None
                else (OTHER_TEXT if sentence == PAPER["sentences"]["S141"] else OURS_TEXT),
            }
        )
    return pd.DataFrame(rows)
