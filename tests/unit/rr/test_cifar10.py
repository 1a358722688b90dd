"""lib.rr.pages.losses_cifar10: the plan (three seeds at paper scale, the sweep once), the gradient
check's bounds, the accuracy floor's gate and the tables, on hand-made metrics."""

from __future__ import annotations

import numpy as np
import pytest

from lib.config import settings
from lib.report import floor_rule as report_floor_rule
from lib.rr.experiment import CSF_LOSSES, LABELS, TABLE_LOSSES
from lib.rr.pages import losses_cifar10 as C

PAGE = C.PAGE


def claims(*args):
    """The page's claims table as rows, and the floor's note (:func:`lib.rr.pages.losses_cifar10.claims`)."""
    table, note = C.claims(*args)
    return table.to_dict("records"), note


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
    return {k: dict(base) for k in (*TABLE_LOSSES, *CSF_LOSSES)}


def seeds(acc: float) -> dict[str, list[dict[str, float]]]:
    return {k: [m] for k, m in metrics(acc).items()}


def test_plans_three_seeds_at_paper_scale_and_the_sweep_once() -> None:
    losses = len(set(TABLE_LOSSES) | set(CSF_LOSSES))
    for scale in ("smoke", "cpu", "paper"):
        cfg = settings("losses_cifar10", scale)
        items = PAGE.plan(scale)
        grid = [(k, v) for k in cfg["coverages"] for v in cfg["nus"]]
        sweep = len(grid) - ((cfg["coverage"], cfg["nu"]) in grid)
        assert len(items) == losses * cfg["seeds"] + sweep
        assert {it.seed for it in items if it.method == C.AU_SWEEP} <= {0}
        assert len({it.id for it in items}) == len(items)
        n = len({it.seed for it in items})
        assert C.scale_line(cfg).endswith(
            f"{n} seed{'s' * (n != 1)} per loss" + (", seed 0 of the AU sweep" if n > 1 else "")
        )
    assert settings("losses_cifar10", "paper")["seeds"] == 3  # paper 4, Sec. 5


def test_gradient_check_holds_inside_the_range_only_and_is_a_numerical_check():
    lo, hi = C.GRADIENT_THRESHOLD_RANGE
    assert C.gradient_check(3.5)["verdict"] == "held" and C.gradient_check(hi)["verdict"] == "held"
    assert C.gradient_check(lo - 0.01)["verdict"] == "did not hold" == C.gradient_check(4.5)["verdict"]
    assert C.gradient_check(3.5)["kind"] == "numerical check"


BALANCED = np.repeat(np.arange(10), 5)  # chance 1/10


def test_page_claims_gate_on_xe_accuracy_but_spare_the_gradient_check():
    rows, why = claims(seeds(0.2), 3.6, 0.005, "resnet50", BALANCED)  # far below the floor
    by_claim = {r["claim"]: r["verdict"] for r in rows}
    assert by_claim.pop(C.GRADIENT_CHECK) == "held"
    assert set(by_claim.values()) == {"inconclusive at this scale"} and "did not learn" in why
    rows, why = claims(seeds(0.945), 3.6, 0.005, "resnet50", BALANCED)
    assert why.startswith(report_floor_rule()) and why.endswith(".") and "The model is judged: " in why
    # the paper's ResNet-50 XE accuracy .9451: floor 0.1 + 0.8 x 0.8451 = 0.776 on a balanced test set;
    # with one class at 30% of the labels the floor is 0.3 + 0.8 x 0.6451 = 0.816 > 0.8
    assert "floor 0.776" in claims(seeds(0.8), 3.6, 0.005, "resnet50", BALANCED)[1]
    skewed = np.r_[np.zeros(15, int), np.repeat(np.arange(1, 10), 4)[:35]]
    rows, why = claims(seeds(0.8), 3.6, 0.005, "resnet50", skewed)
    assert "chance 0.300" in why and "did not learn" in why
    with pytest.raises(ValueError, match="row"):
        claims(seeds(0.9), 3.6, 0.005, "vgg", BALANCED)


def test_tables_and_published_numbers():
    m = metrics(0.9)
    m["au_margin"]["ece"] = 0.05
    csf = C.csf_table(m).set_index("CSF")
    assert csf.loc[LABELS["au_margin"], "ECE x100"] == pytest.approx(5.0)
    pub = C.published({"xe": m["xe"]})
    assert set(pub) == {f"rr_xe_{k}" for k in C.PUBLISHED_METRICS}
    wrn = C.paper_comparison(m, "wrn")
    # Table 1's and Table 4's WRN rows (cwECE XE .472, ECE^a XE 1.93, T 1.2) beside ours
    assert wrn.loc["XE", ["cwECE (paper)", "ECE^a (paper)", "T (paper)"]].tolist() == [0.472, 1.93, 1.2]
    assert wrn.loc["XE", "accuracy (ours)"] == pytest.approx(90.0)
    assert C.mean_metrics({"xe": [{"ece": 0.1}, {"ece": 0.3}]}) == {"xe": {"ece": pytest.approx(0.2)}}


def test_paper_numbers_are_the_tables_columns():
    r50, wrn = C.PAPER_CIFAR10["resnet50"], C.PAPER_CIFAR10["wrn"]
    assert (r50["ece"]["xe"], r50["ece"]["au"], wrn["ece"]["xe"], wrn["ece"]["au"]) == (
        3.00,
        1.69,
        1.99,
        1.54,
    )  # Table 2
    assert (wrn["cwece"]["xe"], wrn["cwece"]["au"], wrn["ece_a"]["xe"], wrn["ece_a"]["au"]) == (
        0.472,
        0.432,
        1.93,
        1.50,
    )
    for row in (r50, wrn):  # every loss of the tables in every metric
        assert all(
            set(row[m]) == set(TABLE_LOSSES) for m in ("accuracy", "ece", "cwece", "cwece_ts", "ece_a", "ece_a_ts")
        )


def test_smoothed_cdf_curves_are_cdfs():
    grid, curves = C.smoothed_cdf_curves()
    assert len(grid) == 201 and grid[0] == 0 and grid[-1] == 1
    assert list(curves) == ["empirical CDF", "nu = 0.005", "nu = 0.05", "nu = 0.1", "nu = 0.3"]
    for name, c in curves.items():
        assert (np.diff(c) >= -1e-12).all() and c.min() >= 0 and c.max() <= 1 + 1e-12, name
    # A small nu is close to a staircase that has reached (almost) all the mass at s = 1.
    assert curves["nu = 0.005"][-1] > 0.9 and curves["empirical CDF"][-1] == 1
