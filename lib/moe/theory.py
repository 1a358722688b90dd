"""Distribution shift on routed populations (paper 1, sections 3.2 and 4, Appendix C): region and
configuration reweightings, the calibration gap they open (eq. 4) predicted from P and measured by
sampling, and the multiaccuracy bound.

Paper: "Calibrated mixture-of-experts under distribution shift" (paper 1),
sections 3-4 and Appendix C (multiaccuracy bound). The populations, with their router and
calibrated experts, are :class:`lib.moe.routed_population.RoutedPopulation`. A test distribution Q has
dQ/dP = rho:

* a *region reweighting* (section 3.2) has rho = omega_k / P(region k) on region k; it keeps a hard
  mixture of region-calibrated experts calibrated;
* a *configuration reweighting* (Prop. 4.1) has rho = rho(Z), Z = (r, f) the routing configuration;
* eq. (4): for a configuration reweighting, the calibration residual of the aggregate at level q is::

      E_Q[Y - p | p = q] = E_P[rho(Z) (eta(Z) - q) | p = q] / E_P[rho(Z) | p = q]."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from lib.moe.routed_population import LEVEL_DECIMALS, RoutedPopulation
from lib.validation import check_finite, check_int, check_ndim, check_positive, check_same_length, to_numpy


# --- Reweightings and the calibration gap of eq. (4) ----------------------------------------------


def _rho(pop: RoutedPopulation, rho: object | None) -> np.ndarray:
    if rho is None:
        return np.ones_like(pop.pi)
    w = to_numpy(rho, "rho")
    check_ndim(w, 1, "rho", "one density ratio per cell")
    check_finite(w, "rho")
    check_same_length(pop.pi, w, "pop.pi", "rho")
    if (w < 0).any():
        raise ValueError("rho: density ratios must be non-negative")
    if (pop.pi * w).sum() <= 0:
        raise ValueError("rho: gives the population zero mass")
    return w


def calibration_residuals(pop: RoutedPopulation, routing: str = "soft", rho: object | None = None) -> pd.DataFrame:
    """Aggregate calibration on Q (dQ/dP = ``rho``, default P): one row per prediction level q with
    ``mass`` = Q(p = q), ``outcome_rate`` = E_Q[Y | p = q] and ``residual`` = E_Q[Y - p | p = q],
    computed exactly from the population (no sampling)."""
    q = pop.pi * _rho(pop, rho)
    q = q / q.sum()
    p = np.round(pop.prediction(routing), LEVEL_DECIMALS)
    rows = []
    for level in np.unique(p):
        m = p == level
        mass = q[m].sum()
        if mass <= 0:
            continue
        rate = (q[m] * pop.eta[m]).sum() / mass
        rows.append((float(level), float(mass), float(rate), float(rate - level)))
    return pd.DataFrame(rows, columns=["level", "mass", "outcome_rate", "residual"])


def region_reweighting(pop: RoutedPopulation, omega: object) -> np.ndarray:
    """Density ratio of the region reweighting Q = sum_k omega_k P(. | region k) (section 3.2):
    rho = omega_k / P(region k) on region k. ``omega`` (K,) new region prevalences (sum 1; regions
    with P(region) = 0 must get omega 0)."""
    om = to_numpy(omega, "omega")
    check_ndim(om, 1, "omega", "one prevalence per expert")
    check_finite(om, "omega")
    if om.shape[0] != pop.num_experts:
        raise ValueError(f"omega: expected {pop.num_experts} prevalences, got {om.shape[0]}")
    if (om < 0).any() or abs(om.sum() - 1) > 1e-9:
        raise ValueError("omega: must be non-negative and sum to 1")
    region = pop.regions()
    prev = np.array([pop.pi[region == k].sum() for k in range(pop.num_experts)])
    if ((prev == 0) & (om > 0)).any():
        raise ValueError("omega: puts mass on a region the population never visits")
    ratio = np.divide(om, prev, out=np.zeros_like(om), where=prev > 0)
    return ratio[region]


def configuration_reweighting(pop: RoutedPopulation, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """Density ratio rho(Z) of a configuration reweighting (Prop. 4.1): ``fn(routing, experts)``
    maps (N, K) router weights and expert predictions to (N,) non-negative values, normalised so that
    E_P[rho] = 1. Being a function of Z = (r, f), it leaves P(Y | Z) unchanged."""
    raw = _rho(pop, np.asarray(fn(pop.routing, pop.experts), dtype=np.float64))
    return raw / (pop.pi * raw).sum()


def entropy_tilt(beta: float) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """rho(Z) proportional to exp(beta * H(r)), H the routing entropy in nats: beta > 0 shifts mass
    toward routing-overlap configurations (section 4.2's routing-induced reweighting)."""
    if not np.isfinite(beta):
        raise ValueError(f"beta: must be a finite number, got {beta!r}")

    def fn(routing: np.ndarray, experts: np.ndarray) -> np.ndarray:
        r = np.clip(routing, 0, 1)
        h = -np.where(r > 0, r * np.log(np.where(r > 0, r, 1)), 0.0).sum(axis=1)
        return np.exp(beta * h)

    return fn


def predicted_gap(pop: RoutedPopulation, rho: object, routing: str = "soft") -> pd.DataFrame:
    """Eq. (4): the calibration residual on Q predicted from P alone, per prediction level q,
    E_P[rho (eta - q) | p = q] / E_P[rho | p = q], with ``p_mass`` = P(p = q) and ``q_mass`` = Q(p = q)."""
    w = _rho(pop, rho)
    p = np.round(pop.prediction(routing), LEVEL_DECIMALS)
    total = (pop.pi * w).sum()
    rows = []
    for level in np.unique(p):
        m = p == level
        pm = pop.pi[m].sum()
        num = (pop.pi[m] * w[m] * (pop.eta[m] - level)).sum() / pm
        den = (pop.pi[m] * w[m]).sum() / pm
        if den > 0:
            rows.append((float(level), float(pm), float(den * pm / total), float(num / den)))
    return pd.DataFrame(rows, columns=["level", "p_mass", "q_mass", "predicted"])


def predicted_gap_closed_form(overlap_mass: float, delta: float, ratio: float) -> float:
    """Eq. (4) in closed form for :func:`lib.moe.routed_population.two_configuration_example` when overlap cells get density
    ratio ``ratio`` times that of dominant cells: with m = overlap_mass and eps = delta m / (1 - m),
    gap = (ratio m delta - (1 - m) eps) / (ratio m + 1 - m) = m delta (ratio - 1) / (ratio m + 1 - m),
    the same at every level."""
    if not 0 < overlap_mass < 1:
        raise ValueError(f"overlap_mass: must lie in (0, 1), got {overlap_mass!r}")
    check_positive(delta, "delta")
    check_positive(ratio, "ratio")
    m = overlap_mass
    return m * delta * (ratio - 1) / (ratio * m + 1 - m)


# --- Sampling: measure what eq. (4) predicts ------------------------------------------------------


def sample(pop: RoutedPopulation, n: int, rho: object | None = None, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n`` examples from Q (dQ/dP = ``rho``): cell indices and outcomes Y ~ Bernoulli(eta)."""
    check_int(n, "n")
    q = pop.pi * _rho(pop, rho)
    rng = np.random.default_rng(seed)
    cells = rng.choice(len(q), size=n, p=q / q.sum())
    y = (rng.random(n) < pop.eta[cells]).astype(np.int64)
    return cells, y


def measured_gap(pop: RoutedPopulation, cells: object, y: object, routing: str = "soft") -> pd.DataFrame:
    """Empirical calibration residual per prediction level from a sample: ``measured`` = mean(Y) - q
    over the sampled examples predicting q, with its standard error ``se`` and count ``n``."""
    c, y = to_numpy(cells, "cells", dtype=np.int64), to_numpy(y, "y")
    check_ndim(c, 1, "cells")
    check_same_length(c, y, "cells", "y")
    if c.size and (c.min() < 0 or c.max() >= len(pop.pi)):
        raise ValueError("cells: indices out of range")
    if not np.isin(y, (0, 1)).all():
        raise ValueError("y: outcomes must be 0 or 1")
    p = np.round(pop.prediction(routing), LEVEL_DECIMALS)[c]
    rows = []
    for level in np.unique(p):
        m = p == level
        k = int(m.sum())
        rate = float(y[m].mean())
        rows.append((float(level), k, rate - float(level), float(np.sqrt(max(rate * (1 - rate), 1e-12) / k))))
    return pd.DataFrame(rows, columns=["level", "n", "measured", "se"])


# --- Appendix C: multiaccuracy bound --------------------------------------------------------------


def multiaccuracy_bound(pop: RoutedPopulation, rho: object | None = None, routing: str = "soft") -> pd.DataFrame:
    """Appendix C on a finite population, under Q with dQ/dP = ``rho`` (default P), binary labels.

    For every expert k and auditor a = r_k h with h: cells -> [-1, 1], Cauchy-Schwarz gives
    ``|E_Q[a (Y - p)]| <= sqrt(E_Q[a^2]) sqrt(E_Q[(Y - p)^2]) <= sqrt(E_Q[(Y - p)^2])`` (as ``|a| <= 1``), and
    (Y - p)^2 <= -log p_Y (binary cross-entropy) tightens nothing but lets the robust CE bound it.
    Within a cell E[Y - p] = eta - p and E[(Y - p)^2] = (eta - p)^2 + eta (1 - eta), so the worst
    auditor is h = sign(eta - p) and the left side is E_Q[r_k |eta - p|]. One row per expert:
    ``alignment`` (that worst case), ``cauchy_schwarz`` (sqrt(E_Q[r_k^2]) sqrt(E_Q[(Y-p)^2])),
    ``rms_residual`` (sqrt(E_Q[(Y-p)^2])) and ``sqrt_cross_entropy`` (sqrt(E_Q[-log p_Y])); the
    bound holds when each column is <= the next."""
    q = pop.pi * _rho(pop, rho)
    q = q / q.sum()
    p = pop.prediction(routing)
    if ((p <= 0) | (p >= 1)).any():
        raise ValueError("pop: aggregate predictions must lie in (0, 1) for the cross-entropy bound")
    eta = pop.eta
    sq = float((q * ((eta - p) ** 2 + eta * (1 - eta))).sum())
    ce = float((q * -(eta * np.log(p) + (1 - eta) * np.log(1 - p))).sum())
    r = pop.weights(routing)
    return pd.DataFrame(
        {
            "expert": k + 1,
            "alignment": float((q * r[:, k] * np.abs(eta - p)).sum()),
            "cauchy_schwarz": float(np.sqrt((q * r[:, k] ** 2).sum()) * np.sqrt(sq)),
            "rms_residual": float(np.sqrt(sq)),
            "sqrt_cross_entropy": float(np.sqrt(ce)),
        }
        for k in range(pop.num_experts)
    )
