"""lib.report: the claims table and the one accuracy-floor rule, on hand-computed cases."""

from __future__ import annotations

import math

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
    table, note, met = report.gate_claims(
        ROWS, accuracy=0.5, paper_accuracy=0.945, chance=0.1, exempt=["gradient threshold"]
    )
    assert table["verdict"].tolist() == [
        "inconclusive at this scale",
        "inconclusive at this scale",
        "held",
        "not run: data unavailable",
    ]
    assert "did not hold" in table.iloc[1]["ours"] and table.iloc[1]["ours"].startswith("gap -0.01")
    assert "did not learn" in note and "0.776" in note and not met
    assert note.startswith(report.floor_rule() + " ")  # the rule, then this run's case
    assert ROWS[0]["verdict"] == "held"  # the input is not modified


def test_gate_claims_at_or_above_floor_keeps_verdicts():
    for acc in (0.776, 0.8, np.float32(0.95)):
        table, note, met = report.gate_claims(ROWS, accuracy=acc, paper_accuracy=0.945, chance=0.1)
        assert table["verdict"].tolist() == [r["verdict"] for r in ROWS]
        assert "The model is judged" in note and met and "(paper 0.945 - chance)" in note
    # a page gating on a reference of its own (not the paper's) says so
    _, note, _ = report.gate_claims(ROWS, 0.8, 0.9, 0.1, reference="reference (our choice)")
    assert "(reference (our choice) 0.900 - chance)" in note and "paper 0.900" not in note


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
    table, note, met = report.gate_claims(ROWS[:1], accuracy=0.915, paper_accuracy=0.915, chance=0.887)
    assert table.iloc[0]["verdict"] == "held" and "The model is judged" in note and met
    table, _, met = report.gate_claims(ROWS[:1], accuracy=0.887, paper_accuracy=0.915, chance=0.887)
    assert table.iloc[0]["verdict"] == "inconclusive at this scale" and not met


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


def test_t_verdict_is_symmetric_and_uses_the_larger_of_noise_and_margin() -> None:
    from lib.report import paired_verdict, t_verdict

    inf = math.inf
    assert t_verdict(0.05, 0.01, df=inf) == "held"  # 0.05 > 1.96 x 0.01
    assert t_verdict(-0.05, 0.01, df=inf) == "did not hold"  # the same evidence, against
    assert t_verdict(0.015, 0.01, df=inf) == "inconclusive at this scale"  # within 1.96 SE
    assert t_verdict(0.05, 0.01, df=4) == "held"  # 0.05 > 2.776 x 0.01
    assert t_verdict(-0.05, 0.01, df=4) == "did not hold"
    assert t_verdict(0.025, 0.01, df=4) == "inconclusive at this scale"  # 2.5 SE: beyond 1.96, within 2.776
    assert t_verdict(0.05, 0.001, margin=0.1, df=inf) == "inconclusive at this scale"  # the margin is a floor
    assert t_verdict(float("nan"), 0.01, df=inf) == "inconclusive at this scale"
    # paired: per-seed differences 0.04, 0.05, 0.06 -> mean .05, SE .01/sqrt(3) ~ .0058, t(2) 4.303: .0248
    assert paired_verdict([0.04, 0.05, 0.06]) == "held"
    assert paired_verdict([-0.04, -0.05, -0.06]) == "did not hold"
    assert paired_verdict([0.1, -0.08, 0.02]) == "inconclusive at this scale"


def test_critical_values_are_students_t_at_the_claims_degrees_of_freedom() -> None:
    # t_{0.975, df} from any t table: n = 2, 3, 5 paired seeds give df 1, 2, 4
    assert report.critical_value(1) == pytest.approx(12.706, abs=5e-4)
    assert report.critical_value(2) == pytest.approx(4.303, abs=5e-4)
    assert report.critical_value(4) == pytest.approx(2.776, abs=5e-4)
    assert report.critical_value(math.inf) == pytest.approx(1.960, abs=5e-4)  # the normal's
    # paired_verdict uses n - 1: with 2, 3, 5 seeds a mean just beyond t x SE holds, just within does not
    for diffs, t in (([1.0, 3.0], 12.706), ([1.0, 2.0, 3.0], 4.303), ([1.0, 2.0, 3.0, 4.0, 5.0], 2.776)):
        arr = np.array(diffs)
        se = report.standard_error(arr)
        shifted = arr - arr.mean() + t * se * 1.001  # the same spread, its mean just beyond the bar
        assert report.paired_verdict(shifted) == "held"
        assert report.paired_verdict(-shifted) == "did not hold"
        assert report.paired_verdict(arr - arr.mean() + t * se * 0.999) == "inconclusive at this scale"


def test_ten_standard_errors_are_inconclusive_at_one_degree_of_freedom_only() -> None:
    # 10 SE: beyond the normal's 1.96 and t(4)'s 2.776, within t(1)'s 12.706
    assert report.t_verdict(10.0, 1.0, df=1) == "inconclusive at this scale"
    assert report.t_verdict(10.0, 1.0, df=math.inf) == "held"
    assert report.t_verdict(-10.0, 1.0, df=math.inf) == "did not hold"  # symmetric: the same evidence against
    assert report.t_verdict(-10.0, 1.0, df=1) == "inconclusive at this scale"


def test_welch_degrees_of_freedom_hand_computed() -> None:
    # equal SEs and sizes: 2n - 2
    for n in (2, 3, 5, 10):
        assert report.welch_df(0.3, n, 0.3, n) == pytest.approx(2 * n - 2)
    # unequal: (1 + 9)^2 / (1 / 1 + 81 / 8) = 100 / 11.125
    assert report.welch_df(1.0, 2, 3.0, 9) == pytest.approx(100 / 11.125)
    # the bounds: min(n) - 1 <= df <= n_a + n_b - 2
    assert 1 <= report.welch_df(5.0, 2, 0.1, 50) <= 50
    assert report.welch_df(0.0, 4, 0.0, 6) == 8  # no noise on either side: any df gives no noise


def test_welch_verdict_judges_two_independent_groups() -> None:
    a, b = [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]
    # means 2 and 5, SEs 1/sqrt(3) each: SE of the difference sqrt(2/3) = .816, Welch df 4, t 2.776: 2.27
    assert report.welch_verdict(b, a) == "held"
    assert report.welch_verdict(a, b) == "did not hold"  # symmetric
    assert report.welch_verdict(b, a, margin=3.5) == "inconclusive at this scale"  # the margin is a floor
    assert report.welch_verdict([2.0, 2.1], [1.0, 3.0]) == "inconclusive at this scale"
    # from printed means and SEs: the same verdict
    se = 1 / math.sqrt(3)
    assert report.welch_means_verdict(5.0, se, 3, 2.0, se, 3) == "held"
    # one value on either side: only the margin decides
    assert report.welch_verdict([4.0], [1.0, 2.0, 3.0], margin=1.0) == "held"
    assert report.welch_verdict([4.0], [1.0, 2.0, 3.0], margin=3.0) == "inconclusive at this scale"
    assert report.welch_means_verdict(1.0, None, 5, 0.0, 0.1, 5, margin=0.5) == "held"


def test_one_seed_the_margin_alone_decides() -> None:
    assert report.t_verdict(0.05, None, margin=0.01) == "held"
    assert report.t_verdict(-0.05, None, margin=0.01) == "did not hold"
    assert report.t_verdict(0.005, None, margin=0.01) == "inconclusive at this scale"
    assert report.t_verdict(0.05, float("nan"), margin=0.01) == "held"  # a NaN SE is no SE
    assert report.t_verdict(0.05, 1.0, margin=0.01, df=0) == "held"  # df < 1: no replication
    assert report.paired_verdict([0.05], margin=0.01) == "held"  # one seed: df 0
    assert report.paired_verdict([0.005], margin=0.01) == "inconclusive at this scale"


def test_bad_verdict_input_raises_naming_the_argument() -> None:
    with pytest.raises(ValueError, match="^df: required"):
        report.t_verdict(0.1, 0.01)  # an SE without its degrees of freedom
    with pytest.raises(ValueError, match="^df: must be >= 0"):
        report.t_verdict(0.1, 0.01, df=-1)
    with pytest.raises(ValueError, match="^df: must be >= 0"):
        report.t_verdict(0.1, 0.01, df=float("nan"))
    with pytest.raises(ValueError, match="^df: must be a number"):
        report.t_verdict(0.1, 0.01, df="4")
    with pytest.raises(ValueError, match="^margin: must be a finite number >= 0"):
        report.t_verdict(0.1, 0.01, margin=-1, df=4)
    with pytest.raises(ValueError, match="^se: must be a number >= 0"):
        report.t_verdict(0.1, -0.01, df=4)
    with pytest.raises(ValueError, match="^diff: must be a number"):
        report.t_verdict("0.1", 0.01, df=4)
    with pytest.raises(ValueError, match="^df: must be > 0"):
        report.critical_value(0)
    with pytest.raises(ValueError, match="^diffs: must not be empty"):
        report.paired_verdict([])
    with pytest.raises(ValueError, match="^n_a: must be an integer >= 2"):
        report.welch_df(0.1, 1, 0.1, 5)
    with pytest.raises(ValueError, match="^se_b: must be a finite number >= 0"):
        report.welch_df(0.1, 5, -0.1, 5)
    with pytest.raises(ValueError, match="^b: must not be empty"):
        report.welch_verdict([1.0], [])


def test_the_rule_is_stated_once_for_the_ledger() -> None:
    assert "Student-t" in report.RULE and "degrees of freedom" in report.RULE
    assert "one seed" in report.RULE and "margin alone" in report.RULE


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
