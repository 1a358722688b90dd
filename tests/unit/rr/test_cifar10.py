"""lib.rr.cifar10: the gradient claim's bounds, the accuracy floor's gate and the
tables, on hand-made metrics."""

from __future__ import annotations

import numpy as np
import pytest

from lib.rr import losses as rw
from lib.rr import experiment as rx
from lib.rr import cifar10 as C


def metrics(acc: float) -> dict[str, dict[str, float]]:
    base = {
        "accuracy": acc,
        "ece": 0.03,
        "ece_a": 0.03,
        "cwece": 0.006,
        "cwece_a": 0.006,
        "ece_ts": 0.01,
        "ece_a_ts": 0.01,
        "cwece_ts": 0.005,
        "conf_gap": 0.02,
        "temperature": 1.5,
    }
    return {k: dict(base) for k in (*rx.TABLE_LOSSES, *rx.CSF_LOSSES)}


def test_gradient_claim_holds_inside_the_range_only():
    lo, hi = C.GRADIENT_THRESHOLD_RANGE
    assert C.gradient_claim(3.5)["verdict"] == "held" and C.gradient_claim(hi)["verdict"] == "held"
    assert (
        C.gradient_claim(lo - 0.01)["verdict"] == "did not hold" and C.gradient_claim(4.5)["verdict"] == "did not hold"
    )


BALANCED = np.repeat(np.arange(10), 5)  # chance 1/10


def test_page_claims_gate_on_xe_accuracy_but_spare_the_gradient_claim():
    rows, why = C.page_claims(metrics(0.2), 3.6, 0.005, "resnet50", BALANCED)  # far below the floor
    by_claim = {r["claim"]: r["verdict"] for r in rows}
    assert by_claim.pop(C.GRADIENT_CLAIM) == "held"
    assert set(by_claim.values()) == {"inconclusive at this scale"} and "did not learn" in why
    rows, why = C.page_claims(metrics(0.945), 3.6, 0.005, "resnet50", BALANCED)
    assert why.startswith("The model is judged")
    # the paper's ResNet-50 XE accuracy .9451: floor 0.1 + 0.8 x 0.8451 = 0.776 on a balanced test set;
    # with one class at 30% of the labels the floor is 0.3 + 0.8 x 0.6451 = 0.816 > 0.8
    paper = rw.PAPER_CIFAR10["resnet50"]["accuracy"]["xe"] / 100
    assert f"floor {0.1 + 0.8 * (paper - 0.1):.3f}" in C.page_claims(metrics(0.8), 3.6, 0.005, "resnet50", BALANCED)[1]
    skewed = np.r_[np.zeros(15, int), np.repeat(np.arange(1, 10), 4)[:35]]
    rows, why = C.page_claims(metrics(0.8), 3.6, 0.005, "resnet50", skewed)
    assert "chance 0.300" in why and "did not learn" in why
    with pytest.raises(ValueError, match="paper_row"):
        C.page_claims(metrics(0.9), 3.6, 0.005, "vgg", BALANCED)


def test_tables_and_published_numbers():
    m = metrics(0.9)
    m["au_margin"]["ece"] = 0.05
    csf = C.csf_table(m).set_index("CSF")
    assert csf.loc[rx.LABELS["au_margin"], "ECE x100"] == pytest.approx(5.0)
    pub = C.published_metrics({"xe": m["xe"]})
    assert set(pub) == {f"rr_xe_{k}" for k in C.PUBLISHED_METRICS}
    wrn = C.paper_comparison(m, "wrn")
    assert wrn.loc[rx.LABELS["xe"], "paper ECE"] == rw.PAPER_CIFAR10["wrn"]["ece"]["xe"]
    assert wrn.loc[rx.LABELS["xe"], "ours accuracy"] == pytest.approx(90.0)


def test_smoothed_cdf_curves_are_cdfs():
    grid, curves = C.smoothed_cdf_curves(n=400, nus=(0.005, 0.3))
    assert len(grid) == 201 and grid[0] == 0 and grid[-1] == 1
    assert list(curves) == ["empirical CDF", "nu = 0.005", "nu = 0.3"]
    for name, c in curves.items():
        assert (np.diff(c) >= -1e-12).all() and c.min() >= 0 and c.max() <= 1 + 1e-12, name
    # A small nu is close to a staircase that has reached (almost) all the mass at s = 1.
    assert curves["nu = 0.005"][-1] > 0.9 and curves["empirical CDF"][-1] == 1
