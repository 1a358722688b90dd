"""Tests of lib.rr.gamma against hand-computed cases: at gamma = 0 every loss is
cross-entropy, so the cross-validated map is temperature scaling; a synthetic case whose best gamma
is known by construction is recovered; folds, selection, tables and claims follow their numbers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, softmax

from lib.rr import losses as rw
from lib.calibration.posthoc import TemperatureScaler, apply_temperature
from lib.rr import gamma as rg
from lib.rr.pages.losses_cifar10 import PAPER_CIFAR10
from lib.rr.pages.losses_released_logits import gamma_check
from lib.calibration.metrics import nll


def _draw(n: int, c: int, temperature: float, seed: int, scale: float = 3.0) -> tuple[np.ndarray, np.ndarray]:
    """Logits z ~ scale * N(0, 1) and labels drawn from softmax(z / temperature)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, c)) * scale
    p = softmax(z / temperature, axis=1)
    y = (rng.random(n)[:, None] > np.cumsum(p, axis=1)).sum(1).clip(0, c - 1)
    return z, y


@pytest.mark.parametrize("loss", list(rg.GAMMA_LOSSES))
def test_gamma_zero_is_temperature_scaling(loss):
    zf, yf = _draw(3000, 5, 2.0, 0)  # over-confident logits: T near 2
    zv, yv = _draw(2000, 5, 2.0, 1)
    row = rg.gamma_curve(zf, yf, zv, yv, loss, [0.0]).iloc[0]
    T = TemperatureScaler().fit(zf, yf).temperature  # LBFGS on the NLL (lib.calibration.posthoc)
    assert row["temperature"] == pytest.approx(T, rel=1e-5)
    assert row["nll"] == pytest.approx(nll(apply_temperature(zv, T), yv), rel=1e-8)
    assert 1.7 < T < 2.3


def _focal_temperature(z: np.ndarray, y: np.ndarray, gamma: float) -> float:
    """argmin_T mean_i -(1 - p_t)^gamma log p_t with p = softmax(z / T), by a bounded 1-D search
    written from the definition (independent of lib)."""

    def objective(log_t: float) -> float:
        logpt = log_softmax(z / math.exp(log_t), axis=1)[np.arange(len(y)), y]
        return float(np.mean(-((-np.expm1(logpt)) ** gamma) * logpt))

    res = minimize_scalar(
        objective, bounds=(math.log(0.05), math.log(20.0)), method="bounded", options={"xatol": 1e-10}
    )
    return math.exp(res.x)


def test_a_known_best_gamma_is_recovered():
    """The fit split is calibrated at T = 1; the validation labels are drawn at T* = the temperature
    that focal loss with gamma = 2 fits on the fit split. The validation NLL, a proper scoring
    rule, is smallest at the map closest to T*: gamma = 2 of the grid."""
    zf, yf = _draw(20000, 5, 1.0, 2)
    t_star = _focal_temperature(zf, yf, 2.0)
    assert t_star > 1.2  # focal loss fits softer predictions than cross-entropy
    zv, yv = _draw(20000, 5, t_star, 3)
    curve = rg.gamma_curve(zf, yf, zv, yv, "focal", [0.0, 1.0, 2.0, 3.0, 4.0])
    assert curve.set_index("gamma").loc[2.0, "temperature"] == pytest.approx(t_star, rel=1e-4)
    assert np.all(np.diff(curve["temperature"]) > 0)  # T grows with gamma
    assert float(curve.loc[curve["nll"].idxmin(), "gamma"]) == 2.0
    assert rg.select_gamma(rg.summarize_folds(curve)) == {"temperature": {"focal": 2.0}}


def test_fold_indices_partition_the_examples():
    folds = rg.fold_indices(103, 5, seed=4)
    assert len(folds) == 5 and sorted(len(f) for f in folds) == [20, 20, 21, 21, 21]
    assert np.array_equal(np.sort(np.concatenate(folds)), np.arange(103))
    assert all(np.array_equal(a, b) for a, b in zip(folds, rg.fold_indices(103, 5, seed=4)))


def test_cross_validation_runs_every_fold_map_loss_and_gamma():
    z, y = _draw(600, 4, 1.5, 5)
    cv = rg.gamma_cross_validation(z, y, [0.0, 2.0], maps=("temperature", "vector"), n_folds=3)
    assert len(cv) == 3 * 2 * 3 * 2
    assert set(cv["fold"]) == {0, 1, 2} and set(cv["map"]) == {"temperature", "vector"}
    at0 = cv[cv["gamma"] == 0.0].groupby(["map", "fold"])["nll"]
    assert (at0.max() - at0.min()).max() < 1e-9  # every loss at gamma 0 is the same cross-entropy
    assert cv[cv["map"] == "vector"]["temperature"].isna().all()
    summary = rg.summarize_folds(cv)
    assert len(summary) == 2 * 3 * 2 and (summary["nll_se"] >= 0).all()


def test_vector_scaling_nests_temperature_scaling():
    z, y = _draw(2000, 4, 1.5, 6)
    xe = rw.get_loss("xe")
    t_scale, t_bias = rg.fit_logit_map(z, y, xe, "temperature")
    v_scale, v_bias = rg.fit_logit_map(z, y, xe, "vector")
    assert np.ptp(t_scale) == 0 and not t_bias.any()
    assert nll(softmax(z * v_scale + v_bias, axis=1), y) <= nll(softmax(z * t_scale, axis=1), y) + 1e-9
    # labels unrelated to the logits: the temperature runs to its bound and stays finite
    rng = np.random.default_rng(0)
    far, _ = rg.fit_logit_map(z, rng.integers(0, 4, len(y)), xe, "temperature")
    assert 1 / far[0] == pytest.approx(100.0, rel=1e-6)


def test_select_gamma_takes_the_fold_mean_and_the_smallest_on_ties():
    cv = pd.DataFrame(
        {
            "loss": ["focal"] * 6,
            "map": ["temperature"] * 6,
            "fold": [0, 0, 0, 1, 1, 1],
            "gamma": [0.0, 1.0, 2.0] * 2,
            "nll": [0.30, 0.20, 0.25, 0.30, 0.40, 0.25],
            "ece": [0.05, 0.03, 0.03, 0.05, 0.03, 0.03],
            "accuracy": [0.9] * 6,
            "temperature": [1.0] * 6,
        }
    )
    summary = rg.summarize_folds(cv)
    assert rg.select_gamma(summary) == {"temperature": {"focal": 2.0}}  # means 0.30, 0.30, 0.25
    assert rg.select_gamma(summary, "ece") == {"temperature": {"focal": 1.0}}  # tie at 0.03: smaller gamma
    with pytest.raises(ValueError, match="^summary"):  # the per-fold table would pick fold 0's gamma 1.0
        rg.select_gamma(cv)
    summary = summary.set_index("gamma")
    assert summary.loc[1.0, "nll"] == pytest.approx(0.30)
    assert summary.loc[1.0, "nll_se"] == pytest.approx(np.std([0.2, 0.4], ddof=1) / math.sqrt(2))


def test_paper_values_and_the_table():
    t2 = rg.PAPER_SELECTED_GAMMAS
    for key, row in (("resnet50", ("CIFAR-10", "ResNet-50")), ("wrn", ("CIFAR-10", "WRN"))):
        assert t2[row]["dual_focal"] == PAPER_CIFAR10[key]["gamma_dual_focal"]
        assert t2[row]["inverse_focal"] == PAPER_CIFAR10[key]["gamma_inverse_focal"]
    chosen = {"temperature": {"focal": 0.0, "inverse_focal": 0.5, "dual_focal": 1.0}}
    table = rg.gamma_table({"NLL": chosen})
    assert list(table.columns) == ["focal", "inverse_focal", "dual_focal"]
    assert table.loc["ours: temperature scaling, by NLL", "inverse_focal"] == 0.5
    assert table.loc["paper: CIFAR-100 ResNet-110", "dual_focal"] == 6.1
    assert math.isnan(table.loc["paper: CIFAR-10 ResNet-50", "focal"])  # the paper uses FL-53
    assert len(table) == 1 + len(t2)


def _inverse_focal_cv(nll_by_gamma: dict[float, float]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "loss": "inverse_focal",
                "map": "temperature",
                "fold": 0,
                "gamma": g,
                "nll": v,
                "ece": 0.0,
                "accuracy": 0.9,
                "temperature": 1.0,
            }
            for g, v in nll_by_gamma.items()
        ]
    )


def test_gamma_check_follows_the_curve_and_is_the_books_expectation():
    def check(cv: pd.DataFrame) -> dict:
        return gamma_check(rg.summarize_folds(cv))

    held = check(_inverse_focal_cv({0.0: 0.30, 3.5: 0.35, 4.0: 0.36, 5.0: 0.40}))
    assert held["verdict"] == "held" and held["kind"] == "expectation"
    bad = check(_inverse_focal_cv({0.0: 0.30, 3.5: 0.37, 4.0: 0.36, 5.0: 0.40}))
    assert bad["verdict"] == "did not hold"
    short = check(_inverse_focal_cv({0.0: 0.30, 2.0: 0.35}))
    assert short["verdict"] == "inconclusive at this scale"
