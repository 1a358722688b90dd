"""Tests for lib.moe.mocae: the plain mixture at unit temperatures, and MoCaE's per-expert temperatures
(lib.calibration.posthoc.TemperatureScaler on expert logits within MoCaE's clamp): fits that equal
single-expert fits, the clamp, and routing-weighted fits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lib.calibration.posthoc import TemperatureScaler
from lib.moe.mocae import T_MAX, T_MIN, mocae_probs


def fit_temperature(logits, labels) -> float:
    return TemperatureScaler().fit(logits, labels).temperature


def fit_expert_temperatures(expert_logits, labels) -> np.ndarray:
    """MoCaE's per-expert temperatures as the cross-paper page fits them (converged, clamped)."""
    return TemperatureScaler(bounds=(T_MIN, T_MAX)).fit(expert_logits, labels).temperature


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _sample_labels(p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return (p.cumsum(axis=1) > rng.random((p.shape[0], 1))).argmax(axis=1)


def _routing(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    return rng.dirichlet(np.ones(k), size=n)


def test_mocae_with_unit_temperatures_is_the_plain_mixture() -> None:
    rng = np.random.default_rng(9)
    z = rng.normal(size=(50, 3, 4))
    r = _routing(50, 3, rng)
    plain = np.einsum("nk,nkc->nc", r, _softmax(z))
    assert np.allclose(mocae_probs(z, r, np.ones(3)), plain)
    out = mocae_probs(torch.tensor(z), torch.tensor(r), torch.ones(3))
    assert isinstance(out, torch.Tensor) and np.allclose(out.numpy(), plain)
    # With other temperatures: sum_k r_k softmax(z_k / T_k) by hand.
    temps = np.array([0.5, 2.0, 4.0])
    by_hand = sum(r[:, [k]] * _softmax(z[:, k] / temps[k]) for k in range(3))
    assert np.allclose(mocae_probs(z, r, temps), by_hand)


def test_expert_temperatures_match_single_expert_fits() -> None:
    # Expert k's logits are generated at temperature t_k; the per-expert objective separates, so
    # each T_k equals fit_temperature on that expert alone and recovers t_k.
    rng = np.random.default_rng(10)
    n, c, true = 8000, 5, [0.6, 1.0, 3.0]
    base = rng.normal(size=(n, c)) * 3.0
    y = _sample_labels(_softmax(base), rng)
    z = np.stack([base * t for t in true], axis=1)  # softmax(z_k / t_k) = softmax(base)
    temps = fit_expert_temperatures(z, y)
    for k in range(3):
        assert temps[k] == pytest.approx(fit_temperature(z[:, k], y), rel=1e-4)
        assert temps[k] == pytest.approx(true[k], rel=0.06)


def test_expert_temperatures_are_clamped() -> None:
    rng = np.random.default_rng(11)
    n, c = 2000, 4
    y = rng.integers(0, c, size=n)
    noise = rng.normal(size=(n, c)) * 5.0  # unrelated to the labels: best T is huge
    tiny = np.eye(c)[y] * 1e-3  # always right but nearly uniform: best T is tiny
    z = np.stack([noise, tiny], axis=1)
    temps = fit_expert_temperatures(z, y)
    assert temps[0] == pytest.approx(10.0) and temps[1] == pytest.approx(0.1)
    assert np.all((temps >= 0.1) & (temps <= 10.0))


# --- bad input ----------------------------------------------------------------------------------
def test_bad_input_raises_naming_the_argument() -> None:
    ez = np.zeros((4, 2, 3))
    r = np.full((4, 2), 0.5)
    with pytest.raises(ValueError, match="routing"):
        mocae_probs(ez, np.full((4, 2), 0.7), [1.0, 1.0])
    with pytest.raises(ValueError, match="temps"):
        mocae_probs(ez, r, [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="temps"):
        mocae_probs(ez, r, [1.0, -1.0])
    with pytest.raises(ValueError, match="expert_logits"):
        mocae_probs(np.zeros((4, 3)), r, [1.0, 1.0])
    with pytest.raises(ValueError, match="labels"):
        fit_expert_temperatures(ez, [0, 1, 5, 0])
