"""lib.ledger: the claims ledger is built from what pages published, verdicts side by side, and
numerical checks apart; every "why" line follows from the verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from lib.ledger import ledger_markdown, ledger_rows, why
from lib.report import NOT_TESTABLE

ROWS = [
    {"claim": "A beats B", "paper": "yes", "ours": "+.05", "verdict": "held", "paper_own": "held"},
    {
        "claim": "C beats D",
        "paper": "yes",
        "ours": "-.01",
        "verdict": "inconclusive at this scale",
        "paper_own": "held",
    },  # fmt: skip
    {"claim": "E beats F", "paper": "yes", "ours": "+.2", "verdict": "did not hold", "paper_own": NOT_TESTABLE},
    {"claim": "tilt -> mean", "paper": "", "ours": "1e-9", "verdict": "held", "kind": "numerical check"},
]


def test_rows_keep_each_published_claim_with_its_three_verdicts() -> None:
    rows = ledger_rows(
        ["p", "q"],
        lambda n: {"claims": ROWS} if n == "p" else None,
        paper_published=lambda n: {"claims": [{"claim": "A beats B", "verdict": "did not hold"}]},
        coverage=lambda n: "3 of 9 runs" if n == "p" else "",
    )
    assert [r["claim"] for r in rows] == [*(r["claim"] for r in ROWS), "(page not executed in this build)"]
    first = rows[0]
    assert (first["paper_own"], first["ours"], first["paper_scale"]) == ("held", "held", "did not hold (3 of 9 runs)")
    assert rows[1]["paper_scale"] == "no paper-scale build yet (3 of 9 runs published)"
    assert rows[1]["why"] == "our runs at this scale are within noise where the paper's numbers decide"
    assert rows[2]["why"] == "the paper reports no errors to judge by; ours is the only test"
    assert rows[3]["kind"] == "numerical check" and rows[3]["paper_own"] == "—"


def test_why_follows_from_the_verdicts() -> None:
    assert why("held", "held", "") == "agree"
    assert why("inconclusive at this scale", "held", "").startswith("the paper's own numbers are within noise")
    assert (
        why("held", "did not hold", "")
        == "opposite verdicts: our scale (data, network, epochs) differs from the paper's"
    )
    assert why("held", "did not hold", "", "one seed, not three") == "opposite verdicts: one seed, not three"
    assert why("held", "held", "", "one seed, not three") == "agree"  # a page's account is for opposite verdicts only
    assert why(
        "held", "inconclusive at this scale", "x [computed verdict 'held' not used: accuracy below the floor]"
    ).startswith("our model is below")
    assert why("", "not run: data unavailable", "").startswith("the data this page needs")


def test_a_bad_published_row_is_named() -> None:
    with pytest.raises(ValueError, match="page 'p' has a claims row without claim/verdict"):
        ledger_rows(["p"], lambda n: {"claims": [{"claim": "x"}]})


def test_markdown_reads_an_executed_build_and_puts_checks_apart(tmp_path: Path, executed_notebook) -> None:
    executed_notebook(tmp_path / "smoke" / "notebooks" / "calibration.ipynb", {"claims": ROWS})
    md = ledger_markdown("smoke", ["calibration"], tmp_path)
    claims, checks = md.split("## Numerical checks")
    assert "A beats B" in claims and "tilt -> mean" not in claims and "tilt -> mean" in checks
    assert "1 of 3 held at this scale.\n" in claims and "1 of 1 held at this scale.\n" in checks  # none at paper scale
    assert "[calibration](../notebooks/calibration.ipynb)" in claims
    # the rule behind every verdict, stated once above the tables: Student-t at the claim's df, one seed: the margin
    rule = md.split("## Claims")[0]
    assert "Student-t critical value at the claim's degrees of freedom" in rule
    assert "With one seed (no SE) the margin alone decides" in rule


def test_a_page_whose_paper_scale_runs_on_a_cpu_shows_that_build_or_says_which_build_runs_it(
    tmp_path: Path, executed_notebook
) -> None:
    executed_notebook(tmp_path / "smoke" / "notebooks" / "cascading.ipynb", {"claims": ROWS[:1]})
    assert "| held | not in this build (a cpu-scale build runs it: no GPU needed) |" in ledger_markdown(
        "smoke", ["cascading"], tmp_path
    )
    executed_notebook(tmp_path / "cpu" / "notebooks" / "cascading.ipynb", {"claims": ROWS[:1]})
    executed_notebook(
        tmp_path / "paper" / "notebooks" / "cascading.ipynb", {"claims": [{**ROWS[0], "verdict": "did not hold"}]}
    )
    assert "| held | did not hold (on a CPU) |" in ledger_markdown("cpu", ["cascading"], tmp_path)
    noisy = {**ROWS[0], "verdict": "inconclusive at this scale"}
    executed_notebook(tmp_path / "paper" / "notebooks" / "cascading.ipynb", {"claims": [noisy]})
    md = ledger_markdown("cpu", ["cascading"], tmp_path)
    assert "| held | inconclusive at paper scale (on a CPU) |" in md
    assert "1 of 1 held at this scale. At paper scale, 0 of the 1 with a paper-scale verdict held." in md
