"""lib.ccc.same_size: the grid's rows obey the bounds routing must obey, and the gains and
published numbers follow from hand-made rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lib.ccc import same_size as S


def test_route_grid_rows_are_bounded_by_the_oracle():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 400)
    z1, z2 = rng.normal(0, 1, (400, 3)), rng.normal(0, 1, (400, 3))
    z1[np.arange(400), y] += 1.5
    z2[np.arange(400), y] += 1.0
    res, curves = S.route_grid({"pair": (z1, z2, y)}, n_splits=2, n_bins=4, joint_bins=2, seed=0)
    assert len(res) == 2 and set(curves["panel"]) == {"pair"}
    for col in ("routed (TS, bins on first)", "routed (TS, joint bins)", "best point of the TS curve"):
        assert (res[col] <= res["oracle (either right)"] + 1e-12).all()
    with pytest.raises(ValueError, match="n_splits"):
        S.route_grid({"pair": (z1, z2, y)}, n_splits=0, n_bins=4, joint_bins=2, seed=0)


def test_gains_and_published_from_hand_made_rows():
    res = pd.DataFrame(
        {
            "pair": ["a", "a", "b"],
            "split": [0, 1, 0],
            "first alone": [0.8, 0.7, 0.5],
            "second alone": [0.75, 0.72, 0.6],
            "routed (TS, bins on first)": [0.82, 0.71, 0.65],
            "routed (TS, joint bins)": [0.8, 0.72, 0.6],
        }
    )
    g = S.gains(res)
    assert g.loc["a", ("gain (bins on first)", "mean")] == pytest.approx((0.02 - 0.01) / 2)
    assert g.loc["a", ("gain (bins on first)", "min")] == pytest.approx(-0.01)
    assert g.loc["b", ("gain (joint bins)", "mean")] == pytest.approx(0.0)
    summ = S.summary(res)
    assert summ.loc["a", "first alone"] == pytest.approx(0.75) and "split" not in summ
    with pytest.raises(ValueError, match="pairs"):
        S.same_size_published(["a", "b"], summ, g)
    pub = S.same_size_published(["b", "a", "a"], summ, g)
    assert pub["same_size_gain_mmlu_8b"] == 0.05 and pub["same_size_acc_mmlu_70b"]["first alone"] == 0.75
