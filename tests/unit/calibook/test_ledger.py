"""calibook.ledger: the claims ledger is built from what pages published, the papers' claims counted apart
from the book's expectations, numerical checks and timings, rows with no verdict in no total, every
"why" line computed from the row's verdicts (or empty), and the page laid out per paper."""

from __future__ import annotations

from pathlib import Path

import pytest

from calibook.ledger import NOT_EXECUTED, counts, ledger_markdown, ledger_rows, why
from lib.report import NOT_TESTABLE, VERDICTS

HELD, FAILED, UNSURE, NOT_RUN = VERDICTS

ROWS = [
    {"claim": "A beats B", "paper": "'A beats B' (sec. 2)", "ours": "+.05", "verdict": HELD, "paper_own": HELD},
    {"claim": "C beats D", "paper": "yes", "ours": "-.01", "verdict": UNSURE, "paper_own": HELD},
    {"claim": "E beats F", "paper": "yes", "ours": "+.2", "verdict": FAILED, "paper_own": NOT_TESTABLE},
    {"claim": "G is cheap", "paper": "our bar", "ours": "1.1x", "verdict": HELD, "kind": "expectation"},
    {"claim": "H runs", "paper": "", "ours": "—", "verdict": NOT_RUN, "paper_own": NOT_TESTABLE},
    {"claim": "tilt -> mean", "paper": "", "ours": "1e-9", "verdict": HELD, "kind": "numerical check"},
]


def test_rows_keep_each_published_claim_with_its_three_verdicts_and_whose_it_is() -> None:
    rows = ledger_rows(
        ["p", "q"],
        lambda n: {"claims": ROWS} if n == "p" else None,
        paper_published=lambda n: {"claims": [{"claim": "A beats B", "verdict": FAILED}]},
        coverage=lambda n: "3 of 9 runs" if n == "p" else "",
        group=lambda n: "moe",
    )
    assert [r["claim"] for r in rows] == [*(r["claim"] for r in ROWS), NOT_EXECUTED]
    first = rows[0]
    assert (first["paper_own"], first["ours"], first["paper_scale"]) == (HELD, HELD, "did not hold (3 of 9 runs)")
    assert first["paper"] == "'A beats B' (sec. 2)" and first["paper_verdict"] == FAILED and first["group"] == "moe"
    assert rows[1]["paper_scale"] == "no paper-scale build yet (3 of 9 runs published)"
    assert [r["kind"] for r in rows] == ["claim", "claim", "claim", "expectation", "claim", "numerical check", "claim"]
    assert rows[-1]["ours"] == "" and rows[-1]["page"] == "q"  # a page not executed: no verdict


def test_counts_leave_rows_without_a_verdict_out_of_every_total() -> None:
    rows = ledger_rows(["p", "q"], lambda n: {"claims": ROWS} if n == "p" else None)
    c = counts(rows, "claim")
    # three judged claims (held, inconclusive, did not hold); "H runs" was not run, q was not executed
    assert (c["judged"], c["held"], c["not_held"], c["inconclusive"], c["not_run"]) == (3, 1, 1, 1, 1)
    assert counts(rows, "expectation")["judged"] == 1 and counts(rows, "numerical check")["held"] == 1
    assert counts(rows, "timing")["judged"] == 0


@pytest.mark.parametrize(
    ("args", "kw", "expected"),
    [
        ((HELD, HELD), {}, "agree"),
        ((HELD, HELD, "", "one seed, not three"), {}, "agree"),  # a page's account is for disagreements only
        ((HELD, FAILED), {"paper_scale": HELD}, "opposite at this scale, agree at paper scale: the scale explains it"),
        # the paper-scale column disagrees too: not the scale (the old "our scale differs" is not printed)
        ((HELD, FAILED), {"paper_scale": FAILED}, "opposite at both our scales, so not our scale"),
        (
            (HELD, FAILED, "", "one seed, not three"),
            {"paper_scale": FAILED},
            "opposite at both our scales, so not our scale; the page's setting differs from the paper's: one seed, "
            "not three",
        ),
        ((HELD, FAILED), {}, "opposite verdicts; no paper-scale verdict yet to tell whether the scale explains it"),
        ((HELD, UNSURE), {}, "the paper's numbers decide; ours at this scale do not"),
        (
            (HELD, UNSURE),
            {"seeds": 1, "paper_scale": HELD},
            "the paper's numbers decide; ours at this scale do not (one seed at this scale: only the claim's margin "
            "decides); at paper scale ours agree",
        ),
        ((UNSURE, HELD), {}, "the paper's own numbers do not decide under the rule; ours do"),
        # no verdict of the paper's: nothing is said about errors the paper does not report
        ((NOT_TESTABLE, HELD), {}, ""),
        ((NOT_TESTABLE, UNSURE), {"seeds": 3}, ""),
        (("", HELD), {}, ""),
        ((NOT_TESTABLE, FAILED), {"paper_scale": HELD}, "our two scales disagree"),
        ((NOT_TESTABLE, UNSURE), {"paper_scale": HELD, "seeds": 5}, "paper scale decides; this scale does not"),
        (("", NOT_RUN), {}, "the data this page needs was not available in this build"),
        # the paper-scale column answers to another row of the paper's (paper 4: ResNet-50 here, WRN there)
        (
            (HELD, HELD),
            {"paper_scale": UNSURE, "paper_own_at_paper": UNSURE},
            "agree at this scale; at paper scale, against the paper's other row: agree",
        ),
        (
            (HELD, HELD),
            {"paper_scale": FAILED, "paper_own_at_paper": UNSURE},
            f"agree at this scale; at paper scale, against the paper's other row: ours {FAILED}, the paper's {UNSURE}",
        ),
        ((HELD, HELD), {"paper_scale": HELD, "paper_own_at_paper": HELD}, "agree"),
        # the other row has no verdict of the paper's: not the same row, so not "agree"
        (
            (HELD, HELD),
            {"paper_scale": HELD, "paper_own_at_paper": ""},
            "agree at this scale; at paper scale, against the paper's other row: ours held, the paper's none",
        ),
        (
            (HELD, UNSURE, "x [computed verdict 'held' not used: accuracy below the floor]"),
            {},
            "our model is below the book's accuracy floor at this scale, so the claim is not judged",
        ),
    ],
)
def test_why_is_computed_from_the_rows_verdicts_or_left_empty(args, kw, expected) -> None:
    assert why(*args, **kw) == expected


def test_why_never_asserts_noise_or_missing_errors() -> None:
    """No line puts a verdict down to noise (a row can be inconclusive by construction) or says the
    paper reports no errors (a row may have no paper claim at all)."""
    for own in (*VERDICTS[:3], NOT_TESTABLE, ""):
        for ours in VERDICTS[:3]:
            for at_paper in ("", *VERDICTS[:3]):
                for seeds in (None, 1, 3):
                    text = why(own, ours, "", "setting", paper_scale=at_paper, seeds=seeds)
                    assert "noise" not in text and "reports no errors" not in text, (own, ours, at_paper)
                    if own == NOT_TESTABLE or not own:
                        assert "paper's" not in text.replace("the paper's:", "")


def test_the_paper_scale_column_is_set_beside_the_paper_scale_rows_own_verdict() -> None:
    """Where a page quotes another row of the paper's tables at paper scale, its own verdict comes from
    the paper-scale build's row, not from this build's."""
    here = [{"claim": "AU has lower ECE", "verdict": HELD, "paper_own": HELD}]
    there = [{"claim": "AU has lower ECE", "verdict": UNSURE, "paper_own": UNSURE}]
    (row,) = ledger_rows(["rr"], lambda n: {"claims": here}, paper_published=lambda n: {"claims": there})
    assert row["why"] == "agree at this scale; at paper scale, against the paper's other row: agree"
    (same,) = ledger_rows(["rr"], lambda n: {"claims": here}, paper_published=lambda n: {"claims": here})
    assert same["why"] == "agree"


def test_a_bad_published_row_is_named() -> None:
    with pytest.raises(ValueError, match="page 'p' has a claims row without claim/verdict"):
        ledger_rows(["p"], lambda n: {"claims": [{"claim": "x"}]})


def test_markdown_lays_out_each_paper_counts_first_then_one_line_per_row(tmp_path: Path, executed_notebook) -> None:
    executed_notebook(tmp_path / "smoke" / "notebooks" / "calibration.ipynb", {"claims": ROWS})
    md = ledger_markdown("smoke", ["calibration", "cascading"], tmp_path)
    # the rule behind every verdict, stated once above the tables: Student-t at the claim's df, one seed: the margin
    head, paper3 = md.split("## Paper 3: calibration, cascading and cleaning")
    assert "Student-t critical value at the claim's degrees of freedom" in head
    assert "With one seed (no SE) the margin alone decides" in head
    assert "✔ held · ✘ did not hold · ? inconclusive" in head  # the legend of the marks
    # a summary line per paper; then the paper's counts: its claims apart from expectations and checks
    assert "| Paper 3 | 1 of 3 held | 1 of 1 held | 1 of 1 held | — |" in head
    counts_line = paper3.split("```{raw} html")[0]
    assert (
        "**The paper's claims: 1 of 3 held** at this scale (1 did not hold, 1 inconclusive); 1 not run" in counts_line
    )
    assert "**The book's own expectations: 1 of 1 held**" in counts_line
    assert "**Numerical checks (hold by theorem or construction): 1 of 1 held**" in counts_line
    assert "Not executed in this build (counted nowhere): cascading." in counts_line
    table = paper3.split("```{raw} html")[1]
    assert table.count("<details>") == len(ROWS)  # one line per row, its details one click away
    assert '<a href="../notebooks/calibration.html">calibration</a>' in table
    assert "<summary>A beats B " in table and "<dd>'A beats B' (sec. 2)</dd>" in table
    # the expectation says whose it is; the marks carry their verdict in words
    assert "<dd>the book's own expectation: our bar</dd>" in table
    assert "<dt>source</dt><dd>a numerical check: —</dd>" in table  # a check is named as one, not "whose"
    assert '<td class="mark held" title="held">✔</td>' in table and 'class="mark failed"' in table


def test_a_page_whose_paper_scale_runs_on_a_cpu_shows_that_build_or_says_which_build_runs_it(
    tmp_path: Path, executed_notebook
) -> None:
    executed_notebook(tmp_path / "smoke" / "notebooks" / "cascading.ipynb", {"claims": ROWS[:1]})
    md = ledger_markdown("smoke", ["cascading"], tmp_path)
    assert 'title="not in this build (a cpu-scale build runs it: no GPU needed)">—</td>' in md
    executed_notebook(tmp_path / "cpu" / "notebooks" / "cascading.ipynb", {"claims": ROWS[:1]})
    executed_notebook(
        tmp_path / "paper" / "notebooks" / "cascading.ipynb", {"claims": [{**ROWS[0], "verdict": FAILED}]}
    )
    md = ledger_markdown("cpu", ["cascading"], tmp_path)
    assert '<td class="mark failed" title="did not hold (on a CPU)">✘</td>' in md
    assert "<dd>opposite at this scale" not in md and "<dd>ours agree at this scale; at paper scale ours: did not" in md
    noisy = {**ROWS[0], "verdict": UNSURE}
    executed_notebook(tmp_path / "paper" / "notebooks" / "cascading.ipynb", {"claims": [noisy]})
    md = ledger_markdown("cpu", ["cascading"], tmp_path)
    assert 'title="inconclusive at paper scale (on a CPU)">?</td>' in md
    assert "1 of 1 held** at this scale (0 did not hold, 0 inconclusive); at paper scale 0 of the 1 with" in md
