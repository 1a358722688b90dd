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
    rows, note = report.gate_claims(ROWS, accuracy=0.5, paper_accuracy=0.945, chance=0.1,
                                    exempt=["gradient threshold"])
    assert [r["verdict"] for r in rows] == ["inconclusive at this scale", "inconclusive at this scale",
                                            "held", "not run: data unavailable"]
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
