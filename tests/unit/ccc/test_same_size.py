"""lib.ccc.pages.same_size: the grid's rows obey the bounds routing must obey, the gains and
published numbers follow from hand-made rows, and each claim can hold, fail and be inconclusive at
the number of splits each scale plans."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lib.ccc.pages import same_size as S
from lib.ccc.pages.same_size import PAGE
from lib.config import settings
from lib.report import VERDICTS

HELD, FAILED, UNSURE = VERDICTS[:3]


def test_route_grid_rows_are_bounded_by_the_oracle():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 400)
    z1, z2 = rng.normal(0, 1, (400, 3)), rng.normal(0, 1, (400, 3))
    z1[np.arange(400), y] += 1.5
    z2[np.arange(400), y] += 1.0
    res, curves = S.route_grid({"pair": (z1, z2, y)}, n_splits=2, n_bins=4, joint_bins=2, seed=0)
    assert len(res) == 2 and set(curves["panel"]) == {"pair"}
    for col in (S.TS, "routed (TS, joint bins)", "best point of the TS curve"):
        assert (res[col] <= res["oracle (either right)"] + 1e-12).all()
    # the test-set SE of a paired difference is sqrt(d / n) <= sqrt(1 / n), n = 200 test rows
    assert (res[S.NOISE_GAIN] <= np.sqrt(1 / 200) + 1e-12).all() and (res[S.NOISE_TS_UC] >= 0).all()
    assert S.NOISE_GAIN not in S.summary(res)
    with pytest.raises(ValueError, match="n_splits"):
        S.route_grid({"pair": (z1, z2, y)}, n_splits=0, n_bins=4, joint_bins=2, seed=0)


def test_gains_and_published_from_hand_made_rows():
    res = pd.DataFrame(
        {
            "pair": ["a", "a", "b"],
            "split": [0, 1, 0],
            "first alone": [0.8, 0.7, 0.5],
            "second alone": [0.75, 0.72, 0.6],
            S.TS: [0.82, 0.71, 0.65],
            "routed (TS, joint bins)": [0.8, 0.72, 0.6],
            S.NOISE_GAIN: [0.01] * 3,
            S.NOISE_TS_UC: [0.01] * 3,
        }
    )
    g = S.gains(res)
    assert g.loc["a", ("gain (bins on first)", "mean")] == pytest.approx((0.02 - 0.01) / 2)
    assert g.loc["a", ("gain (bins on first)", "min")] == pytest.approx(-0.01)
    assert g.loc["b", ("gain (joint bins)", "mean")] == pytest.approx(0.0)
    summ = S.summary(res)
    assert summ.loc["a", "first alone"] == pytest.approx(0.75) and "split" not in summ
    with pytest.raises(ValueError, match="pairs"):
        S.published(res, ["a", "b"])
    pub = S.published(res, ["b", "a", "a"])
    assert pub["same_size_gain_mmlu_8b"] == 0.05 and pub["same_size_acc_mmlu_70b"]["first alone"] == 0.75
    table = S.paper_table(res, ["a", "b"])
    assert table.loc["a", "single models"] == "75.00% (ours, better one)" and len(table) == 4


def _rows(k: int, gain: float, ts_minus_uc: float, sd: float, test_se: float) -> pd.DataFrame:
    """k splits of two pairs: routing ``gain`` above the better model and ``ts_minus_uc`` above
    uncalibrated routing, each split moved by +-sd, with a test-set SE ``test_se``."""
    a = sd * (-1.0) ** np.arange(k)
    return pd.concat(
        [
            pd.DataFrame(
                {"pair": p, "split": range(k), "first alone": 0.8, "second alone": 0.79, S.TS: 0.8 + gain + a,
                 "routed (TS, joint bins)": 0.8,
                 S.UNCAL: 0.8 + gain - ts_minus_uc - a, S.NOISE_GAIN: test_se, S.NOISE_TS_UC: test_se}
            )
            for p in ("p", "q")
        ]
    )  # fmt: skip


@pytest.mark.parametrize("scale", ["smoke", "cpu", "paper"])
def test_same_size_claims_can_hold_fail_and_be_inconclusive(scale):
    k = settings("same_size", scale)["n_splits"]

    def verdicts(*args):
        return list(S.claims(_rows(k, *args), ["p", "q"])["verdict"])

    assert verdicts(0.02, 0.02, 1e-4, 1e-3) == [HELD] * 3
    assert verdicts(-0.02, -0.02, 1e-4, 1e-3) == [FAILED] * 3
    assert verdicts(0.001, 0.001, 1e-4, 0.002) == [UNSURE] * 3  # inside the test set's own noise
    assert verdicts(0.001, 0.001, 0.01, 1e-4) == [UNSURE] * 3  # inside the splits' noise
    with pytest.raises(ValueError, match="pairs"):
        S.claims(_rows(k, 0.0, 0.0, 0.0, 0.0), ["p"])
    # "TS beats uncalibrated" is a comparison the paper does not make: the book's expectation
    kinds = list(S.claims(_rows(k, 0.02, 0.02, 1e-4, 1e-3), ["p", "q"])["kind"])
    assert kinds == ["claim", "claim", "expectation"]


def test_page_runs_on_synthetic_logits_and_publishes_claims():
    cfg = settings("same_size", "smoke", n_synthetic=600, n_splits=2)
    pairs = PAGE.data(cfg)
    res, curves = S.route_grid(pairs, cfg["n_splits"], cfg["n_bins"], cfg["joint_bins"], cfg["seed"])
    claims = S.claims(res, list(pairs))
    assert len(claims) == 4 and list(claims["claim"])[0].startswith("MMLU 8B base + 8B instruct")
    assert set(curves["panel"]) == set(pairs)
    assert set(S.published(res, list(pairs))) >= {"same_size_gain_cifar10", "same_size_acc_mmlu_70b"}
