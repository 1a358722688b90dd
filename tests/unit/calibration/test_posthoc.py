"""Tests for lib.calibration.posthoc: recover known parameters from data generated with them, and identities."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lib.calibration.posthoc import (
    HistogramBinning,
    TemperatureScaler,
    apply_temperature,
    fit_platt,
    lbfgs_minimize,
    probs_to_logits,
)
from lib.calibration.metrics import accuracy, ece, nll


def fit_temperature(logits, labels, **options) -> float:
    """The fitted T of a TemperatureScaler with ``options`` (one T for (N, C) logits)."""
    return TemperatureScaler(**options).fit(logits, labels).temperature


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _sample_labels(p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return (p.cumsum(axis=1) > rng.random((p.shape[0], 1))).argmax(axis=1)


def _data_at_temperature(t0: float, n: int = 10_000, c: int = 10, seed: int = 0):
    """Logits z and labels drawn from softmax(z / t0): the true temperature is t0."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, c)) * 3.0
    y = _sample_labels(_softmax(z / t0), rng)
    return z, y


# --- temperature scaling ------------------------------------------------------------------------


@pytest.mark.parametrize("t0", [0.5, 2.0])
def test_fit_temperature_recovers_known_temperature(t0: float) -> None:
    z, y = _data_at_temperature(t0)
    T = fit_temperature(z, y)
    assert isinstance(T, float)
    assert T == pytest.approx(t0, rel=0.05)


def test_fitted_temperature_minimises_nll() -> None:
    z, y = _data_at_temperature(1.7, n=5000, seed=3)
    T = fit_temperature(torch.tensor(z), torch.tensor(y))
    best = nll(_softmax(z / T), y)
    for other in (T * 0.97, T * 1.03, 1.0, 3.0):
        assert best <= nll(_softmax(z / other), y) + 1e-9


def test_temperature_scaling_keeps_accuracy_and_lowers_ece() -> None:
    z, y = _data_at_temperature(2.5, n=5000, seed=4)
    T = fit_temperature(z, y)
    before, after = _softmax(z), apply_temperature(z, T)
    assert np.array_equal(before.argmax(axis=1), after.argmax(axis=1))
    assert accuracy(after, y) == accuracy(before, y)
    assert ece(after, y) < ece(before, y) / 2


def test_fit_temperature_with_uninformative_logits_stays_finite() -> None:
    # Labels independent of the logits: the NLL keeps falling as T grows (towards uniform), so the
    # fit must run to a large finite T instead of overflowing to NaN.
    rng = np.random.default_rng(6)
    z = rng.normal(size=(2000, 4)) * 5.0
    T = fit_temperature(z, rng.integers(0, 4, size=2000))
    assert np.isfinite(T) and T > 5.0


def _two_class_constant_gap(d: float, q: float, n: int = 1000):
    """n examples with logits (d, 0), a fraction q labelled class 0. NLL(T) = -q log s(d/T)
    - (1-q) log s(-d/T) is minimised where s(d/T) = q, i.e. T = d / logit(q) (closed form); the
    ECE |q - s(d/T)| (all confidences in one bin) is 0 at the same T."""
    z = np.tile([d, 0.0], (n, 1))
    y = (np.arange(n) >= round(q * n)).astype(np.int64)
    return z, y, d / np.log(q / (1 - q))


@pytest.mark.parametrize("criterion", ["nll", "ece"])
def test_fit_temperature_closed_form_two_class(criterion: str) -> None:
    z, y, t_star = _two_class_constant_gap(3.0, 0.8)  # T* = 3 / ln 4 = 2.164
    T = fit_temperature(z, y, criterion=criterion)
    assert T == pytest.approx(t_star, rel=1e-4 if criterion == "nll" else 2e-3)


def test_fit_temperature_nll_matches_grid_minimum() -> None:
    z, y = _data_at_temperature(1.3, n=3000, c=5, seed=11)
    grid = np.exp(np.linspace(np.log(0.5), np.log(3.0), 4001))
    t_grid = grid[int(np.argmin([nll(_softmax(z / t), y) for t in grid]))]
    assert fit_temperature(z, y, criterion="nll", max_iter=50) == pytest.approx(t_grid, rel=1e-3)


def test_fit_temperature_ece_criterion_beats_nll_on_ece() -> None:
    # Heterogeneous miscalibration: half the examples overconfident, half underconfident, so one
    # T cannot fix both and the NLL and ECE optima differ; the ECE criterion's T must have an
    # ECE no larger than the NLL criterion's T.
    rng = np.random.default_rng(12)
    z1, y1 = _data_at_temperature(3.0, n=3000, seed=13)
    z2, y2 = _data_at_temperature(0.6, n=3000, seed=14)
    z, y = np.concatenate([z1 * rng.uniform(0.5, 2, (3000, 1)), z2]), np.concatenate([y1, y2])
    t_nll, t_ece = fit_temperature(z, y), fit_temperature(z, y, criterion="ece")
    assert ece(_softmax(z / t_ece), y) <= ece(_softmax(z / t_nll), y) + 1e-12
    assert t_ece != pytest.approx(t_nll, rel=1e-3)
    # it is the minimum of lib.calibration.metrics.ece over a fine grid, up to the grid's resolution
    grid = np.exp(np.linspace(np.log(0.05), np.log(20.0), 2001))
    assert ece(_softmax(z / t_ece), y) <= min(ece(_softmax(z / t), y) for t in grid) + 1e-3


def test_fit_temperature_bad_criterion() -> None:
    with pytest.raises(ValueError, match="criterion"):
        fit_temperature(np.zeros((2, 3)), [0, 1], criterion="brier")


def test_apply_temperature_closed_form_and_types() -> None:
    z = np.array([[1.0, 2.0, 3.0]])
    expected = np.exp(z / 2) / np.exp(z / 2).sum()
    assert np.allclose(apply_temperature(z, 2.0), expected)
    out = apply_temperature(torch.tensor(z), 2.0)
    assert isinstance(out, torch.Tensor) and torch.allclose(out, torch.tensor(expected))


def test_probs_to_logits_round_trip_and_mixture_ts() -> None:
    p = np.array([[0.7, 0.2, 0.1], [0.0, 0.5, 0.5]])
    z = probs_to_logits(p)
    assert z[1, 0] == pytest.approx(np.log(1e-12))
    assert np.allclose(apply_temperature(z, 1.0), p, atol=1e-11)
    # TS of a mixture via its log-probabilities recovers a known temperature too.
    zt, y = _data_at_temperature(2.0, n=10_000, seed=5)
    T = fit_temperature(probs_to_logits(_softmax(zt)), y)
    assert T == pytest.approx(2.0, rel=0.06)


# --- Platt scaling ------------------------------------------------------------------------------


def test_fit_platt_recovers_known_parameters() -> None:
    rng = np.random.default_rng(7)
    s = rng.normal(size=20_000)
    a0, b0 = 2.0, -1.0
    o = (rng.random(s.size) < 1 / (1 + np.exp(-(a0 * s + b0)))).astype(int)
    a, b = fit_platt(s, o)
    assert a == pytest.approx(a0, abs=0.1) and b == pytest.approx(b0, abs=0.1)
    # The MLE's score equations: mean residual and mean residual * s vanish at the optimum.
    r = 1 / (1 + np.exp(-(a * s + b))) - o
    assert abs(r.mean()) < 1e-6 and abs((r * s).mean()) < 1e-6


# --- histogram binning --------------------------------------------------------------------------


def test_histogram_binning_hand_example() -> None:
    # 2 equal-count bins of the 6 confidences: {.1 .2 .3} and {.7 .8 .9} split at (.3 + .7) / 2 = .5
    # (which belongs to the lower bin, (lo, hi]); accuracies 1/3 and 1.
    conf = np.array([0.9, 0.1, 0.8, 0.2, 0.7, 0.3])
    outcome = np.array([1, 0, 1, 1, 1, 0])
    hb = HistogramBinning(n_bins=2).fit(conf, outcome)
    assert hb.predict(np.array([0.0, 0.15, 0.5, 0.55, 0.95])) == pytest.approx([1 / 3, 1 / 3, 1 / 3, 1, 1])


def test_histogram_binning_on_calibrated_data_is_monotone_and_near_identity() -> None:
    rng = np.random.default_rng(8)
    conf = rng.random(30_000)
    outcome = (rng.random(conf.size) < conf).astype(int)  # calibrated by construction
    hb = HistogramBinning(n_bins=10).fit(conf, outcome)
    assert np.all(np.diff(hb.values) > 0)
    assert np.all(hb.counts == 3000)
    # Each bin's calibrated value is close to the mean confidence in the bin.
    idx = np.searchsorted(hb.edges[1:-1], conf, side="left")
    means = np.array([conf[idx == b].mean() for b in range(10)])
    assert np.max(np.abs(hb.values - means)) < 0.03


# --- bad input ----------------------------------------------------------------------------------
def test_bad_input_raises_naming_the_argument() -> None:
    z = np.zeros((4, 3))
    with pytest.raises(ValueError, match="labels"):
        fit_temperature(z, [0, 1, 2, 3])
    with pytest.raises(ValueError, match="logits"):
        fit_temperature(np.full((2, 3), np.nan), [0, 1])
    with pytest.raises(ValueError, match="logits"):
        fit_temperature(np.zeros(3), [0, 1, 2])
    with pytest.raises(ValueError, match="T"):
        apply_temperature(z, 0.0)
    with pytest.raises(ValueError, match="outcomes"):
        fit_platt([0.1, 0.2], [0, 2])
    with pytest.raises(ValueError, match="outcomes"):
        fit_platt([0.1, 0.2], [1, 1])
    with pytest.raises(ValueError, match="conf"):
        HistogramBinning(5).fit([0.2, 1.2], [0, 1])
    with pytest.raises(ValueError, match="fit"):
        HistogramBinning(5).predict([0.2])
    with pytest.raises(ValueError, match="probs"):
        probs_to_logits(np.array([[0.3, 0.3]]))


# --- the one LBFGS fitter (lbfgs_minimize) and its protocols -----------------------------------------


@pytest.mark.parametrize("lr,iters", [(0.01, 50), (0.1, 10), (0.01, 5)])
def test_fixed_step_lbfgs_closed_form_on_a_quadratic(lr, iters):
    """Paper 1's protocol (no line search): on f(x) = a/2 (x - m)^2 the first step is
    lr*min(1, 1/|g0|)*g0, then each step is lr x the secant-Newton step (exact on a quadratic), so
    the gap to m shrinks by (1 - lr) per iteration."""
    a, m, x0 = 5.0, 3.0, 1.0
    g0 = a * (x0 - m)
    x1 = x0 - lr * min(1.0, 1.0 / abs(g0)) * g0
    expected = m + (x1 - m) * (1 - lr) ** (iters - 1)
    x = torch.tensor([x0], dtype=torch.float64, requires_grad=True)
    lbfgs_minimize(
        lambda: 0.5 * a * (x[0] - m) ** 2,
        [x],
        lr=lr,
        max_iter=iters,
        line_search=False,
        tolerance_grad=1e-7,
        tolerance_change=1e-9,
    )
    assert float(x.detach()[0]) == pytest.approx(expected, rel=1e-9)


def _binary_case(q: float, a: float, n: int = 1000):
    """Two classes, logits (a, -a) on every example, label 0 on a fraction q: the NLL of
    softmax(z / T) is -q log s(2a/T) - (1-q) log s(-2a/T), minimal where s(2a/T) = q, i.e.
    T* = 2a / logit(q) (s the sigmoid)."""
    k = int(round(q * n))
    z = np.tile([a, -a], (n, 1)).astype(np.float64)
    y = np.r_[np.zeros(k), np.ones(n - k)].astype(np.int64)
    return z, y, 2 * a / math.log(q / (1 - q))


@pytest.mark.parametrize("q,a", [(0.8, 3.0), (0.9, 0.5), (0.6, 2.0)])
def test_converged_fit_hits_the_closed_form_optimum(q, a):
    z, y, t_star = _binary_case(q, a)
    assert fit_temperature(z, y) == pytest.approx(t_star, rel=1e-5)
    # the paper's protocol moves from T = 1 towards T*, never past it; with the full step it converges
    t_paper = fit_temperature(z, y, protocol="paper")
    assert min(1.0, t_star) <= t_paper <= max(1.0, t_star) and t_paper != 1.0
    if t_star > 1.0:  # with the full step (lr = 1) it converges; below 1 the first Newton step in T overshoots
        assert fit_temperature(z, y, protocol="paper", lr=1.0, max_iter=200) == pytest.approx(t_star, rel=1e-5)


def test_per_expert_temperatures_are_separate_fits_each_at_its_closed_form():
    """Expert logits (N, K, C): one T per expert, exactly the fit of that expert alone, each its
    closed-form optimum; given bounds clamp the optimum (the NLL is unimodal in T), and the paper's
    partial fit runs per expert too."""
    z1, y, t1 = _binary_case(0.8, 3.0)
    z2, _, t2 = _binary_case(0.8, 0.4)  # same labels, another scale: T scales with the logits
    zz = np.stack([z1, z2], 1)
    got = TemperatureScaler().fit(zz, y).temperature
    assert got.shape == (2,) and got.tolist() == pytest.approx([t1, t2], rel=1e-6)
    assert got.tolist() == [fit_temperature(z1, y), fit_temperature(z2, y)]
    assert t1 > 2.0 > t2
    clamped = TemperatureScaler(bounds=(0.1, 2.0)).fit(zz, y).temperature
    assert clamped.tolist() == pytest.approx([2.0, t2], rel=1e-6)
    paper = TemperatureScaler(protocol="paper").fit(zz, y).temperature
    assert paper.tolist() == [fit_temperature(z1, y, protocol="paper"), fit_temperature(z2, y, protocol="paper")]
    # applied per expert: softmax(z_k / T_k)
    probs = TemperatureScaler().fit(zz, y)(zz)
    assert np.allclose(probs[:, 1], _softmax(z2 / got[1]))


def test_logits_scaled_by_a_known_factor_scale_the_temperature():
    """NLL(T; c z) = NLL(T / c; z), so the minimiser of c z is c times that of z."""
    z, y = _data_at_temperature(1.5, n=4000, seed=21)
    t = fit_temperature(z, y)
    for c in (0.25, 4.0):
        assert fit_temperature(c * z, y) == pytest.approx(c * t, rel=1e-5)


def test_a_temperature_of_one_is_the_identity_and_calibrated_logits_keep_it():
    z, y = _data_at_temperature(1.0, n=20_000, seed=22)
    scaler = TemperatureScaler()
    scaler.temperature = 1.0
    assert np.allclose(scaler(z), _softmax(z))
    assert fit_temperature(z, y) == pytest.approx(1.0, rel=0.03)  # labels drawn from softmax(z)


def test_expert_logits_get_one_temperature_each():
    """Expert logits (N, K, C) are K separate fits: an expert whose logits are doubled gets twice T."""
    z, y = _data_at_temperature(0.7, n=600, seed=23)
    per_expert = TemperatureScaler().fit(np.stack([z, 2 * z], 1), y).temperature
    assert per_expert.tolist() == pytest.approx([fit_temperature(z, y), 2 * fit_temperature(z, y)], rel=1e-6)


def test_fitter_and_protocol_arguments_are_checked():
    z, y, _ = _binary_case(0.8, 1.0, n=10)
    with pytest.raises(ValueError, match="protocol"):
        fit_temperature(z, y, protocol="partial")
    with pytest.raises(ValueError, match="protocol"):
        fit_temperature(z, y, protocol="paper", criterion="ece")
    x = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    with pytest.raises(ValueError, match="lr"):
        lbfgs_minimize(lambda: (x**2).sum(), [x], lr=0.0)
    with pytest.raises(ValueError, match="params"):
        lbfgs_minimize(lambda: (x**2).sum(), [x.detach()])
    for tol in ("tolerance_grad", "tolerance_change"):
        with pytest.raises(ValueError, match=f"^{tol}: "):
            lbfgs_minimize(lambda: (x**2).sum(), [x], **{tol: -1e-9})
    with pytest.raises(ValueError, match="bounds"):
        TemperatureScaler(bounds=(2.0, 1.0))
    with pytest.raises(ValueError, match="fit"):
        TemperatureScaler()(z)
    with pytest.raises(ValueError, match="logits"):
        TemperatureScaler().fit(np.zeros((4, 2, 3, 1)), [0, 1, 2, 0])
