"""lib.report: the claims table and the one accuracy-floor rule, on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from lib import report

ROWS = [
    {"claim": "AU lowers ECE", "paper": "1.69 vs 3.00", "ours": "2.1 vs 2.5", "verdict": "held"},
    {"claim": "focal overconfident", "paper": "Fig. 2", "ours": "gap -0.01", "verdict": "did not hold"},
    {"claim": "gradient threshold", "paper": "3.5", "ours": "3.6", "verdict": "held"},
    {"claim": "needs data", "paper": "x", "ours": "—", "verdict": "not run: data unavailable"},
]


def test_accuracy_floor_hand_computed():
    # CIFAR-10 at the paper's 94.5%, chance 10%: 0.1 + 0.8 * 0.845 = 0.776
    assert report.accuracy_floor(0.945, 0.1) == pytest.approx(0.776)
    # PACS sketch 63.7%, 7 classes: 1/7 + 0.8 (0.637 - 1/7)
    assert report.accuracy_floor(0.637, 1 / 7) == pytest.approx(1 / 7 + 0.8 * (0.637 - 1 / 7))
    # floor 1 demands the paper's accuracy, floor 0 only chance
    assert report.accuracy_floor(0.9, 0.25, floor=1.0) == pytest.approx(0.9)
    assert report.accuracy_floor(0.9, 0.25, floor=0.0) == pytest.approx(0.25)


def test_gate_claims_below_floor_makes_model_claims_inconclusive():
    rows, note = report.gate_claims(ROWS, accuracy=0.5, paper_accuracy=0.945, chance=0.1, exempt=["gradient threshold"])
    assert [r["verdict"] for r in rows] == [
        "inconclusive at this scale",
        "inconclusive at this scale",
        "held",
        "not run: data unavailable",
    ]
    assert "did not hold" in rows[1]["ours"] and rows[1]["ours"].startswith("gap -0.01")
    assert "did not learn" in note and "0.776" in note
    assert ROWS[0]["verdict"] == "held"  # the input is not modified
    report.claims_table(rows)  # still a valid claims table


def test_gate_claims_at_or_above_floor_keeps_verdicts():
    for acc in (0.776, 0.8, np.float32(0.95)):
        rows, note = report.gate_claims(ROWS, accuracy=acc, paper_accuracy=0.945, chance=0.1)
        assert [r["verdict"] for r in rows] == [r["verdict"] for r in ROWS]
        assert note.startswith("The model is judged")


def test_gate_claims_bad_input_names_argument():
    with pytest.raises(ValueError, match="accuracy"):
        report.gate_claims(ROWS, accuracy=94.5, paper_accuracy=0.945, chance=0.1)
    with pytest.raises(ValueError, match="paper_accuracy"):
        report.gate_claims(ROWS, accuracy=0.5, paper_accuracy=0.05, chance=0.1)
    with pytest.raises(ValueError, match="chance"):
        report.accuracy_floor(0.9, float("nan"))
    with pytest.raises(ValueError, match="exempt"):
        report.gate_claims(ROWS, accuracy=0.5, paper_accuracy=0.9, chance=0.1, exempt=["no such claim"])


def test_chance_accuracy_is_the_most_frequent_class_rate():
    # balanced 4 classes: 1/4; imbalanced binary 7 of 8 zeros: 7/8 (the majority rate)
    assert report.chance_accuracy([0, 1, 2, 3, 3, 2, 1, 0]) == pytest.approx(0.25)
    assert report.chance_accuracy(np.array([0, 0, 0, 1, 0, 0, 0, 0])) == pytest.approx(7 / 8)
    import torch

    assert report.chance_accuracy(torch.tensor([1, 1, 0])) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="labels"):
        report.chance_accuracy([])
    with pytest.raises(ValueError, match="labels"):
        report.chance_accuracy([0.5, 1.0])


def test_imbalanced_binary_floor_is_reachable():
    # CivilComments-like: majority rate 0.887, paper 0.915 -> floor 0.887 + 0.8 x 0.028 = 0.9094;
    # a model at the paper's accuracy is judged, one at the majority rate is not.
    assert report.accuracy_floor(0.915, 0.887) == pytest.approx(0.9094)
    rows, note = report.gate_claims(ROWS[:1], accuracy=0.915, paper_accuracy=0.915, chance=0.887)
    assert rows[0]["verdict"] == "held" and note.startswith("The model is judged")
    rows, _ = report.gate_claims(ROWS[:1], accuracy=0.887, paper_accuracy=0.915, chance=0.887)
    assert rows[0]["verdict"] == "inconclusive at this scale"


def test_floor_rule_quotes_the_threshold():
    assert f"{report.ACCURACY_FLOOR:g}" in report.floor_rule() and "gate_claims" in report.floor_rule()
    assert "0.5 x" in report.floor_rule(0.5)


def test_show_renders_text_as_markdown_and_frames_as_tables(monkeypatch):
    import IPython.display as disp
    import pandas as pd

    shown = []
    monkeypatch.setattr(disp, "display", lambda obj: shown.append(obj))
    assert report.show("No paper-scale results yet. *Run* it.") is None
    assert isinstance(shown[-1], disp.Markdown) and shown[-1].data.startswith("No paper-scale")
    report.show(pd.DataFrame({"status": ["x" * 200]}))
    html = shown[-1].to_html()
    assert "x" * 200 in html  # never cut at the page width


def test_show_keeps_a_meaningful_index(monkeypatch):
    import IPython.display as disp
    import pandas as pd

    shown = []
    monkeypatch.setattr(disp, "display", lambda obj: shown.append(obj))
    report.show(pd.DataFrame({"seeds": ["1 of 5"]}, index=["Robust MoE"]))
    assert "Robust MoE" in shown[-1].to_html()
    report.show(pd.DataFrame({"x": [1.0]}))  # numbers only: shown as the frame itself
    assert isinstance(shown[-1], pd.DataFrame)


def test_two_se_verdict_is_symmetric_and_uses_the_larger_of_noise_and_margin() -> None:
    from lib.report import paired_verdict, two_se_verdict

    assert two_se_verdict(0.05, 0.01) == "held"  # 0.05 > 2 x 0.01
    assert two_se_verdict(-0.05, 0.01) == "did not hold"  # the same evidence, against
    assert two_se_verdict(0.015, 0.01) == "inconclusive at this scale"  # within two SE
    assert two_se_verdict(0.05, None, margin=0.01) == "held"  # one seed: the margin alone
    assert two_se_verdict(0.005, None, margin=0.01) == "inconclusive at this scale"
    assert two_se_verdict(0.05, 0.001, margin=0.1) == "inconclusive at this scale"  # the margin is a floor
    assert two_se_verdict(float("nan"), 0.01) == "inconclusive at this scale"
    # paired: per-seed differences 0.04, 0.05, 0.06 -> mean .05, SE .01/sqrt(3) ~ .0058
    assert paired_verdict([0.04, 0.05, 0.06]) == "held"
    assert paired_verdict([-0.04, -0.05, -0.06]) == "did not hold"
    assert paired_verdict([0.1, -0.08, 0.02]) == "inconclusive at this scale"
    with pytest.raises(ValueError, match="margin: must be a finite number >= 0"):
        two_se_verdict(0.1, 0.01, margin=-1)
    with pytest.raises(ValueError, match="diffs: must not be empty"):
        paired_verdict([])


def test_claims_table_shows_the_papers_own_verdict_and_kind_only_where_used() -> None:
    from lib.report import NOT_TESTABLE, claims_table

    plain = claims_table([{"claim": "a", "ours": "1", "verdict": "held"}])
    assert list(plain.columns) == ["claim", "paper", "ours", "verdict"]
    rows = [
        {"claim": "a", "ours": "1", "verdict": "held", "paper_own": NOT_TESTABLE},
        {"claim": "b", "ours": "2", "verdict": "did not hold", "paper_own": "held", "kind": "numerical check"},
    ]
    full = claims_table(rows)
    assert list(full.columns) == ["claim", "paper", "ours", "verdict", "paper_own", "kind"]
    with pytest.raises(ValueError, match="paper_own 'yes'"):
        claims_table([{"claim": "a", "ours": "1", "verdict": "held", "paper_own": "yes"}])
    with pytest.raises(ValueError, match="kind 'theorem'"):
        claims_table([{"claim": "a", "ours": "1", "verdict": "held", "kind": "theorem"}])


def test_standard_error_hand_computed():
    # values 1, 2, 3: sample std 1, so SE = 1 / sqrt(3); one value gives none
    assert report.standard_error(np.array([1.0, 2.0, 3.0])) == pytest.approx(1 / np.sqrt(3), rel=1e-15)
    assert report.standard_error(np.array([4.0, 4.0])) == 0.0
    assert report.standard_error(np.array([7.0])) is None
