"""lib.ccc.cascade against hand-built cascades whose curves and APGR follow in closed form."""

from __future__ import annotations

import numpy as np
import pytest

from lib.ccc import cascade as C
from lib.ccc.confidence import ModelOutputs


def outputs(conf_cal, correct_cal, conf_test=None, correct_test=None) -> ModelOutputs:
    conf_test = conf_cal if conf_test is None else conf_test
    correct_test = correct_cal if correct_test is None else correct_test
    return ModelOutputs(
        np.asarray(conf_cal, float),
        np.asarray(correct_cal, bool),
        np.asarray(conf_test, float),
        np.asarray(correct_test, bool),
    )


# --- apgr ---------------------------------------------------------------------------------------


def test_apgr_closed_forms():
    c = np.linspace(0, 1, 11)
    # Straight line between the models (random routing): 1/2.
    assert C.apgr(c, 0.5 + 0.3 * c, 0.5, 0.8) == pytest.approx(0.5)
    # Strong model's performance at every cost > 0 (a step at c = 0): 1 - (1/2)(1/10).
    perf = np.where(c > 0, 0.8, 0.5)
    assert C.apgr(c, perf, 0.5, 0.8) == pytest.approx(1 - 0.05)
    # Concave r(c) = sqrt(c) on a fine grid: integral 2/3.
    f = np.linspace(0, 1, 20001)
    assert C.apgr(f, 0.2 + 0.4 * np.sqrt(f), 0.2, 0.6) == pytest.approx(2 / 3, abs=1e-4)
    # Order of the points does not matter.
    assert C.apgr(c[::-1], (0.5 + 0.3 * c)[::-1], 0.5, 0.8) == pytest.approx(0.5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(cost=[0.0, 0.5], performance=[0.1, 0.2], weak=0.1, strong=0.2), "span"),
        (dict(cost=[0.0, 1.2], performance=[0.1, 0.2], weak=0.1, strong=0.2), "cost"),
        (dict(cost=[0.0, 1.0], performance=[0.1, 0.2, 0.3], weak=0.1, strong=0.2), "lengths"),
        (dict(cost=[0.0, 1.0], performance=[0.1, np.nan], weak=0.1, strong=0.2), "performance"),
        (dict(cost=[0.0, 1.0], performance=[0.1, 0.1], weak=0.1, strong=0.1), "strong"),
    ],
)
def test_apgr_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        C.apgr(**kwargs)


# --- cascade curves on hand-built pairs ---------------------------------------------------------


def test_perfect_cascade_matches_closed_form():
    """Large model always right, small right exactly on its top (B - q) of B equal-count bins.

    Bins with the highest small confidence have the lowest advantage and are kept first, so
    r(c) = min(c / (q/B), 1) and APGR = 1 - q / (2B); with q = 2 of B = 15 that is 0.9333.
    """
    B, per_bin, q = 15, 40, 2
    n = B * per_bin
    conf_small = (np.arange(n) + 0.5) / n  # distinct, evenly spread
    small_right = np.arange(n) >= q * per_bin
    small = outputs(conf_small, small_right)
    large = outputs(np.full(n, 0.99), np.ones(n, bool))
    curve = C.cascade_curve(small, large, n_bins=B)
    assert curve.frac_small[0] == 0 and curve.frac_small[-1] == 1
    assert curve.accuracy[0] == pytest.approx(1.0)
    assert curve.accuracy[-1] == pytest.approx(small_right.mean())
    assert curve.apgr() == pytest.approx(1 - q / (2 * B))
    # Bins are kept from the most to the least confident.
    assert list(curve.order) == list(range(B - 1, -1, -1))


def test_uninformative_confidence_gives_the_random_line():
    """Same confidence for both models and the same accuracy in every bin: the curve is RC."""
    B, per_bin = 15, 20
    n = B * per_bin
    conf = (np.arange(n) + 0.5) / n
    pattern = np.arange(n) % per_bin
    small = outputs(conf, pattern < 10)  # 50% right in every bin
    large = outputs(conf, pattern < 16)  # 80% right in every bin
    curve = C.cascade_curve(small, large, n_bins=B)
    np.testing.assert_allclose(curve.accuracy, 0.8 - 0.3 * curve.frac_small, atol=1e-12)
    assert curve.apgr() == pytest.approx(0.5)
    rc = C.random_curve(0.5, 0.8)
    assert rc.apgr() == pytest.approx(0.5)


def test_random_confidences_give_apgr_near_half():
    rng = np.random.default_rng(0)
    n = 40000
    small = outputs(rng.random(n), rng.random(n) < 0.55, rng.random(n), rng.random(n) < 0.55)
    large = outputs(rng.random(n), rng.random(n) < 0.85, rng.random(n), rng.random(n) < 0.85)
    assert C.cascade_curve(small, large, 15).apgr() == pytest.approx(0.5, abs=0.04)


def test_curve_counts_and_test_assignment():
    """Test rows go to bins by the calibration half's edges; fractions are bin masses."""
    conf_cal = np.array([0.1, 0.2, 0.3, 0.4])
    small = outputs(conf_cal, [0, 0, 1, 1], conf_test=[0.05, 0.35, 0.39, 0.9], correct_test=[0, 1, 1, 1])
    large = outputs([0.9, 0.9, 0.5, 0.5], [1, 1, 1, 1], conf_test=[0.5] * 4, correct_test=[1, 1, 0, 1])
    curve = C.cascade_curve(small, large, n_bins=2)
    # Bin 1 (small conf > 0.25) has advantage 0.5 - 0.35 < bin 0's 0.9 - 0.15: kept first.
    assert list(curve.order) == [1, 0]
    np.testing.assert_allclose(curve.frac_small, [0, 0.75, 1.0])
    # k=1: rows 1-3 on small (1,1,1), row 0 on large (1) -> 1.0; k=2: small alone 0.75.
    np.testing.assert_allclose(curve.accuracy, [0.75, 1.0, 0.75])


def test_split_halves_partition():
    cal, test = C.split_halves(101, seed=3)
    assert len(cal) == 50 or len(cal) == 51
    assert sorted(np.concatenate([cal, test])) == list(range(101))


def test_input_validation_names_arguments():
    with pytest.raises(ValueError, match="n_bins"):
        C.equal_count_bins(np.array([0.1, 0.2]), 0)
    with pytest.raises(ValueError, match="conf_cal"):
        C.equal_count_bins(np.array([0.1, 1.2]), 2)


# --- random routing (RC) on a real pair ------------------------------------------------------------


def test_random_routing_closed_forms():
    # small always wrong, large always right: accuracy = 1 - frac_small exactly, APGR exactly 0.5
    rc = C.random_routing_curve(np.zeros(60), np.ones(60), n_points=7, seed=3)
    np.testing.assert_allclose(rc.frac_small, np.arange(7) / 6)
    np.testing.assert_allclose(rc.accuracy, 1 - rc.frac_small)
    assert rc.apgr() == pytest.approx(0.5, abs=1e-12)
    # endpoints are the two models alone; nested subsets: the first m of one random order stay small
    ks = np.array([1, 1, 0, 0, 1, 0, 1, 0], bool)
    kl = np.array([1, 0, 1, 1, 1, 1, 0, 0], bool)
    rc = C.random_routing_curve(ks, kl, n_points=5, seed=1)
    assert rc.accuracy[0] == pytest.approx(kl.mean()) and rc.accuracy[-1] == pytest.approx(ks.mean())
    for k, f in enumerate(rc.frac_small):
        m = int(round(f * 8))
        kept = rc.order[:m]
        sent = rc.order[m:]
        assert rc.accuracy[k] == pytest.approx((ks[kept].sum() + kl[sent].sum()) / 8)


def test_random_routing_expectation_is_the_straight_line():
    """E[accuracy at frac_small f] = acc_large + f (acc_small - acc_large), so E[APGR] = 0.5."""
    rng = np.random.default_rng(0)
    ks, kl = rng.random(400) < 0.6, rng.random(400) < 0.8
    curves = [C.random_routing_curve(ks, kl, 9, seed=s) for s in range(400)]
    mean_acc = np.mean([c.accuracy for c in curves], axis=0)
    f = curves[0].frac_small
    np.testing.assert_allclose(mean_acc, kl.mean() + f * (ks.mean() - kl.mean()), atol=0.004)
    apgrs = np.array([c.apgr() for c in curves])
    assert abs(apgrs.mean() - 0.5) < 4 * apgrs.std() / np.sqrt(len(apgrs))
    with pytest.raises(ValueError, match="correct_large"):
        C.random_routing_curve(ks, kl[:10])


def _outputs(conf_cal, correct_cal, conf_test=None, correct_test=None) -> ModelOutputs:
    conf_test = conf_cal if conf_test is None else conf_test
    correct_test = correct_cal if correct_test is None else correct_test
    return ModelOutputs(
        np.asarray(conf_cal, float), np.asarray(correct_cal, bool), np.asarray(conf_test, float),
        np.asarray(correct_test, bool),
    )  # fmt: skip


def test_same_size_routing_picks_the_better_model_per_bin():
    """Model 1 right on its confident half, model 2 right on the other half: routing is perfect."""
    n = 200
    conf1 = (np.arange(n) + 0.5) / n
    high = conf1 > 0.5
    first = _outputs(np.where(high, 0.9 + 0.05 * conf1, 0.3 * conf1), high)
    second = _outputs(np.where(high, 0.2, 0.9), ~high)
    res = C.same_size_route(first, second, n_bins=4)
    assert res.accuracy == pytest.approx(1.0) and res.correct.all()
    assert res.acc_first == pytest.approx(0.5) and res.acc_second == pytest.approx(0.5)
    assert res.frac_second == pytest.approx(0.5)


def _pair(n: int, seed: int) -> tuple[ModelOutputs, ModelOutputs]:
    """A small and a large model whose confidence tracks their correctness, on halves of ``n`` examples."""
    rng = np.random.default_rng(seed)
    out = []
    for acc in (0.6, 0.8):
        correct = rng.random(n) < acc
        conf = np.clip(0.5 + 0.3 * correct + 0.2 * rng.random(n), 0.0, 1.0)
        out.append(ModelOutputs(conf[: n // 2], correct[: n // 2], conf[n // 2 :], correct[n // 2 :]))
    return out[0], out[1]


def test_apgr_test_se_is_the_delta_method_on_the_curves_own_terms():
    small, large = _pair(4000, 0)
    curve = C.cascade_curve(small, large, 10)
    # the curve's APGR is exactly the ratio of its per-example terms
    assert curve.apgr() == pytest.approx(np.mean(curve.to_large * curve.gain) / np.mean(curve.gain))
    se = C.apgr_test_se(curve)
    # under the bound that takes |u - APGR| as 1: sqrt(d / n) / gap, d the share where one model alone is right
    ks, kl = small.correct_test, large.correct_test
    assert 0 < se < np.sqrt(np.mean(ks != kl) / ks.size) / abs(kl.mean() - ks.mean())
    # it is the spread of the APGR over test sets drawn afresh (bins fixed by the calibration half)
    rng = np.random.default_rng(1)
    draws = []
    for _ in range(200):
        i = rng.integers(0, large.conf_test.size, large.conf_test.size)
        s2, l2 = (ModelOutputs(m.conf_cal, m.correct_cal, m.conf_test[i], m.correct_test[i]) for m in (small, large))
        draws.append(C.cascade_curve(s2, l2, 10).apgr())
    assert np.std(draws) == pytest.approx(se, rel=0.25)
    # two curves that route alike differ by much less than either varies
    assert C.apgr_test_se(curve, C.cascade_curve(small, large, 9)) < se / 2
    other, _ = _pair(4000, 5)
    with pytest.raises(ValueError, match="other: must be a curve of the same two models"):
        C.apgr_test_se(curve, C.cascade_curve(other, large, 10))
    with pytest.raises(ValueError, match="curve: needs the per-example terms"):
        C.apgr_test_se(C.random_curve(0.6, 0.8))


def test_acc_advantage_and_joint_routing_by_hand():
    """acc_advantage is the large model's accuracy minus the small one's per bin (NaN where empty).
    Joint binning: 2 x 2 cells on both models' confidences send examples 1 and 3 (where the second
    is surer) to the second model, each to the model that is right (accuracy 1); binning on the first
    model alone sends the low bin {0, 1} to the second and keeps {2, 3} (accuracy 1/2)."""
    t = C.advantage_table([0, 2], 3, [0.5, 0.5], [0.5, 0.5], [1, 0], [1, 1])
    assert t["acc_advantage"].tolist()[::2] == [0.0, 1.0] and np.isnan(t["acc_advantage"][1])
    first = ModelOutputs(*[np.array([0.1, 0.2, 0.8, 0.9]), np.array([1, 0, 1, 0], bool)] * 2)
    second = ModelOutputs(*[np.array([0.05, 0.7, 0.6, 0.95]), np.array([0, 1, 0, 1], bool)] * 2)
    joint = C.same_size_route(first, second, n_bins=2, binning="joint")
    assert (joint.accuracy, joint.frac_second) == (1.0, 0.5)
    alone = C.same_size_route(first, second, n_bins=2)
    assert (alone.accuracy, alone.frac_second) == (0.5, 0.5)
