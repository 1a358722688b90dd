"""lib.cross_paper.study against identities that must hold whatever the data."""

import numpy as np
import pandas as pd
import pytest

from lib.cross_paper import study as xp


def _logits(n: int, k: int, c: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k, c)) * 2
    labels = np.array([rng.choice(c, p=xp.softmax(z[i, 0][None])[0]) for i in range(n)])
    return z, labels


def test_softmax_rows_sum_to_one_and_temperature_flattens() -> None:
    z = np.array([[2.0, 0.0, -1.0]])
    p1, p2 = xp.softmax(z), xp.softmax(z, 2.0)
    assert np.allclose(p1.sum(1), 1) and p2.max() < p1.max()
    assert np.allclose(p1, np.exp(z) / np.exp(z).sum())


def test_one_expert_mixture_per_expert_scaling_equals_global_scaling() -> None:
    # With K = 1 and routing 1, MoCaE's p = softmax(z / T_1) is temperature scaling itself.
    z, y = _logits(600, 1, 4, seed=0)
    z = z * 3  # over-confident: labels come from softmax(z/3)
    routing = np.ones((600, 1))
    cal, test = np.arange(300), np.arange(300, 600)
    out = xp.mixture_ece(z, y, routing, cal, test)
    assert out["per-expert temperature"] == pytest.approx(out["temperature on the mixture"], abs=2e-3)
    assert out["per-expert temperature"] < out["none"]
    assert out["accuracy (vanilla)"] == out["accuracy (per-expert temperature)"]


def test_confidence_routing_favours_the_confident_expert() -> None:
    z = np.array([[[5.0, 0.0], [0.1, 0.0]]])  # expert 0 confident, expert 1 not
    r = xp.confidence_routing(z, sharpness=10.0)
    assert np.allclose(r.sum(1), 1) and r[0, 0] > r[0, 1]


def test_posthoc_scaling_of_calibrated_logits_changes_little() -> None:
    z, y = _logits(4000, 1, 5, seed=1)
    cal, test = np.arange(2000), np.arange(2000, 4000)
    out = xp.posthoc_ece(z[:, 0], y, cal, test)
    assert set(out) == set(xp.POSTHOC)
    assert out["temperature"] < 0.04 and out["none"] < 0.04


def test_best_fix_picks_lowest_ece_and_highest_apgr() -> None:
    table = pd.concat(
        [
            xp.long_table("a", "d", {"none": 0.3, "x": 0.1, "y": 0.2}),
            xp.long_table("b", "d", {"none": 0.6, "x": 0.7, "y": 0.65}, metric="APGR"),
        ]
    )
    fixes = xp.best_fix(table).set_index("failure")
    assert fixes.loc["a", "best method"] == "x" and fixes.loc["a", "uncorrected"] == 0.3
    assert fixes.loc["b", "best method"] == "x" and fixes.loc["b", "best value"] == 0.7
