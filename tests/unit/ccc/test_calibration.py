"""lib.ccc.calibration on logits with a known miscalibration and hand-made reliability tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lib.ccc import cascade
from lib.ccc import calibration as K
from lib.calibration.metrics import binary_ece


def calibrated_logits(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Labels drawn from softmax(z): calibrated at T = 1 by construction."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 2, (n, 4))
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    y = np.array([rng.choice(4, p=row) for row in p])
    return z, y


def test_ece_grid_overconfident_model_is_fixed_by_temperature():
    z, y = calibrated_logits(3000, 0)
    results, tables = K.ece_grid({"sharp": (3 * z, y), "plain": (z, y)}, platt_models={"plain"}, n_bins=10, seed=1)
    sharp_T = results.query("model == 'sharp'")["T"].iloc[0]
    assert sharp_T == pytest.approx(3, rel=0.2)  # undoes the x3
    for split in K.SPLITS:
        assert K.ece(results, "sharp", split, "after TS") < K.ece(results, "sharp", split, "before")
    assert set(results.query("model == 'plain'")["stage"]) == {"before", "after TS", "after Platt"}
    assert "after Platt" not in set(results.query("model == 'sharp'")["stage"])
    cal, test = cascade.split_halves(len(y), seed=1)
    conf = np.exp(3 * z[test]) / np.exp(3 * z[test]).sum(1, keepdims=True)
    direct = binary_ece(conf.max(1), conf.argmax(1) == y[test], 10, binning="mass")
    assert K.ece(results, "sharp", "held-out half", "before") == pytest.approx(direct)
    assert len(tables) == 10 * (2 * 2 + 2 * 3)
    with pytest.raises(ValueError, match="no result"):
        K.ece(results, "sharp", "held-out half", "after Platt")


def test_monotonicity_of_hand_made_tables():
    up = pd.DataFrame({"conf": [0.3, 0.5, 0.7, 0.9], "acc": [0.2, 0.5, 0.6, 0.95]})
    down = pd.DataFrame({"conf": [0.3, 0.5, 0.7, 0.9], "acc": [0.9, 0.85, 0.84, 0.5]})
    tables = pd.concat([up.assign(model="up"), down.assign(model="down")]).assign(split="held-out half", stage="before")
    mono = K.monotonicity(tables)
    assert mono.loc["up", "spearman"] == pytest.approx(1) and mono.loc["up", "non_decreasing_steps"] == 1
    assert mono.loc["down", "spearman"] == pytest.approx(-1)
    assert mono.loc["down", "non_decreasing_steps"] == pytest.approx(
        1 / 3
    )  # only the 0.01 drop is within the tolerance


def test_published_key_and_paper_table():
    assert K.published_key("llama-3.1-8b-instruct") == "8b_instruct"
    assert K.published_key("resnet50-ce (CIFAR-10)") == "resnet50_ce"
    rows = [
        {"model": m, "split": sp, "stage": st, "T": 1.0, "accuracy": 0.5, "ece": e}
        for m, stages in (("s", ("before", "after TS", "after Platt")), ("v", ("before", "after TS")))
        for sp in K.SPLITS
        for e, st in enumerate(stages, 1)
    ]
    results = pd.DataFrame(rows)
    table = K.paper_table(results, "s", "v")
    assert table.iloc[0]["ours test after"] == 3 and table.iloc[1]["ours test after"] == 2
    assert table.iloc[2]["paper test after"] == 0.0296
    mono = pd.DataFrame({"spearman": [0.91, 0.95]}, index=["s", "v"])
    pub = K.calibration_published(results, mono, "s")
    assert pub["ece_s_cal_after"] == 2 and pub["ece_platt_8b_instruct_test"] == 3 and pub["min_spearman"] == 0.91
